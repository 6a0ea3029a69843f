"""The provenance lane (docs/provenance.md): does every answer point back to a real source?

One unit is one replicate of one case, as one fresh pool identity: each prime prompt is
a teach episode (``prime_1``, ``prime_2``, ...), then the scored prompt is answered in a
fresh session (episode ``answer``) ending with ``FINAL ANSWER:`` and a ``SOURCES:`` line,
recorded as the episode's sources. The harness then resolves every cited ref through
the platform adapter (``read_ref``), and the one decision function
(``projections.suites.provenance.decisions``) judges the citations, exactly as re-derivation will.
Run with ``k = 2`` and a fresh platform per unit, each case is answered twice on fresh
runtimes; the metrics (``projections.suites.provenance.scorecard``) compare the two.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from benchledger import protocols
from benchledger.harness.agents.base import Episode
from benchledger.harness.episode import COUNTED, Findings
from benchledger.harness.platforms.base import RefCapability
from benchledger.harness.record import RunConfig, RunRefused
from benchledger.harness.suites.base import Loaded, Outcome
from benchledger.harness.unit import UnitContext
from benchledger.ledger.events import RunRecord
from benchledger.projections.suites.provenance.decisions import (
    MAX_SOURCES,
    RESOLVE,
    SCORED,
    decide_case,
    prime_stage,
    scored,
)
from benchledger.protocols.cases import Case, case_set_hash, cited_sources, load_cases
from benchledger.protocols.grading import ABSTAIN_ANSWER

BUDGET: Final = 6  # tool calls per episode
DEFAULT_K: Final = 2  # replicates per case: M1 compares them
_COMMON: Final = (
    "You are a data analyst working with a memory platform through its tools. "
    "You have a limited number of tool calls in this session."
)
PRIME_PROMPT: Final = (
    _COMMON + " Save what the user asks you to keep with memory_capture: a definition or "
    "business rule as type business_knowledge (it goes to review), a personal note or "
    "preference as type episodic_event or personal_preference."
)
ANSWER_PROMPT: Final = (
    _COMMON + " Answer from what the platform holds: search it (its memory, insights, "
    "catalog and knowledge pages) and read what you need. End your reply with a line "
    "'FINAL ANSWER: <answer>' followed by a line 'SOURCES: <ref>, <ref>' listing the ref "
    "of every search hit, or the URN or id of every record, your answer relies on (a "
    "search hit's `ref` field, verbatim). If nothing you can find grounds an answer, reply "
    f"'FINAL ANSWER: {ABSTAIN_ANSWER}' and no SOURCES line."
)


def citing(answer: str, results: Sequence[str]) -> Findings:
    """The scored episode's reading: the refs its answer's ``SOURCES:`` line cites."""
    return Findings(sources=tuple(cited_sources(answer)))


class ProvenanceSuite:
    name = "provenance"
    identities_per_unit = 1  # one fresh identity per replicate: its memories are its own
    run_prefix = "prov"
    item_noun = "case"
    # The lifecycle's: an episode records whether it searched or captured the same way.
    tools = COUNTED  # the calls the platform's vocabulary names

    def default_path(self) -> str:
        return protocols.CASES_PUBLIC_V1

    def load(self, path: str) -> Loaded:
        cases = load_cases(path).cases
        return Loaded(list(cases), case_set_hash(cases), path)

    def entity(self, item: Any) -> str:
        return f"case:{item.id}"

    def item_hash(self, item: Any) -> str:
        return ""  # a case is bound by the case set's hash in run_started

    def passed(self, outcome: Outcome) -> bool:
        return not any(v is False for v in outcome.values())

    def unit_status(self, outcome: Outcome) -> str:
        failed = [check for check, v in outcome.items() if v is False]
        return "ok" if not failed else "failed " + ", ".join(failed)

    def settle(self, config: RunConfig, external: bool) -> None:
        """Each case runs k=2 times, on a fresh platform per unit when the platform is
        embedded (an external one is shared; fresh identities keep each replicate's
        memories apart). ``--cases`` names the case file or folder."""
        if "k" not in config.given:
            config.k = max(config.k, DEFAULT_K)
        elif config.k < 2:
            raise RunRefused("--suite provenance needs --k 2 or more: M1 compares the replicates")
        if "runtime_scope" not in config.given and not external:
            config.runtime_scope = "unit"

    def configure(self, record: RunRecord) -> None:
        pass  # nothing of its own: budgets and prompts are fixed

    async def run_unit(self, ctx: UnitContext) -> None:
        case: Case = ctx.plan.item
        who = ctx.plan.identities[0]
        for n, prompt in enumerate(case.prime, 1):
            ep = Episode(prime_stage(n), PRIME_PROMPT, prompt, case, BUDGET)
            await ctx.episode(ep, who)
        ep = Episode(SCORED, ANSWER_PROMPT, case.prompt, case, BUDGET)
        await ctx.episode(ep, who, citing)
        ctx.stage = RESOLVE
        finished = scored(ctx.log)
        cited = finished[1].sources if finished is not None else []
        # A platform that cannot resolve refs leaves them unresolved (judged so, never passed).
        platform = ctx.platform
        if isinstance(platform, RefCapability):
            for ref in cited[:MAX_SOURCES]:
                await platform.read_ref(ctx, ref)
        ctx.decisions(decide_case(case, ctx.log))
        await ctx.commit()
