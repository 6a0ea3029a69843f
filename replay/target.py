"""A run to replay, read only after it verified: from a ledger by run id, or from a bundle.

Replay never works on a log it cannot trust: a tampered or partial input (a broken
link, a missing stream, an unsealed run) stops here with the first bad stream and seq.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from benchledger.ledger import Ledger, UnusableInput
from benchledger.ledger.events import (
    Body,
    Event,
    RunStartedBody,
    RunStartedEvent,
    UnitAbandonedEvent,
    UnitStartedEvent,
    probe_stream,
)
from benchledger.ledger.verdict import Failure, Fault
from benchledger.ledger.verified import PartialRun, RunEvents, RunUnverified, open_run


@dataclass
class ReplayUnit:
    """One unit stream of a run: its events in order (typed bodies with their envelopes)."""

    stream: str
    events: list[Event] = field(default_factory=list)

    @property
    def pairs(self) -> list[tuple[int, Body]]:
        """``(seq, body)`` pairs, the shape the decision and trace functions take."""
        return [(e.seq, e.body) for e in self.events]  # type: ignore[attr-defined]

    @property
    def started(self) -> UnitStartedEvent | None:
        return next((e for e in self.events if isinstance(e, UnitStartedEvent)), None)

    @property
    def abandoned(self) -> bool:
        """Interrupted and re-run under another stream on resume: not a result."""
        return any(isinstance(e, UnitAbandonedEvent) for e in self.events)


@dataclass
class Run:
    """A verified run: its header and its unit streams in stream order."""

    run_id: str
    root: str
    header: RunStartedBody
    units: list[ReplayUnit]
    events: RunEvents
    probe: ReplayUnit | None = None  # its probe stream (None: a run recorded without one)


def verified(
    target: str, ledger: Callable[[], Ledger], opened: RunEvents | None = None
) -> tuple[Run | None, Failure | None]:
    """The run ``target`` names (a bundle path or a run id in ``ledger()``), or its failure.

    UnusableInput when the target cannot be read at all (exit 2); a Failure when it reads
    but does not verify (exit 1), sealed root included. ``opened``: ``target`` as the
    caller already read it through the door, used instead of reading it again.
    """
    if opened is not None:
        if opened.check is not None and opened.check.partial:
            raise UnusableInput(
                target, "an audit bundle holds only some streams; replay needs the whole run"
            )
        if not opened.root:
            return None, Failure(opened.run_id, -1, Fault.NOT_SEALED, "the run is not sealed")
        return _split(opened), None
    try:
        run = open_run(target, ledger, require_seal=True, allow_partial=False)
    except PartialRun:
        raise UnusableInput(
            target, "an audit bundle holds only some streams; replay needs the whole run"
        ) from None
    except RunUnverified as exc:
        return None, exc.failure
    return _split(run), None


def _split(run: RunEvents) -> Run:
    header: RunStartedBody | None = None
    units: dict[str, ReplayUnit] = {}
    probe = ReplayUnit(probe_stream(run.run_id))
    for event, _ in run.events:
        if event.stream == run.run_id:
            if isinstance(event, RunStartedEvent):
                header = event.body
            continue
        if event.stream == probe.stream:
            probe.events.append(event)
            continue
        units.setdefault(event.stream, ReplayUnit(event.stream)).events.append(event)
    if header is None:
        raise UnusableInput(run.run_id, "the run has no run_started event")
    return Run(run.run_id, run.root, header, list(units.values()), run,
               probe if probe.events else None)  # fmt: skip
