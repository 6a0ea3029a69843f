"""Session handles and the search-first gate's memory, as the peer's middlewares keep them.

``platform_info`` mints a ``dps_`` handle for the caller. Every other tool call is
resolved (middleware/mcp_session_handle.go): a ``session_id`` argument holding a handle
is taken off the arguments and must be a handle this identity minted, else
``SESSION_EXPIRED``; a call without one adopts the identity's latest handle, and an
identity that never called ``platform_info`` is refused with ``SESSION_REQUIRED``.
Handles do not expire here. The search-first gate (mcp_workflow_gate.go) keys on the
USER, not the handle: once an identity has called ``search`` its query tools are open
in every later session. The semantic enrichment remembers, per handle, which tables it
already described, so a second query on them carries a short ``metadata_reference``.
"""

from __future__ import annotations

from typing import Final

from benchledger.refplatform import ids
from benchledger.refplatform.auth import Identity
from benchledger.refplatform.errors import ToolError
from benchledger.refplatform.store import StateStore

INIT_TOOL: Final = "platform_info"
SESSION_HINT: Final = (
    "Call {tool} first, then retry with the session_id it returns. This is a "
    "session-setup requirement, not a platform outage."
)


def session_required() -> ToolError:
    """The refusal of a call from an identity that never minted a handle."""
    return ToolError(
        f"SESSION_REQUIRED: Call {INIT_TOOL} first. It returns a session_id you must pass as "
        "the session_id argument on every subsequent tool call.",
        code="session_required",
        category="session_required",
        hint=SESSION_HINT.format(tool=INIT_TOOL),
    )


def session_expired() -> ToolError:
    """The refusal of an unknown handle or another identity's handle (indistinguishable)."""
    return ToolError(
        f"SESSION_EXPIRED: Your session_id is unknown or expired. Call {INIT_TOOL} again to "
        "mint a fresh session_id, then pass it on every subsequent tool call.",
        code="session_expired",
        category="session_required",
        hint=f"Call {INIT_TOOL} to mint a fresh session_id, then retry. This is a "
        "session-setup requirement, not a platform outage.",
    )


def search_required(tool: str) -> ToolError:
    """The search-first gate's refusal of a query tool."""
    return ToolError(
        f"SEARCH_REQUIRED: You must call search before using {tool}. search discovers the "
        "table's business context (descriptions, owners, tags, glossary terms, prior insights) "
        "and any access restrictions you need before running queries. Call search first, then "
        "retry your query.",
        code="search_required",
        category="search_required",
        hint="Call search first, then retry. This is a workflow requirement, not a platform "
        "outage.",
    )


class Sessions:
    """Minted handles, per-user discovery, and per-handle enrichment memory."""

    def __init__(self, store: StateStore) -> None:
        self.store = store

    def mint(self, who: Identity) -> str:
        """A fresh handle for ``who``."""
        with self.store.tx() as db:
            seq = self.store.next_seq("session")
            handle = ids.session_handle(seq)
            db.execute(
                "INSERT INTO sessions VALUES (?, ?, ?, ?, ?)",
                (handle, seq, who.user_id, who.email, self.store.now()),
            )
        return handle

    def resolve(self, who: Identity, handle: str | None) -> str:
        """The handle this call runs under (see the module docstring); ToolError to refuse."""
        with self.store.read() as db:
            if handle:
                row = db.execute(
                    "SELECT user_id FROM sessions WHERE handle = ?", (handle,)
                ).fetchone()
                if row is None or row[0] != who.user_id:
                    raise session_expired()
                return handle
            row = db.execute(
                "SELECT handle FROM sessions WHERE user_id = ? ORDER BY seq DESC LIMIT 1",
                (who.user_id,),
            ).fetchone()
        if row is None:
            raise session_required()
        return str(row[0])

    def record_discovery(self, who: Identity) -> None:
        """Remember that ``who`` has searched (the gate stays open for them from now on)."""
        with self.store.tx() as db:
            db.execute(
                "INSERT OR IGNORE INTO discovery VALUES (?, ?)", (who.user_id, self.store.now())
            )

    def discovered(self, who: Identity) -> bool:
        """Whether ``who`` has ever called ``search``."""
        with self.store.read() as db:
            row = db.execute("SELECT 1 FROM discovery WHERE user_id = ?", (who.user_id,)).fetchone()
        return row is not None

    def first_time(self, handle: str, tables: list[str]) -> bool:
        """Whether any of ``tables`` is new to this session's enrichment; marks them seen."""
        with self.store.tx() as db:
            fresh = False
            for table in tables:
                cur = db.execute("INSERT OR IGNORE INTO enriched VALUES (?, ?)", (handle, table))
                fresh = fresh or cur.rowcount > 0
        return fresh
