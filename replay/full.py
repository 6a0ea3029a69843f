"""Full replay: re-execute each unit's agent loop and compare per-episode trace hashes
(docs/ci.md, What is checked: ``--level full``).

Model responses come from the log (a request not in it is a divergence, never a live
call); tool results come from the log (``tools="log"``) or from a fresh embedded
platform (``tools="live"``, which also checks the platform). Each unit runs the suite's
own stages through the driver's unit runner (``harness.unit.run_unit``) on a scratch
in-memory ledger, on virtual time. Needs no model key and no network.
"""

from __future__ import annotations

import asyncio
import importlib
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Final

import msgspec

from benchledger.harness import agents
from benchledger.harness.agents.base import Agent
from benchledger.harness.judge import JudgeRefused, recorded_judge
from benchledger.harness.models import Divergence
from benchledger.harness.platforms.base import PlatformClient
from benchledger.harness.platforms.platform import Platform, of_record
from benchledger.harness.platforms.provision import EmbeddedProvisioner, PlatformSpec, provisioner
from benchledger.harness.probe import ProbeReport, probe, scratch
from benchledger.harness.record import pool_index
from benchledger.harness.suites import Suite, suite_for
from benchledger.harness.unit import UnitPlan, run_unit
from benchledger.ledger import Ledger, UnusableInput, open_store
from benchledger.ledger.events import (
    Body,
    ModelCallBody,
    ProbeFinishedEvent,
    RunRecord,
    UnitFinishedBody,
)
from benchledger.projections.trace import episode_trace_hash, episodes, trace, unit_trace_hash
from benchledger.protocols.schema import Protocol
from benchledger.replay.clock import ReplayClock
from benchledger.replay.findings import TOOLS, Mismatch, Report, first_difference
from benchledger.replay.tape import RequestDivergence, Tape, TapeTransport, ToolDivergence, describe
from benchledger.replay.target import ReplayUnit, Run

POOL_MARGIN: Final = 4

# A fresh platform for one scope of a live replay (a pass, or a unit).
Runtime = Callable[[], AbstractAsyncContextManager[PlatformClient]]
Events = list[tuple[int, Body]]


def _live_runtime(record: RunRecord, pool: int, where: str) -> Runtime:
    """A fresh embedded platform as the run had it: its seed pack and its recorded options
    (the embedder), made by the one ``provisioner`` the driver uses."""
    try:
        made = provisioner(PlatformSpec("embedded"), pool_size=pool, pack=record.pack,
                           options=record.platform_options)  # fmt: skip
    except ValueError as exc:  # a recorded pack or embedder this installation cannot serve
        raise UnusableInput(
            where, f"--tools live cannot rebuild the run's platform: {exc}"
        ) from None
    assert isinstance(made, EmbeddedProvisioner)  # the kind asked for
    return made.runtime


@dataclass
class Replayed:
    """One unit as replay re-ran it: its events, and what stopped it early (if anything)."""

    unit: ReplayUnit
    events: Events = field(default_factory=list)
    stop: Exception | None = None
    left: list[tuple[int, Body]] = field(default_factory=list)  # recorded, never replayed


def replay_full(
    run: Run,
    protocols: Mapping[str, Protocol],
    *,
    tools: str = "log",
    runtime: Runtime | None = None,
    target: str = "",
) -> Report:
    """Re-run every finished unit of ``run`` and compare its trace with the recorded one."""
    return asyncio.run(
        replay_full_async(run, protocols, tools=tools, runtime=runtime, target=target)
    )


async def replay_full_async(
    run: Run,
    protocols: Mapping[str, Protocol],
    *,
    tools: str = "log",
    runtime: Runtime | None = None,
    target: str = "",
) -> Report:
    """``replay_full`` inside a running event loop."""
    if tools not in TOOLS:
        raise ValueError(f"--tools {tools!r}: use log or live")
    record = run.header.record
    if record is None:
        raise UnusableInput(
            target or run.run_id,
            "the run has no run record (imported from a peer, or recorded by an older "
            "version), so its agent loop cannot be re-executed; --level rederive still works",
        )
    report = Report("full", target or run.run_id, run.run_id)
    units = _planned_order(record, [u for u in run.units if not u.abandoned])
    suite = suite_for(record.suite)
    suite.configure(record)
    pool = max((i for u in units for i in _identities(u)), default=0) + POOL_MARGIN
    replayed: list[Replayed] = []
    where = target or run.run_id
    try:
        platform = of_record(record.platform.kind)
    except LookupError as exc:
        raise UnusableInput(where, f"the run cannot be replayed: {exc}") from None
    if tools == "log":
        twin = log_twin(platform, where)
        # A twin that needs the run's platform record (a mapped server's mapping) says so.
        given = {"record": record.platform} if getattr(twin, "wants_record", False) else {}
        if run.probe is not None and all(hasattr(e, "body") for e in run.probe.events):
            tape = Tape(run.probe.stream, run.probe.pairs)
            logged = twin(tape, pool_size=pool, **given)
            await _probe(report, run.probe, logged, tape, record.platform.sinks)
        for unit in units:
            tape = Tape(unit.stream, unit.pairs)
            logged = twin(tape, pool_size=pool, **given)
            try:
                replayed.append(await _unit(unit, protocols, suite, record, logged, tape, 0.0))
            finally:
                await logged.aclose()
    else:
        if not platform.live_replay and runtime is None:
            raise UnusableInput(
                where,
                f"the run is on {record.platform.name or platform.name}, and a live replay "
                "re-drives units on the embedded mcp-data-platform: use --tools log",
            )
        if record.runtime_scope == "pass" and record.concurrency > 1 and len(units) > 1:
            # Its units saw each other's captures and promotions as their calls happened
            # to interleave (a search found another unit's page, or not yet): that order
            # was never recorded, and a live replay running units one after another
            # differs at the first such result (every default run did), so it is refused.
            raise UnusableInput(
                where,
                f"--tools live cannot replay this run: it had up to {record.concurrency} "
                "units in flight on one platform per pass, and their tool results depended "
                "on how their calls interleaved, which was not recorded; use --tools log "
                "(the recorded results), or record with --concurrency 1 or --platform-scope "
                "unit to replay live",
            )
        make = runtime or _live_runtime(record, pool, where)
        if run.probe is not None:  # its findings are re-derived; live, it is not re-run
            report.skipped["probe (not re-run live)"] = 1
        for group in _scopes(record, units):
            async with make() as client:
                for unit in group:
                    tape = Tape(unit.stream, unit.pairs, platform=False)
                    replayed.append(
                        await _unit(unit, protocols, suite, record, client, tape, time.time())
                    )
    _compare(report, replayed)
    return report


# A platform's log twin: its adapter over the recorded I/O of one unit (``Platform.replay``).
LogTwin = Callable[..., PlatformClient]


async def _probe(
    report: Report, recorded: ReplayUnit, logged: PlatformClient, tape: Tape, sinks: list[str]
) -> None:
    """The probe re-run on its recorded calls (harness/probe.py, its calls served from the
    log, each checked against the recording): its findings must be the recorded ones, and
    every recorded call replayed."""
    end = next((e for e in recorded.events if isinstance(e, ProbeFinishedEvent)), None)
    if end is None:
        return  # rederive names a probe stream without its end
    was = ProbeReport.of(end.body)
    w = scratch()
    try:
        now = await probe(logged, was.platform, w, sinks=sinks, clock=ReplayClock(0.0))
    except ToolDivergence as exc:
        report.mismatches.append(Mismatch(recorded.stream, exc.seq, "probe", "call",
                                          exc.expected, exc.actual))  # fmt: skip
        return
    finally:
        await logged.aclose()
    report.compared["probe"] = 1
    if now.findings != was.findings:
        report.mismatches.append(Mismatch(recorded.stream, end.seq, "probe", "findings",
                                          was.record(), now.record()))  # fmt: skip
    elif left := tape.left():
        seq, body = left[0]
        report.mismatches.append(
            Mismatch(recorded.stream, seq, "probe", "interactions", describe(body),
                     "(never replayed)"))  # fmt: skip


def log_twin(platform: Platform, where: str) -> LogTwin:
    """The adapter that serves ``platform`` from a log, as its ``replay`` names it
    (``module:Name``); UnusableInput saying why when it has none or it cannot be loaded."""
    if not platform.replay:
        raise UnusableInput(
            where,
            f"the run is on {platform.name}, which cannot be replayed from its log: "
            f"{platform.not_replayable}; --level rederive still works",
        )
    module, _, name = platform.replay.partition(":")
    try:
        twin: LogTwin = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise UnusableInput(
            where, f"the {platform.name} platform's log twin {platform.replay} cannot be "
            f"loaded ({type(exc).__name__}: {exc})"
        ) from None  # fmt: skip
    return twin


def _planned_order(record: RunRecord, units: list[ReplayUnit]) -> list[ReplayUnit]:
    """Units in the order the run planned them (pass by pass), resumed ones at their place."""
    order = {(u.unit_id, u.attempt): i for i, u in enumerate(record.units)}

    def key(u: ReplayUnit) -> tuple[int, int, str]:
        started = u.started
        if started is None:
            raise UnusableInput(u.stream, "the unit stream has no unit_started event")
        b = started.body
        return b.attempt, order.get((b.protocol_id, b.attempt), len(order)), u.stream

    return sorted(units, key=key)


def _scopes(record: RunRecord, units: list[ReplayUnit]) -> list[list[ReplayUnit]]:
    """Units grouped by the platform they shared: one per pass, or one each."""
    if record.runtime_scope == "unit":
        return [[u] for u in units]
    groups: dict[int, list[ReplayUnit]] = {}
    for u in units:
        started = u.started
        groups.setdefault(started.body.attempt if started else 0, []).append(u)
    return list(groups.values())


def _identities(unit: ReplayUnit) -> tuple[int, int]:
    """The unit's (teacher, learner) pool indexes, from the labels it recorded."""
    started = unit.started
    labels = (started.body.teacher, started.body.learner) if started else ("", "")
    teacher, learner = (pool_index(label) for label in labels)
    if teacher is None or learner is None:
        raise UnusableInput(unit.stream, f"unit_started names no pool identities ({labels})")
    return teacher, learner


def _agent(record: RunRecord, unit: ReplayUnit, tape: Tape) -> Agent:
    """The recorded agent, its model served from the tape (the scripted agent as it is)."""
    if record.agent == "scripted":
        return agents.from_spec("scripted")
    models = [b for _, b in unit.pairs if isinstance(b, ModelCallBody)]
    try:
        transport = TapeTransport(tape, models)
    except msgspec.ValidationError as exc:
        raise UnusableInput(unit.stream, f"a recorded model response is malformed: {exc}") from None
    try:
        return agents.from_spec(
            record.agent, transport=transport, params=dict(record.agent_params) or None
        )
    except ValueError as exc:
        raise UnusableInput(unit.stream, f"the recorded agent cannot be rebuilt: {exc}") from None


def _judge(suite: Suite, record: RunRecord, unit: ReplayUnit, tape: Tape) -> None:
    """The run's recorded judge, its calls served from the unit's tape (a run without a
    judge, or a suite without one: nothing)."""
    use = getattr(suite, "use_judge", None)
    if use is None or not record.judge:
        return
    models = [b for _, b in unit.pairs if isinstance(b, ModelCallBody)]
    try:
        use(recorded_judge(record.judge, TapeTransport(tape, models)))
    except msgspec.ValidationError as exc:
        raise UnusableInput(unit.stream, f"a recorded model response is malformed: {exc}") from None
    except JudgeRefused as exc:
        raise UnusableInput(unit.stream, f"the recorded judge cannot be rebuilt: {exc}") from None


async def _unit(
    unit: ReplayUnit,
    protocols: Mapping[str, Protocol],
    suite: Suite,
    record: RunRecord,
    client: PlatformClient,
    tape: Tape,
    start: float,
) -> Replayed:
    """One unit re-run through the suite on a scratch ledger; stopped by a divergence."""
    started = unit.started
    assert started is not None  # _planned_order checked it
    b = started.body
    protocol = protocols.get(b.protocol_id)
    if protocol is None:
        raise UnusableInput(
            unit.stream,
            f"protocol {b.protocol_id!r} is not in the protocol set; pass the run's "
            "protocols with --protocols PATH",
        )
    plan = UnitPlan(protocol, b.attempt, unit.stream, _identities(unit), resumes=b.resumes)
    _judge(suite, record, unit, tape)
    ledger = Ledger(open_store(":memory:"))
    out = Replayed(unit)
    try:
        # The driver's own unit runner, from the recorded unit_started; a divergence stops it.
        await run_unit(suite, ledger, client, _agent(record, unit, tape), plan,
                       clock=ReplayClock(start), started=b, stops=(Divergence, ToolDivergence),
                       log=out.events)  # fmt: skip
    except (Divergence, ToolDivergence) as exc:
        out.stop = exc
    finally:
        ledger.store.close()
    out.left = tape.left()
    return out


def _episode_at(events: Sequence[tuple[int, Body]], seq: int) -> str:
    for ep in episodes(events):
        if ep.started <= seq <= ep.finished:
            return f"episode {ep.stage}"
    return ""


def _compare(report: Report, replayed: list[Replayed]) -> None:
    """Per-episode and per-unit trace hashes, and the first divergence as a diff."""
    n_episodes = 0
    for r in replayed:
        recorded = r.unit.pairs
        stream = r.unit.stream
        before = len(report.mismatches)
        mine, theirs = episodes(recorded), episodes(r.events)
        n_episodes += len(mine)
        for i, ep in enumerate(mine):
            expected = episode_trace_hash(b for _, b in ep.events)
            actual = theirs[i].recorded if i < len(theirs) else "(not replayed)"
            if expected != actual:
                report.mismatches.append(
                    Mismatch(
                        stream, ep.finished, f"episode {ep.stage}", "trace_hash", expected, actual
                    )
                )
        end = recorded[-1][0] if recorded else -1
        for ep in theirs[len(mine) :]:
            report.mismatches.append(
                Mismatch(
                    stream, end, f"episode {ep.stage}", "trace_hash", "(not recorded)", ep.recorded
                )
            )
        unit_end = next((s for s, b in recorded if isinstance(b, UnitFinishedBody)), end)
        expected = unit_trace_hash(b for s, b in recorded if s < unit_end)
        actual = next(
            (b.trace_hash for _, b in r.events if isinstance(b, UnitFinishedBody)), "(not replayed)"
        )
        if expected != actual:
            report.mismatches.append(
                Mismatch(stream, unit_end, "unit", "trace_hash", expected, actual)
            )
        if r.left and r.stop is None and len(report.mismatches) == before:
            seq, body = r.left[0]
            report.mismatches.append(
                Mismatch(stream, seq, "unit", "interactions", describe(body), "(never replayed)")
            )
        if report.first is None and (r.stop is not None or len(report.mismatches) > before):
            report.first = _first(r)
    report.compared = {"episodes": n_episodes, "units": len(replayed), **report.compared}


def _first(r: Replayed) -> Mismatch | None:
    """The earliest difference between the recorded and the replayed unit, field by field."""
    stream, recorded = r.unit.stream, r.unit.pairs
    mine, theirs = trace(recorded), trace(r.events, keep_unfinished=True)
    at = next(
        (i for i, (a, b) in enumerate(zip(mine, theirs, strict=False)) if a.item != b.item),
        min(len(mine), len(theirs)),
    )
    stopped_here = at >= len(theirs)
    if r.stop is not None and stopped_here:
        return _from_stop(r.unit, r.stop)
    if at >= len(mine) and at >= len(theirs):
        return None
    if at >= len(mine):
        seq = recorded[-1][0] if recorded else -1
        item = theirs[at].item
        return Mismatch(stream, seq, "unit", "event", "(nothing more recorded)", item)
    step = mine[at]
    form = step.item[1]
    what = _episode_at(recorded, step.seq) or f"stage {form.get('stage') or form.get('episode')}"
    if at >= len(theirs):
        return Mismatch(stream, step.seq, what, step.item[0], step.item[1], "(the replay ended)")
    other = theirs[at].item
    if step.item[0] != other[0]:
        return Mismatch(stream, step.seq, what, "event", step.item[0], other[0])
    diff = first_difference(step.item[1], other[1])
    path, a, b = diff if diff else ("", step.item[1], other[1])
    return Mismatch(stream, step.seq, what, f"{step.item[0]}.{path}".rstrip("."), a, b)


def _from_stop(unit: ReplayUnit, stop: Exception) -> Mismatch:
    """A divergence raised mid-episode, as a diff of what was recorded and what was asked."""
    stream, recorded = unit.stream, unit.pairs
    if isinstance(stop, RequestDivergence):
        diff = first_difference(stop.expected, stop.request)
        path, a, b = diff if diff else ("", stop.expected, stop.request)
        return Mismatch(
            stream,
            stop.seq,
            _episode_at(recorded, stop.seq) or "model call",
            f"model_call.request.{path}".rstrip("."),
            a,
            b,
        )
    if isinstance(stop, ToolDivergence):
        what = _episode_at(recorded, stop.seq) if stop.seq >= 0 else "unit"
        if isinstance(stop.expected, dict) and isinstance(stop.actual, dict):
            diff = first_difference(stop.expected, stop.actual)
            if diff:
                return Mismatch(
                    stream,
                    stop.seq,
                    what or "platform",
                    f"{stop.actual.get('kind', 'call')}.{diff[0]}",
                    diff[1],
                    diff[2],
                )
        return Mismatch(stream, stop.seq, what or "platform", "call", stop.expected, stop.actual)
    if isinstance(stop, Divergence):
        return Mismatch(stream, -1, "model call", "request", stop.expected, stop.request)
    return Mismatch(stream, -1, "unit", "error", "", str(stop))
