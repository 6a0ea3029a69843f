"""The locomo suite: LoCoMo's questions asked of a platform that ingested the conversations.

One unit is one question (``SAMPLE:qN``). The units of one sample in one pass share one
pool identity, the identity of the sample's first unit in this process's plan
(``group_units``): that unit ingests every turn of every session, in order, as its own
episode ``ingest`` (one memory per turn, ``[D3:1 | DATE] Speaker: text``, written with the
platform's declared vocabulary, ``harness.platforms.vocabulary``), and the ``ingested``
decision records how many turns landed. The other units of the sample wait for it and
ask under that identity. Each question is asked in a fresh session, episode ``ask``, by
the run's agent; the one decision function (``projections.suites.locomo.decisions``)
grades it as ``replay --level rederive`` will. docs/locomo.md, "Ingestion", says why.

A unit's ``unit_started`` records the sample's identity as its teacher and its own as its
learner, so a full replay knows, from the unit alone, whether it ingested (the two are
the same) and under which identity it asked; a replay never waits for another unit.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
from collections.abc import Sequence
from typing import Any, Final

from benchledger import protocols
from benchledger.harness.agents.base import Agent, Episode, Turn, UnitInfo
from benchledger.harness.episode import COUNTED, run_episode
from benchledger.harness.errors import InfraError
from benchledger.harness.judge import Judge
from benchledger.harness.models.transport import ModelObserver
from benchledger.harness.record import RunConfig, RunRefused
from benchledger.harness.suites.base import Loaded, Outcome
from benchledger.harness.unit import UnitContext, UnitFailed, UnitPlan, identity_label
from benchledger.ledger.events import InfraErrorBody, RunRecord
from benchledger.ledger.ledger import StreamWriter
from benchledger.projections.card import Ruling
from benchledger.projections.suites.locomo.decisions import (
    ASK,
    F1,
    INGEST,
    JUDGE,
    ask_rulings,
    graded,
    ingest_ruling,
    judge_gold,
    judge_rulings,
)
from benchledger.projections.suites.locomo.items import (
    LocomoItem,
    item_hash,
    items_of,
    memory_text,
    run_config,
)
from benchledger.protocols import locomo
from benchledger.protocols.locomo import Sample

DEFAULT_DATA: Final = os.path.join(protocols.DATA_DIR, "locomo", "synthetic.json")
ASK_BUDGET: Final = 6  # tool calls a question's episode may make
DEFAULT_SEARCH_K: Final = 10  # hits the harness's search asks for (``--search-k``)
SYSTEM_PROMPT: Final = (
    "You are answering a question about a long conversation between two people, which is "
    "stored in the platform's memory, one memory per dialogue turn. Search the memory, then "
    "end your reply with a line 'FINAL ANSWER: <short answer>'. If the conversation does "
    "not say, answer 'FINAL ANSWER: no information available'."
)


class Ingester:
    """The harness's own writer of a haystack's turns (no model): the ``ingest`` episode's
    agent. One turn writes every memory; the next reports how many landed (the longmemeval
    suite's ingestion too)."""

    name = "ingest"
    model = ""
    records_model_calls = False

    def __init__(self, memories: Sequence[tuple[str, str]], empty: str) -> None:
        self.memories = memories  # (text, title) per turn, in order
        self.empty = empty  # the reply when there is nothing to write

    def for_unit(self, unit: UnitInfo) -> Agent:
        return self

    async def next_turn(
        self,
        episode: Episode,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        observer: ModelObserver | None = None,
    ) -> Turn:
        results = [m for m in messages if m["role"] == "tool"]
        if len(messages) > 1:  # the writes were made: report them
            landed = sum(not r.get("is_error") for r in results)
            return Turn(f"ingested {landed} of {len(results)} turns")
        vocab = episode.vocabulary
        if vocab is None:
            return Turn("ingested 0 of 0 turns: the platform declares no memory vocabulary")
        calls = [vocab.write_call(f"w{i}", text, title)
                 for i, (text, title) in enumerate(self.memories, start=1)]  # fmt: skip
        if not calls:
            return Turn(f"ingested 0 of 0 turns: {self.empty}")
        return Turn("", tuple(calls))


def memories(sample: Sample) -> list[tuple[str, str]]:
    """Every turn of ``sample`` as the memory ingestion writes, with its dialogue id."""
    return [(memory_text(t, s), t.dia_id) for s in sample.sessions for t in s.turns]


def turns(sample: Sample) -> int:
    """How many turns ``sample`` has (the ingest episode's budget)."""
    return sum(len(s.turns) for s in sample.sessions)


class LocomoSuite:
    name = "locomo"
    identities_per_unit = 1  # a unit's own; its sample's first unit's is shared (module doc)
    run_prefix = "lm"
    item_noun = "question"
    tools = COUNTED  # the calls the platform's vocabulary names
    default_search_k = DEFAULT_SEARCH_K  # a run's --search-k when not given (recorded)

    def __init__(self) -> None:
        self.loaded: locomo.LocomoSet | None = None
        # (sample, pass, the sample's identity) -> whether its ingestion landed: set by
        # the ingesting unit, awaited by the others (only those this process planned).
        self._expected: set[tuple[str, int, int]] = set()
        self._ingested: dict[tuple[str, int, int], asyncio.Future[bool]] = {}
        self.search_k = self.context_budget = 0  # from the run record (``configure``)
        self.judge: Judge | None = None  # ``--judge``: grades each answer (harness/judge.py)

    def use_judge(self, judge: Judge | None) -> None:
        """Grade every answer with ``judge`` too (a run's ``--judge``; a full replay's,
        served from the unit's log)."""
        self.judge = judge

    def default_path(self) -> str:
        return DEFAULT_DATA

    def load(self, path: str) -> Loaded:
        self.loaded = locomo.load(path)
        return Loaded(items_of(self.loaded.samples), self.loaded.sha256, path)

    def entity(self, item: Any) -> str:
        return f"sample:{item.sample.sample_id}"  # a sample's units share its memory

    def item_hash(self, item: Any) -> str:
        return item_hash(item)

    def passed(self, outcome: Outcome) -> bool:
        return outcome.get(F1) is True

    def unit_status(self, outcome: Outcome) -> str:
        return "right" if self.passed(outcome) else "not right"

    def settle(self, config: RunConfig, external: bool) -> None:
        """The units of a sample ask the memory its first unit ingested: one platform per
        pass, never one per unit."""
        if config.runtime_scope == "unit":
            raise RunRefused(
                "--suite locomo asks every question of a conversation the memory its first "
                "unit ingested: use --platform-scope pass (a platform per unit would be empty)"
            )

    def configure(self, record: RunRecord) -> None:
        """The search depth and the full-context budget the run recorded, which every ask
        episode carries (a run recorded before either: 0, its agents' own behaviour)."""
        self.search_k, self.context_budget = record.search_k, record.context_budget

    def run_config(self) -> dict[str, Any]:
        """``run_started.config``: the file's sha256 and every sample as loaded."""
        return run_config(self.loaded) if self.loaded is not None else {}

    def group_units(self, plans: Sequence[UnitPlan]) -> list[UnitPlan]:
        """Each unit's identities as (its sample's identity, its own): the sample's is the
        own identity of its first unit in ``plans``, per pass (that unit ingests)."""
        first: dict[tuple[str, int], int] = {}
        out = []
        for p in plans:
            own = p.identities[-1]
            key = (p.item.sample.sample_id, p.attempt)
            who = first.setdefault(key, own)
            self._expected.add((*key, who))
            out.append(dataclasses.replace(p, identities=(who, own)))
        return out

    def _future(self, key: tuple[str, int, int]) -> asyncio.Future[bool]:
        found = self._ingested.get(key)
        if found is None:
            found = self._ingested[key] = asyncio.get_running_loop().create_future()
        return found

    async def _ingest(self, ctx: UnitContext, item: LocomoItem, who: int) -> None:
        """Write every turn of the item's sample as identity ``who``, as the ``ingest`` episode.

        Never retried whole: a retry would write the turns that landed twice. A failure
        ends the unit (and the sample's other units) as an infrastructure failure."""
        ctx.stage = INGEST
        sample = item.sample
        ep = Episode(INGEST, "", f"ingest {sample.sample_id}: {turns(sample)} turns", item,
                     max(1, turns(sample)))  # fmt: skip
        try:
            writer = Ingester(memories(sample), "the sample has no turns")
            await run_episode(writer, ctx.platform, ctx.w, ep, who,
                              identity_label(ctx.platform, who), tools=ctx.tools)  # fmt: skip
        except InfraError as exc:
            ctx.w.append(InfraErrorBody(stage=INGEST, error=exc.kind, message=exc.message,
                                        retry=0, retryable=False))  # fmt: skip
            await ctx.commit()
            raise UnitFailed(f"{INGEST}: {exc}") from None
        ctx.decisions(ingest_ruling(ctx.log))
        await ctx.commit()

    async def run_unit(self, ctx: UnitContext) -> None:
        item: LocomoItem = ctx.plan.item
        who, own = ctx.plan.identities[0], ctx.plan.identities[-1]
        key = (item.sample.sample_id, ctx.plan.attempt, who)
        if who == own:
            waiting = self._future(key) if key in self._expected else None
            done = False
            try:
                await self._ingest(ctx, item, who)
                done = True
            finally:  # the others ask even when some writes failed: ``ingested`` says so
                if waiting is not None and not waiting.done():
                    waiting.set_result(done)
        elif key in self._expected and not await self._future(key):
            raise UnitFailed(f"{INGEST}: the ingestion of {item.sample.sample_id} failed in "
                             "the sample's first unit")  # fmt: skip
        q = item.question
        ask = Episode(ASK, SYSTEM_PROMPT, q.question, item, ASK_BUDGET,
                      search_k=self.search_k, context_budget=self.context_budget)  # fmt: skip
        await ctx.episode(ask, who)
        ctx.decisions(ask_rulings(item, ctx.log))
        await ctx.commit()
        if self.judge is not None and F1 in ctx.outcome:
            await self._judge(ctx, item, self.judge)

    async def _judge(self, ctx: UnitContext, item: LocomoItem, judge: Judge) -> None:
        """The judge's verdict on the recorded answer: its calls, then ``locomo_j``."""
        ctx.stage = JUDGE
        ctx.decisions(await judge_answer(judge, ctx.w, item))
        await ctx.commit()


async def judge_answer(judge: Judge, w: StreamWriter, item: LocomoItem) -> list[Ruling]:
    """Have ``judge`` grade the answer recorded on ``w`` (its calls staged there); the
    judge's rulings, to append ([] before an answer). A run's unit and ``regrade`` both."""
    asked = graded(item, w.log)
    if asked is None:
        return []
    await judge.grade(w, item.question.question, judge_gold(item), asked.prediction,
                      [asked.finished])  # fmt: skip
    return judge_rulings(item, w.log)
