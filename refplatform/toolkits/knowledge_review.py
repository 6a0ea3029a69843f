"""Insights under review: reading and filtering them, review transitions, the review actions.

approve/reject validate the review transition per insight and report failures in
``errors`` instead of failing the call; ``bulk_review``, ``review`` and ``synthesize``
read the queue (knowledge/toolkit.go in the peer). An applied insight carries
``applied_by``, ``applied_at`` and ``changeset_ref``; a rollback returns it to ``pending``.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any, Final

from benchledger.refplatform import records
from benchledger.refplatform.auth import Identity
from benchledger.refplatform.errors import Conflict, NotFound, PlatformError, ToolError
from benchledger.refplatform.store import StateStore, dumps
from benchledger.refplatform.times import rfc3339, rfc3339_seconds
from benchledger.refplatform.toolkits.catalog import Catalog
from benchledger.refplatform.toolkits.memory import Memory, clamp_limit

STALE_DAYS: Final = 30
BULK_REVIEW_NOTE: Final = (
    "Counts are pending insights only (the global review queue). by_entity counts an insight "
    "once per entity URN it carries and omits insights that have no entity URN, so it does not "
    "sum to total_pending. Pass itemize:true to enumerate every pending insight (with id, "
    "captured_by and sink_class)."
)
_DAY_NS: Final = 86_400 * 10**9


def mine(who: Identity) -> dict[str, str]:
    """The review filter holding a pool identity to the insights it captured (the admin
    key: none); toolkits/knowledge.py says why."""
    return {"captured_by": who.email} if who.pool_index else {}


def rollback_review_note(changeset_id: str) -> str:
    """The review note of an insight a rollback sent back to the queue."""
    return f"Returned to review: changeset {changeset_id} was rolled back."


class Insights:
    """Insights under review: queries, transitions and the review actions of ``apply_knowledge``."""

    def __init__(self, store: StateStore, memory: Memory, catalog: Catalog) -> None:
        self.store = store
        self.memory = memory
        self.catalog = catalog

    def row(self, insight_id: str) -> sqlite3.Row:
        """One live insight's row by id; NotFound otherwise."""
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
        return records.insight_view(self.row(insight_id))

    def filtered(self, f: dict[str, Any], *, oldest: bool = False) -> list[sqlite3.Row]:
        """Live insight rows matching the filters, newest first (``oldest`` flips)."""
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
        rows = self.filtered(f, oldest=oldest)
        return [records.insight_view(r) for r in rows[offset : offset + limit]], len(rows)

    def stats(self, f: dict[str, Any]) -> dict[str, Any]:
        """Aggregates over the matching insights (``GET /insights/stats``)."""
        rows = self.filtered(f)
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
            row = self.row(insight_id)
            records.check_transition(row["insight_status"], status)
            db.execute(
                "UPDATE records SET insight_status = ?, reviewed_by = ?, reviewed_at = ?, "
                "review_notes = ?, updated_at = ? WHERE id = ?",
                (status, reviewer, self.store.now(), notes, self.store.now(), insight_id),
            )

    def edit(self, insight_id: str, text: str, category: str, confidence: str) -> None:
        """Edit a non-applied insight's text, category or confidence (Conflict if applied)."""
        with self.store.tx() as db:
            row = self.row(insight_id)
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

    def mark_applied(self, insight_ids: Sequence[str], who: Identity, changeset_id: str) -> None:
        """Mark the insights applied by ``changeset_id``; one that cannot move is left."""
        # Best effort per insight, as the peer: one that cannot move to applied is left.
        with self.store.tx() as db:
            for insight_id in insight_ids:
                try:
                    row = self.row(insight_id)
                    records.check_transition(row["insight_status"], records.APPLIED)
                except (NotFound, Conflict):
                    continue
                now = self.store.now()
                db.execute(
                    "UPDATE records SET insight_status = ?, applied_by = ?, applied_at = ?, "
                    "changeset_ref = ?, updated_at = ? WHERE id = ?",
                    (records.APPLIED, who.email, now, changeset_id, now, insight_id),
                )

    def return_to_review(self, insight_ids: Sequence[str], by: str, changeset_id: str) -> list[str]:
        """Send the applied insights back to pending; the ids that moved."""
        moved = []
        with self.store.tx() as db:
            for insight_id in insight_ids:
                try:
                    row = self.row(insight_id)
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

    # -- the review actions of apply_knowledge ---------------------------------------------

    def bulk_review(self, who: Identity, args: dict[str, Any]) -> dict[str, Any]:
        """The ``bulk_review`` action: counts over the pending queue, itemized on request."""
        pending = self.filtered({"status": records.PENDING, **mine(who)})
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

    def review(self, who: Identity, args: dict[str, Any]) -> dict[str, Any]:
        """The ``review`` action: an entity's insights and its current metadata."""
        urn = str(args.get("entity_urn") or "")
        if not urn:
            raise ToolError("entity_urn is required for review action")
        rows = self.filtered({"entity_urn": urn, **mine(who)})[:100]
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

    def synthesize(self, who: Identity, args: dict[str, Any]) -> dict[str, Any]:
        """The ``synthesize`` action: approved insights and the changes they suggest."""
        urn = str(args.get("entity_urn") or "")
        if not urn:
            raise ToolError("entity_urn is required for synthesize action")
        rows = self.filtered({"entity_urn": urn, "status": records.APPROVED, **mine(who)})[:100]
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

    def approve_reject(self, who: Identity, args: dict[str, Any]) -> dict[str, Any]:
        """The ``approve``/``reject`` actions: per-insight failures land in ``errors``."""
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
