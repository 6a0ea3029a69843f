"""One protocol attempt through the lifecycle (DESIGN §6), every step an event in its stream."""

from __future__ import annotations

import asyncio
import datetime as dt
import time
import urllib.parse
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

from harness.agents.base import Agent, Episode
from harness.episode import EpisodeResult, Recorder, run_episode
from harness.errors import InfraError
from harness.platforms.base import CallResult, PlatformClient, ReadBack
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

INSIGHTS: Final = "/api/v1/admin/knowledge/insights"
CHANGESETS: Final = "/api/v1/admin/knowledge/changesets"
PAGES: Final = "/api/v1/portal/knowledge-pages"
MAX_RETRIES: Final = 3
BACKOFF_S: Final = 0.25
CLOCK_SLACK_S: Final = 5.0  # capture checks look this far before teach started (clock skew)
LIVE: Final = ("pending", "approved", "applied")

T = TypeVar("T")


def pool_email(index: int) -> str:
    return f"bench-agent-{index:03d}@apikey.local"


def identity_label(index: int) -> str:
    """How an identity is recorded: its pool index and email, never its key."""
    return f"pool:{index:03d} {pool_email(index)}"


def _rfc3339(epoch_s: float) -> str:
    stamp = dt.datetime.fromtimestamp(epoch_s, dt.UTC)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


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
        o = self.outcome
        update_ok = o.get(lc.UPDATE_CAPTURED) is None or (
            o.get(lc.UPDATE_CAPTURED) is True
            and o.get(lc.UPDATE_CORRECT) is True
            and o.get(lc.DUPLICATED) is not True
        )
        return (
            not self.error
            and o.get(lc.CAPTURED) is True
            and o.get(lc.RECALL_CORRECT) is True
            and o.get(lc.PROMOTED) in (None, True)
            and o.get(lc.TRANSFER_CORRECT) in (None, True)
            and o.get(lc.ABSTAIN_CORRECT) in (None, True)
            and update_ok
        )


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

    async def read(
        self,
        stage: str,
        method: str,
        path: str,
        params: dict[str, Any] | None = None,
        body: Any = None,
    ) -> tuple[ReadBack, int]:
        """One admin API request, retried on its own (not its stage), recorded as a read-back."""
        got = await self.retrying(
            stage, lambda: self.platform.rest(method, path, params=params, body=body)
        )
        shown = path + ("?" + urllib.parse.urlencode(params) if params else "")
        seq = self.w.append(
            ReadBackBody(
                stage=stage,
                method=method,
                path=shown,
                status=got.status,
                body=got.body,
                latency_ms=round(got.latency_ms, 3),
            )
        )
        return got, seq

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
                self.agent, self.platform, self.w, ep, who, identity_label(who), fact
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
                teacher=identity_label(plan.teacher),
                learner=identity_label(plan.learner),
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
        params = {
            "status": "pending",
            "captured_by": pool_email(self.plan.teacher),
            "entity_urn": self.p.entity_urn,
            "since": _rfc3339(since - CLOCK_SLACK_S),
        }
        deadline = time.monotonic() + self.capture_timeout_s
        refs = [teach.finished_seq]
        while True:
            got, seq = await self.read("capture", "GET", INSIGHTS, params)
            refs.append(seq)
            data = got.body.get("data") if isinstance(got.body, dict) else None
            if got.status == 200 and data:
                insight = str(data[-1]["id"])
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
        """Approve over REST, apply over MCP, then verify applied + changeset + sink."""
        p = self.p
        refs: list[int] = []
        approved, seq = await self.read(
            "promote",
            "PUT",
            f"{INSIGHTS}/{insight}/status",
            body={"status": "approved", "review_notes": "benchledger reviewer"},
        )
        refs.append(seq)
        if approved.status != 200:
            self.decide("promote", lc.PROMOTED, False, f"approve answered {approved.status}", refs)
            return False
        rec = Recorder(self.w, "promote")
        applied, sink_text = await self.retrying("promote", lambda: self.apply(insight, rec))
        refs.extend(rec.seqs)
        if applied.is_error:
            self.decide("promote", lc.PROMOTED, False, f"apply failed: {applied.text[:200]}", refs)
            return False
        status, seq = await self.read("promote", "GET", f"{INSIGHTS}/{insight}")
        refs.append(seq)
        changes, seq = await self.read("promote", "GET", CHANGESETS, {"entity_urn": p.entity_urn})
        refs.append(seq)
        if p.sink == "knowledge_page":
            pages, seq = await self.read("promote", "GET", PAGES)
            refs.append(seq)
            sink_text = str(pages.body)
        is_applied = isinstance(status.body, dict) and status.body.get("status") == "applied"
        rows = changes.body.get("data", []) if isinstance(changes.body, dict) else []
        listed = any(
            insight in c.get("source_insight_ids", []) and not c.get("rolled_back") for c in rows
        )
        shown = grading.surfaced(p.fact, sink_text)
        ok = is_applied and listed and shown
        reason = (
            f"insight {'is' if is_applied else 'is not'} applied; a changeset "
            f"{'lists' if listed else 'does not list'} it; the {p.sink} sink "
            f"{'shows' if shown else 'does not show'} the fact"
        )
        self.decide("promote", lc.PROMOTED, ok, reason, refs)
        return ok

    async def apply(self, insight: str, rec: Recorder) -> tuple[CallResult, str]:
        """Apply the approved insight to the protocol's sink as the admin, over MCP."""
        p = self.p
        async with self.platform.session(None, rec) as admin:
            args: dict[str, Any] = {
                "action": "apply",
                "entity_urn": p.entity_urn,
                "insight_ids": [insight],
                "confirm": True,
                "sink": p.sink,
            }
            if p.sink == "datahub":
                entity = await admin.call_tool("datahub_get_entity", {"urn": p.entity_urn})
                current = (
                    entity.data.get("description", "") if isinstance(entity.data, dict) else ""
                )
                detail = f"{current}\n\n{p.fact}".strip()
                args["changes"] = [{"change_type": "update_description", "detail": detail}]
            elif p.page is not None:
                args["page"] = {
                    "slug": p.page.slug,
                    "title": p.page.title,
                    "summary": p.page.summary,
                    "body": p.page.body,
                }
            applied = await admin.call_tool("apply_knowledge", args)
            sink_text = ""
            if p.sink == "datahub":
                entity = await admin.call_tool("datahub_get_entity", {"urn": p.entity_urn})
                sink_text = entity.text

        return applied, sink_text

    async def update_check(self, original: str, since: float, ep: EpisodeResult) -> bool:
        """Did the correction land as a new insight, and is the original superseded?"""
        params = {
            "captured_by": pool_email(self.plan.teacher),
            "entity_urn": self.p.entity_urn,
            "since": _rfc3339(since - CLOCK_SLACK_S),
        }
        got, seq = await self.read("update", "GET", INSIGHTS, params)
        rows = got.body.get("data", []) if isinstance(got.body, dict) else []
        new = [r for r in rows if r.get("id") != original and r.get("status") in LIVE]
        refs = [ep.finished_seq, seq]
        landed = bool(new)
        self.decide(
            "update",
            lc.UPDATE_CAPTURED,
            landed,
            f"correction captured as {new[-1]['id']}"
            if landed
            else "no new live insight after the correction",
            refs,
        )
        if not landed:
            return False
        old, seq = await self.read("update", "GET", f"{INSIGHTS}/{original}")
        status = old.body.get("status") if isinstance(old.body, dict) else None
        dup = status in LIVE
        self.decide(
            "update",
            lc.DUPLICATED,
            dup,
            f"the original insight is {status!r}" + (" (still live)" if dup else ""),
            [*refs, seq],
        )
        return True
