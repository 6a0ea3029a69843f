"""Where a run's events come from: the one verified door, ``ledger.verified.open_run``.

Every display reads a run through ``open_run`` (a ledger run id or a bundle file, read
once, verified while decoded). What lives here: the names projections and the command
line have always imported (re-exported from the door), the completeness of a folded
run, and ``from_ledger`` / ``from_bundle``, the unverified reads.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Protocol

from benchledger.ledger import Ledger, UnusableInput
from benchledger.ledger.bundle import REDACTED_FORMAT, read_bundle
from benchledger.ledger.chain import link_hash
from benchledger.ledger.codec import decode_event
from benchledger.ledger.completeness import Completeness, Plan, UnitState
from benchledger.ledger.completeness import completeness as count_units
from benchledger.ledger.events import Event
from benchledger.ledger.redaction import as_event, read_placeholder
from benchledger.ledger.verified import (
    PartialRun,
    RunEvents,
    RunUnverified,
    Tally,
    Verification,
    VerifiedRun,
    is_bundle,
    open_run,
)

if TYPE_CHECKING:
    from benchledger.projections.card import RunMeta


class FoldedUnit(Protocol):
    """What ``completeness`` reads of a suite fold's unit (each suite's ``Unit`` has it)."""

    @property
    def stream(self) -> str: ...
    @property
    def protocol_id(self) -> str: ...
    @property
    def attempt(self) -> int: ...
    @property
    def finished(self) -> object | None: ...  # its unit_finished, None until it lands
    @property
    def abandoned(self) -> bool: ...
    @property
    def error(self) -> str: ...
    @property
    def withheld(self) -> Sequence[tuple[int, str]]: ...  # (seq, kind) of each withheld event


__all__ = [
    "Completeness",
    "PartialRun",
    "RunEvents",
    "RunUnverified",
    "Verification",
    "VerifiedRun",
    "banner_of",
    "completeness",
    "completeness_of",
    "from_bundle",
    "from_ledger",
    "is_bundle",
    "open_run",
]


# -- unverified reads -----------------------------------------------------------------------
# Nothing that displays a run uses these: they check nothing. They stay for what builds
# or inspects a ledger it just wrote itself (tests, benchmarks), where there is no one to
# forge the input between a check and a read.


def from_ledger(ledger: Ledger, run_id: str) -> RunEvents:
    """A run's events read from a ledger, unverified (UnknownRun if absent)."""
    info = ledger.run_info(run_id)
    return RunEvents(run_id, info.root, list(ledger.events(run_id)))


def from_bundle(path: str) -> RunEvents:
    """A run's events read from a bundle (or audit bundle) file, unverified.

    In a redacted bundle a withheld event reads as a ``WithheldEvent`` (kind and digest,
    no body), so projections can show it as withheld rather than absent.
    """
    events: list[tuple[Event, str]] = []
    with read_bundle(path) as (header, recs):
        redacted = header.format == REDACTED_FORMAT
        for n, rec in enumerate(recs, start=2):
            try:
                events.append((decode_event(rec.data), link_hash(rec.data)))
            except Exception as exc:  # msgspec errors: a damaged line
                ph = read_placeholder(rec.data) if redacted else None
                if ph is None:
                    raise UnusableInput(path, f"not a benchledger event ({exc})", line=n) from None
                events.append((as_event(ph), ph.hash))
    return RunEvents(header.run, header.root, events, header)


# -- how much of its plan a run finished ----------------------------------------------------


def completeness(meta: RunMeta, units: Iterable[FoldedUnit]) -> Completeness:
    """The count of a folded run's planned and finished units (``ledger.completeness.completeness``
    counts; this only hands it what a suite's fold saw)."""
    states = (
        UnitState(
            u.stream,
            u.protocol_id,
            u.attempt,
            u.finished is not None or any(kind == "unit_finished" for _, kind in u.withheld),
            u.abandoned,
            u.error,
        )
        for u in units
    )
    plan = Plan(meta.planned, meta.planned_units)
    return count_units(meta.run_id, bool(meta.root), plan, states)


def completeness_of(run: RunEvents) -> Completeness:
    """How much of its plan a run finished: the door's count, else counted from its events."""
    if run.completeness is not None:
        return run.completeness
    tally = Tally(run.run_id)
    for event, _ in run.events:
        tally.add(event)
    return tally.completeness()


def banner_of(run: RunEvents) -> str:
    """The line a display of ``run`` starts with when the run is partial ("" when whole).

    An audit bundle holds only the streams it cites by design; its ``PARTIAL`` verification
    line says so, so it gets no banner of its own.
    """
    if run.check is not None and run.check.partial:
        return ""
    return completeness_of(run).banner()
