"""LongMemEval's retrieval metrics, as its ``src/retrieval/eval_utils.py`` computes them.

Pure and deterministic (docs/longmemeval.md, "Retrieval metrics"). The corpus is
LongMemEval's turn-level one (``run_retrieval.py``'s ``process_item_flat_index``): every
user turn of the question's haystack, in haystack order, its id ``SESSION_N`` (N its
1-based place in the session, counting every turn). A turn is evidence when its session
is one of ``answer_session_ids`` and it has ``has_answer: true`` (LongMemEval marks
the other user turns of an evidence session ``noans``: mapped to sessions they are a
session of their own, never the evidence session, so they are keyed apart here too).

The ranking is what the platform returned: the turn ids the question's searches retrieved,
best first, each once, kept where they are in the corpus (an assistant turn, which the
platform holds too, has no place in it). Then, at cut-off k:

- turn level (``evaluate_retrieval``): recall_any (any evidence turn in the top k),
  recall_all (every one) and NDCG (binary relevance; ``dcg`` = rel_1 + Σ_{r≥2} rel_r/log2(r)
  over the 1-based ranks r of the top k, so ranks 1 and 2 weigh the same, as eval_utils.py's
  ``dcg`` does; over the ideal ordering of the whole corpus);
- session level (``evaluate_retrieval_turn2session``): each turn mapped to its session,
  and k widened to the smallest cut-off whose top holds k distinct sessions (its
  "effective k", never past one more than the corpus size), then the same three.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Final, NamedTuple

from benchledger.protocols.longmemeval import Question

KS: Final = (1, 3, 5, 10, 30, 50)  # the cut-offs LongMemEval reports
NOANS: Final = "#noans"  # a non-evidence turn's session key, in an evidence session


class Corpus(NamedTuple):
    """A question's turn-level corpus: ids, each one's session key, the evidence ids."""

    ids: tuple[str, ...]
    sessions: tuple[str, ...]
    evidence: frozenset[str]

    @property
    def evidence_sessions(self) -> frozenset[str]:
        return frozenset(s for i, s in zip(self.ids, self.sessions, strict=True)
                         if i in self.evidence)  # fmt: skip


def corpus(question: Question) -> Corpus:
    """The question's turn-level corpus (module docstring)."""
    answers = set(question.answer_session_ids)
    ids: list[str] = []
    keys: list[str] = []
    evidence: set[str] = set()
    for session in question.sessions:
        for i, turn in enumerate(session.turns):
            if turn.role != "user":
                continue
            tid = f"{session.id}_{i + 1}"
            ids.append(tid)
            if session.id in answers and not turn.has_answer:
                keys.append(session.id + NOANS)
            else:
                keys.append(session.id)
                if session.id in answers:
                    evidence.add(tid)
    return Corpus(tuple(ids), tuple(keys), frozenset(evidence))


def rankings(found: Corpus, retrieved: Sequence[str]) -> list[int]:
    """The corpus positions of the retrieved turn ids, in rank order (an id the corpus does
    not hold is left out; an id held twice is at its first place)."""
    first: dict[str, int] = {}
    for i, tid in enumerate(found.ids):
        first.setdefault(tid, i)
    return [first[t] for t in retrieved if t in first]


def dcg(relevances: Sequence[float], k: int) -> float:
    """Discounted cumulative gain of the first ``k`` relevances, as eval_utils.py's: the
    first undiscounted, the one at 1-based rank r >= 2 divided by log2(r)."""
    top = list(relevances)[:k]
    if not top:
        return 0.0
    return top[0] + sum(r / math.log2(i) for i, r in enumerate(top[1:], start=2))


def _evaluate(ranks: Sequence[int], correct: frozenset[str], ids: Sequence[str], k: int
              ) -> tuple[float, float, float]:  # fmt: skip
    recalled = {ids[i] for i in ranks[:k]}
    recall_any = float(any(d in recalled for d in correct))
    recall_all = float(all(d in recalled for d in correct))
    relevances = [1 if d in correct else 0 for d in ids]
    ideal = dcg(sorted(relevances, reverse=True), k)
    actual = dcg([relevances[i] for i in ranks[:k]], k)
    return recall_any, recall_all, (actual / ideal if ideal else 0.0)


def turn_level(found: Corpus, ranks: Sequence[int], k: int) -> tuple[float, float, float]:
    """recall_any, recall_all and NDCG at ``k`` over the turns."""
    return _evaluate(ranks, found.evidence, found.ids, k)


def effective_k(sessions: Sequence[str], ranks: Sequence[int], k: int) -> int:
    """The smallest cut-off from ``k`` whose top ``ranks`` hold ``k`` distinct sessions
    (LongMemEval's rule: it stops one past the corpus size)."""
    eff = k
    while eff <= len(sessions) and len({sessions[i] for i in ranks[:eff]}) < k:
        eff += 1
    return eff


def session_level(found: Corpus, ranks: Sequence[int], k: int) -> tuple[float, float, float]:
    """recall_any, recall_all and NDCG at ``k`` with the turns mapped to their sessions."""
    eff = effective_k(found.sessions, ranks, k)
    return _evaluate(ranks, found.evidence_sessions, found.sessions, eff)


def scored(question: Question) -> bool:
    """Whether LongMemEval's retrieval evaluation scores the question: not an abstention
    question, and some user turn of its haystack marked ``has_answer``."""
    if question.abstention:
        return False
    return any(t.has_answer and t.role == "user" for s in question.sessions for t in s.turns)


__all__ = ["KS", "Corpus", "corpus", "dcg", "effective_k", "rankings", "scored",
           "session_level", "turn_level"]  # fmt: skip
