"""The scripted agent on a LoCoMo (or LongMemEval) question: one search, then the gold
answer (plumbing only).

Deterministic and model-free. It searches the session's memory with the question (the
platform's declared vocabulary, ``Episode.vocabulary``; k = 10) so the retrieval metrics have a
search to read, then answers the question's gold answer (for an open-domain question,
category 3, its first ``;``-separated alternative, the one LoCoMo grades against), or, for
an adversarial question (category 5), "no information available", the answer LoCoMo
scores right. Its F1 checks the suite's recording and grading end to end, never memory:
only its retrieval metrics measure the platform. A LongMemEval question gets its gold
answer, or "no information available" when it is an abstention question.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, Final

from benchledger.harness.agents.base import Episode, Turn
from benchledger.projections.suites.locomo.grading import ABSTENTIONS, ADVERSARIAL, OPEN_DOMAIN
from benchledger.projections.suites.locomo.items import LocomoItem
from benchledger.projections.suites.longmemeval.items import LongMemEvalItem

SEARCH_K: Final = 10


def locomo_turn(episode: Episode, messages: list[dict[str, Any]], tools: Collection[str]) -> Turn:
    """The next turn of a LoCoMo question's episode: a search, then the gold answer (pure)."""
    item = episode.protocol
    assert isinstance(item, LocomoItem | LongMemEvalItem)  # ScriptedAgent.decide sends only these
    searched = any(m["role"] == "tool" for m in messages)
    vocab = episode.vocabulary
    if not searched and vocab is not None:
        return Turn("", (vocab.search_call("call-1", item.question.question, SEARCH_K),))
    if isinstance(item, LongMemEvalItem):
        lq = item.question
        return Turn(f"FINAL ANSWER: {ABSTENTIONS[0] if lq.abstention else lq.answer}")
    q = item.question
    said = q.answer.split(";")[0].strip() if q.category == OPEN_DOMAIN else q.answer
    if q.category == ADVERSARIAL:
        said = ABSTENTIONS[0]
    return Turn(f"FINAL ANSWER: {said}")
