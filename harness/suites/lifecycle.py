"""The lifecycle suite: teach, capture, recall, promote, transfer, update, abstain.

What each stage does and decides: docs/runner.md, "One unit (a protocol attempt)".

The stages run episodes and ask the platform adapter for each check; after each stage
the one decision function (``projections.suites.lifecycle.decisions``) turns the recorded
evidence into grader decisions, exactly as re-derivation will.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager, nullcontext
from typing import Any, Final

from benchledger import protocols
from benchledger.harness.agents.base import Episode
from benchledger.harness.episode import COUNTED, Findings, Reading
from benchledger.harness.platforms.base import (
    LifecycleCapability,
    PollPolicy,
    declare_not_applicable,
    target_of,
)
from benchledger.harness.prompts import SYSTEM
from benchledger.harness.record import RunConfig
from benchledger.harness.suites.base import Loaded, Outcome
from benchledger.harness.unit import UnitContext
from benchledger.ledger.events import RunRecord
from benchledger.projections.suites.lifecycle.decisions import decide_stage
from benchledger.projections.suites.lifecycle.scorecard import lifecycle_passed
from benchledger.protocols.grading import surfaced
from benchledger.protocols.hashing import benchledger_hash
from benchledger.protocols.pack_schema import check
from benchledger.protocols.schema import Protocol

target = target_of  # where a protocol's fact lives and where its promotion should land


# Why a platform without the lifecycle capability has no capture, promote or update stage.
NO_CAPABILITY: Final = (
    "the platform offers no lifecycle checks (capture, promote, update): its adapter does "
    "not implement LifecycleCapability"
)


async def not_applicable(ctx: UnitContext, stage: str, why: str) -> None:
    """Record, in ``stage``, that it does not apply on this platform and why (its decision
    is then ``None`` with that reason, never a silent pass or fail)."""
    ctx.stage = stage
    await declare_not_applicable(ctx, "platform", stage, why)


def surfacing(fact: str) -> Reading:
    """An episode's reading for a stage that looks for ``fact``: whether a tool result
    surfaced it (no fact: nothing to look for)."""

    def read(answer: str, results: Sequence[str]) -> Findings:
        return Findings(fact_surfaced=bool(fact) and any(surfaced(fact, t) for t in results))

    return read


# The tools whose calls the lifecycle's decisions read as a search and as a capture.
TOOLS: Final = COUNTED  # the calls the platform's vocabulary names


class LifecycleSuite:
    name = "lifecycle"
    identities_per_unit = 2  # teacher, learner
    run_prefix = "lc"
    item_noun = "protocol"
    tools = TOOLS

    def __init__(self, capture_timeout_s: float = 10.0) -> None:
        self.capture_timeout_s = capture_timeout_s
        # The sinks the platform described (``Description.sinks``, from the run record);
        # None: not described yet, every sink assumed.
        self.sinks: frozenset[str] | None = None
        # One reviewer per platform: promotions to one entity never interleave, so a
        # description update cannot overwrite another unit's (read-modify-write).
        self._locks: dict[tuple[int, str], asyncio.Lock] = {}
        # Across processes: a queue worker on a shared platform sets this to hold an
        # advisory lock per entity around each promotion (harness.queue.entity_lock).
        self.entity_lock: Callable[[str], AbstractAsyncContextManager[None]] | None = None

    def default_path(self) -> str:
        return protocols.LIFECYCLE_DIR

    def load(self, path: str) -> Loaded:
        items = list(protocols.load(path).protocols)
        return Loaded(items, benchledger_hash(items), path)

    def entity(self, item: Any) -> str:
        return str(item.entity_urn)

    def check_pack(self, loaded: Loaded, items: Sequence[Any], pack: str) -> None:
        """InvalidInput naming a protocol file when the seed pack at ``pack`` (benchledger's
        own for "") lacks a table or column the set records needing (protocols.pack_schema)."""
        pset = protocols.load(loaded.path)
        ids = {item.id for item in items}
        mine = [(p, f) for p, f in zip(pset.protocols, pset.origins, strict=True) if p.id in ids]
        check(mine, loaded.path, pack or protocols.PACK_DIR, pack or "protocols/data/pack")

    def item_hash(self, item: Any) -> str:
        return benchledger_hash([item])

    def passed(self, outcome: Outcome) -> bool:
        return lifecycle_passed(outcome.get)

    def unit_status(self, outcome: Outcome) -> str:
        return "pass" if self.passed(outcome) else "fail"

    def settle(self, config: RunConfig, external: bool) -> None:
        pass  # nothing of its own to fill in or check

    def configure(self, record: RunRecord) -> None:
        self.capture_timeout_s = record.capture_timeout_s
        self.described(record)

    def described(self, record: RunRecord) -> None:
        """What the platform said it is (a new run's, once its preflight described it).
        A run recorded before platforms were probed (no ``probe``) asked every promotion,
        so its full replay does too."""
        self.sinks = frozenset(record.platform.sinks) if record.probe else None

    def _episode(self, p: Protocol, stage: str, prompt: str) -> Episode:
        return Episode(stage, SYSTEM[stage], prompt, p, p.budget_tool_calls)

    async def run_unit(self, ctx: UnitContext) -> None:
        p: Protocol = ctx.plan.item
        teacher, learner = ctx.plan.identities
        tgt = target(p)
        platform = ctx.platform
        client = platform if isinstance(platform, LifecycleCapability) else None
        fact = surfacing(p.fact)  # each stage's episode looks for the taught fact
        updated = surfacing(p.update.fact if p.update else "")  # the update's, for its stages

        def decide(stage: str) -> None:
            ctx.decisions(decide_stage(p, stage, ctx.log))

        teach_started = ctx.clock.time()
        teach = await ctx.episode(self._episode(p, "teach", p.teach.prompt), teacher, fact)
        decide("teach")
        insight = None
        if client is None:
            await not_applicable(ctx, "capture", NO_CAPABILITY)
        else:
            ctx.stage = "capture"
            # Without a capture call there is nothing to wait for: look once.
            timeout = self.capture_timeout_s if teach.capture_attempted else 0.0
            check = await client.check_capture(
                ctx, identity=teacher, target=tgt, since=teach_started, poll=PollPolicy(timeout)
            )
            insight = check.found
        decide("capture")
        await ctx.commit()

        await ctx.episode(self._episode(p, "recall", p.recall.prompt), teacher, fact)
        decide("recall")
        await ctx.commit()

        if client is None:
            for stage, applies in (("promote", p.promotes), ("update", p.update is not None)):
                if applies:
                    await not_applicable(ctx, stage, NO_CAPABILITY)
                    decide(stage)
                    await ctx.commit()

        lacks = self.sinks is not None and p.promotes and p.sink not in self.sinks
        if client is not None and insight is not None and lacks:
            # Description.sinks: a promotion to a sink the platform has is never asked for.
            had = ", ".join(sorted(self.sinks or ())) or "none"
            await not_applicable(ctx, "promote", f"the platform has no {p.sink} sink (its "
                                 f"sinks: {had})")  # fmt: skip
            decide("promote")
            await ctx.commit()
        elif client is not None and p.promotes and insight is not None:
            ctx.stage = "promote"
            lock = self._locks.setdefault((id(client), p.entity_urn), asyncio.Lock())
            across = self.entity_lock(p.entity_urn) if self.entity_lock else nullcontext()
            async with lock, across:
                promotion = await client.promote(ctx, capture=insight, target=tgt)
            decide("promote")
            await ctx.commit()
            if promotion.ok and p.transfer is not None:
                ep = self._episode(p, "transfer", p.transfer.prompt)
                await ctx.episode(ep, learner, fact)
                decide("transfer")
                await ctx.commit()

        if client is not None and p.update is not None and insight is not None:
            u = p.update
            update_started = ctx.clock.time()
            await ctx.episode(self._episode(p, "update", u.prompt), teacher, updated)
            ctx.stage = "update"
            upd = await client.check_update(
                ctx, identity=teacher, original=insight, target=tgt, since=update_started
            )
            decide("update")
            await ctx.commit()
            if upd.landed is not None:
                ep = self._episode(p, "update_recall", u.recall.prompt)
                await ctx.episode(ep, teacher, updated)
                decide("update_recall")
                await ctx.commit()

        if p.abstain is not None:
            await ctx.episode(self._episode(p, "abstain", p.abstain.prompt), teacher)
            decide("abstain")
            await ctx.commit()
