"""The SQLite backend: a ledger in one SQLite file (WAL mode), or in memory."""

from __future__ import annotations

import os
import sqlite3
import urllib.parse
from collections.abc import Iterator, Sequence
from typing import Any

from eventsourcing.persistence import PersistenceError
from eventsourcing.sqlite import SQLiteApplicationRecorder, SQLiteCursor, SQLiteDatastore

from benchledger.ledger.backend import SCAN_CHUNK, TABLE, RecorderStore, Row
from benchledger.ledger.chain import Record
from benchledger.ledger.errors import UnusableInput

# SQLite's row columns. CAST: a hand-edited row may hold TEXT, COALESCE: or NULL; readers
# must still see bytes.
_SQLITE_COLS = "originator_id, originator_version, topic, COALESCE(CAST(state AS BLOB), X'')"


def _unit_range(run_id: str) -> tuple[str, str]:
    """The key range ``[lo, hi)`` holding every ``run/...`` stream: "0" follows "/"."""
    return run_id + "/", run_id + "0"


class _SqliteRecorder(SQLiteApplicationRecorder):
    """The library's application recorder, inserting a batch with one executemany.

    The stock recorder inserts row by row to return notification ids, which we never
    use; executemany is what makes batched appends run near raw SQLite speed.
    """

    def _insert_events(self, c: SQLiteCursor, stored_events: Sequence[Any], **_: Any) -> None:
        # Our rows are Records, tuples already in column order (stream, seq, kind, data).
        c.executemany(self.insert_events_statement, stored_events)


class SqliteStore(RecorderStore):
    """A ledger in one SQLite file (WAL mode)."""

    def __init__(self, path: str, *, create: bool = True, read_only: bool = False) -> None:
        self.url = path
        create = create and not read_only
        if path != ":memory:":
            if os.path.isdir(path):
                raise UnusableInput(path, "is a directory, not a ledger file")
            if not create and not os.path.exists(path):
                raise UnusableInput(path, "no ledger here (no such file)")
            if create:
                parent = os.path.dirname(os.path.abspath(path))
                try:
                    os.makedirs(parent, exist_ok=True)
                except OSError as exc:
                    raise UnusableInput(path, f"cannot create its folder: {exc.strerror}") from None
        if path != ":memory:" and os.path.exists(path):
            if not create and _empty(path) and _empty(path + "-wal"):
                # SQLite would take it for a new database and fail to write its journal
                # ("attempt to write a readonly database"): say what it is instead. (A new
                # WAL ledger's rows may all still be in its -wal file, its main file empty.)
                raise UnusableInput(path, "an empty file (0 bytes), not a benchledger ledger")
            _refuse_foreign(path)
        names = [path]
        if read_only and path != ":memory:":
            # mode=ro never writes; a WAL ledger on a read-only mount (no -shm can be made)
            # opens only as immutable, which is safe when no writer left a -wal file behind.
            uri = "file:" + urllib.parse.quote(os.path.abspath(path))
            names = [uri + "?mode=ro"]
            if not os.path.exists(path + "-wal"):
                names.append(uri + "?mode=ro&immutable=1")
        for n, name in enumerate(names):
            try:
                self._ds = SQLiteDatastore(name, originator_id_type="text", lock_timeout=30)
                self._rec = _SqliteRecorder(self._ds, events_table_name=TABLE)
                if create:
                    self._rec.create_table()
                with self._ds.transaction(commit=False) as c:
                    c.execute(f"SELECT 1 FROM {TABLE} LIMIT 1")
                return
            except (PersistenceError, sqlite3.Error) as exc:
                if n + 1 < len(names) and "unable to open" in str(exc):
                    continue
                raise UnusableInput(path, _sqlite_problem(exc)) from None

    def _problem(self, exc: Exception) -> str:
        return _sqlite_problem(exc)

    def _insert(self, cursor: Any, rows: Sequence[Record]) -> None:
        self._rec._insert_events(cursor, rows)

    def _query(self, *queries: tuple[str, Sequence[Any]]) -> Iterator[tuple[Any, ...]]:
        """Rows of each ``(sql, params)`` query in turn, in one read transaction."""
        try:
            with self._ds.transaction(commit=False) as c:
                cur: sqlite3.Cursor = c.sqlite_cursor
                cur.row_factory = None  # plain tuples: the hot path of verify
                for sql, params in queries:
                    cur.execute(sql, params)
                    while chunk := cur.fetchmany(SCAN_CHUNK):
                        yield from chunk
        except (PersistenceError, sqlite3.Error) as exc:
            raise self._unusable(exc) from None

    def scan(self, run_id: str | None = None) -> Iterator[Row]:
        cols = _SQLITE_COLS
        rows: Iterator[tuple[Any, ...]]
        if run_id is None:
            rows = self._query(
                (f"SELECT {cols} FROM {TABLE} ORDER BY originator_id, originator_version", ())
            )
        else:
            # The scan of verify: two ranges of the key index read in one transaction, the
            # header stream then every "run/..." stream, so no row needs a per-row filter
            # to drop other runs such as "run-2".
            header = (
                f"SELECT {cols} FROM {TABLE} WHERE originator_id = ? ORDER BY originator_version"
            )
            units = (
                f"SELECT {cols} FROM {TABLE} WHERE originator_id >= ? AND originator_id < ? "
                "ORDER BY originator_id, originator_version"
            )
            rows = self._query((header, (run_id,)), (units, _unit_range(run_id)))
        return rows

    def heads(self, run_id: str) -> list[Record]:
        # A skip scan of the key index, as PostgreSQL's: the header's last row, then stream
        # by stream through the "run/..." range, finding the next name and its last
        # version by index probes. A GROUP BY over the range would visit every row of the
        # run (and read each one's state) to keep one per stream.
        cols = _SQLITE_COLS
        header = (
            f"SELECT {cols} FROM {TABLE} WHERE originator_id = ? "
            "ORDER BY originator_version DESC LIMIT 1"
        )
        units = (
            "WITH RECURSIVE s(id) AS ("
            f"SELECT min(originator_id) FROM {TABLE} WHERE originator_id >= ?1 "
            "AND originator_id < ?2 UNION ALL "
            f"SELECT (SELECT min(originator_id) FROM {TABLE} WHERE originator_id > s.id "
            "AND originator_id < ?2) FROM s WHERE s.id IS NOT NULL) "
            f"SELECT {cols} FROM s JOIN {TABLE} e "
            "ON e.originator_id = s.id AND e.originator_version = ("
            f"SELECT max(originator_version) FROM {TABLE} WHERE originator_id = s.id) "
            "ORDER BY s.id"
        )
        return [
            Record(*row) for row in self._query((header, (run_id,)), (units, _unit_range(run_id)))
        ]

    def run_ids(self) -> list[str]:
        return [
            r[0]
            for r in self._query(
                (
                    f"SELECT DISTINCT originator_id FROM {TABLE} "
                    "WHERE instr(originator_id, '/') = 0 ORDER BY originator_id",
                    (),
                )
            )
        ]

    def recent_run_ids(self) -> list[str]:
        # By the rowid of each header stream's first row: the order runs were recorded in.
        return [
            r[0]
            for r in self._query(
                (
                    f"SELECT originator_id FROM {TABLE} WHERE instr(originator_id, '/') = 0 "
                    "GROUP BY originator_id ORDER BY min(rowid) DESC",
                    (),
                )
            )
        ]


def _empty(path: str) -> bool:
    """Whether ``path`` is missing or holds no bytes."""
    try:
        return os.path.getsize(path) == 0
    except OSError:
        return True


def _refuse_foreign(path: str) -> None:
    """Refuse an existing SQLite file that is not a ledger, before anything writes to it.

    Only a definite answer refuses: a file another process holds, or one this user may
    not open, is left to the real open (which says what is wrong).
    """
    uri = "file:" + urllib.parse.quote(os.path.abspath(path)) + "?mode=ro"
    try:
        conn = sqlite3.connect(uri, uri=True)
    except sqlite3.Error:
        return
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    except sqlite3.DatabaseError as exc:
        if "not a database" in str(exc):
            raise UnusableInput(path, _sqlite_problem(exc)) from None
        return
    finally:
        conn.close()
    if tables and TABLE not in tables:
        shown = ", ".join(sorted(tables)[:4])
        raise UnusableInput(
            path,
            f"not a benchledger ledger: an SQLite database of something else (tables {shown}); "
            "give --ledger a file of its own",
        )


def _sqlite_problem(exc: Exception) -> str:
    text = str(exc)
    if "file is not a database" in text or "not a database" in text:
        return "not a benchledger ledger (the file is not an SQLite database)"
    if "no such table" in text:
        return "not a benchledger ledger (no events table in this SQLite database)"
    if "unable to open database file" in text:
        return "cannot open the ledger file (no permission, or a read-only file system?)"
    if "readonly database" in text:
        return f"the ledger cannot be written here ({text})"
    if "database or disk is full" in text:
        return "the ledger's disk is full (SQLite: database or disk is full)"
    return f"SQLite error: {text}"
