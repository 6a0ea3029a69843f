"""One protocol attempt through the lifecycle (DESIGN §6), every step an event in its stream."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

from harness.agents.base import Agent, Episode
from harness.episode import EpisodeResult, Recorder, run_episode
from harness.errors import InfraError
from harness.platforms.base import PlatformClient, ReadBack
from harness.prompts import SYSTEM
from ledger import Ledger
from ledger.events import (
    GraderDecisionBody,
    InfraErrorBody,
    ReadBackBody,
    UnitFinishedBody,
    UnitStartedBody,
)
from ledger.ledger import StreamWriter
from projections import lifecycle as lc
from protocols import grading
from protocols.hashing import benchledger_hash
from protocols.schema import Protocol

MAX_RETRIES: Final = 3
BACKOFF_S: Final = 0.25
LIVE: Final = ("pending", "approved", "applied")

T = TypeVar("T")


def identity_label(platform: PlatformClient, index: int) -> str:
    """How an identity is recorded: its pool index and email, never its key."""
    return f"pool:{index:03d} {platform.email(index)}"


@dataclass
class UnitPlan:
    """What to run: the protocol, the attempt, the stream and the two pool identities."""

    protocol: Protocol
    attempt: int
    stream: str
    teacher: int
    learner: int
    resumes: str = ""


@dataclass
class UnitOutcome:
    stream: str
    protocol_id: str
    attempt: int
    outcome: dict[str, bool | None] = field(default_factory=dict)
    error: str = ""

    @property
    def passed(self) -> bool:
        return not self.error and lc.lifecycle_passed(self.outcome.get)


class UnitFailed(Exception):
    """A stage failed for infrastructure reasons after its retries."""


class UnitRunner:
    """Runs the stages of one unit, staging events on one writer, committing per episode."""

    def __init__(
        self,
        ledger: Ledger,
        platform: PlatformClient,
        agent: Agent,
        plan: UnitPlan,
        *,
        capture_timeout_s: float = 10.0,
        entity_locks: dict[str, asyncio.Lock] | None = None,
    ) -> None:
        self.ledger = ledger
        # One reviewer per platform: promotions to one entity never interleave, so a
        # description update cannot overwrite another unit's (read-modify-write).
        self.entity_locks = entity_locks if entity_locks is not None else {}
        self.platform = platform
        self.agent = agent
        self.plan = plan
        self.p = plan.protocol
        self.w: StreamWriter = ledger.new_stream(plan.stream)
        self.capture_timeout_s = capture_timeout_s
        self.outcome: dict[str, bool | None] = {}

    # -- recording helpers ----------------------------------------------------------------

    def commit(self) -> None:
        self.ledger.commit(self.w)

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
    ) -> None:
        self.outcome[check] = verdict
        body = GraderDecisionBody(
            stage=stage,
            check=check,
            verdict=verdict,
            reason=reason,
            answer=answer,
            expected=expected,
        )
        self.w.append(body, refs=sorted(set(refs)))

    async def recorded(
        self, stage: str, action: Callable[[], Awaitable[tuple[T, ReadBack | None]]]
    ) -> tuple[T, int | None]:
        """One platform read, retried on its own (not its stage), recorded as a read-back."""
        value, got = await self.retrying(stage, action)
        if got is None:
            return value, None
        body = ReadBackBody(
            stage=stage,
            method=got.method,
            path=got.path,
            status=got.status,
            body=got.body,
            latency_ms=round(got.latency_ms, 3),
        )
        return value, self.w.append(body)

    async def retrying(self, stage: str, action: Callable[[], Awaitable[T]]) -> T:
        """Run a stage, recording each infra failure; retry retryable ones with backoff."""
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
                self.commit()
                if not exc.retryable or attempt == MAX_RETRIES:
                    raise UnitFailed(f"{stage}: {exc}") from None
                await asyncio.sleep(BACKOFF_S * 2**attempt)
        raise AssertionError("unreachable")

    async def episode(self, stage: str, prompt: str, who: int, fact: str) -> EpisodeResult:
        ep = Episode(stage, SYSTEM[stage], prompt, self.p, self.p.budget_tool_calls)

        async def go() -> EpisodeResult:
            result = await run_episode(
                self.agent, self.platform, self.w, ep, who, identity_label(self.platform, who), fact
            )
            self.commit()
            return result

        return await self.retrying(stage, go)

    # -- the lifecycle ----------------------------------------------------------------------

    async def run(self) -> UnitOutcome:
        """Every stage; infrastructure failures end the unit with an error, never raise."""
        plan, p = self.plan, self.p
        self.w.append(
            UnitStartedBody(
                protocol_id=p.id,
                attempt=plan.attempt,
                protocol_hash=benchledger_hash([p]),
                teacher=identity_label(self.platform, plan.teacher),
                learner=identity_label(self.platform, plan.learner),
                resumes=plan.resumes,
            )
        )
        self.commit()
        error = ""
        try:
            await self.stages()
        except UnitFailed as exc:
            error = str(exc)
        self.w.append(UnitFinishedBody(outcome=dict(self.outcome), error=error))
        self.commit()
        return UnitOutcome(plan.stream, p.id, plan.attempt, dict(self.outcome), error)

    async def stages(self) -> None:
        p, plan = self.p, self.plan
        teach_started = time.time()
        teach = await self.episode("teach", p.teach.prompt, plan.teacher, p.fact)
        self.decide(
            "teach",
            lc.CAPTURE_ATTEMPTED,
            teach.capture_attempted,
            "memory_capture was called"
            if teach.capture_attempted
            else "memory_capture was not called",
            [teach.finished_seq],
        )
        self.decide(
            "teach",
            lc.TEACH_BUDGET_EXHAUSTED,
            teach.budget_exhausted,
            f"{teach.tool_calls} of {p.budget_tool_calls} tool calls used",
            [teach.finished_seq],
        )
        insight = await self.capture_check(teach_started, teach)
        self.commit()

        recall = await self.episode("recall", p.recall.prompt, plan.teacher, p.fact)
        self.grade_answer(
            "recall",
            lc.RECALL_CORRECT,
            recall,
            grading.grade(recall.answer, p.recall.grading),
            p.recall.grading,
        )
        self.decide(
            "recall",
            lc.RECALL_SEARCH_CALLED,
            recall.search_called,
            "search was called" if recall.search_called else "search was not called",
            [recall.finished_seq],
        )
        self.decide(
            "recall",
            lc.RECALL_FACT_SURFACED,
            recall.fact_surfaced,
            "the taught fact appeared in a tool result"
            if recall.fact_surfaced
            else "the taught fact appeared in no tool result",
            [recall.finished_seq],
        )
        self.commit()

        if p.promotes and insight is not None:
            lock = self.entity_locks.setdefault(p.entity_urn, asyncio.Lock())
            async with lock:
                promoted = await self.promote(insight)
            self.commit()
            if promoted and p.transfer is not None:
                transfer = await self.episode("transfer", p.transfer.prompt, plan.learner, p.fact)
                self.grade_answer(
                    "transfer",
                    lc.TRANSFER_CORRECT,
                    transfer,
                    grading.grade(transfer.answer, p.transfer.grading),
                    p.transfer.grading,
                )
                self.decide(
                    "transfer",
                    lc.TRANSFER_SURFACED,
                    transfer.fact_surfaced,
                    "the promoted fact appeared in a tool result"
                    if transfer.fact_surfaced
                    else "the promoted fact appeared in no tool result",
                    [transfer.finished_seq],
                )
                self.commit()

        if p.update is not None and insight is not None:
            u = p.update
            update_started = time.time()
            corr = await self.episode("update", u.prompt, plan.teacher, u.fact)
            landed = await self.update_check(insight, update_started, corr)
            self.commit()
            if landed:
                again = await self.episode("update_recall", u.recall.prompt, plan.teacher, u.fact)
                verdict = grading.update(again.answer, u.recall.grading, u.superseded_value)
                self.grade_answer(
                    "update_recall",
                    lc.UPDATE_CORRECT,
                    again,
                    verdict,
                    u.recall.grading,
                    stale=u.superseded_value,
                )
                self.commit()

        if p.abstain is not None:
            abstain = await self.episode("abstain", p.abstain.prompt, plan.teacher, "")
            verdict = grading.abstention(abstain.answer)
            self.decide(
                "abstain",
                lc.ABSTAIN_CORRECT,
                verdict.ok,
                verdict.reason,
                [abstain.finished_seq],
                answer=verdict.scored,
                expected=grading.ABSTAIN_ANSWER,
            )
            self.commit()

    def grade_answer(
        self,
        stage: str,
        check: str,
        ep: EpisodeResult,
        verdict: grading.Verdict,
        g: Any,
        stale: Any = None,
    ) -> None:
        expected: Any = g.value if g.kind == "numeric" else list(g.aliases)
        if stale is not None:
            expected = {"value": expected, "not": stale}
        self.decide(
            stage,
            check,
            verdict.ok,
            verdict.reason,
            [ep.finished_seq],
            answer=verdict.scored,
            expected=expected,
        )

    # -- API read-backs ---------------------------------------------------------------------

    async def capture_check(self, since: float, teach: EpisodeResult) -> str | None:
        """Poll for a pending insight by the teacher on the entity; decide ``captured``."""
        deadline = time.monotonic() + self.capture_timeout_s
        refs = [teach.finished_seq]
        email, urn = self.platform.email(self.plan.teacher), self.p.entity_urn
        while True:
            found, seq = await self.recorded(
                "capture",
                lambda: self.platform.insights(
                    captured_by=email, entity_urn=urn, since=since, status="pending"
                ),
            )
            refs += [seq] if seq is not None else []
            if found:
                insight = found[-1].id
                self.decide("capture", lc.CAPTURED, True, f"pending insight {insight} found", refs)
                return insight
            if not teach.capture_attempted or time.monotonic() >= deadline:
                why = (
                    "no capture was attempted"
                    if not teach.capture_attempted
                    else (f"no pending insight within {self.capture_timeout_s:g}s")
                )
                self.decide("capture", lc.CAPTURED, False, why, refs)
                return None
            await asyncio.sleep(0.25)

    async def promote(self, insight: str) -> bool:
        """Approve, apply, then verify: applied, listed in a changeset, shown by the sink."""
        p, client = self.p, self.platform
        refs: list[int] = []

        def note(seq: int | None) -> None:
            refs.extend([seq] if seq is not None else [])

        approved, seq = await self.recorded(
            "promote", lambda: client.approve(insight, "benchledger reviewer")
        )
        note(seq)
        if not approved:
            self.decide("promote", lc.PROMOTED, False, "the platform refused the approval", refs)
            return False
        rec = Recorder(self.w, "promote")
        page = None
        if p.page is not None:
            page = {
                "slug": p.page.slug,
                "title": p.page.title,
                "summary": p.page.summary,
                "body": p.page.body,
            }
        ok, answer = await self.retrying(
            "promote",
            lambda: client.apply(
                insight, entity_urn=p.entity_urn, sink=p.sink, fact=p.fact, page=page, observer=rec
            ),
        )
        refs.extend(rec.seqs)
        if not ok:
            self.decide("promote", lc.PROMOTED, False, f"apply failed: {answer[:200]}", refs)
            return False
        status, seq = await self.recorded("promote", lambda: client.insight(insight))
        note(seq)
        listed, seq = await self.recorded(
            "promote", lambda: client.changeset_lists(insight, p.entity_urn)
        )
        note(seq)
        sink_rec = Recorder(self.w, "promote")
        sink_text, seq = await self.recorded(
            "promote", lambda: client.read_sink(p.sink, p.entity_urn, sink_rec)
        )
        note(seq)
        refs.extend(sink_rec.seqs)
        is_applied = status is not None and status.status == "applied"
        shown = grading.surfaced(p.fact, sink_text)
        ok = is_applied and listed and shown
        reason = (
            f"insight {'is' if is_applied else 'is not'} applied; a changeset "
            f"{'lists' if listed else 'does not list'} it; the {p.sink} sink "
            f"{'shows' if shown else 'does not show'} the fact"
        )
        self.decide("promote", lc.PROMOTED, ok, reason, refs)
        return ok

    async def update_check(self, original: str, since: float, ep: EpisodeResult) -> bool:
        """Did the correction land as a new insight, and is the original superseded?"""
        email, urn = self.platform.email(self.plan.teacher), self.p.entity_urn
        rows, seq = await self.recorded(
            "update", lambda: self.platform.insights(captured_by=email, entity_urn=urn, since=since)
        )
        new = [r for r in rows if r.id != original and r.status in LIVE]
        refs = [ep.finished_seq] + ([seq] if seq is not None else [])
        landed = bool(new)
        self.decide(
            "update",
            lc.UPDATE_CAPTURED,
            landed,
            f"correction captured as {new[-1].id}"
            if landed
            else "no new live insight after the correction",
            refs,
        )
        if not landed:
            return False
        old, seq = await self.recorded("update", lambda: self.platform.insight(original))
        status = old.status if old is not None else None
        dup = status in LIVE
        self.decide(
            "update",
            lc.DUPLICATED,
            dup,
            f"the original insight is {status!r}" + (" (still live)" if dup else ""),
            refs + ([seq] if seq is not None else []),
        )
        return True
