"""The raw database `bench ledger` measures the ledger against, SQLite or PostgreSQL.

The same canonical bytes, blake3-chained, go into a plain table ``raw(stream, seq, prev,
hash, data)`` with the primary key ``(stream, seq)``: by ``executemany`` into SQLite
(WAL), by binary ``COPY`` (psycopg's fastest path) into PostgreSQL, one transaction per
batch. Verify reads the rows back in key order (SQLite: one cursor; PostgreSQL: a
server-side binary cursor, 2000 rows a fetch) and recomputes the chain.

The chain is hashed by the recipe of an event format (``fmt``): 1, one hash of each row's
bytes (all the baseline did before event format 2); 2, format 2's (docs/ledger-format.md,
"Hashes"): a withholdable kind's body digested first, then its sealed form hashed, so a
format-2 baseline does the hashing every format-2 verifier must do, with the checker's
idioms, and nothing else (no decode, no checks). A format-2 table has a ``kind`` column
too (``raw(stream, seq, kind, prev, hash, data)``), as the ledger's has its topic: the
recipe depends on the kind, and finding it in the bytes would cost the baseline ~1 us a
row (measured), work a plain table need not do. An edited kind still breaks the chain.
"""

from __future__ import annotations

import binascii
import sqlite3
import urllib.parse
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from typing import Any

import blake3

from benchledger.ledger.chain import BODY_DOMAIN, EVENT_DOMAIN, genesis
from benchledger.ledger.events import WITHHOLDABLE

ChainRow = tuple[Any, ...]  # (stream, seq, prev, hash, data); format 2: kind after seq
Streams = list[tuple[str, list[bytes], list[str | None]]]  # (stream, events' bytes, kinds)
_FETCH = 2000
_WITHHOLDABLE = frozenset(WITHHOLDABLE)


def _cols(fmt: int) -> str:
    """The raw table's columns in a format's rows (format 2 adds ``kind``)."""
    return "stream, seq, prev, hash, data" if fmt == 1 else "stream, seq, kind, prev, hash, data"


def chain(streams: Streams, fmt: int = 1) -> list[ChainRow]:
    """The rows of ``streams`` (``(stream, seq, prev, hash, data)``, format 2 with ``kind``
    after ``seq``), hash-chained by format ``fmt``'s recipe, inline as the ledger's
    writer hashes (no call a row)."""
    rows: list[ChainRow] = []
    if fmt == 1:
        for stream, datas, _kinds in streams:
            prev = genesis(stream)
            for seq, data in enumerate(datas):
                h = blake3.blake3(EVENT_DOMAIN + data).hexdigest()
                rows.append((stream, seq, prev, h, data))
                prev = h
        return rows
    body_hasher = blake3.blake3()
    reset, update, digest = body_hasher.reset, body_hasher.update, body_hasher.digest
    hexlify, join, withholdable = binascii.hexlify, b"".join, _WITHHOLDABLE
    for stream, datas, kinds in streams:
        prev = genesis(stream)
        for seq, (data, kind) in enumerate(zip(datas, kinds, strict=True)):
            if kind in withholdable:
                b = data.find(b',"body":') + 8
                t = data.rfind(b',"kind":"')
                reset()
                update(BODY_DOMAIN)
                update(data[b:t])
                hexed = hexlify(digest())
                sealed = join((EVENT_DOMAIN, data[:b], b'"', hexed, b'"', data[t:]))
                h = blake3.blake3(sealed).hexdigest()
            else:
                h = blake3.blake3(EVENT_DOMAIN + data).hexdigest()
            rows.append((stream, seq, kind, prev, h, data))
            prev = h
    return rows


def check(rows: Iterable[tuple[Any, ...]], fmt: int = 1) -> int:
    """Recompute the chain of rows in key order by format ``fmt``'s recipe; SystemExit at
    the first break."""
    if fmt != 1:
        return _check_v2(rows)
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


def _check_v2(rows: Iterable[tuple[Any, ...]]) -> int:
    """``check`` by format 2's recipe, with the checker's idioms: one body hasher kept
    and reset, its digest hexlified, the sealed form spliced in one join, and the link
    hash computed as format 1's."""
    body_hasher = blake3.blake3()
    reset, update, digest = body_hasher.reset, body_hasher.update, body_hasher.digest
    hexlify, join, withholdable = binascii.hexlify, b"".join, _WITHHOLDABLE
    hasher, domain, body_domain = blake3.blake3, EVENT_DOMAIN, BODY_DOMAIN
    n = 0
    last_stream, last_hash, want_seq = None, "", 0
    for stream, seq, kind, prev, h, data in rows:
        if stream != last_stream:
            last_stream, last_hash, want_seq = stream, genesis(stream), 0
        if seq != want_seq or prev != last_hash:
            raise SystemExit(f"baseline chain broken at {stream} {seq}")
        if kind in withholdable:
            b = data.find(b',"body":') + 8
            t = data.rfind(b',"kind":"')
            reset()
            update(body_domain)
            update(data[b:t])
            sealed = join((domain, data[:b], b'"', hexlify(digest()), b'"', data[t:]))
            got = hasher(sealed).hexdigest()
        else:
            got = hasher(domain + data).hexdigest()
        if got != h:
            raise SystemExit(f"baseline hash broken at {stream} {seq}")
        last_hash, want_seq = h, seq + 1
        n += 1
    return n


class RawTable(ABC):
    """A plain table in one database: ``insert`` chains and writes a batch of streams."""

    location: str
    fmt: int  # the event format whose recipe chains the rows

    @abstractmethod
    def insert(self, streams: Streams) -> None:
        """Chain ``streams`` and write them in one transaction."""

    @abstractmethod
    def close(self) -> None: ...


class SqliteRaw(RawTable):
    def __init__(self, path: str, fmt: int = 1) -> None:
        self.location, self.fmt = path, fmt
        self._conn = sqlite3.connect(path, isolation_level=None)
        self._conn.execute("PRAGMA journal_mode=WAL")
        kind = "" if fmt == 1 else "kind TEXT, "
        self._conn.execute(
            f"CREATE TABLE IF NOT EXISTS raw (stream TEXT, seq INTEGER, {kind}prev TEXT, "
            "hash TEXT, data BLOB, PRIMARY KEY (stream, seq))"
        )
        self._insert = (
            "INSERT INTO raw VALUES (?,?,?,?,?)"
            if fmt == 1
            else ("INSERT INTO raw VALUES (?,?,?,?,?,?)")
        )

    def insert(self, streams: Streams) -> None:
        rows = chain(streams, self.fmt)
        self._conn.execute("BEGIN")
        self._conn.executemany(self._insert, rows)
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
    def __init__(self, url: str, fmt: int = 1) -> None:
        self.location, self.fmt = url, fmt
        self._conn = pg_connect(url)
        kind = "" if fmt == 1 else "kind text, "
        self._conn.execute(
            f'CREATE TABLE IF NOT EXISTS raw (stream text COLLATE "C", seq bigint, {kind}'
            "prev text, hash text, data bytea, PRIMARY KEY (stream, seq))"
        )
        self._types = ["text", "int8", "text", "text", "bytea"]
        if fmt != 1:
            self._types.insert(2, "text")

    def insert(self, streams: Streams) -> None:
        rows = chain(streams, self.fmt)
        with (
            self._conn.transaction(),
            self._conn.cursor().copy("COPY raw FROM STDIN (FORMAT BINARY)") as copy,
        ):
            copy.set_types(self._types)
            for row in rows:
                copy.write_row(row)

    def close(self) -> None:
        self._conn.close()


def open_raw(location: str, fmt: int = 1) -> RawTable:
    """The raw table at a SQLite path or a ``postgresql://`` URL, chained by format
    ``fmt``'s recipe."""
    if location.startswith(("postgresql://", "postgres://")):
        return PostgresRaw(location, fmt)
    return SqliteRaw(location, fmt)


def _sqlite_rows(path: str, fmt: int) -> Iterator[tuple[Any, ...]]:
    conn = sqlite3.connect(path)
    cur = conn.execute(f"SELECT {_cols(fmt)} FROM raw ORDER BY stream, seq")
    while rows := cur.fetchmany(_FETCH):
        yield from rows
    conn.close()


def _pg_rows(url: str, fmt: int) -> Iterator[tuple[Any, ...]]:
    from psycopg.rows import tuple_row

    with pg_connect(url) as conn, conn.transaction():
        conn.execute("SET LOCAL enable_sort = off")  # as the ledger's scan: key order
        with conn.cursor(name="raw_scan", row_factory=tuple_row, binary=True) as cur:
            cur.itersize = _FETCH
            cur.execute(f"SELECT {_cols(fmt)} FROM raw ORDER BY stream, seq")
            yield from cur


def verify_raw(location: str, fmt: int = 1) -> int:
    """Read the raw table back in key order and recompute its chain by format ``fmt``'s
    recipe; return the row count."""
    if location.startswith(("postgresql://", "postgres://")):
        return check(_pg_rows(location, fmt), fmt)
    return check(_sqlite_rows(location, fmt), fmt)
