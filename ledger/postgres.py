"""The PostgreSQL backend: ``PostgresStore``, its URL parsing, and its recorder.

Imported only when a ``postgresql://`` ledger is opened: it loads the driver (psycopg).

The recorder is eventsourcing's table and notification log, written faster: the
library's ``PostgresApplicationRecorder`` with three changes:

- the stream column (``originator_id``) is created ``COLLATE "C"``, so the primary-key
  index is in byte order: a run's streams (its id and every ``run/...`` name) are one
  index range, read in the order verification needs, with no sort;
- a batch goes in with one binary ``COPY`` (its payload built before the transaction)
  instead of ``INSERT ... FROM unnest(%s::composite[])``, which adapts every row to a
  composite type in Python (about 6k events/s here, against about 50k for COPY);
- the lock that keeps the notification log gap-free serialises readers against
  writers, not writers against each other (below).

**The notification log.** Notification ids come from a sequence when rows are
inserted, so two writers in flight can commit out of id order, and a reader tailing the
log could pass an id whose transaction commits later. The library prevents that by
taking an EXCLUSIVE table lock in every inserting transaction (plus a ``NOTIFY``, which
also serialises commits): writers then run one at a time, measured here at about a
quarter of the throughput of the same writers unserialised. Here every inserting
transaction first takes a *shared* advisory lock (writers never wait for each other);
a reader that wants the log takes the same lock *exclusively* for one statement, which
waits for the writers in flight to end and holds new ones back meanwhile, and reads the
highest notification id: every id up to it is final (committed, or rolled back for
good). ``select_notifications`` is then read up to that horizon, never past it. Nothing
here LISTENs, so there is no ``NOTIFY``.
"""

from __future__ import annotations

import re
import struct
import urllib.parse
from collections.abc import Iterator, Sequence
from typing import Any

import psycopg
from eventsourcing.persistence import Notification, PersistenceError
from eventsourcing.postgres import PostgresApplicationRecorder, PostgresDatastore
from psycopg import Cursor
from psycopg.rows import DictRow, tuple_row
from psycopg.sql import SQL, Identifier, Literal

from benchledger.ledger.backend import SCAN_CHUNK, TABLE, RecorderStore, Row
from benchledger.ledger.chain import Record
from benchledger.ledger.errors import UnusableInput

# PostgreSQL's binary COPY format: signature, flags, header extension length; then per
# row a field count and each field as (int32 length, bytes); then -1 as the trailer.
_COPY_HEADER = b"PGCOPY\n\xff\r\n\x00" + bytes(8)
_COPY_TRAILER = b"\xff\xff"
_INT32 = struct.Struct("!i").pack
_ROW_START = struct.Struct("!hi").pack  # 4 fields, then the stream's length
_SEQ_AND_LENGTH = struct.Struct("!iqi").pack  # int8 (length 8, value), then the state's length


def copy_payload(rows: Sequence[Any]) -> bytes:
    """Rows ``(stream, seq, kind, data)`` as one binary COPY payload, header to trailer, in
    the COPY's column order (stream, kind, seq, state).

    A row's stream and kind fields repeat across a batch (50 events a stream, a dozen
    kinds), so each is encoded once per payload; the seq and the state's length, now
    adjacent, are packed together: ~0.5 us a row where encoding every field was ~1.3.
    """
    parts = [_COPY_HEADER]
    add = parts.append
    streams: dict[str, bytes] = {}
    kinds: dict[str, bytes] = {}
    for stream, seq, kind, data in rows:
        s = streams.get(stream)
        if s is None:
            name = stream.encode()
            s = streams[stream] = _ROW_START(4, len(name)) + name
        k = kinds.get(kind)
        if k is None:
            tag = kind.encode()
            k = kinds[kind] = _INT32(len(tag)) + tag
        add(s)
        add(k)
        add(_SEQ_AND_LENGTH(8, seq, len(data)))
        add(data)
    add(_COPY_TRAILER)
    return b"".join(parts)


class PostgresRecorder(PostgresApplicationRecorder):
    """The library's application recorder: byte-ordered stream key, one COPY per batch,
    writers in parallel and notification readers behind a horizon.

    ``insert_events`` takes rows in column order ``(stream, seq, kind, data)`` (the
    ledger's Records); it returns no notification ids, which the ledger never uses.
    """

    def __init__(self, datastore: PostgresDatastore, *, events_table_name: str) -> None:
        super().__init__(datastore, events_table_name=events_table_name)
        schema, table = Identifier(datastore.schema), Identifier(events_table_name)
        # The library's CREATE TABLE, with the stream column in byte order.
        self.sql_create_statements[self.create_table_statement_index] = SQL(
            "CREATE TABLE IF NOT EXISTS {schema}.{table} ("
            'originator_id text COLLATE "C" NOT NULL, '
            "originator_version bigint NOT NULL, "
            "topic text, "
            "state bytea, "
            "notification_id bigserial, "
            "PRIMARY KEY (originator_id, originator_version)) "
            "WITH ("
            "    autovacuum_enabled = true,"
            "    autovacuum_vacuum_threshold = 100000000,"
            "    autovacuum_vacuum_scale_factor = 0.5,"
            "    autovacuum_analyze_threshold = 1000,"
            "    autovacuum_analyze_scale_factor = 0.01"
            ")"
        ).format(schema=schema, table=table)
        self._copy = SQL(
            "COPY {schema}.{table} (originator_id, topic, originator_version, state) "
            "FROM STDIN (FORMAT BINARY)"
        ).format(schema=schema, table=table)
        # One advisory lock per events table: writers share it, horizon readers take it alone.
        key = Literal(f"benchledger:{datastore.schema}.{events_table_name}")
        self._writing = SQL("SELECT pg_advisory_xact_lock_shared(hashtext({0}))").format(key)
        self._settle = SQL("SELECT pg_advisory_xact_lock(hashtext({0}))").format(key)
        self._highest = SQL("SELECT max(notification_id) AS top FROM {schema}.{table}").format(
            schema=schema, table=table
        )
        self._horizon = 0  # ids up to here are final for good: no need to settle again

    def insert_events(self, stored_events: Sequence[Any], **kwargs: Any) -> None:
        if not stored_events:
            return
        payload = copy_payload(stored_events)  # built before the transaction begins
        with self.datastore.transaction(commit=True) as curs:
            self._insert_payload(curs, payload)

    def _insert_stored_events(
        self, curs: Cursor[DictRow], stored_events: Sequence[Any], **_: Any
    ) -> None:
        self._insert_payload(curs, copy_payload(stored_events))

    def _insert_payload(self, curs: Cursor[DictRow], payload: bytes) -> None:
        curs.execute(self._writing)  # before any notification id is drawn
        with curs.copy(self._copy) as copy:
            copy.write(payload)

    def notification_horizon(self) -> int:
        """The highest notification id below which no writer is still in flight."""
        with self.datastore.transaction(commit=False) as curs:
            curs.execute(self._settle)
            curs.execute(self._highest)
            row = curs.fetchone()
        return int(row["top"]) if row and row["top"] is not None else 0

    def select_notifications(
        self,
        start: int | None,
        limit: int,
        stop: int | None = None,
        topics: Sequence[str] = (),
        *,
        inclusive_of_start: bool = True,
    ) -> Sequence[Notification]:
        """The library's read, never past the horizon (see the module docstring).

        The horizon is settled again only once a reader has read up to the last one.
        """
        first = None if start is None else start if inclusive_of_start else start + 1
        if first is None or first > self._horizon:
            self._horizon = self.notification_horizon()
        stop = self._horizon if stop is None else min(stop, self._horizon)
        return super().select_notifications(
            start, limit, stop, topics, inclusive_of_start=inclusive_of_start
        )


# A run's streams as one range of the byte-ordered key (the same bounds as SQLite's):
# an index range on ledgers whose stream column is COLLATE "C", a filter on older ones.
_PG_RUN_WHERE = (
    'originator_id COLLATE "C" >= %s AND originator_id COLLATE "C" < %s AND '
    "(originator_id = %s OR starts_with(originator_id, %s))"
)


def _pg_run_params(run_id: str) -> tuple[str, str, str, str]:
    return run_id, run_id + "0", run_id, run_id + "/"


class PostgresStore(RecorderStore):
    """A ledger in a PostgreSQL database, for many workers sharing one ledger.

    URL: ``postgresql://user[:password]@host[:port]/dbname[?schema=NAME]``.
    """

    def __init__(self, url: str, *, create: bool = True) -> None:
        kwargs = postgres_params(url)  # refuses a malformed URL before redact_url parses it
        self.url = redact_url(url)
        self.schema = kwargs.pop("schema")
        try:
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
                if in_key_order and self._byte_keys:
                    # The key index already yields this order; a planner that sees a whole
                    # table in range would sort it instead (on disk, for a large run).
                    conn.execute("SET LOCAL enable_sort = off")

                # Binary: bytea arrives as raw bytes, half the hex text's size, no decoding.
                with conn.cursor(
                    name="benchledger_scan", row_factory=tuple_row, binary=True
                ) as cur:
                    cur.itersize = SCAN_CHUNK
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

    def recent_run_ids(self) -> list[str]:
        # By each header stream's first notification id: the order runs were recorded in.
        return [
            r[0]
            for r in self._query(
                f"SELECT originator_id FROM {self._table} WHERE strpos(originator_id, '/') = 0 "
                "GROUP BY originator_id ORDER BY min(notification_id) DESC"
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
