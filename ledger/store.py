"""Storage: the eventsourcing recorder layer, SQLite file or PostgreSQL.

Each event is a stored event: originator = stream, version = seq, topic = kind,
state = canonical bytes. The recorder's unique (originator, version) key is what makes
a fork impossible. Library and driver errors are translated here, never leaked.
"""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
import urllib.parse
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, NamedTuple

from eventsourcing.persistence import IntegrityError, PersistenceError
from eventsourcing.sqlite import SQLiteApplicationRecorder, SQLiteCursor, SQLiteDatastore

from ledger.chain import Record
from ledger.errors import AppendConflict, UnusableInput

TABLE = "benchledger_events"
_SCAN_CHUNK = 2000
# SQLite's row columns. CAST: a hand-edited row may hold TEXT, COALESCE: or NULL; readers
# must still see bytes.
_SQLITE_COLS = "originator_id, originator_version, topic, COALESCE(CAST(state AS BLOB), X'')"


def _unit_range(run_id: str) -> tuple[str, str]:
    """The key range ``[lo, hi)`` holding every ``run/...`` stream: "0" follows "/"."""
    return run_id + "/", run_id + "0"


# What scan yields: plain tuples in column order, the same shape as Record.
Row = tuple[str, int, str, bytes]


class Notification(NamedTuple):
    id: int
    record: Record


class Store(ABC):
    """Rows of ``(stream, seq, kind, canonical bytes)`` in a recorder."""

    url: str

    @abstractmethod
    def append(self, rows: Sequence[Record]) -> None:
        """Insert rows atomically; raise AppendConflict naming the first taken (stream, seq)."""

    @abstractmethod
    def append_all(self, batches: Iterable[Sequence[Record]]) -> int:
        """Insert every batch in one transaction (all or nothing); return rows written."""

    @abstractmethod
    def head(self, stream: str) -> Record | None:
        """The last row of ``stream``, or None when it is empty."""

    @abstractmethod
    def read_stream(self, stream: str, after: int = -1) -> list[Record]:
        """Rows of ``stream`` with seq > ``after``, in seq order."""

    @abstractmethod
    def scan(self, run_id: str | None = None) -> Iterator[Row]:
        """Every row of a run (or the whole ledger), by stream name then seq, streamed."""

    @abstractmethod
    def heads(self, run_id: str) -> list[Record]:
        """The last row of every stream of ``run_id``, sorted by stream name."""

    @abstractmethod
    def run_ids(self) -> list[str]:
        """Ids of every run, i.e. every stream name without a ``/``, sorted."""

    @abstractmethod
    def notifications(self, start: int, limit: int) -> list[Notification]:
        """Up to ``limit`` rows in global insertion order, from notification id ``start``."""

    @abstractmethod
    def close(self) -> None:
        """Release connections."""

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _conflict(self, rows: Sequence[Record]) -> AppendConflict:
        for row in rows:
            assert row.stream is not None and row.seq is not None
            h = self.head(row.stream)
            if h is not None and h.seq is not None and h.seq >= row.seq:
                return AppendConflict(row.stream, row.seq)
        first = rows[0]
        return AppendConflict(first.stream or "", first.seq or 0)


class _RecorderStore(Store):
    """What both backends share: writes and stream reads through eventsourcing's
    application recorder, its errors translated to ledger errors naming the ledger."""

    _ds: Any
    _rec: Any

    @abstractmethod
    def _problem(self, exc: Exception) -> str:
        """One line saying what a driver or library error means for this ledger."""

    @abstractmethod
    def _insert(self, cursor: Any, rows: Sequence[Record]) -> None:
        """Insert ``rows`` inside the open transaction of ``cursor``."""

    def _unusable(self, exc: Exception) -> UnusableInput:
        return UnusableInput(self.url, self._problem(exc))

    def append(self, rows: Sequence[Record]) -> None:
        if not rows:
            return
        try:
            self._rec.insert_events(rows)
        except IntegrityError:
            raise self._conflict(rows) from None
        except PersistenceError as exc:
            raise self._unusable(exc) from None

    def append_all(self, batches: Iterable[Sequence[Record]]) -> int:
        n = 0
        try:
            with self._ds.transaction(commit=True) as cursor:
                for batch in batches:
                    if batch:
                        self._insert(cursor, batch)
                        n += len(batch)
        except IntegrityError as exc:
            raise UnusableInput(
                self.url, f"import conflicted with a concurrent writer: {exc}"
            ) from None
        except PersistenceError as exc:
            raise self._unusable(exc) from None
        return n

    def head(self, stream: str) -> Record | None:
        try:
            rows = self._rec.select_events(stream, desc=True, limit=1)
        except PersistenceError as exc:
            raise self._unusable(exc) from None
        if not rows:
            return None
        s = rows[0]
        return Record(stream, s.originator_version, s.topic, _as_bytes(s.state))

    def read_stream(self, stream: str, after: int = -1) -> list[Record]:
        try:
            rows = self._rec.select_events(stream, gt=after)
        except PersistenceError as exc:
            raise self._unusable(exc) from None
        return [Record(stream, s.originator_version, s.topic, _as_bytes(s.state)) for s in rows]

    def notifications(self, start: int, limit: int) -> list[Notification]:
        try:
            found = self._rec.select_notifications(start, limit)
        except PersistenceError as exc:
            raise self._unusable(exc) from None
        return [
            Notification(
                n.id,
                Record(str(n.originator_id), n.originator_version, n.topic, _as_bytes(n.state)),
            )
            for n in found
        ]

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._ds.close()


class _SqliteRecorder(SQLiteApplicationRecorder):
    """The library's application recorder, inserting a batch with one executemany.

    The stock recorder inserts row by row to return notification ids, which we never
    use; executemany is what makes batched appends run near raw SQLite speed.
    """

    def _insert_events(self, c: SQLiteCursor, stored_events: Sequence[Any], **_: Any) -> None:
        # Our rows are Records, tuples already in column order (stream, seq, kind, data).
        c.executemany(self.insert_events_statement, stored_events)


class SqliteStore(_RecorderStore):
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
                    while chunk := cur.fetchmany(_SCAN_CHUNK):
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


def _as_bytes(value: bytes | memoryview | str | None) -> bytes:
    # A hand-edited row may hold TEXT or NULL: NULL reads as empty bytes, which the
    # ledger then reports as a damaged event instead of crashing on None.
    if value is None:
        return b""
    return value.encode() if isinstance(value, str) else bytes(value)


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


# A run's streams as one range of the byte-ordered key (the same bounds as SQLite's):
# an index range on ledgers whose stream column is COLLATE "C", a filter on older ones.
_PG_RUN_WHERE = (
    'originator_id COLLATE "C" >= %s AND originator_id COLLATE "C" < %s AND '
    "(originator_id = %s OR starts_with(originator_id, %s))"
)


def _pg_run_params(run_id: str) -> tuple[str, str, str, str]:
    return run_id, run_id + "0", run_id, run_id + "/"


class PostgresStore(_RecorderStore):
    """A ledger in a PostgreSQL database, for many workers sharing one ledger.

    URL: ``postgresql://user[:password]@host[:port]/dbname[?schema=NAME]``.
    """

    def __init__(self, url: str, *, create: bool = True) -> None:
        from eventsourcing.postgres import PostgresDatastore

        from ledger.postgres import PostgresRecorder

        kwargs = postgres_params(url)  # refuses a malformed URL before redact_url parses it
        self.url = redact_url(url)
        self.schema = kwargs.pop("schema")
        try:
            import psycopg

            with psycopg.connect(**kwargs, connect_timeout=5, autocommit=True) as conn:
                if create:
                    # Processes creating one ledger at once (shards starting together) take
                    # turns: concurrent CREATE ... IF NOT EXISTS statements can still collide.
                    # The lock goes with this connection.
                    conn.execute("SELECT pg_advisory_lock(hashtext(%s))", (f"bl:{self.schema}",))
                    conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"')
                self._ds = PostgresDatastore(
                    **kwargs,
                    originator_id_type="text",
                    schema=self.schema,
                    pool_size=2,
                    max_overflow=4,
                    connect_timeout=5,
                )
                # Open (and fill) the pool here, once: psycopg_pool's open(wait=True) is not
                # safe to race from many threads, which eventsourcing does when it is lazy.
                self._ds.pool.open(wait=True, timeout=5)
                self._rec = PostgresRecorder(self._ds, events_table_name=TABLE)
                if create:
                    self._rec.create_table()
            with self._ds.transaction(commit=False) as c:
                c.execute(f'SELECT 1 FROM "{self.schema}".{TABLE} LIMIT 1')
                # Ledgers created before the stream key was byte-ordered read by sorting.
                c.execute(
                    "SELECT collation_name FROM information_schema.columns WHERE "
                    "table_schema = %s AND table_name = %s AND column_name = 'originator_id'",
                    (self.schema, TABLE),
                )
                found = c.fetchone()
                self._byte_keys = found is not None and found["collation_name"] == "C"
        except Exception as exc:  # psycopg / pool errors of every flavour
            raise self._unusable(exc) from None
        self._table = f'"{self.schema}".{TABLE}'

    def _problem(self, exc: Exception) -> str:
        return _pg_problem(exc)

    def _insert(self, cursor: Any, rows: Sequence[Record]) -> None:
        self._rec._insert_stored_events(cursor, rows)

    def _query(
        self, sql: str, params: Sequence[Any] = (), *, in_key_order: bool = False
    ) -> Iterator[tuple[Any, ...]]:
        try:
            with self._ds.get_connection() as conn, conn.transaction():
                from psycopg.rows import tuple_row

                if in_key_order and self._byte_keys:
                    # The key index already yields this order; a planner that sees a whole
                    # table in range would sort it instead (on disk, for a large run).
                    conn.execute("SET LOCAL enable_sort = off")

                # Binary: bytea arrives as raw bytes, half the hex text's size, no decoding.
                with conn.cursor(
                    name="benchledger_scan", row_factory=tuple_row, binary=True
                ) as cur:
                    cur.itersize = _SCAN_CHUNK
                    cur.execute(sql, params)
                    yield from cur
        except PersistenceError as exc:
            raise self._unusable(exc) from None

    def scan(self, run_id: str | None = None) -> Iterator[Row]:
        # COALESCE: a NULLed state column still reads as bytes (the ledger reports it damaged).
        cols = "originator_id, originator_version, topic, COALESCE(state, ''::bytea)"
        order = 'ORDER BY originator_id COLLATE "C", originator_version'
        if run_id is None:
            return self._query(f"SELECT {cols} FROM {self._table} {order}", in_key_order=True)
        return self._query(
            f"SELECT {cols} FROM {self._table} WHERE {_PG_RUN_WHERE} {order}",
            _pg_run_params(run_id),
            in_key_order=True,
        )

    def heads(self, run_id: str) -> list[Record]:
        if not self._byte_keys:
            rows = self._query(
                'SELECT DISTINCT ON (originator_id COLLATE "C") originator_id, '
                f"originator_version, topic, COALESCE(state, ''::bytea) FROM {self._table} "
                f'WHERE {_PG_RUN_WHERE} ORDER BY originator_id COLLATE "C", '
                "originator_version DESC",
                _pg_run_params(run_id),
            )
            return [Record(*row) for row in rows]
        # A skip scan of the key index: stream by stream, two index probes each, so a
        # seal reads one row per stream instead of the whole run.
        t = self._table
        lo, hi, run, prefix = _pg_run_params(run_id)
        rows = self._query(
            f"WITH RECURSIVE s(id) AS ("
            f"SELECT min(originator_id) FROM {t} WHERE originator_id >= %s "
            "AND originator_id < %s UNION ALL "
            f"SELECT (SELECT min(originator_id) FROM {t} WHERE originator_id > s.id "
            "AND originator_id < %s) FROM s WHERE s.id IS NOT NULL) "
            "SELECT s.id, e.originator_version, e.topic, e.state FROM s CROSS JOIN LATERAL ("
            "SELECT originator_version, topic, COALESCE(state, ''::bytea) AS state "
            f"FROM {t} WHERE originator_id = s.id ORDER BY originator_version DESC LIMIT 1) e "
            "WHERE s.id = %s OR starts_with(s.id, %s) ORDER BY s.id",
            (lo, hi, hi, run, prefix),
        )
        return [Record(*row) for row in rows]

    def run_ids(self) -> list[str]:
        return [
            r[0]
            for r in self._query(
                f"SELECT DISTINCT originator_id FROM {self._table} "
                "WHERE strpos(originator_id, '/') = 0 ORDER BY 1"
            )
        ]


def _pg_problem(exc: Exception) -> str:
    text = " ".join(str(exc).split())
    if "does not exist" in text and TABLE in text:
        return "not a benchledger ledger (no events table in this database)"
    if "does not exist" in text and text.startswith("schema "):
        return f"not a benchledger ledger (no events table in this database: the {text})"
    if "connect" in text.lower() or "timeout" in text.lower():
        return f"cannot reach PostgreSQL: {text}"
    return f"PostgreSQL error: {text}"


def postgres_params(url: str) -> dict[str, Any]:
    """The connection parameters of a ``postgresql://`` ledger URL, and its ``schema``.

    UnusableInput, naming the URL without its password, unless it is a ``postgresql://`` URL
    with a host, a port in 1..65535 (default 5432) and a schema of letters, digits and ``_``.
    """
    if not url.startswith(("postgresql://", "postgres://")):
        raise UnusableInput(_no_password(url), "not a postgresql:// URL")
    try:
        shown = redact_url(url)
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError as exc:  # "Invalid IPv6 URL", a port that is no number or > 65535
        if "port" not in str(exc).lower():
            raise UnusableInput(_no_password(url), f"not a URL ({exc})") from None
        raise UnusableInput(_no_password(url), "the port must be a number in 1..65535") from None
    if not parts.hostname:
        raise UnusableInput(shown, "the URL names no host, e.g. postgresql://USER@HOST:5432/DB")
    if port == 0:
        raise UnusableInput(shown, "the port must be a number in 1..65535")
    schema = dict(urllib.parse.parse_qsl(parts.query)).get("schema", "public")
    if not schema.replace("_", "").isalnum():
        raise UnusableInput(shown, f"schema {schema!r} must be letters, digits and _")
    return dict(
        dbname=(parts.path or "/").lstrip("/") or "postgres",
        host=parts.hostname,
        port=port or 5432,
        user=urllib.parse.unquote(parts.username or "postgres"),
        password=urllib.parse.unquote(parts.password or ""),
        schema=schema,
    )


def reach_postgres(url: str) -> None:
    """UnusableInput unless ``url`` parses and a PostgreSQL server there lets its user in,
    within the connect timeout (5 s): a check for commands that connect by other means."""
    params = postgres_params(url)
    params.pop("schema")
    try:
        import psycopg

        psycopg.connect(**params, connect_timeout=5).close()
    except Exception as exc:  # psycopg errors of every flavour
        raise UnusableInput(redact_url(url), _pg_problem(exc)) from None


def _no_password(url: str) -> str:
    """``url`` with any password hidden, for a URL that ``urlsplit`` cannot parse."""
    return re.sub(r"//([^/@:]*):[^/]*@", r"//\1:***@", url)


def redact_url(url: str) -> str:
    """``url`` with any password replaced by ``***`` (secrets never reach a message)."""
    parts = urllib.parse.urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


def open_store(location: str, *, create: bool = True, read_only: bool = False) -> Store:
    """Open a ledger by path or ``postgresql://`` URL; ``create=False`` refuses a missing one.

    ``read_only`` never writes (an SQLite file is opened ``mode=ro``), so a ledger the user
    cannot write is still readable.
    """
    if location.startswith(("postgresql://", "postgres://")):
        return PostgresStore(location, create=create and not read_only)
    if "://" in location:
        raise UnusableInput(
            location, "unknown ledger URL scheme (use a file path or postgresql://)"
        )
    return SqliteStore(location, create=create, read_only=read_only)
