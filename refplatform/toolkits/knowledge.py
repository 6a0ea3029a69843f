"""The knowledge toolkit: insights under review, ``apply_knowledge``, changesets and rollback.

Shared by the ``apply_knowledge`` tool and the admin REST routes, as in the peer
(knowledge/toolkit.go, rollback.go, page_sink.go). The points that matter to a client:

- approve/reject validate the review transition per insight and report failures in
  ``errors`` instead of failing the call;
- ``apply`` writes catalog changes (sink ``datahub``) or finds-or-creates a knowledge
  page by slug (sink ``knowledge_page``; an existing slug keeps its page id and gets a
  new version), records ONE changeset (target ``kp:<slug>`` for pages), and marks the
  listed insights ``applied`` with ``applied_by``, ``applied_at`` and ``changeset_ref``;
  an insight that is not ``approved`` is left as it is (the peer logs and goes on);
- a rollback restores the sink and returns the insights to ``pending``, keeping their
  application fields. It is refused (Conflict, 409 over REST) when the changeset was
  already rolled back, when a newer live changeset on the same entity touched the same
  aspect, or when the page was edited since; it is Unprocessable (422) for change
  types without a before-image. A refused rollback changes nothing.

Everything one call writes is one transaction: a failing apply or rollback writes nothing.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any, Final

from refplatform import pages as pagestore
from refplatform import records
from refplatform.auth import Identity
from refplatform.errors import Conflict, NotFound, PlatformError, ToolError, Unprocessable
from refplatform.pages import PageStore
from refplatform.store import Store, dumps
from refplatform.times import rfc3339, rfc3339_seconds
from refplatform.toolkits.catalog import Catalog, tag_urn, term_urn
from refplatform.toolkits.memory import Memory, clamp_limit

ACTIONS: Final = (
    "bulk_review",
    "review",
    "synthesize",
    "apply",
    "approve",
    "reject",
    "rollback",
    "list_changesets",
    "bulk_untag",
)
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
REVERTIBLE: Final = ("update_description", "add_tag", "remove_tag", "add_glossary_term")
PAGE_TARGET: Final = "kp:"
CREATE_PAGE, UPDATE_PAGE = "create_page", "update_page"
MAX_CHANGES, MAX_INSIGHT_IDS = 20, 50
PAGE_LIMITS: Final = {"slug": 120, "title": 200, "summary": 2000}
MAX_PAGE_BODY: Final = 1 << 20
STALE_DAYS: Final = 30
BULK_REVIEW_NOTE: Final = (
    "Counts are pending insights only (the global review queue). by_entity counts an insight "
    "once per entity URN it carries and omits insights that have no entity URN, so it does not "
    "sum to total_pending. Pass itemize:true to enumerate every pending insight (with id, "
    "captured_by and sink_class)."
)
_DAY_NS: Final = 86_400 * 10**9


def page_target(slug: str) -> str:
    """The changeset target of a knowledge page promotion: ``kp:<slug>``."""
    return PAGE_TARGET + slug


def rollback_review_note(changeset_id: str) -> str:
    """The review note of an insight a rollback sent back to the queue."""
    return f"Returned to review: changeset {changeset_id} was rolled back."


def _aspect(change: dict[str, Any]) -> str:
    """The metadata aspect a recorded change mutated (two changes conflict on the same one)."""
    kind = change.get("change_type", "")
    target = change.get("target", "")
    if kind == "update_description":
        return f"column_description:{target[7:]}" if target.startswith("column:") else "description"
    if kind in ("add_tag", "remove_tag", "flag_quality_issue"):
        return "tags"
    if kind == "add_glossary_term":
        return "glossary_terms"
    return str(kind)


def _recorded(new_value: dict[str, Any]) -> list[dict[str, Any]]:
    """The ordered changes of a changeset's ``new_value`` (``change_0``, ``change_1``, ...)."""
    out, i = [], 0
    while isinstance(new_value.get(f"change_{i}"), dict):
        out.append(new_value[f"change_{i}"])
        i += 1
    return out


def _revertible(change: dict[str, Any]) -> bool:
    if change.get("change_type") == "update_description":
        return not str(change.get("target", "")).startswith("column:")
    return change.get("change_type") in REVERTIBLE


def _unrevertible_types(target_urn: str, changes: list[dict[str, Any]]) -> list[str]:
    if target_urn.startswith(PAGE_TARGET):
        return []
    return list(dict.fromkeys(c["change_type"] for c in changes if not _revertible(c)))


class Knowledge:
    """Insights under review, their promotion to a sink, and changesets with rollback."""

    def __init__(self, store: Store, memory: Memory, catalog: Catalog, pages: PageStore) -> None:
        self.store = store
        self.memory = memory
        self.catalog = catalog
        self.pages = pages

    # -- insights -----------------------------------------------------------------------------

    def _insight_row(self, insight_id: str) -> sqlite3.Row:
        with self.store.read() as db:
            row = db.execute(
                "SELECT * FROM records WHERE id = ? AND insight = 1 AND status != ?",
                (insight_id, records.ARCHIVED),
            ).fetchone()
        if row is None:
            raise NotFound("insight not found")
        return row

    def insight(self, insight_id: str) -> dict[str, Any]:
        """One insight by id; NotFound otherwise."""
        return records.insight_view(self._insight_row(insight_id))

    def _filtered(self, f: dict[str, Any], *, oldest: bool = False) -> list[sqlite3.Row]:
        sql = "SELECT * FROM records WHERE insight = 1 AND status != ?"
        args: list[Any] = [records.ARCHIVED]
        for key, column in (
            ("status", "insight_status"),
            ("category", "category"),
            ("captured_by", "created_by"),
            ("confidence", "confidence"),
            ("source", "source"),
        ):
            if f.get(key):
                sql += f" AND {column} = ?"
                args.append(f[key])
        if f.get("since") is not None:
            sql += " AND created_at >= ?"
            args.append(f["since"])
        if f.get("until") is not None:
            sql += " AND created_at <= ?"
            args.append(f["until"])
        order = "ASC" if oldest else "DESC"
        with self.store.read() as db:
            rows = db.execute(sql + f" ORDER BY created_at {order}, seq {order}", args).fetchall()
        if f.get("entity_urn"):
            rows = [r for r in rows if f["entity_urn"] in records.urns(r)]
        return rows

    def insights(
        self, f: dict[str, Any], *, limit: int, offset: int, oldest: bool = False
    ) -> tuple[list[dict[str, Any]], int]:
        """Insights matching the filters, newest first (``oldest`` flips), one window."""
        rows = self._filtered(f, oldest=oldest)
        return [records.insight_view(r) for r in rows[offset : offset + limit]], len(rows)

    def stats(self, f: dict[str, Any]) -> dict[str, Any]:
        """Aggregates over the matching insights (``GET /insights/stats``)."""
        rows = self._filtered(f)
        pending = [r for r in rows if r["insight_status"] == records.PENDING]
        by: dict[str, dict[str, int]] = {"category": {}, "confidence": {}, "insight_status": {}}
        for r in rows:
            for column, counts in by.items():
                counts[r[column]] = counts.get(r[column], 0) + 1
        out: dict[str, Any] = {
            "total_pending": len(pending),
            "by_entity": _entity_summaries(pending),
            "by_category": by["category"],
            "by_confidence": by["confidence"],
            "by_status": by["insight_status"],
            "pending_over_30d": self._stale_count(pending),
        }
        if pending:
            out["oldest_pending_at"] = rfc3339(min(r["created_at"] for r in pending))
        return out

    def _stale_count(self, pending: Sequence[sqlite3.Row]) -> int:
        cutoff = self.store.now() - STALE_DAYS * _DAY_NS
        return sum(1 for r in pending if r["created_at"] <= cutoff)

    def set_status(self, insight_id: str, status: str, reviewer: str, notes: str) -> None:
        """Approve or reject one insight (NotFound; Conflict on an invalid transition)."""
        if status not in (records.APPROVED, records.REJECTED):
            raise PlatformError("status must be 'approved' or 'rejected'")
        with self.store.tx() as db:
            row = self._insight_row(insight_id)
            records.check_transition(row["insight_status"], status)
            db.execute(
                "UPDATE records SET insight_status = ?, reviewed_by = ?, reviewed_at = ?, "
                "review_notes = ?, updated_at = ? WHERE id = ?",
                (status, reviewer, self.store.now(), notes, self.store.now(), insight_id),
            )

    def edit(self, insight_id: str, text: str, category: str, confidence: str) -> None:
        """Edit a non-applied insight's text, category or confidence (Conflict if applied)."""
        with self.store.tx() as db:
            row = self._insight_row(insight_id)
            if row["insight_status"] == records.APPLIED:
                raise Conflict("cannot edit an applied insight")
            try:
                if text:
                    records.validate_content(text)
                records.validate_labels(category, confidence)
            except ToolError as exc:
                raise PlatformError(exc.message) from None
            vector = self.memory.try_embed(text) if text else None
            db.execute(
                "UPDATE records SET content = ?, category = ?, confidence = ?, embedding = ?, "
                "updated_at = ? WHERE id = ?",
                (
                    text or row["content"],
                    category or row["category"],
                    confidence or row["confidence"],
                    dumps(vector) if vector is not None else row["embedding"],
                    self.store.now(),
                    insight_id,
                ),
            )

    def _mark_applied(self, insight_ids: Sequence[str], who: Identity, changeset_id: str) -> None:
        # Best effort per insight, as the peer: one that cannot move to applied is left.
        with self.store.tx() as db:
            for insight_id in insight_ids:
                try:
                    row = self._insight_row(insight_id)
                    records.check_transition(row["insight_status"], records.APPLIED)
                except (NotFound, Conflict):
                    continue
                now = self.store.now()
                db.execute(
                    "UPDATE records SET insight_status = ?, applied_by = ?, applied_at = ?, "
                    "changeset_ref = ?, updated_at = ? WHERE id = ?",
                    (records.APPLIED, who.email, now, changeset_id, now, insight_id),
                )

    def _return_to_review(
        self, insight_ids: Sequence[str], by: str, changeset_id: str
    ) -> list[str]:
        moved = []
        with self.store.tx() as db:
            for insight_id in insight_ids:
                try:
                    row = self._insight_row(insight_id)
                except NotFound:
                    continue
                if row["insight_status"] != records.APPLIED:
                    continue
                db.execute(
                    "UPDATE records SET insight_status = ?, reviewed_by = ?, reviewed_at = ?, "
                    "review_notes = ?, updated_at = ? WHERE id = ?",
                    (
                        records.PENDING,
                        by,
                        self.store.now(),
                        rollback_review_note(changeset_id),
                        self.store.now(),
                        insight_id,
                    ),
                )
                moved.append(insight_id)
        return moved

    # -- changesets ---------------------------------------------------------------------------

    @staticmethod
    def _changeset_view(row: sqlite3.Row) -> dict[str, Any]:
        view: dict[str, Any] = {
            "id": row["id"],
            "created_at": rfc3339(row["created_at"]),
            "target_urn": row["target_urn"],
            "change_type": row["change_type"],
            "previous_value": json.loads(row["previous_value"]),
            "new_value": json.loads(row["new_value"]),
            "source_insight_ids": json.loads(row["source_insight_ids"]),
            "approved_by": row["approved_by"],
            "applied_by": row["applied_by"],
            "rolled_back": bool(row["rolled_back"]),
        }
        if row["rolled_back_by"]:
            view["rolled_back_by"] = row["rolled_back_by"]
        if row["rolled_back_at"] is not None:
            view["rolled_back_at"] = rfc3339(row["rolled_back_at"])
        return view

    def _changeset_row(self, changeset_id: str) -> sqlite3.Row:
        with self.store.read() as db:
            row = db.execute("SELECT * FROM changesets WHERE id = ?", (changeset_id,)).fetchone()
        if row is None:
            raise NotFound("changeset not found")
        return row

    def changeset(self, changeset_id: str) -> dict[str, Any]:
        """One changeset by id; NotFound otherwise."""
        return self._changeset_view(self._changeset_row(changeset_id))

    def _changeset_rows(self, f: dict[str, Any]) -> list[sqlite3.Row]:
        sql, args = "SELECT * FROM changesets WHERE 1 = 1", []
        for key, column in (("entity_urn", "target_urn"), ("applied_by", "applied_by")):
            if f.get(key):
                sql += f" AND {column} = ?"
                args.append(f[key])
        if f.get("rolled_back") is not None:
            sql += " AND rolled_back = ?"
            args.append(int(bool(f["rolled_back"])))
        if f.get("since") is not None:
            sql += " AND created_at >= ?"
            args.append(f["since"])
        if f.get("until") is not None:
            sql += " AND created_at <= ?"
            args.append(f["until"])
        with self.store.read() as db:
            return db.execute(sql + " ORDER BY created_at DESC, seq DESC", args).fetchall()

    def changesets(
        self, f: dict[str, Any], *, limit: int, offset: int
    ) -> tuple[list[dict[str, Any]], int]:
        """Changesets matching the filters, newest first, one window."""
        rows = self._changeset_rows(f)
        return [self._changeset_view(r) for r in rows[offset : offset + limit]], len(rows)

    def _record_changeset(
        self,
        *,
        target: str,
        change_type: str,
        previous: dict[str, Any],
        new: dict[str, Any],
        insight_ids: Sequence[str],
        who: Identity,
    ) -> str:
        with self.store.tx() as db:
            cid, seq = self.store.next_id("changeset")
            db.execute(
                "INSERT INTO changesets (id, seq, created_at, target_urn, change_type, "
                "previous_value, new_value, source_insight_ids, applied_by) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    cid,
                    seq,
                    self.store.now(),
                    target,
                    change_type,
                    dumps(previous),
                    dumps(new),
                    dumps(list(insight_ids)),
                    who.email,
                ),
            )
        return cid

    # -- rollback -----------------------------------------------------------------------------

    def rollback(self, changeset_id: str, by: str) -> dict[str, Any]:
        """Revert a changeset (see the module docstring for when it is refused)."""
        with self.store.tx() as db:
            row = self._changeset_row(changeset_id)
            if row["rolled_back"]:
                raise Conflict("changeset already rolled back")
            target = row["target_urn"]
            if target.startswith(PAGE_TARGET):
                reverted = [self._revert_page(row, by)]
                skipped: list[str] = []
            else:
                reverted, skipped = self._revert_catalog(row)
            moved = self._return_to_review(json.loads(row["source_insight_ids"]), by, row["id"])
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
        changes = _recorded(json.loads(row["new_value"]))
        blocked = _unrevertible_types(row["target_urn"], changes)
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
        mine = {_aspect(c) for c in changes}
        with self.store.read() as db:
            later = db.execute(
                "SELECT * FROM changesets WHERE target_urn = ? AND rolled_back = 0 AND seq > ? "
                "ORDER BY seq",
                (row["target_urn"], row["seq"]),
            ).fetchall()
        ids, aspects = set(), set()
        for other in later:
            touched = {_aspect(c) for c in _recorded(json.loads(other["new_value"]))} & mine
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

    # -- apply_knowledge ----------------------------------------------------------------------

    def apply_knowledge(self, who: Identity, args: dict[str, Any]) -> dict[str, Any]:
        """Dispatch one ``apply_knowledge`` action."""
        action = str(args.get("action") or "")
        if not action:
            raise ToolError(f"action is required and must be one of: {', '.join(ACTIONS)}")
        if action not in ACTIONS:
            raise ToolError(f'invalid action "{action}": must be one of: {", ".join(ACTIONS)}')
        if action == "bulk_untag":
            raise ToolError(
                "bulk_untag is not available on refplatform: its catalog has no tag search; "
                "remove the tag per entity with apply (change_type remove_tag)"
            )
        handler = {
            "bulk_review": self._bulk_review,
            "review": self._review,
            "synthesize": self._synthesize,
            "apply": self._apply,
            "approve": self._approve_reject,
            "reject": self._approve_reject,
            "rollback": self._rollback_tool,
            "list_changesets": self._list_changesets,
        }[action]
        return handler(who, args)

    def _bulk_review(self, who: Identity, args: dict[str, Any]) -> dict[str, Any]:
        pending = self._filtered({"status": records.PENDING})
        by_category: dict[str, int] = {}
        by_confidence: dict[str, int] = {}
        for r in pending:
            by_category[r["category"]] = by_category.get(r["category"], 0) + 1
            by_confidence[r["confidence"]] = by_confidence.get(r["confidence"], 0) + 1
        out: dict[str, Any] = {
            "total_pending": len(pending),
            "by_entity": _entity_summaries(pending[:100]),
            "by_category": by_category,
            "by_confidence": by_confidence,
            "note": BULK_REVIEW_NOTE,
        }
        if pending:
            oldest = min(r["created_at"] for r in pending)
            out["oldest_pending_at"] = rfc3339_seconds(oldest)
            out["oldest_pending_age_days"] = max(0, (self.store.now() - oldest) // _DAY_NS)
            out["pending_over_30d"] = self._stale_count(pending)
        if not args.get("itemize"):
            if len(pending) > 100:
                out["by_entity_complete"] = False
            return out
        limit = clamp_limit(args.get("limit"))
        offset = max(0, int(args.get("offset") or 0))
        window = pending[offset : offset + limit]
        items = []
        for r in window:
            item = records.insight_view(r, with_actions=False)
            item["suggested_actions_count"] = len(json.loads(r["suggested_actions"]))
            items.append(item)
        out["by_entity"] = sorted(
            _entity_summaries(pending), key=lambda s: (-s["count"], s["entity_urn"])
        )
        out.update(insights=items, returned=len(items), offset=offset)
        if offset + limit < len(pending):
            out["next_offset"] = offset + limit
        return out

    def _review(self, who: Identity, args: dict[str, Any]) -> dict[str, Any]:
        urn = str(args.get("entity_urn") or "")
        if not urn:
            raise ToolError("entity_urn is required for review action")
        rows = self._filtered({"entity_urn": urn})[:100]
        return {
            "entity_urn": urn,
            "current_metadata": self._metadata_or_none(urn),
            "insights": [records.insight_view(r) for r in rows],
        }

    def _metadata_or_none(self, urn: str) -> dict[str, Any] | None:
        try:
            return self.catalog.metadata(urn)
        except NotFound:
            return None

    def _synthesize(self, who: Identity, args: dict[str, Any]) -> dict[str, Any]:
        urn = str(args.get("entity_urn") or "")
        if not urn:
            raise ToolError("entity_urn is required for synthesize action")
        rows = self._filtered({"entity_urn": urn, "status": records.APPROVED})[:100]
        if args.get("insight_ids"):
            rows = [r for r in rows if r["id"] in args["insight_ids"]]
        meta = self._metadata_or_none(urn)
        proposed = []
        for r in rows:
            for action in json.loads(r["suggested_actions"]):
                current = ""
                if meta and action.get("action_type") == "update_description":
                    current = meta["description"]
                proposed.append(
                    {
                        "change_type": action.get("action_type", ""),
                        "target": action.get("target", ""),
                        "current_value": current,
                        "suggested_value": action.get("detail", ""),
                        "source_insight_ids": [r["id"]],
                    }
                )
        out: dict[str, Any] = {
            "entity_urn": urn,
            "current_metadata": meta,
            "approved_insights": [records.insight_view(r) for r in rows],
            "proposed_changes": proposed,
        }
        if not proposed:
            out["note"] = (
                "These insights were captured without suggested_actions. Review the insight text "
                "above and the current metadata, then construct changes for the apply action."
            )
        return out

    def _approve_reject(self, who: Identity, args: dict[str, Any]) -> dict[str, Any]:
        action = args["action"]
        ids = list(args.get("insight_ids") or [])
        if not ids:
            raise ToolError(f"insight_ids is required for {action} action")
        target = records.APPROVED if action == "approve" else records.REJECTED
        updated, errors = 0, []
        for insight_id in ids:
            try:
                self.set_status(
                    insight_id, target, who.user_id, str(args.get("review_notes") or "")
                )
            except NotFound:
                errors.append(f"{insight_id}: not found")
                continue
            except Conflict as exc:
                errors.append(f"{insight_id}: {exc.message}")
                continue
            updated += 1
        out: dict[str, Any] = {"action": action, "updated": updated, "total": len(ids)}
        if errors:
            out["errors"] = errors
        return out

    def _rollback_tool(self, who: Identity, args: dict[str, Any]) -> dict[str, Any]:
        changeset_id = str(args.get("changeset_id") or "")
        if not changeset_id:
            raise ToolError("changeset_id is required for rollback action")
        try:
            row = self._changeset_row(changeset_id)
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

    def _list_changesets(self, who: Identity, args: dict[str, Any]) -> dict[str, Any]:
        urn = str(args.get("entity_urn") or "")
        if not urn:
            raise ToolError("entity_urn is required for list_changesets action")
        rows = self._changeset_rows({"entity_urn": urn})
        summaries = []
        for r in rows[:100]:
            blocked = _unrevertible_types(r["target_urn"], _recorded(json.loads(r["new_value"])))
            summary: dict[str, Any] = {
                "changeset_id": r["id"],
                "created_at": rfc3339(r["created_at"]),
                "target_urn": r["target_urn"],
                "change_type": r["change_type"],
                "applied_by": r["applied_by"],
                "source_insight_ids": json.loads(r["source_insight_ids"]),
                "rolled_back": bool(r["rolled_back"]),
                "revertible": not blocked and not r["rolled_back"],
            }
            if r["rolled_back_by"]:
                summary["rolled_back_by"] = r["rolled_back_by"]
            if r["rolled_back_at"] is not None:
                summary["rolled_back_at"] = rfc3339(r["rolled_back_at"])
            if blocked:
                summary["unrevertible_change_types"] = blocked
            summaries.append(summary)
        return {"entity_urn": urn, "total": len(rows), "changesets": summaries}

    # -- apply: the catalog sink --------------------------------------------------------------

    def _apply(self, who: Identity, args: dict[str, Any]) -> dict[str, Any]:
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
            cid = self._record_changeset(
                target=urn,
                change_type=kinds.pop() if len(kinds) == 1 else "multiple",
                previous=previous,
                new=new_value,
                insight_ids=insight_ids,
                who=who,
            )
            self._mark_applied(insight_ids, who, cid)
            resulting = self.catalog.metadata(urn)
        blocked = _unrevertible_types(urn, _recorded(new_value))
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
                row = self._insight_row(insight_id)
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
            cid = self._record_changeset(
                target=page_target(slug),
                change_type=change_type,
                previous=previous,
                new=new,
                insight_ids=insight_ids,
                who=who,
            )
            self._mark_applied(insight_ids, who, cid)
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


def _entity_summaries(rows: Sequence[sqlite3.Row]) -> list[dict[str, Any]]:
    """Insights grouped by entity URN: ``{entity_urn, count, categories, latest_at}``."""
    out: dict[str, dict[str, Any]] = {}
    for r in rows:
        for urn in records.urns(r):
            s = out.setdefault(
                urn, {"entity_urn": urn, "count": 0, "categories": [], "latest_at": ""}
            )
            s["count"] += 1
            if r["category"] not in s["categories"]:
                s["categories"].append(r["category"])
            stamp = rfc3339_seconds(r["created_at"])
            s["latest_at"] = max(s["latest_at"], stamp)
    return list(out.values())
