"""Rollback of a changeset: the sink restored, the insights returned to review.

A rollback restores the sink and returns the insights to ``pending``, keeping their
application fields (knowledge/rollback.go in the peer). It is refused (Conflict, 409 over
REST) when the changeset was already rolled back, when a newer live changeset on the same
entity touched the same aspect, or when the page was edited since; it is Unprocessable
(422) for change types without a before-image. A refused rollback changes nothing: all of
it is one transaction.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from benchledger.refplatform import pages as pagestore
from benchledger.refplatform.auth import Identity
from benchledger.refplatform.errors import (
    Conflict,
    NotFound,
    PlatformError,
    ToolError,
    Unprocessable,
)
from benchledger.refplatform.pages import PageStore
from benchledger.refplatform.store import StateStore
from benchledger.refplatform.toolkits.catalog import Catalog, tag_urn, term_urn
from benchledger.refplatform.toolkits.knowledge_changesets import (
    CREATE_PAGE,
    PAGE_TARGET,
    Changesets,
    aspect,
    recorded,
    unrevertible_types,
)
from benchledger.refplatform.toolkits.knowledge_review import Insights


class Rollback:
    """Reverts changesets on the catalog or on knowledge pages."""

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

    def rollback(self, changeset_id: str, by: str) -> dict[str, Any]:
        """Revert a changeset (see the module docstring for when it is refused)."""
        with self.store.tx() as db:
            row = self.changesets.row(changeset_id)
            if row["rolled_back"]:
                raise Conflict("changeset already rolled back")
            target = row["target_urn"]
            if target.startswith(PAGE_TARGET):
                reverted = [self._revert_page(row, by)]
                skipped: list[str] = []
            else:
                reverted, skipped = self._revert_catalog(row)
            moved = self.insights.return_to_review(
                json.loads(row["source_insight_ids"]), by, row["id"]
            )
            db.execute(
                "UPDATE changesets SET rolled_back = 1, rolled_back_by = ?, rolled_back_at = ? "
                "WHERE id = ?",
                (by, self.store.now(), row["id"]),
            )
        result: dict[str, Any] = {
            "changeset_id": row["id"],
            "target_urn": target,
            "reverted_changes": reverted,
            "insights_returned_to_review": moved,
            "rolled_back_by": by,
        }
        if skipped:
            result["skipped_changes"] = skipped
        return result

    def _revert_catalog(self, row: sqlite3.Row) -> tuple[list[str], list[str]]:
        changes = recorded(json.loads(row["new_value"]))
        blocked = unrevertible_types(row["target_urn"], changes)
        if blocked:
            raise Unprocessable(
                f"changeset cannot be rolled back automatically: change types "
                f"{', '.join(blocked)} do not record enough prior state to revert; restore the "
                "desired state with a new apply"
            )
        self._check_newer(row, changes)
        prior = json.loads(row["previous_value"])
        urn = row["target_urn"]
        reverted: list[str] = []
        skipped: list[str] = []
        before_tags, before_terms = (
            set(prior.get("tags") or []),
            set(prior.get("glossary_terms") or []),
        )
        add_tags, remove_tags, remove_terms = [], [], []
        for change in changes:
            kind, detail = change["change_type"], change.get("detail", "")
            if kind == "add_tag":
                tag = tag_urn(detail)
                if tag in before_tags:
                    skipped.append(f"kept pre-existing tag {tag}")
                else:
                    remove_tags.append(tag)
                    reverted.append(f"removed tag {tag}")
            elif kind == "remove_tag":
                tag = tag_urn(detail)
                if tag not in before_tags:
                    skipped.append(f"tag {tag} was not present before; nothing to restore")
                else:
                    add_tags.append(tag)
                    reverted.append(f"restored tag {tag}")
            elif kind == "add_glossary_term":
                term = term_urn(detail)
                if term in before_terms:
                    skipped.append(f"kept pre-existing glossary term {term}")
                else:
                    remove_terms.append(term)
                    reverted.append(f"removed glossary term {term}")
        if add_tags or remove_tags:
            self.catalog.change_tags(urn, add_tags, remove_tags)
        if remove_terms:
            self.catalog.change_terms(urn, [], remove_terms)
        if any(c["change_type"] == "update_description" for c in changes):
            self.catalog.set_description(urn, str(prior.get("description", "")))
            reverted.append("restored description")
        return reverted, skipped

    def _check_newer(self, row: sqlite3.Row, changes: list[dict[str, Any]]) -> None:
        """Conflict when a newer, live changeset on the same entity touched the same aspect."""
        mine = {aspect(c) for c in changes}
        with self.store.read() as db:
            later = db.execute(
                "SELECT * FROM changesets WHERE target_urn = ? AND rolled_back = 0 AND seq > ? "
                "ORDER BY seq",
                (row["target_urn"], row["seq"]),
            ).fetchall()
        ids, aspects = set(), set()
        for other in later:
            touched = {aspect(c) for c in recorded(json.loads(other["new_value"]))} & mine
            if touched:
                ids.add(other["id"])
                aspects |= touched
        if ids:
            raise Conflict(
                f"rollback blocked: newer changeset(s) {', '.join(sorted(ids))} modified the same "
                f"aspect(s) {', '.join(sorted(aspects))}; roll those back first or restore the "
                "desired state with a new apply"
            )

    def _revert_page(self, row: sqlite3.Row, by: str) -> str:
        slug = row["target_urn"][len(PAGE_TARGET) :]
        page = self.pages.by_slug(slug)
        if page is None:
            raise PlatformError(
                f"rollback failed: knowledge page no longer exists: {slug}", status=500
            )
        produced = int(json.loads(row["new_value"]).get("version", 0))
        if page["current_version"] != produced:
            raise Conflict(
                f'rollback blocked: knowledge page "{slug}" was edited after this changeset (page '
                f"is at v{page['current_version']}, changeset produced v{produced}); review the "
                "page and roll back manually if needed"
            )
        if row["change_type"] == CREATE_PAGE:
            self.pages.soft_delete(page["id"])
            return f"deleted page {slug}"
        prev = json.loads(row["previous_value"])
        self.pages.update(
            page["id"],
            title=prev.get("title", ""),
            summary=prev.get("summary", ""),
            body=prev.get("body", ""),
            tags=prev.get("tags") or [],
            author=by,
            change_summary=f"rollback of changeset {row['id']}",
        )
        self.pages.set_refs(page["id"], pagestore.REF_PROMOTED, prev.get("entity_urns") or [], by)
        return f"restored page {slug}"

    def tool(self, who: Identity, args: dict[str, Any]) -> dict[str, Any]:
        """The ``rollback`` action: ``rollback`` with refusals as tool errors."""
        changeset_id = str(args.get("changeset_id") or "")
        if not changeset_id:
            raise ToolError("changeset_id is required for rollback action")
        try:
            row = self.changesets.row(changeset_id)
        except NotFound:
            raise ToolError(f"changeset not found: {changeset_id}") from None
        urn = str(args.get("entity_urn") or "")
        if urn and row["target_urn"] != urn:
            raise ToolError(f"changeset {changeset_id} does not belong to entity {urn}")
        try:
            return self.rollback(changeset_id, who.email)
        except Conflict as exc:
            if exc.message == "changeset already rolled back":
                raise ToolError("changeset has already been rolled back") from None
            raise ToolError(exc.message) from None
        except PlatformError as exc:
            raise ToolError(exc.message) from None
