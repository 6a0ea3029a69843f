"""The longmemeval suite's decision function: a question's verdicts from its recorded evidence.

One function rules on a unit, live (``harness.suites.longmemeval``) and re-derived
(``replay --level rederive``), from the unit's events and its item alone
(docs/longmemeval.md):

- ``ingested`` (stage ``ingest``): every turn of the question's haystack written without
  an error (the locomo suite's ruling, ``locomo.decisions.ingest_ruling``);
- ``longmemeval_answer`` (stage ``ask``): the answer (``protocols.grading.final_answer``)
  graded by the judge-free bound (``grading``): verdict True when it contains the gold
  answer (an abstention question: when it abstains); the token F1 is in the reason;
- ``longmemeval_retrieval`` (stage ``ask``): the turn ids the ask episode's searches
  retrieved (``locomo.decisions.retrieved`` reading this suite's ``[SESSION_N | DATE]``
  memories), ranked in LongMemEval's turn-level corpus (``ranking``); verdict True when
  every evidence turn was retrieved, None for a question LongMemEval's retrieval
  evaluation leaves out (abstention, or no user turn marked ``has_answer``).

- ``longmemeval_judge`` (stage ``judge``; only in a run with a judge, ``run --judge`` or
  ``regrade``): the judge's verdict on the answer, read by ``protocols.judges.verdict_of``
  from each recorded ``model_call`` of the episode ``judge`` (LongMemEval's reading: "yes"
  is a pass) by the locomo suite's reader (``locomo.decisions.judged``): True when more
  than half of the samples said yes, None when no reply could be read; it cites the
  judge's calls. The prompt each question got (evaluate_qa.py's for its type,
  ``grading.prompt_of``, unless the run named another) is in the recorded request.
"""

from __future__ import annotations

from typing import Final, NamedTuple

from benchledger.ledger.events import GraderDecisionBody, InfraErrorBody
from benchledger.projections.card import Ruling
from benchledger.projections.suites.locomo.decisions import (
    ASK,
    INGEST,
    INGESTED,
    OURS,
    Events,
    finished,
    ingest_ruling,
    judged,
    retrieved,
)
from benchledger.projections.suites.locomo.decisions import JUDGE as JUDGE_STAGE
from benchledger.projections.suites.longmemeval import grading, ranking
from benchledger.projections.suites.longmemeval.items import LongMemEvalItem, memory_id
from benchledger.protocols.grading import final_answer

ANSWER: Final = "longmemeval_answer"
RETRIEVAL: Final = "longmemeval_retrieval"
JUDGE: Final = "longmemeval_judge"  # a judge's verdict per question (module doc)


class Asked(NamedTuple):
    """What one question's unit recorded and how it is graded."""

    prediction: str
    finished: int  # the ask episode's episode_finished seq
    retrieved: tuple[str, ...]  # turn ids (every role), rank order
    calls: tuple[int, ...]  # the seqs of the tool calls that returned any
    ranks: tuple[int, ...]  # the retrieved turns' places in the turn-level corpus
    f1: float
    contains: bool


def graded(item: LongMemEvalItem, events: Events) -> Asked | None:
    """The question's recorded answer and retrieval, graded (None: not asked yet)."""
    found = finished(events, ASK)
    if found is None:
        return None
    seq, done = found
    q = item.question
    prediction = final_answer(done.final_answer)
    ids, calls = retrieved(events, memory_id)
    ranks = tuple(ranking.rankings(ranking.corpus(q), ids))
    return Asked(prediction, seq, ids, calls, ranks, grading.f1_bound(q, prediction),
                 grading.contains_gold(q, prediction))  # fmt: skip


def decide_unit(item: LongMemEvalItem, events: Events) -> list[Ruling]:
    """The unit's rulings: ``ingested``, then the ask's, then the judge's."""
    return ingest_ruling(events) + ask_rulings(item, events) + judge_rulings(item, events)


def judge_rulings(item: LongMemEvalItem, events: Events) -> list[Ruling]:
    """``longmemeval_judge`` when the answer was judged ([] otherwise)."""
    found = judged(events)
    asked = graded(item, events)
    if found is None or asked is None:
        return []
    said = ["yes" if v else "no" if v is False else "not understood" for v in found.verdicts]
    n = len(said)
    why = (
        f"the judge said {said[0]}"
        if n == 1
        else f"the judge's {n} samples said {', '.join(said)} (agreement {found.agreement:.2f})"
    )
    body = GraderDecisionBody(stage=JUDGE_STAGE, check=JUDGE, verdict=found.verdict,
                              reason=why, answer=asked.prediction, expected=item.question.answer,
                              origin=OURS)  # fmt: skip
    return [Ruling(body, found.calls)]


def ask_rulings(item: LongMemEvalItem, events: Events) -> list[Ruling]:
    """``longmemeval_answer`` and ``longmemeval_retrieval``; [] before the answer or after
    a harness failure in the ask."""
    asked = graded(item, events)
    if asked is None or any(isinstance(b, InfraErrorBody) and b.stage == ASK for _, b in events):
        return []
    q = item.question
    kind = "abstains" if q.abstention else "contains the gold answer"
    why = (f"{kind}: {'yes' if asked.contains else 'no'}; token F1 {asked.f1:.4f} "
           f"(judge-free bound; a judge would use evaluate_qa.py's {grading.prompt_of(q)} "
           "prompt)")  # fmt: skip
    out = [Ruling(GraderDecisionBody(stage=ASK, check=ANSWER, verdict=asked.contains,
                                     reason=why, answer=asked.prediction, expected=q.answer,
                                     origin=OURS), (asked.finished,))]  # fmt: skip
    found = ranking.corpus(q)
    verdict: bool | None
    if not ranking.scored(q):
        verdict = None
        why = "left out, as LongMemEval's retrieval evaluation leaves it out: " + (
            "an abstention question" if q.abstention else "no user turn has_answer"
        )
    else:
        at = {found.ids[r]: n for n, r in enumerate(asked.ranks, start=1)}
        hits = {e: at.get(e) for e in sorted(found.evidence)}
        verdict = all(r is not None for r in hits.values())
        shown = ", ".join(asked.retrieved[:10]) + (" ..." if asked.retrieved[10:] else "")
        why = (f"{sum(r is not None for r in hits.values())} of {len(hits)} evidence turns "
               f"retrieved (ranks among the user turns {hits}); retrieved in rank order: "
               f"{shown or 'none'}")  # fmt: skip
    out.append(Ruling(GraderDecisionBody(stage=ASK, check=RETRIEVAL, verdict=verdict,
                                         reason=why, answer=" ".join(asked.retrieved),
                                         expected=sorted(found.evidence), origin=OURS),
                      asked.calls or (asked.finished,)))  # fmt: skip
    return out


__all__ = ["ANSWER", "ASK", "INGEST", "INGESTED", "JUDGE", "JUDGE_STAGE", "RETRIEVAL", "Asked",
           "ask_rulings", "decide_unit", "graded", "judge_rulings"]  # fmt: skip
