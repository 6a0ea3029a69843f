"""The raw database `bench ledger` measures the ledger against, SQLite or PostgreSQL.

The same canonical bytes, blake3-chained, go into a plain table ``raw(stream, seq, prev,
hash, data)`` with the primary key ``(stream, seq)``: by ``executemany`` into SQLite
(WAL), by binary ``COPY`` (psycopg's fastest path) into PostgreSQL, one transaction per
batch. Verify reads the rows back in key order (SQLite: one cursor; PostgreSQL: a
server-side binary cursor, 2000 rows a fetch) and recomputes the chain.
"""

from __future__ import annotations

import sqlite3
import urllib.parse
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from typing import Any

import blake3

from ledger.chain import EVENT_DOMAIN, genesis

ChainRow = tuple[str, int, str, str, bytes]
Streams = list[tuple[str, list[bytes]]]
_FETCH = 2000


def chain(streams: Streams) -> list[ChainRow]:
    """``(stream, seq, prev, hash, data)`` rows: each stream's bytes, hash-chained."""
    rows = []
    for stream, datas in streams:
        prev = genesis(stream)
        for seq, data in enumerate(datas):
            h = blake3.blake3(EVENT_DOMAIN + data).hexdigest()
            rows.append((stream, seq, prev, h, data))
            prev = h
    return rows


def check(rows: Iterable[tuple[Any, ...]]) -> int:
    """Recompute the chain of rows in key order; SystemExit at the first break."""
    n = 0
    last_stream, last_hash, want_seq = None, "", 0
    for stream, seq, prev, h, data in rows:
        if stream != last_stream:
            last_stream, last_hash, want_seq = stream, genesis(stream), 0
        if seq != want_seq or prev != last_hash:
            raise SystemExit(f"baseline chain broken at {stream} {seq}")
        if blake3.blake3(EVENT_DOMAIN + data).hexdigest() != h:
            raise SystemExit(f"baseline hash broken at {stream} {seq}")
        last_hash, want_seq = h, seq + 1
        n += 1
    return n


class RawTable(ABC):
    """A plain table in one database: ``insert`` chains and writes a batch of streams."""

    location: str

    @abstractmethod
    def insert(self, streams: Streams) -> None:
        """Chain ``streams`` and write them in one transaction."""

    @abstractmethod
    def close(self) -> None: ...


class SqliteRaw(RawTable):
    def __init__(self, path: str) -> None:
        self.location = path
        self._conn = sqlite3.connect(path, isolation_level=None)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute(
            "CREATE TABLE IF NOT EXISTS raw (stream TEXT, seq INTEGER, prev TEXT, hash TEXT, "
            "data BLOB, PRIMARY KEY (stream, seq))"
        )

    def insert(self, streams: Streams) -> None:
        rows = chain(streams)
        self._conn.execute("BEGIN")
        self._conn.executemany("INSERT INTO raw VALUES (?,?,?,?,?)", rows)
        self._conn.execute("COMMIT")

    def close(self) -> None:
        self._conn.close()


def pg_connect(url: str) -> Any:
    """A psycopg connection to ``url`` (a ledger URL: ``?schema=`` sets the search path)."""
    import psycopg

    parts = urllib.parse.urlsplit(url)
    schema = dict(urllib.parse.parse_qsl(parts.query)).get("schema", "public")
    conninfo = urllib.parse.urlunsplit(parts._replace(query=""))
    return psycopg.connect(conninfo, autocommit=True, options=f"-c search_path={schema}")


class PostgresRaw(RawTable):
    def __init__(self, url: str) -> None:
        self.location = url
        self._conn = pg_connect(url)
        self._conn.execute(
            'CREATE TABLE IF NOT EXISTS raw (stream text COLLATE "C", seq bigint, prev text, '
            "hash text, data bytea, PRIMARY KEY (stream, seq))"
        )

    def insert(self, streams: Streams) -> None:
        rows = chain(streams)
        with (
            self._conn.transaction(),
            self._conn.cursor().copy("COPY raw FROM STDIN (FORMAT BINARY)") as copy,
        ):
            copy.set_types(["text", "int8", "text", "text", "bytea"])
            for row in rows:
                copy.write_row(row)

    def close(self) -> None:
        self._conn.close()


def open_raw(location: str) -> RawTable:
    """The raw table at a SQLite path or a ``postgresql://`` URL."""
    if location.startswith(("postgresql://", "postgres://")):
        return PostgresRaw(location)
    return SqliteRaw(location)


def _sqlite_rows(path: str) -> Iterator[tuple[Any, ...]]:
    conn = sqlite3.connect(path)
    cur = conn.execute("SELECT stream, seq, prev, hash, data FROM raw ORDER BY stream, seq")
    while rows := cur.fetchmany(_FETCH):
        yield from rows
    conn.close()


def _pg_rows(url: str) -> Iterator[tuple[Any, ...]]:
    from psycopg.rows import tuple_row

    with pg_connect(url) as conn, conn.transaction():
        conn.execute("SET LOCAL enable_sort = off")  # as the ledger's scan: key order
        with conn.cursor(name="raw_scan", row_factory=tuple_row, binary=True) as cur:
            cur.itersize = _FETCH
            cur.execute("SELECT stream, seq, prev, hash, data FROM raw ORDER BY stream, seq")
            yield from cur


def verify_raw(location: str) -> int:
    """Read the raw table back in key order and recompute its chain; return the row count."""
    if location.startswith(("postgresql://", "postgres://")):
        return check(_pg_rows(location))
    return check(_sqlite_rows(location))
