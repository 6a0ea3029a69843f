"""What a ledger backend is: the ``Store`` contract and the recorder base both build on.

Each event is a stored event: originator = stream, version = seq, topic = kind,
state = canonical bytes. The recorder's unique (originator, version) key is what makes
a fork impossible. Library and driver errors are translated in the backends, never
leaked. The backends are ``ledger/sqlite.py`` and ``ledger/postgres.py``;
``ledger/store.py`` ``open_store`` picks one.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, NamedTuple

from eventsourcing.persistence import IntegrityError, PersistenceError

from benchledger.ledger.chain import Record
from benchledger.ledger.errors import AppendConflict, UnusableInput

TABLE = "benchledger_events"
SCAN_CHUNK = 2000  # rows fetched per round trip by a streamed read
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

    def recent_run_ids(self) -> list[str]:
        """Ids of every run, the most recently recorded first (what an unknown run id's
        message names); a backend that cannot tell keeps ``run_ids``' order."""
        return self.run_ids()

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


class RecorderStore(Store):
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


def _as_bytes(value: bytes | memoryview | str | None) -> bytes:
    # A hand-edited row may hold TEXT or NULL: NULL reads as empty bytes, which the
    # ledger then reports as a damaged event instead of crashing on None.
    if value is None:
        return b""
    return value.encode() if isinstance(value, str) else bytes(value)
