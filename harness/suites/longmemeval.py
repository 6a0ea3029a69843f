"""The longmemeval suite: each LongMemEval question asked of a platform that ingested its own
haystack (docs/longmemeval.md).

One unit is one question (its ``question_id``), under its own pool identity: episode
``ingest`` writes every turn of every haystack session, in haystack order, one memory per
turn (``[SESSION_N | DATE] role: content``, with the platform's declared vocabulary, by the
locomo suite's ``Ingester``), and the ``ingested`` decision records how many landed; then
episode ``ask``, in a fresh session, puts the question to the run's agent with the
question's date; with a judge (``--judge``), episode ``judge`` has it grade the answer with
evaluate_qa.py's prompt for the question's type (the abstention prompt for an ``_abs``
question; ``--judge-prompt`` names one prompt for every question). The one decision
function (``projections.suites.longmemeval.decisions``) grades it as ``replay --level
rederive`` will. Each question's haystack is its own, so no unit waits for another and a
full replay re-runs a unit from its events alone.
"""

from __future__ import annotations

import os
from typing import Any, Final

from benchledger import protocols
from benchledger.harness.agents.base import Episode
from benchledger.harness.episode import COUNTED, run_episode
from benchledger.harness.errors import InfraError
from benchledger.harness.judge import Judge
from benchledger.harness.record import RunConfig
from benchledger.harness.suites.base import Loaded, Outcome
from benchledger.harness.suites.locomo import Ingester
from benchledger.harness.unit import UnitContext, UnitFailed, identity_label
from benchledger.ledger.events import InfraErrorBody, RunRecord
from benchledger.ledger.ledger import StreamWriter
from benchledger.projections.card import Ruling
from benchledger.projections.suites.locomo.decisions import ingest_ruling
from benchledger.projections.suites.longmemeval.decisions import (
    ANSWER,
    ASK,
    INGEST,
    JUDGE_STAGE,
    ask_rulings,
    graded,
    judge_rulings,
)
from benchledger.projections.suites.longmemeval.grading import judge_type
from benchledger.projections.suites.longmemeval.items import (
    LongMemEvalItem,
    item_hash,
    items_of,
    memory_text,
    run_config,
    turn_id,
    turns,
)
from benchledger.protocols import longmemeval
from benchledger.protocols.judges import PER_TYPE

DEFAULT_DATA: Final = os.path.join(protocols.DATA_DIR, "longmemeval", "synthetic.json")
ASK_BUDGET: Final = 6  # tool calls a question's episode may make
SYSTEM_PROMPT: Final = (
    "You are a chat assistant with a long history of past conversations with this user, "
    "stored in the platform's memory, one memory per message, each led by its session's "
    "date. Search the memory, then end your reply with a line 'FINAL ANSWER: <short "
    "answer>'. If the history does not say, answer 'FINAL ANSWER: no information available'."
)


def user_prompt(item: LongMemEvalItem) -> str:
    """The question as asked: on its date, as LongMemEval's readers are told."""
    q = item.question
    return f"Current date: {q.date}\nQuestion: {q.question}"


def memories(item: LongMemEvalItem) -> list[tuple[str, str]]:
    """Every turn of the question's haystack as the memory ingestion writes, with its id."""
    return [(memory_text(t, s, i), turn_id(s, i))
            for s in item.question.sessions for i, t in enumerate(s.turns)]  # fmt: skip


class LongMemEvalSuite:
    name = "longmemeval"
    identities_per_unit = 1
    run_prefix = "lme"
    item_noun = "question"
    tools = COUNTED

    default_judge_prompt = PER_TYPE  # evaluate_qa.py's prompt for each question's type

    def __init__(self) -> None:
        self.loaded: longmemeval.LongMemEvalSet | None = None
        self.judge: Judge | None = None  # ``--judge``: grades each answer (harness/judge.py)

    def use_judge(self, judge: Judge | None) -> None:
        """Grade every answer with ``judge`` too (a run's ``--judge``; a full replay's,
        served from the unit's log)."""
        self.judge = judge

    def default_path(self) -> str:
        return DEFAULT_DATA

    def load(self, path: str) -> Loaded:
        self.loaded = longmemeval.load(path)
        return Loaded(items_of(self.loaded.questions), self.loaded.sha256, path)

    def entity(self, item: Any) -> str:
        return f"question:{item.id}"  # a question's haystack is its own

    def item_hash(self, item: Any) -> str:
        return item_hash(item)

    def passed(self, outcome: Outcome) -> bool:
        return outcome.get(ANSWER) is True

    def unit_status(self, outcome: Outcome) -> str:
        return "right" if self.passed(outcome) else "not right"

    def settle(self, config: RunConfig, external: bool) -> None:
        pass  # a unit ingests its own haystack: any platform scope works

    def configure(self, record: RunRecord) -> None:
        pass

    def run_config(self) -> dict[str, Any]:
        """``run_started.config``: the file's sha256 and every question as loaded."""
        return run_config(self.loaded) if self.loaded is not None else {}

    async def _ingest(self, ctx: UnitContext, item: LongMemEvalItem, who: int) -> None:
        """Write every turn of the question's haystack as identity ``who``. Never retried
        whole (a retry would write the turns that landed twice): a failure ends the unit."""
        ctx.stage = INGEST
        n = turns(item.question)
        ep = Episode(INGEST, "", f"ingest {item.id}: {n} turns", item, max(1, n))
        try:
            writer = Ingester(memories(item), "the haystack has no turns")
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
        item: LongMemEvalItem = ctx.plan.item
        who = ctx.plan.identities[-1]
        await self._ingest(ctx, item, who)
        await ctx.episode(Episode(ASK, SYSTEM_PROMPT, user_prompt(item), item, ASK_BUDGET), who)
        ctx.decisions(ask_rulings(item, ctx.log))
        await ctx.commit()
        if self.judge is not None and ANSWER in ctx.outcome:
            ctx.stage = JUDGE_STAGE
            ctx.decisions(await judge_answer(self.judge, ctx.w, item))
            await ctx.commit()


async def judge_answer(judge: Judge, w: StreamWriter, item: LongMemEvalItem) -> list[Ruling]:
    """Have ``judge`` grade the answer recorded on ``w`` with the prompt for the question's
    type (``grading.judge_type``), its calls staged there; the judge's rulings, to append
    ([] before an answer). A run's unit and ``regrade`` both."""
    asked = graded(item, w.log)
    if asked is None:
        return []
    q = item.question
    await judge.grade(w, q.question, q.answer, asked.prediction, [asked.finished],
                      question_type=judge_type(q))  # fmt: skip
    return judge_rulings(item, w.log)
