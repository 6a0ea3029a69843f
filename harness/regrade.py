"""``benchledger regrade RUN --judge SPEC``: a new run judging RUN's recorded answers again.

No platform is started and no agent is made: each unit stream of the source run (sealed,
read through the one door, ``ledger.verified.open_run``) is copied into the new run's
stream event for event, with its refs, up to the source's own judgment (its judge calls,
its ``locomo_j`` and its ``unit_finished`` are left out), so every seq a decision of the new
run cites is the seq, and the body, of the source event it copies. Then the new judge grades
the copied answer (its calls recorded as any judge's, ``harness.judge``), the decision
function rules on it (``projections.suites.locomo.decisions.judge_rulings``) and the unit
finishes with its trace hash over the new stream. The header is the source's
``run_started`` with the new judge in ``record.judge`` and the source in
``record.regraded``: its run id, its root and, per unit, the source stream and the link
hash of the last event copied. So the new run verifies, re-derives (the decisions from its
own events) and replays in full (the copied session calls and the judge's calls served from
its log) like any run. docs/locomo.md, "Re-judging a run".
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Final

import msgspec

from benchledger.harness.judge import Judge
from benchledger.harness.record import RunRefused
from benchledger.ledger import Ledger
from benchledger.ledger.events import (
    Event,
    GraderDecisionBody,
    ModelCallBody,
    RunStartedBody,
    UnitFinishedBody,
    UnitStartedBody,
)
from benchledger.ledger.verified import VerifiedRun
from benchledger.projections.suites.locomo.decisions import (
    F1,
    JUDGE,
    J,
    graded,
    judge_gold,
    judge_rulings,
)
from benchledger.projections.suites.locomo.items import LocomoItem, items
from benchledger.projections.trace import unit_trace_hash

__all__ = ["regrade"]

SUITE: Final = "locomo"


def _cut(events: Sequence[tuple[Event, str]]) -> int:
    """How many of a unit's events the new run copies: those before its judgment."""
    for i, (e, _) in enumerate(events):
        body = e.body  # type: ignore[attr-defined]
        if isinstance(body, UnitFinishedBody):
            return i
        if isinstance(body, ModelCallBody) and body.episode == JUDGE:
            return i
        if isinstance(body, GraderDecisionBody) and body.check == J:
            return i
    return len(events)


def _header(source: VerifiedRun) -> RunStartedBody:
    for e, _ in source.events:
        if e.stream == source.run_id and isinstance(e.body, RunStartedBody):  # type: ignore[attr-defined]
            return e.body  # type: ignore[attr-defined]
    raise RunRefused(f"run {source.run_id} has no run_started: nothing to regrade")


async def regrade(
    ledger: Ledger, source: VerifiedRun, judge: Judge, run_id: str, *, concurrency: int = 4
) -> str:
    """Write run ``run_id`` re-judging ``source``'s answers with ``judge``; its root.
    RunRefused (nothing written) when the source is not a locomo run with a record."""
    started = _header(source)
    record = started.record
    if record is None or started.suite != SUITE:
        raise RunRefused(
            f"regrade judges LoCoMo answers again; run {source.run_id} is a {started.suite} "
            "run" + (" recorded without a run record" if record is None else "")
        )
    by_id = items(started).by_id
    streams: dict[str, list[tuple[Event, str]]] = {}
    for e, link in source.events:
        if e.stream != source.run_id:
            streams.setdefault(e.stream, []).append((e, link))
    cuts = {s: _cut(evs) for s, evs in streams.items()}
    copied = {
        run_id + s[len(source.run_id) :]: {
            "stream": s,
            "seq": evs[cuts[s] - 1][0].seq if cuts[s] else -1,
            "hash": evs[cuts[s] - 1][1] if cuts[s] else "",
        }
        for s, evs in streams.items()
    }
    regraded: dict[str, Any] = {"run": source.run_id, "root": source.root, "units": copied}
    header = msgspec.structs.replace(
        started,
        record=msgspec.structs.replace(record, judge=judge.record(), regraded=regraded),
    )
    ledger.start_run(run_id, header)
    sem = asyncio.Semaphore(max(1, concurrency))

    async def unit(stream: str, events: list[tuple[Event, str]]) -> None:
        async with sem:
            await _unit(ledger, run_id + stream[len(source.run_id) :], events,
                        cuts[stream], by_id, judge)  # fmt: skip

    await asyncio.gather(*(unit(s, evs) for s, evs in streams.items()))
    return ledger.seal(run_id)


async def _unit(
    ledger: Ledger,
    stream: str,
    events: list[tuple[Event, str]],
    cut: int,
    by_id: dict[str, LocomoItem],
    judge: Judge,
) -> None:
    w = ledger.new_stream(stream, keep_log=True)
    outcome: dict[str, bool | None] = {}
    for e, _ in events[:cut]:
        body = e.body  # type: ignore[attr-defined]
        w.append(body, refs=e.refs)
        if isinstance(body, GraderDecisionBody):
            outcome[body.check] = body.verdict
    started = next((b for _, b in w.log if isinstance(b, UnitStartedBody)), None)
    item = by_id.get(started.protocol_id) if started is not None else None
    asked = graded(item, w.log) if item is not None else None
    if item is not None and asked is not None and F1 in outcome:
        await judge.grade(w, item.question.question, judge_gold(item), asked.prediction,
                          [asked.finished])  # fmt: skip
        for r in judge_rulings(item, w.log):
            w.append(r.body, refs=r.refs)
            outcome[r.body.check] = r.body.verdict
    finished = next((e.body for e, _ in events[cut:] if isinstance(e.body, UnitFinishedBody)),  # type: ignore[attr-defined]
                    None)  # fmt: skip
    if finished is not None:  # an abandoned unit's stream stays unfinished, as it was
        trace = unit_trace_hash(b for _, b in w.log)
        w.append(msgspec.structs.replace(finished, outcome=outcome, trace_hash=trace))
    ledger.commit(w)
