"""``benchledger regrade RUN --judge SPEC``: a new run judging RUN's recorded answers again
(a locomo or a longmemeval run).

No platform is started and no agent is made: each unit stream of the source run (sealed,
read through the one door, ``ledger.verified.open_run``) is copied into the new run's
stream event for event, with its refs, up to the source's own judgment (its judge calls,
its judge's decision and its ``unit_finished`` are left out), so every seq a decision of the
new run cites is the seq, and the body, of the source event it copies. Then the new judge
grades the copied answer as the suite's run does (its ``judge_answer``: the calls recorded
as any judge's, ``harness.judge``; the suite's decision function rules on them) and the unit
finishes with its trace hash over the new stream. The header is the source's
``run_started`` with the new judge in ``record.judge`` and the source in
``record.regraded``: its run id, its root and, per unit, the source stream and the link
hash of the last event copied. So the new run verifies, re-derives (the decisions from its
own events) and replays in full (the copied session calls and the judge's calls served from
its log) like any run. docs/locomo.md, "Re-judging a run"; docs/longmemeval.md, "Answers".
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final, NamedTuple

import msgspec

from benchledger.harness.judge import Judge
from benchledger.harness.record import RunRefused
from benchledger.harness.suites import locomo as locomo_suite
from benchledger.harness.suites import longmemeval as lme_suite
from benchledger.ledger import Ledger
from benchledger.ledger.events import (
    Event,
    GraderDecisionBody,
    ModelCallBody,
    RunStartedBody,
    UnitFinishedBody,
    UnitStartedBody,
)
from benchledger.ledger.ledger import StreamWriter
from benchledger.ledger.verified import VerifiedRun
from benchledger.projections.card import Ruling
from benchledger.projections.suites.locomo import items as locomo_items
from benchledger.projections.suites.locomo.decisions import F1, JUDGE, J
from benchledger.projections.suites.longmemeval import decisions as lme
from benchledger.projections.suites.longmemeval import items as lme_items
from benchledger.projections.trace import unit_trace_hash
from benchledger.protocols.judges import PER_TYPE

__all__ = ["SUITES", "default_prompt", "regrade"]


class Judging(NamedTuple):
    """How a suite's recorded answers are judged again."""

    items: Callable[[RunStartedBody], Mapping[str, Any]]  # the run's items by protocol id
    answered: str  # the check decided on the answer (a unit without one is not judged)
    check: str  # the judge's decision's check
    judge: Callable[[Judge, StreamWriter, Any], Awaitable[list[Ruling]]]  # the suite's own
    prompt: str  # the suite's default judge prompt ("": the judge's default)


SUITES: Final = {
    "locomo": Judging(lambda s: locomo_items.items(s).by_id, F1, J,
                      locomo_suite.judge_answer, ""),
    "longmemeval": Judging(lambda s: lme_items.items(s).by_id, lme.ANSWER, lme.JUDGE,
                           lme_suite.judge_answer, PER_TYPE),
}  # fmt: skip


def default_prompt(source: VerifiedRun) -> str:
    """The judge prompt a regrade of ``source`` uses when none is named: its suite's."""
    found = SUITES.get(_header(source).suite)
    return found.prompt if found is not None else ""


def _cut(events: Sequence[tuple[Event, str]], check: str) -> int:
    """How many of a unit's events the new run copies: those before its judgment (its
    judge's calls, or its decision ``check``)."""
    for i, (e, _) in enumerate(events):
        body = e.body  # type: ignore[attr-defined]
        if isinstance(body, UnitFinishedBody):
            return i
        if isinstance(body, ModelCallBody) and body.episode == JUDGE:
            return i
        if isinstance(body, GraderDecisionBody) and body.check == check:
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
    RunRefused (nothing written) when the source is not a locomo or longmemeval run with a
    record, or the judge's prompt is LongMemEval's per-type set and the run is not one."""
    started = _header(source)
    record = started.record
    suite = SUITES.get(started.suite)
    if record is None or suite is None:
        raise RunRefused(
            f"regrade judges the answers of a {' or '.join(SUITES)} run again; run "
            f"{source.run_id} is a {started.suite} run"
            + (" recorded without a run record" if record is None else "")
        )
    if judge.prompt.name == PER_TYPE and started.suite != "longmemeval":
        raise RunRefused(
            f"--judge-prompt {PER_TYPE} picks LongMemEval's prompt by question type; run "
            f"{source.run_id}'s {started.suite} questions have none"
        )
    by_id = suite.items(started)
    streams: dict[str, list[tuple[Event, str]]] = {}
    for e, link in source.events:
        if e.stream != source.run_id:
            streams.setdefault(e.stream, []).append((e, link))
    cuts = {s: _cut(evs, suite.check) for s, evs in streams.items()}
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
                        cuts[stream], by_id, judge, suite)  # fmt: skip

    await asyncio.gather(*(unit(s, evs) for s, evs in streams.items()))
    return ledger.seal(run_id)


async def _unit(
    ledger: Ledger,
    stream: str,
    events: list[tuple[Event, str]],
    cut: int,
    by_id: Mapping[str, Any],
    judge: Judge,
    suite: Judging,
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
    if item is not None and suite.answered in outcome:
        for r in await suite.judge(judge, w, item):
            w.append(r.body, refs=r.refs)
            outcome[r.body.check] = r.body.verdict
    finished = next((e.body for e, _ in events[cut:] if isinstance(e.body, UnitFinishedBody)),  # type: ignore[attr-defined]
                    None)  # fmt: skip
    if finished is not None:  # an abandoned unit's stream stays unfinished, as it was
        trace = unit_trace_hash(b for _, b in w.log)
        w.append(msgspec.structs.replace(finished, outcome=outcome, trace_hash=trace))
    ledger.commit(w)
