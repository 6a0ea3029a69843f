"""One unit's recording context: its stream, its decisions, retries and episodes.

Every suite runs its units through a ``UnitContext``. It is the ``Evidence`` a platform
adapter records its reads into, holds the retry policy and the clock (injected, so a
replay runs without the wall clock), and runs episodes with the unit's agent.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Awaitable, Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

from harness.agents.base import Agent, Episode
from harness.episode import EpisodeResult, Recorder, run_episode
from harness.errors import InfraError
from harness.platforms.base import Clock, PlatformClient, ReadBack
from ledger import Ledger
from ledger.events import Body, GraderDecisionBody, InfraErrorBody, ReadBackBody
from ledger.ledger import StreamWriter
from projections import lifecycle as lc
from projections.decisions import Decision

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
    return f"pool:{index:03d} {platform.email(index)}"


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
    stream: str
    unit_id: str
    attempt: int
    outcome: dict[str, bool | None] = field(default_factory=dict)
    error: str = ""

    @property
    def protocol_id(self) -> str:
        return self.unit_id

    @property
    def passed(self) -> bool:
        return not self.error and lc.lifecycle_passed(self.outcome.get)


class UnitFailed(Exception):
    """A stage failed for infrastructure reasons after its retries."""


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
    ) -> None:
        self.ledger = ledger
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
        try:
            await asyncio.shield(asyncio.wrap_future(done))
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

    def decisions(self, decided: Iterable[Decision]) -> None:
        """Append decisions computed by the one decision function; remember their verdicts."""
        for d in decided:
            self.outcome[d.body.check] = d.body.verdict
            self.w.append(d.body, refs=d.refs)

    # -- Evidence, for platform adapters ---------------------------------------------------

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
        self, episode: Episode, who: int, fact: str, *, commit: bool = True, cites: bool = False
    ) -> EpisodeResult:
        """Run one episode as pool identity ``who`` (retried whole on infra errors).

        ``cites``: record the answer's ``SOURCES:`` refs as the episode's sources.
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
                fact,
                attempt=attempt,
                cites=cites,
            )
            if commit:
                await self.commit()
            return result

        return await self.retrying(episode.stage, go)
