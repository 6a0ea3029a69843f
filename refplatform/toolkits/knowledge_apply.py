"""``apply``: approved knowledge promoted to a sink, recorded as one changeset.

Sink ``datahub`` writes catalog changes; sink ``knowledge_page`` finds or creates a page
by slug (an existing slug keeps its page id and gets a new version; the changeset target
is ``kp:<slug>``). Either way ONE changeset is recorded and the listed insights are marked
``applied``; an insight that is not ``approved`` is left as it is (the peer logs and goes
on; knowledge/toolkit.go, page_sink.go). A failing apply writes nothing.
"""

from __future__ import annotations

from typing import Any, Final

from benchledger.refplatform import pages as pagestore
from benchledger.refplatform import records
from benchledger.refplatform.auth import Identity
from benchledger.refplatform.errors import NotFound, ToolError
from benchledger.refplatform.pages import PageStore
from benchledger.refplatform.store import StateStore
from benchledger.refplatform.toolkits.catalog import Catalog
from benchledger.refplatform.toolkits.knowledge_changesets import (
    CREATE_PAGE,
    UPDATE_PAGE,
    Changesets,
    page_target,
    recorded,
    unrevertible_types,
)
from benchledger.refplatform.toolkits.knowledge_review import Insights

CHANGE_TYPES: Final = (
    "update_description",
    "add_tag",
    "remove_tag",
    "add_glossary_term",
    "flag_quality_issue",
    "add_documentation",
    "add_curated_query",
    "set_structured_property",
    "remove_structured_property",
    "raise_incident",
    "resolve_incident",
    "add_context_document",
    "update_context_document",
    "remove_context_document",
    "add_prompt",
    "delete_tag",
    "set_custom_property",
    "remove_custom_property",
)
# What refplatform's catalog can write; the other valid types are refused by name.
SUPPORTED_CHANGES: Final = ("update_description", "add_tag", "remove_tag", "add_glossary_term")
MAX_CHANGES, MAX_INSIGHT_IDS = 20, 50
PAGE_LIMITS: Final = {"slug": 120, "title": 200, "summary": 2000}
MAX_PAGE_BODY: Final = 1 << 20


class Apply:
    """The ``apply`` action: catalog changes or a knowledge page, then one changeset."""

    def __init__(
        self,
        store: StateStore,
        catalog: Catalog,
        pages: PageStore,
        insights: Insights,
        changesets: Changesets,
    ) -> None:
        self.store = store
        self.catalog = catalog
        self.pages = pages
        self.insights = insights
        self.changesets = changesets

    def apply(self, who: Identity, args: dict[str, Any]) -> dict[str, Any]:
        """Write the changes to the sink, record one changeset, mark the insights applied."""
        sink = str(args.get("sink") or "datahub")
        if sink == "knowledge_page":
            return self._promote_page(who, args)
        if sink != "datahub":
            raise ToolError(f"unknown sink: {sink} (valid: datahub, knowledge_page)")
        urn = str(args.get("entity_urn") or "")
        if not urn:
            raise ToolError("entity_urn is required for apply action")
        changes = [dict(c) for c in args.get("changes") or []]
        _validate_changes(changes)
        insight_ids = list(args.get("insight_ids") or [])
        with self.store.tx():
            try:
                previous = self.catalog.metadata(urn)
            except NotFound as exc:
                raise ToolError(f"failed to get current metadata: {exc.message}") from None
            for change in changes:
                self._write_change(urn, change)
            kinds = {c["change_type"] for c in changes}
            new_value: dict[str, Any] = {}
            for i, c in enumerate(changes):
                entry = {
                    "change_type": c["change_type"],
                    "target": c["target"],
                    "detail": c["detail"],
                }
                for extra in ("query_sql", "query_description"):
                    if c.get(extra):
                        entry[extra] = c[extra]
                new_value[f"change_{i}"] = entry
            cid = self.changesets.record(
                target=urn,
                change_type=kinds.pop() if len(kinds) == 1 else "multiple",
                previous=previous,
                new=new_value,
                insight_ids=insight_ids,
                who=who,
            )
            self.insights.mark_applied(insight_ids, who, cid)
            resulting = self.catalog.metadata(urn)
        blocked = unrevertible_types(urn, recorded(new_value))
        suffix = " changes_applied counts requested changes; verify against resulting_state below."
        if blocked:
            message = (
                f"Changes applied to DataHub. Recorded as changeset {cid} for audit. This "
                f"changeset cannot be rolled back automatically ({', '.join(blocked)}: no "
                f"before-image); restore prior state with a new apply if needed.{suffix}"
            )
        else:
            message = (
                "Changes applied to DataHub. Roll back with action=rollback "
                f"changeset_id={cid}.{suffix}"
            )
        out: dict[str, Any] = {
            "changeset_id": cid,
            "entity_urn": urn,
            "changes_applied": len(changes),
            "insights_marked_applied": len(insight_ids),
            "revertible": not blocked,
            "message": message,
            "resulting_state": resulting,
        }
        if blocked:
            out["unrevertible_change_types"] = blocked
        return out

    def _write_change(self, urn: str, change: dict[str, Any]) -> None:
        kind, target, detail = change["change_type"], change["target"], change["detail"]
        if kind == "update_description":
            if target.startswith("column:") and target[7:]:
                self.catalog.set_column_description(urn, target[7:], detail)
            else:
                self.catalog.set_description(urn, detail)
        elif kind == "add_tag":
            self.catalog.change_tags(urn, [detail], [])
        elif kind == "remove_tag":
            self.catalog.change_tags(urn, [], [detail])
        elif kind == "add_glossary_term":
            self.catalog.change_terms(urn, [detail], [])

    # -- apply: the knowledge-page sink -------------------------------------------------------

    def _promote_page(self, who: Identity, args: dict[str, Any]) -> dict[str, Any]:
        page = args.get("page")
        if not isinstance(page, dict):
            raise ToolError("page object (slug, title, body) is required for sink=knowledge_page")
        _validate_page(page)
        insight_ids = list(args.get("insight_ids") or [])
        origin, carried = "", []
        for insight_id in insight_ids:
            try:
                row = self.insights.row(insight_id)
            except NotFound:
                raise ToolError(f"insight {insight_id} not found") from None
            origin = row["sink_class"]
            carried += records.urns(row) + pagestore.scan_refs(row["content"])
        explicit = [self._citable(ref) for ref in page.get("references") or []]
        promoted = list(dict.fromkeys(explicit + [u for u in carried if _citable_form(u)]))
        tags = list(dict.fromkeys(t.strip() for t in page.get("tags") or [] if t.strip()))
        if origin and origin not in tags:
            tags.append(origin)
        slug, title = page["slug"].strip(), page["title"]
        summary, body = page.get("summary") or "", page["body"]
        with self.store.tx():
            existing = self.pages.by_slug(slug)
            if existing is None:
                written = self.pages.create(
                    slug=slug, title=title, summary=summary, body=body, tags=tags, author=who.email
                )
                change_type = CREATE_PAGE
                previous = _page_image("", "", "", None, 0, None)
            else:
                previous = _page_image(
                    existing["title"],
                    existing["summary"],
                    existing["body"],
                    existing["tags"],
                    existing["current_version"],
                    self.pages.promoted_urns(existing["id"]) or None,
                )
                written = self.pages.update(
                    existing["id"],
                    title=title,
                    summary=summary,
                    body=body,
                    tags=tags,
                    author=who.email,
                    change_summary="promoted from capture",
                )
                change_type = UPDATE_PAGE
            self.pages.add_refs(
                written["id"], pagestore.REF_PROMOTED, promoted, who.email, replace=True
            )
            refs = self.pages.refs(written["id"])
            new = _page_image(
                title,
                summary,
                body,
                tags,
                written["current_version"],
                self.pages.promoted_urns(written["id"]) or None,
            )
            cid = self.changesets.record(
                target=page_target(slug),
                change_type=change_type,
                previous=previous,
                new=new,
                insight_ids=insight_ids,
                who=who,
            )
            self.insights.mark_applied(insight_ids, who, cid)
        action = "created" if change_type == CREATE_PAGE else "updated"
        return {
            "changeset_id": cid,
            "page_id": written["id"],
            "slug": slug,
            "action": action,
            "insights_marked_applied": len(insight_ids),
            "revertible": True,
            "references_attached": len(refs),
            "message": f"Knowledge page {action}. Roll back with action=rollback "
            f"changeset_id={cid}.",
        }

    def _citable(self, ref: str) -> str:
        """An explicit page reference, checked: DataHub URNs as given, internal ones must exist."""
        ref = ref.strip()
        if ref.startswith("urn:li:"):
            return ref
        if ref.startswith(("mcp:memory:", "mcp:insight:")):
            raise ToolError(
                f'invalid page reference: reference "{ref}": personal references are private to '
                "their owner and cannot be cited on a shared page"
            )
        if ref.startswith("mcp:knowledge_page:"):
            try:
                self.pages.get(ref.removeprefix("mcp:knowledge_page:"))
            except NotFound:
                raise ToolError(f'reference "{ref}": target does not exist') from None
            return ref
        raise ToolError(
            f'invalid page reference: reference "{ref}": not a recognized reference form'
        )


def _citable_form(ref: str) -> bool:
    return ref.startswith("urn:li:") or ref.startswith("mcp:knowledge_page:")


def _page_image(
    title: str,
    summary: str,
    body: str,
    tags: list[str] | None,
    version: int,
    urns: list[str] | None,
) -> dict[str, Any]:
    return {
        "title": title,
        "summary": summary,
        "body": body,
        "tags": tags,
        "version": version,
        "entity_urns": urns,
    }


def _validate_page(page: dict[str, Any]) -> None:
    for field in ("slug", "title", "body"):
        if not str(page.get(field) or "").strip():
            raise ToolError(f"page.{field} is required for sink=knowledge_page")
    for field, most in PAGE_LIMITS.items():
        if len(str(page.get(field) or "")) > most:
            raise ToolError(f"page.{field} exceeds {most} characters")
    if len(str(page["body"]).encode()) > MAX_PAGE_BODY:
        raise ToolError(f"page.body exceeds {MAX_PAGE_BODY} bytes")
    if len(page.get("references") or []) > 50:
        raise ToolError("page.references exceeds 50 entries")


def _validate_changes(changes: list[dict[str, Any]]) -> None:
    if not changes:
        raise ToolError("changes is required and must not be empty")
    if len(changes) > MAX_CHANGES:
        raise ToolError(f"changes exceeds maximum of {MAX_CHANGES} (got {len(changes)})")
    for i, change in enumerate(changes):
        kind = change.get("change_type", "")
        if kind not in CHANGE_TYPES:
            raise ToolError(
                f'changes[{i}]: invalid change_type "{kind}": must be one of: '
                + ", ".join(CHANGE_TYPES)
            )
        if kind not in SUPPORTED_CHANGES:
            raise ToolError(
                f'changes[{i}]: change_type "{kind}" is not supported by refplatform\'s catalog '
                f"(supported: {', '.join(SUPPORTED_CHANGES)}); use sink knowledge_page for prose"
            )
