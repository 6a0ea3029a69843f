"""The lifecycle suite (DESIGN §6): teach, capture, recall, promote, transfer, update, abstain.

The stages run episodes and ask the platform adapter for each check; the decisions
here turn the adapter's observations into grader decisions that cite their evidence.
"""

from __future__ import annotations

import asyncio
from typing import Any

import protocols
from harness.agents.base import Episode
from harness.episode import EpisodeResult
from harness.platforms.base import Page, PollPolicy, Target
from harness.prompts import SYSTEM
from harness.suites.base import Loaded
from harness.unit import UnitContext
from projections import lifecycle as lc
from protocols import grading
from protocols.hashing import benchledger_hash
from protocols.schema import Protocol


def target(p: Protocol) -> Target:
    """Where a protocol's fact lives and where its promotion should land."""
    page = None
    if p.page is not None:
        page = Page(p.page.slug, p.page.title, p.page.summary, p.page.body)
    return Target(p.entity_urn, p.sink, p.fact, page)


class LifecycleSuite:
    name = "lifecycle"
    identities_per_unit = 2  # teacher, learner

    def __init__(self, capture_timeout_s: float = 10.0) -> None:
        self.capture_timeout_s = capture_timeout_s
        # One reviewer per platform: promotions to one entity never interleave, so a
        # description update cannot overwrite another unit's (read-modify-write).
        self._locks: dict[tuple[int, str], asyncio.Lock] = {}

    def default_path(self) -> str:
        return protocols.LIFECYCLE_DIR

    def load(self, path: str) -> Loaded:
        items = list(protocols.load(path).protocols)
        return Loaded(items, benchledger_hash(items), path)

    def entity(self, item: Any) -> str:
        return str(item.entity_urn)

    def _episode(self, p: Protocol, stage: str, prompt: str) -> Episode:
        return Episode(stage, SYSTEM[stage], prompt, p, p.budget_tool_calls)

    async def run_unit(self, ctx: UnitContext) -> None:
        p: Protocol = ctx.plan.item
        teacher, learner = ctx.plan.identities
        tgt = target(p)
        client = ctx.platform

        teach_started = ctx.clock.time()
        teach = await ctx.episode(self._episode(p, "teach", p.teach.prompt), teacher, p.fact)
        ctx.decide("teach", lc.CAPTURE_ATTEMPTED, teach.capture_attempted,
                   "memory_capture was called" if teach.capture_attempted
                   else "memory_capture was not called", [teach.finished_seq])  # fmt: skip
        ctx.decide("teach", lc.TEACH_BUDGET_EXHAUSTED, teach.budget_exhausted,
                   f"{teach.tool_calls} of {p.budget_tool_calls} tool calls used",
                   [teach.finished_seq])  # fmt: skip
        ctx.stage = "capture"
        # Without a capture call there is nothing to wait for: look once.
        timeout = self.capture_timeout_s if teach.capture_attempted else 0.0
        check = await client.check_capture(
            ctx, identity=teacher, target=tgt, since=teach_started, poll=PollPolicy(timeout)
        )
        why = check.reason if teach.capture_attempted else "no capture was attempted"
        ctx.decide("capture", lc.CAPTURED, check.found is not None,
                   check.reason if check.found else why,
                   [teach.finished_seq, *check.refs])  # fmt: skip
        ctx.commit()
        insight = check.found

        recall = await ctx.episode(self._episode(p, "recall", p.recall.prompt), teacher, p.fact)
        self._grade(ctx, "recall", lc.RECALL_CORRECT, recall,
                    grading.grade(recall.answer, p.recall.grading), p.recall.grading)  # fmt: skip
        ctx.decide("recall", lc.RECALL_SEARCH_CALLED, recall.search_called,
                   "search was called" if recall.search_called else "search was not called",
                   [recall.finished_seq])  # fmt: skip
        ctx.decide("recall", lc.RECALL_FACT_SURFACED, recall.fact_surfaced,
                   "the taught fact appeared in a tool result" if recall.fact_surfaced
                   else "the taught fact appeared in no tool result",
                   [recall.finished_seq])  # fmt: skip
        ctx.commit()

        if p.promotes and insight is not None:
            ctx.stage = "promote"
            lock = self._locks.setdefault((id(client), p.entity_urn), asyncio.Lock())
            async with lock:
                promotion = await client.promote(ctx, capture=insight, target=tgt)
            ctx.decide("promote", lc.PROMOTED, promotion.ok, promotion.reason, promotion.refs)
            ctx.commit()
            if promotion.ok and p.transfer is not None:
                ep = self._episode(p, "transfer", p.transfer.prompt)
                transfer = await ctx.episode(ep, learner, p.fact)
                self._grade(ctx, "transfer", lc.TRANSFER_CORRECT, transfer,
                            grading.grade(transfer.answer, p.transfer.grading),
                            p.transfer.grading)  # fmt: skip
                ctx.decide("transfer", lc.TRANSFER_SURFACED, transfer.fact_surfaced,
                           "the promoted fact appeared in a tool result" if transfer.fact_surfaced
                           else "the promoted fact appeared in no tool result",
                           [transfer.finished_seq])  # fmt: skip
                ctx.commit()

        if p.update is not None and insight is not None:
            u = p.update
            update_started = ctx.clock.time()
            corr = await ctx.episode(self._episode(p, "update", u.prompt), teacher, u.fact)
            ctx.stage = "update"
            upd = await client.check_update(
                ctx, identity=teacher, original=insight, target=tgt, since=update_started
            )
            refs = [corr.finished_seq, *upd.landed_refs]
            ctx.decide("update", lc.UPDATE_CAPTURED, upd.landed is not None, upd.landed_reason,
                       refs)  # fmt: skip
            if upd.landed is not None:
                status = upd.original_status
                ctx.decide("update", lc.DUPLICATED, upd.duplicated,
                           f"the original insight is {status!r}"
                           + (" (still live)" if upd.duplicated else ""),
                           [*refs, *upd.status_refs])  # fmt: skip
            ctx.commit()
            if upd.landed is not None:
                ep = self._episode(p, "update_recall", u.recall.prompt)
                again = await ctx.episode(ep, teacher, u.fact)
                verdict = grading.update(again.answer, u.recall.grading, u.superseded_value)
                self._grade(ctx, "update_recall", lc.UPDATE_CORRECT, again, verdict,
                            u.recall.grading, stale=u.superseded_value)  # fmt: skip
                ctx.commit()

        if p.abstain is not None:
            abstain = await ctx.episode(self._episode(p, "abstain", p.abstain.prompt), teacher, "")
            verdict = grading.abstention(abstain.answer)
            ctx.decide("abstain", lc.ABSTAIN_CORRECT, verdict.ok, verdict.reason,
                       [abstain.finished_seq], answer=verdict.scored,
                       expected=grading.ABSTAIN_ANSWER)  # fmt: skip
            ctx.commit()

    @staticmethod
    def _grade(
        ctx: UnitContext,
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
        ctx.decide(stage, check, verdict.ok, verdict.reason, [ep.finished_seq],
                   answer=verdict.scored, expected=expected)  # fmt: skip
