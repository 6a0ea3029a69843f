"""One unit: its recording context (stream, decisions, retries, episodes) and its runner.

Every suite runs its units through a ``UnitContext``. It is the ``UnitRecorder`` a platform
adapter records its reads into, holds the retry policy and the clock (injected, so a
replay runs without the wall clock), and runs episodes with the unit's agent.
``run_unit`` is the one way a unit runs, for the driver and for full replay alike: its
``unit_started``, the suite's stages behind the fault barrier, its ``unit_finished`` with
the trace hash.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Final, Protocol, TypeVar

from benchledger.harness import interrupt
from benchledger.harness.agents.base import Agent, Episode, UnitInfo
from benchledger.harness.episode import (
    NO_TOOLS,
    EpisodeResult,
    Reading,
    Recorder,
    ToolSets,
    nothing_read,
    run_episode,
)
from benchledger.harness.errors import InfraError
from benchledger.harness.logging import FailureLog
from benchledger.harness.platforms.base import Clock, PlatformClient, ReadBack
from benchledger.harness.record import pool_label
from benchledger.ledger import Ledger, LedgerError
from benchledger.ledger.events import (
    INTERNAL_ERROR,
    Body,
    GraderDecisionBody,
    InfraErrorBody,
    ReadBackBody,
    UnitFinishedBody,
    UnitStartedBody,
)
from benchledger.ledger.ledger import StreamWriter
from benchledger.projections.card import Ruling
from benchledger.projections.trace import unit_trace_hash

MAX_RETRIES: Final = 3
BACKOFF_S: Final = 0.25

T = TypeVar("T")


@functools.cache
def _writer() -> ThreadPoolExecutor:
    """The one thread this process commits units' events from (SQLite writes one at a time)."""
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="ledger-commit")


class SystemClock:
    """The wall clock and asyncio's sleep."""

    def time(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


def identity_label(platform: PlatformClient, index: int) -> str:
    """How an identity is recorded: its pool index and email, never its key."""
    return pool_label(index, platform.email(index))


@dataclass
class UnitPlan:
    """What to run: the item (a protocol), the attempt, the stream and its pool identities."""

    item: Any
    attempt: int
    stream: str
    identities: tuple[int, ...]
    resumes: str = ""

    @property
    def unit_id(self) -> str:
        return str(self.item.id)


@dataclass
class UnitOutcome:
    """How a unit ended: its verdicts, its error, and (by its suite's rule) pass and status."""

    stream: str
    unit_id: str
    attempt: int
    outcome: dict[str, bool | None] = field(default_factory=dict)
    error: str = ""
    passed: bool = False
    status: str = ""  # for the progress line: the suite's word, or ``error: ...``

    @property
    def protocol_id(self) -> str:
        return self.unit_id


class UnitFailed(Exception):
    """A stage failed for infrastructure reasons after its retries."""


def _seen(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


class UnitContext:
    """Stages events of one unit on one writer and commits them at episode boundaries."""

    def __init__(
        self,
        ledger: Ledger,
        platform: PlatformClient,
        agent: Agent,
        plan: UnitPlan,
        *,
        clock: Clock | None = None,
        backoff_s: float = BACKOFF_S,
        tools: ToolSets = NO_TOOLS,
        failures: FailureLog | None = None,
    ) -> None:
        self.ledger = ledger
        self.failures = failures
        self.tools = tools
        self.platform = platform
        self.agent = agent
        self.plan = plan
        self.clock: Clock = clock or SystemClock()
        self.backoff_s = backoff_s
        self.w: StreamWriter = ledger.new_stream(plan.stream, keep_log=True)
        self.outcome: dict[str, bool | None] = {}
        self.stage = ""

    @property
    def log(self) -> list[tuple[int, Body]]:
        """Every event body of this unit so far, typed, with its seq."""
        return self.w.log

    async def commit(self) -> None:
        """Write the staged events in one transaction: durable when this returns.

        The write (an fsync, ~3-13 ms) runs in the ledger's writer thread, so the other
        units in flight go on meanwhile instead of waiting with the event loop. It is
        waited for even when the unit is cancelled, so nothing else writes the stream
        while it is under way.
        """
        done = _writer().submit(self.ledger.commit, self.w)
        waiting = asyncio.wrap_future(done)
        # A unit cancelled mid-write re-raises the write's error below, from ``done``; the
        # shielded future's copy is marked seen here, since shield drops its own callback
        # that would (once the waiting task is cancelled) and asyncio would log it unseen.
        waiting.add_done_callback(_seen)
        try:
            await asyncio.shield(waiting)
        except asyncio.CancelledError:
            done.result()  # as long as the write takes; raises what it raised
            raise

    def decide(
        self,
        stage: str,
        check: str,
        verdict: bool | None,
        reason: str,
        refs: list[int],
        *,
        answer: str = "",
        expected: Any = None,
    ) -> int:
        """Append a grader decision citing ``refs``; remember its verdict for the outcome."""
        self.outcome[check] = verdict
        body = GraderDecisionBody(
            stage=stage, check=check, verdict=verdict, reason=reason, answer=answer,
            expected=expected,
        )  # fmt: skip
        return self.w.append(body, refs=sorted(set(refs)))

    def decisions(self, decided: Iterable[Ruling]) -> None:
        """Append decisions computed by the one decision function; remember their verdicts."""
        for d in decided:
            self.outcome[d.body.check] = d.body.verdict
            self.w.append(d.body, refs=d.refs)

    # -- UnitRecorder, for platform adapters ---------------------------------------------------

    async def read(
        self,
        purpose: str,
        action: Callable[[], Awaitable[ReadBack]],
        observe: Callable[[ReadBack], Any],
    ) -> tuple[Any, int | None]:
        """One platform read, retried on its own (not its stage), recorded as a read-back."""
        got = await self.retrying(self.stage or purpose, action)
        observed = observe(got)
        body = ReadBackBody(
            stage=self.stage or purpose,
            method=got.method,
            path=got.path,
            status=got.status,
            body=got.body,
            latency_ms=round(got.latency_ms, 3),
            purpose=purpose,
            observed=observed,
        )
        return observed, self.w.append(body)

    def observer(self, purpose: str) -> Recorder:
        return Recorder(self.w, self.stage or purpose)

    async def retrying(self, purpose: str, action: Callable[[], Awaitable[T]]) -> T:
        """Run ``action``, recording each infra failure; retry retryable ones with backoff."""
        stage = self.stage or purpose
        for attempt in range(MAX_RETRIES + 1):
            try:
                return await action()
            except InfraError as exc:
                if interrupt.unwinding():  # a session torn down by the interrupt: no fault
                    raise asyncio.CancelledError from exc
                self.w.append(
                    InfraErrorBody(
                        stage=stage,
                        error=exc.kind,
                        message=exc.message,
                        retry=attempt,
                        retryable=exc.retryable,
                    )
                )
                await self.commit()
                if not exc.retryable or attempt == MAX_RETRIES:
                    raise UnitFailed(f"{stage}: {exc}") from None
                await self.clock.sleep(self.backoff_s * 2**attempt)
        raise AssertionError("unreachable")

    # -- episodes --------------------------------------------------------------------------

    async def episode(
        self, episode: Episode, who: int, reads: Reading = nothing_read, *, commit: bool = True
    ) -> EpisodeResult:
        """Run one episode as pool identity ``who`` (retried whole on infra errors).

        ``reads``: the suite's findings from the episode (``harness.episode.Reading``).
        """
        self.stage = episode.stage
        tries = 0

        async def go() -> EpisodeResult:
            nonlocal tries
            attempt, tries = tries, tries + 1
            result = await run_episode(
                self.agent,
                self.platform,
                self.w,
                episode,
                who,
                identity_label(self.platform, who),
                reads,
                attempt=attempt,
                tools=self.tools,
            )
            if commit:
                await self.commit()
            return result

        return await self.retrying(episode.stage, go)


class UnitSuite(Protocol):
    """The part of a suite (``harness.suites.base.Suite``) the unit runner uses."""

    tools: ToolSets

    def item_hash(self, item: Any) -> str: ...

    def passed(self, outcome: Mapping[str, bool | None]) -> bool: ...

    def unit_status(self, outcome: Mapping[str, bool | None]) -> str: ...

    async def run_unit(self, ctx: UnitContext) -> None: ...


def unit_started(suite: UnitSuite, platform: PlatformClient, plan: UnitPlan) -> UnitStartedBody:
    """The ``unit_started`` a new unit of ``plan`` records."""
    labels = [identity_label(platform, i) for i in plan.identities]
    return UnitStartedBody(
        protocol_id=plan.unit_id,
        attempt=plan.attempt,
        protocol_hash=suite.item_hash(plan.item),
        teacher=labels[0],
        learner=labels[-1],
        resumes=plan.resumes,
    )


async def run_unit(
    suite: UnitSuite,
    ledger: Ledger,
    platform: PlatformClient,
    agent: Agent,
    plan: UnitPlan,
    *,
    clock: Clock | None = None,
    started: UnitStartedBody | None = None,
    stops: tuple[type[BaseException], ...] = (),
    log: list[tuple[int, Body]] | None = None,
    failures: FailureLog | None = None,
) -> UnitOutcome:
    """One unit behind the fault barrier: whatever goes wrong ends it with an error.

    ``started``: the ``unit_started`` to record (a replay's, as recorded); built from the
    plan otherwise. ``stops``: exceptions that end the unit unfinished and propagate (a
    replay's divergences), as storage faults and cancellation do. ``log``: filled with the
    unit's events as they are staged, so a caller sees them even when the unit stops.
    ``failures``: where a harness failure's traceback goes (its error names the file);
    None keeps no traceback (a full replay's scratch run).
    """
    start = started or unit_started(suite, platform, plan)
    info = UnitInfo(plan.stream, plan.unit_id, plan.attempt, start.teacher, start.learner)
    ctx = UnitContext(ledger, platform, agent.for_unit(info), plan, clock=clock, tools=suite.tools,
                      failures=failures)  # fmt: skip
    if log is not None:
        ctx.w.log = log  # the writer's own list: staged events land in the caller's
    ctx.w.append(start)
    await ctx.commit()
    error = ""
    try:
        await suite.run_unit(ctx)
    except stops:
        raise
    except (LedgerError, asyncio.CancelledError):
        raise  # storage faults and Ctrl-C end the run; the unit resumes later
    except Exception as exc:  # the fault barrier: one unit's bug never ends the run
        if interrupt.unwinding():  # whatever the interrupt's unwinding raised: no error
            raise asyncio.CancelledError from exc
        error = _error(ctx, exc)
    trace = unit_trace_hash(body for _, body in ctx.log)
    ctx.w.append(UnitFinishedBody(outcome=dict(ctx.outcome), error=error, trace_hash=trace))
    await ctx.commit()
    passed = not error and suite.passed(ctx.outcome)
    status = f"error: {error}" if error else suite.unit_status(ctx.outcome)
    return UnitOutcome(plan.stream, plan.unit_id, plan.attempt, dict(ctx.outcome), error,
                       passed, status)  # fmt: skip


def _error(ctx: UnitContext, exc: Exception) -> str:
    """How a unit's failure reads in its ``unit_finished.error``: an infrastructure failure
    as it is, a bug of ours (the fault barrier) as an internal error, which a harness
    failure is: its traceback goes to the run's failure log (never the ledger), and the
    error names the file."""
    if isinstance(exc, UnitFailed):
        return str(exc)
    if isinstance(exc, InfraError):  # an adapter's failure outside its retries
        return f"{ctx.stage}: {exc}"
    error = f"{INTERNAL_ERROR}{ctx.stage or 'the unit'}: {type(exc).__name__}: {exc}"
    if ctx.failures is None:
        return error
    where = ctx.failures.write(f"{ctx.plan.stream} ({ctx.stage or 'the unit'})", exc)
    return ctx.failures.scrub(error) + f" ({where})"
