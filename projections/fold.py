"""Projections as folds: pure functions of an event sequence, resumable from a position.

A ``Fold`` consumes events one at a time and can say its result at any point. A
``LiveView`` feeds a fold from a store's notification log (the global order), keeps
the last position it applied, and resumes from there; a rebuild from position 0
gives the same result because folds are pure.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Generic, Protocol, TypeVar

from benchledger.ledger import Store
from benchledger.ledger.chain import link_hash
from benchledger.ledger.codec import decode_event
from benchledger.ledger.events import Event

T = TypeVar("T", covariant=True)
F = TypeVar("F", bound="Fold[object]")


class Fold(Protocol[T]):
    """A projection: ``apply`` each event in order, ``result`` at any time."""

    def apply(self, event: Event, link: str) -> None: ...

    def result(self) -> T: ...


def fold(projection: Fold[T], events: Iterable[tuple[Event, str]]) -> T:
    """Apply every event to ``projection`` and return its result."""
    for event, link in events:
        projection.apply(event, link)
    return projection.result()


class LiveView(Generic[F]):
    """A fold kept up to date from the notification log, for dashboards tailing a ledger.

    ``position`` is the id of the last notification applied; pass it back (with the
    fold) to resume where a view stopped.
    """

    def __init__(
        self,
        store: Store,
        projection: F,
        *,
        run_id: str | None = None,
        position: int = 0,
        batch: int = 500,
    ) -> None:
        self.store = store
        self.projection = projection
        self.run_id = run_id
        self.position = position
        self._batch = batch
        self._keep: Callable[[str], bool] = (
            (lambda s: True)
            if run_id is None
            else (lambda s: s == run_id or s.startswith(run_id + "/"))
        )

    def catch_up(self, limit: int | None = None) -> int:
        """Apply notifications after ``position`` (at most ``limit``); return how many read."""
        read = 0
        while limit is None or read < limit:
            want = self._batch if limit is None else min(self._batch, limit - read)
            notes = self.store.notifications(self.position + 1, want)
            if not notes:
                break
            for note in notes:
                rec = note.record
                if rec.stream is not None and self._keep(rec.stream):
                    self.projection.apply(decode_event(rec.data), link_hash(rec.data))
                self.position = note.id
            read += len(notes)
        return read
