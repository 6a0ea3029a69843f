"""The audit log: one event per tool call that reached the tool chain.

The peer's harness reads efficiency back from ``GET /api/v1/admin/audit/events``
(bench/internal/auditapi): every event of a session handle, sorted by timestamp, with
``duration_ms``, ``success``, ``error_message``, the enrichment counters and
``event_kind``. Refusals issued before the audit layer (authentication, session
handle, search-first gate) leave no event, exactly as in the peer; ``platform_info``
is audited under the handle it mints.
"""

from __future__ import annotations

import json
from typing import Any, Final

from benchledger.refplatform import ids
from benchledger.refplatform.auth import Identity
from benchledger.refplatform.errors import NotFound
from benchledger.refplatform.store import StateStore, dumps
from benchledger.refplatform.times import rfc3339

EVENT_KIND: Final = "mcp_tool_call"
SOURCE: Final = "mcp"
SORTABLE: Final = {
    "timestamp": "timestamp",
    "duration_ms": "duration_ms",
    "tool_name": "tool_name",
    "user_id": "user_id",
}
DEFAULT_PER_PAGE, MAX_PER_PAGE = 50, 1000


class Audit:
    """Appends audit events and answers the admin audit routes."""

    def __init__(self, store: StateStore) -> None:
        self.store = store

    def record(
        self,
        *,
        who: Identity,
        session_id: str,
        tool: str,
        toolkit_kind: str,
        toolkit_name: str,
        parameters: dict[str, Any],
        success: bool,
        error_message: str,
        duration_ms: int,
        enrichment_chars: int,
        request_chars: int,
        response_chars: int,
        content_blocks: int,
    ) -> None:
        """Append one event."""
        with self.store.tx() as db:
            seq = self.store.next_seq("audit")
            at = self.store.now()
            event: dict[str, Any] = {
                "id": ids.event_id(seq),
                "timestamp": rfc3339(at),
                "duration_ms": duration_ms,
                "request_id": f"req_{ids.hex_id('request', seq)[:12]}",
                "session_id": session_id,
                "user_id": who.user_id,
                "user_email": who.email,
                "persona": who.persona,
                "tool_name": tool,
                "toolkit_kind": toolkit_kind,
                "toolkit_name": toolkit_name,
                "connection": toolkit_name,
                "parameters": parameters,
                "success": success,
                "authorized": True,
                "enrichment_applied": enrichment_chars > 0,
                "enrichment_mode": "full" if enrichment_chars else "",
                "enrichment_tokens_full": enrichment_chars // 4,
                "enrichment_tokens_dedup": 0,
                "event_kind": EVENT_KIND,
                "source": SOURCE,
                "transport": "http",
                "request_chars": request_chars,
                "response_chars": response_chars,
                "content_blocks": content_blocks,
            }
            if error_message:
                # The category stays in the tool result; the swagger's Event has no field for it.
                event["error_message"] = error_message
            db.execute(
                "INSERT INTO audit VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    event["id"],
                    seq,
                    at,
                    session_id,
                    who.user_id,
                    tool,
                    toolkit_kind,
                    SOURCE,
                    EVENT_KIND,
                    int(success),
                    duration_ms,
                    dumps(event),
                ),
            )

    def event(self, event_id: str) -> dict[str, Any]:
        """One event by id; NotFound otherwise."""
        with self.store.read() as db:
            row = db.execute("SELECT data FROM audit WHERE id = ?", (event_id,)).fetchone()
        if row is None:
            raise NotFound("audit event not found")
        event: dict[str, Any] = json.loads(row[0])
        return event

    def events(
        self,
        f: dict[str, Any],
        *,
        sort_by: str = "timestamp",
        ascending: bool = False,
        limit: int = DEFAULT_PER_PAGE,
        offset: int = 0,
    ) -> tuple[list[dict[str, Any]], int]:
        """Events matching the filters in the asked order (default newest first), one window."""
        sql, args = "SELECT data FROM audit WHERE 1 = 1", []
        for key in ("user_id", "tool_name", "toolkit_kind", "source", "event_kind", "session_id"):
            if f.get(key):
                sql += f" AND {key} = ?"
                args.append(f[key])
        if f.get("success") is not None:
            sql += " AND success = ?"
            args.append(int(f["success"]))
        if f.get("start_time") is not None:
            sql += " AND timestamp >= ?"
            args.append(f["start_time"])
        if f.get("end_time") is not None:
            sql += " AND timestamp <= ?"
            args.append(f["end_time"])
        column = SORTABLE.get(sort_by, "timestamp")
        order = "ASC" if ascending else "DESC"
        with self.store.read() as db:
            rows = db.execute(sql + f" ORDER BY {column} {order}, seq {order}", args).fetchall()
        return [json.loads(r[0]) for r in rows[offset : offset + limit]], len(rows)

    def filters(self, start: int | None = None, end: int | None = None) -> dict[str, Any]:
        """The distinct users, tools, toolkit kinds, sources and event kinds in a window."""
        events, _ = self.events({"start_time": start, "end_time": end}, limit=10**9)

        def distinct(key: str) -> list[str]:
            return sorted({str(e[key]) for e in events if e.get(key)})

        return {
            "users": distinct("user_id"),
            "tools": distinct("tool_name"),
            "toolkit_kinds": distinct("toolkit_kind"),
            "sources": distinct("source"),
            "event_kinds": distinct("event_kind"),
            "user_labels": {e["user_id"]: e["user_email"] for e in events},
        }
