"""The PostgreSQL recorder: eventsourcing's table and notification log, written faster.

The library's ``PostgresApplicationRecorder`` with three changes:

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

import struct
from collections.abc import Sequence
from typing import Any

from eventsourcing.persistence import Notification
from eventsourcing.postgres import PostgresApplicationRecorder, PostgresDatastore
from psycopg import Cursor
from psycopg.rows import DictRow
from psycopg.sql import SQL, Identifier, Literal

# PostgreSQL's binary COPY format: signature, flags, header extension length; then per
# row a field count and each field as (int32 length, bytes); then -1 as the trailer.
_COPY_HEADER = b"PGCOPY\n\xff\r\n\x00" + bytes(8)
_COPY_TRAILER = b"\xff\xff"
_INT32 = struct.Struct("!i").pack
_ROW_START = struct.Struct("!hi").pack  # 4 fields, then the stream's length
_SEQ = struct.Struct("!iq").pack  # int8: length 8, value


def copy_payload(rows: Sequence[Any]) -> bytes:
    """Rows ``(stream, seq, kind, data)`` as one binary COPY payload, header to trailer."""
    parts = [_COPY_HEADER]
    add = parts.append
    for stream, seq, kind, data in rows:
        s, k = stream.encode(), kind.encode()
        add(_ROW_START(4, len(s)))
        add(s)
        add(_SEQ(8, seq))
        add(_INT32(len(k)))
        add(k)
        add(_INT32(len(data)))
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
            "COPY {schema}.{table} (originator_id, originator_version, topic, state) "
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
