"""Read-only SQL over the seeded dataset: one SELECT, a row limit and a timeout."""

from __future__ import annotations

import sqlite3
import threading
import time
from typing import Any, Final

from protocols import dataset
from refplatform.errors import PlatformError

MAX_ROWS: Final = 1000
DEFAULT_ROWS: Final = 200
TIMEOUT_S: Final = 2.0

_ALLOWED = {
    sqlite3.SQLITE_SELECT,
    sqlite3.SQLITE_READ,
    sqlite3.SQLITE_FUNCTION,
    sqlite3.SQLITE_RECURSIVE,
}


class SqlEngine:
    """A private in-memory copy of the dataset that only answers single SELECTs."""

    def __init__(self, timeout_s: float = TIMEOUT_S) -> None:
        self._conn = sqlite3.connect(":memory:", check_same_thread=False)
        dataset.load_into(self._conn)
        self._conn.execute("PRAGMA query_only = ON")
        self._conn.set_authorizer(self._authorize)
        self._lock = threading.Lock()
        self._timeout_s = timeout_s
        self._deadline = 0.0

    @staticmethod
    def _authorize(action: int, *_: Any) -> int:
        return sqlite3.SQLITE_OK if action in _ALLOWED else sqlite3.SQLITE_DENY

    def _progress(self) -> int:
        return 1 if time.monotonic() > self._deadline else 0

    def tables(self) -> list[dict[str, Any]]:
        """Every table with its row count and description."""
        data = dataset.build()
        return [
            {"table": t.name, "rows": len(t.rows), "description": e.description, "urn": e.urn}
            for t, e in zip(data.tables, data.entities, strict=True)
        ]

    def describe(self, table: str) -> dict[str, Any]:
        """One table's columns (name, type, description)."""
        for t, e in zip(dataset.build().tables, dataset.build().entities, strict=True):
            if t.name == table:
                columns = [c._asdict() for c in t.columns]
                return {
                    "table": t.name,
                    "urn": e.urn,
                    "description": e.description,
                    "columns": columns,
                }
        known = ", ".join(t.name for t in dataset.build().tables)
        raise PlatformError(f"table: no table {table!r}; known tables: {known}")

    def query(self, sql: str, limit: int = DEFAULT_ROWS) -> dict[str, Any]:
        """Run one SELECT; at most ``limit`` rows come back, ``truncated`` says if more exist."""
        text = sql.strip().rstrip(";").strip()
        if not text.lower().startswith(("select", "with")):
            raise PlatformError("sql: only a single SELECT statement is allowed")
        limit = max(1, min(limit, MAX_ROWS))
        with self._lock:
            self._deadline = time.monotonic() + self._timeout_s
            self._conn.set_progress_handler(self._progress, 1000)
            try:
                cur = self._conn.execute(text)
                rows = cur.fetchmany(limit + 1)
            except sqlite3.ProgrammingError as exc:
                raise PlatformError(f"sql: {exc} (only one SELECT statement is allowed)") from None
            except sqlite3.DatabaseError as exc:
                msg = str(exc)
                if "interrupted" in msg:
                    raise PlatformError(
                        f"sql: query exceeded the {self._timeout_s:g}s timeout"
                    ) from None
                if "not authorized" in msg or "prohibited" in msg:
                    raise PlatformError("sql: only a single read-only SELECT is allowed") from None
                raise PlatformError(f"sql: {msg}") from None
            finally:
                self._conn.set_progress_handler(None, 0)
        columns = [d[0] for d in cur.description or ()]
        return {
            "columns": columns,
            "rows": [list(r) for r in rows[:limit]],
            "row_count": min(len(rows), limit),
            "truncated": len(rows) > limit,
        }
