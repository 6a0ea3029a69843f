"""The platform's state: one SQLite database (a file, or in memory) behind ONE lock.

Every read and every write holds the lock. The MCP server runs tool handlers in
worker threads over this one connection, and a read that skipped the lock would run
inside another thread's open transaction and see its uncommitted writes (a bug this
project once had; ``tests/test_refplatform_locking.py`` keeps it fixed). The lock is
re-entrant and ``tx`` nests, so an operation that writes may call helpers that read or
write inside the same transaction: a failing call writes nothing.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from benchledger.refplatform import ids
from benchledger.refplatform.errors import PlatformError

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS records (
    id TEXT PRIMARY KEY, seq INTEGER NOT NULL, created_by TEXT NOT NULL, persona TEXT NOT NULL,
    dimension TEXT NOT NULL, sink_class TEXT NOT NULL, content TEXT NOT NULL,
    category TEXT NOT NULL, confidence TEXT NOT NULL, source TEXT NOT NULL,
    entity_urns TEXT NOT NULL, related_columns TEXT NOT NULL, suggested_actions TEXT NOT NULL,
    extra TEXT NOT NULL, status TEXT NOT NULL, insight INTEGER NOT NULL,
    insight_status TEXT NOT NULL DEFAULT '', session_id TEXT NOT NULL DEFAULT '',
    reviewed_by TEXT NOT NULL DEFAULT '', reviewed_at INTEGER,
    review_notes TEXT NOT NULL DEFAULT '', applied_by TEXT NOT NULL DEFAULT '',
    applied_at INTEGER, changeset_ref TEXT NOT NULL DEFAULT '',
    superseded_by TEXT NOT NULL DEFAULT '', created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL, embedding TEXT
);
CREATE INDEX IF NOT EXISTS records_by_owner ON records (created_by, status);
CREATE TABLE IF NOT EXISTS changesets (
    id TEXT PRIMARY KEY, seq INTEGER NOT NULL, created_at INTEGER NOT NULL,
    target_urn TEXT NOT NULL, change_type TEXT NOT NULL, previous_value TEXT NOT NULL,
    new_value TEXT NOT NULL, source_insight_ids TEXT NOT NULL,
    approved_by TEXT NOT NULL DEFAULT '', applied_by TEXT NOT NULL,
    rolled_back INTEGER NOT NULL DEFAULT 0, rolled_back_by TEXT NOT NULL DEFAULT '',
    rolled_back_at INTEGER
);
CREATE TABLE IF NOT EXISTS entities (
    urn TEXT PRIMARY KEY, seq INTEGER NOT NULL, data TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS glossary (
    urn TEXT PRIMARY KEY, seq INTEGER NOT NULL, data TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS pages (
    id TEXT PRIMARY KEY, seq INTEGER NOT NULL, slug TEXT NOT NULL, title TEXT NOT NULL,
    summary TEXT NOT NULL, body TEXT NOT NULL, tags TEXT NOT NULL, created_by TEXT NOT NULL,
    created_email TEXT NOT NULL, updated_by TEXT NOT NULL, current_version INTEGER NOT NULL,
    created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL, deleted_at INTEGER
);
CREATE UNIQUE INDEX IF NOT EXISTS pages_live_slug ON pages (slug) WHERE deleted_at IS NULL;
CREATE TABLE IF NOT EXISTS page_versions (
    id TEXT PRIMARY KEY, page_id TEXT NOT NULL, version INTEGER NOT NULL, title TEXT NOT NULL,
    summary TEXT NOT NULL, body TEXT NOT NULL, tags TEXT NOT NULL,
    change_summary TEXT NOT NULL, created_by TEXT NOT NULL, created_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS page_refs (
    page_id TEXT NOT NULL, urn TEXT NOT NULL, source TEXT NOT NULL, created_by TEXT NOT NULL,
    PRIMARY KEY (page_id, urn)
);
CREATE TABLE IF NOT EXISTS sessions (
    handle TEXT PRIMARY KEY, seq INTEGER NOT NULL, user_id TEXT NOT NULL, email TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS discovery (user_id TEXT PRIMARY KEY, at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS enriched (
    handle TEXT NOT NULL, table_name TEXT NOT NULL, PRIMARY KEY (handle, table_name)
);
CREATE TABLE IF NOT EXISTS audit (
    id TEXT PRIMARY KEY, seq INTEGER NOT NULL, timestamp INTEGER NOT NULL,
    session_id TEXT NOT NULL, user_id TEXT NOT NULL, tool_name TEXT NOT NULL,
    toolkit_kind TEXT NOT NULL, source TEXT NOT NULL, event_kind TEXT NOT NULL,
    success INTEGER NOT NULL, duration_ms INTEGER NOT NULL, data TEXT NOT NULL
);
"""


def dumps(value: Any) -> str:
    """Compact, key-sorted JSON for a stored column."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _refuse_foreign(path: str) -> None:
    """PlatformError when ``path`` is an SQLite file of something else (read-only look)."""
    uri = "file:" + urllib.parse.quote(os.path.abspath(path)) + "?mode=ro"
    conn = sqlite3.connect(uri, uri=True)
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    finally:
        conn.close()
    if tables and "meta" not in tables:
        what = "a benchledger ledger" if "benchledger_events" in tables else "another database"
        raise PlatformError(f"{path}: is {what}, not a platform state file; give --db a file "
                            "of its own")  # fmt: skip


class StateStore:
    """The SQLite connection, its one re-entrant lock, the clock and the id counters."""

    def __init__(self, path: str = ":memory:", *, clock: Callable[[], int] = time.time_ns) -> None:
        self._clock = clock
        # Re-entrant: a transaction may call helpers that read. Looked up on every use
        # (never captured), so a test can wrap it to watch who waits for it.
        self.lock: Any = threading.RLock()
        self._depth = 0
        try:
            if path != ":memory:" and os.path.isfile(path):
                _refuse_foreign(path)  # never write our tables into another's file
            self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
            self._db.row_factory = sqlite3.Row
            self._db.executescript(_SCHEMA)
        except sqlite3.Error as exc:
            raise PlatformError(f"{path}: cannot open the platform state: {exc}") from None

    @contextmanager
    def tx(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (nested calls join the outer one); rolls back on error."""
        with self.lock:
            if self._depth:
                self._depth += 1
                try:
                    yield self._db
                finally:
                    self._depth -= 1
                return
            self._db.execute("BEGIN IMMEDIATE")
            self._depth = 1
            try:
                yield self._db
            except BaseException:
                self._depth = 0
                self._db.execute("ROLLBACK")
                raise
            self._depth = 0
            self._db.execute("COMMIT")

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """The connection for reads, under the lock like every write."""
        with self.lock:
            yield self._db

    def now(self) -> int:
        """The clock in whole microseconds (as ns), so a rendered time filters back exactly."""
        return self._clock() // 1000 * 1000

    def meta(self, key: str) -> str | None:
        """A value of the ``meta`` table, or None."""
        with self.read() as db:
            row = db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        """Set a ``meta`` value (inside the caller's transaction)."""
        with self.tx() as db:
            db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    def next_seq(self, kind: str) -> int:
        """The next number of ``kind`` (1, 2, ...): one counter per kind, kept in the database."""
        with self.tx() as db:
            key = f"counter:{kind}"
            row = db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
            n = int(row[0]) + 1 if row else 1
            db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, str(n)))
        return n

    def next_id(self, kind: str) -> tuple[str, int]:
        """A fresh deterministic 32-hex id of ``kind`` and its sequence number."""
        n = self.next_seq(kind)
        return ids.hex_id(kind, n), n

    def close(self) -> None:
        """Close the connection (waits for a running transaction)."""
        with self.lock:
            self._db.close()
