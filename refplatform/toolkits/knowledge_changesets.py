"""Changesets: the record of one ``apply``, what it changed and whether it can be undone.

A changeset's ``new_value`` holds the ordered changes (``change_0``, ``change_1``, ...);
its target is the entity URN, or ``kp:<slug>`` for a knowledge page. Two changes conflict
when they touch the same metadata aspect (rollback refuses to undo one under a newer one).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any, Final

from benchledger.refplatform.auth import Identity
from benchledger.refplatform.errors import NotFound, ToolError
from benchledger.refplatform.store import StateStore, dumps
from benchledger.refplatform.times import rfc3339

REVERTIBLE: Final = ("update_description", "add_tag", "remove_tag", "add_glossary_term")
PAGE_TARGET: Final = "kp:"
CREATE_PAGE, UPDATE_PAGE = "create_page", "update_page"


def page_target(slug: str) -> str:
    """The changeset target of a knowledge page promotion: ``kp:<slug>``."""
    return PAGE_TARGET + slug


def aspect(change: dict[str, Any]) -> str:
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


def recorded(new_value: dict[str, Any]) -> list[dict[str, Any]]:
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


def unrevertible_types(target_urn: str, changes: list[dict[str, Any]]) -> list[str]:
    """The change types in ``changes`` that have no before-image (none for pages)."""
    if target_urn.startswith(PAGE_TARGET):
        return []
    return list(dict.fromkeys(c["change_type"] for c in changes if not _revertible(c)))


class Changesets:
    """The changesets table: record one, read one or a filtered window, list them for a tool."""

    def __init__(self, store: StateStore) -> None:
        self.store = store

    @staticmethod
    def view(row: sqlite3.Row) -> dict[str, Any]:
        """A changeset row as the REST routes show it."""
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

    def row(self, changeset_id: str) -> sqlite3.Row:
        """One changeset's row by id; NotFound otherwise."""
        with self.store.read() as db:
            row = db.execute("SELECT * FROM changesets WHERE id = ?", (changeset_id,)).fetchone()
        if row is None:
            raise NotFound("changeset not found")
        return row

    def changeset(self, changeset_id: str) -> dict[str, Any]:
        """One changeset by id; NotFound otherwise."""
        return self.view(self.row(changeset_id))

    def rows(self, f: dict[str, Any]) -> list[sqlite3.Row]:
        """Changeset rows matching the filters, newest first."""
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
        rows = self.rows(f)
        return [self.view(r) for r in rows[offset : offset + limit]], len(rows)

    def record(
        self,
        *,
        target: str,
        change_type: str,
        previous: dict[str, Any],
        new: dict[str, Any],
        insight_ids: Sequence[str],
        who: Identity,
    ) -> str:
        """Insert one changeset and return its id (inside the caller's transaction)."""
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

    def list_tool(self, who: Identity, args: dict[str, Any]) -> dict[str, Any]:
        """The ``list_changesets`` action: an entity's changesets, whether each is revertible."""
        urn = str(args.get("entity_urn") or "")
        if not urn:
            raise ToolError("entity_urn is required for list_changesets action")
        rows = self.rows({"entity_urn": urn})
        summaries = []
        for r in rows[:100]:
            blocked = unrevertible_types(r["target_urn"], recorded(json.loads(r["new_value"])))
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
