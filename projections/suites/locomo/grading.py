"""LoCoMo's grading, as LoCoMo grades (docs/locomo.md, "Grading"): pure and deterministic.

Answers: token F1 after normalisation and Porter stemming, with LoCoMo's rule per category
(1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop, 5 adversarial). Retrieval: evidence
recall (dialogue- or session-level), recall@k and reciprocal rank of evidence among the
retrieved dialogue ids in rank order.

The stemmer is nltk's ``PorterStemmer`` in its default mode, the one LoCoMo's evaluation
uses; a core dependency (docs/locomo.md), imported on first use, so a run that grades no
LoCoMo answer never loads it.
"""

from __future__ import annotations

import functools
import re
import string
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Final

MULTI_HOP: Final = 1
TEMPORAL: Final = 2
OPEN_DOMAIN: Final = 3
SINGLE_HOP: Final = 4
ADVERSARIAL: Final = 5
CATEGORIES: Final = (MULTI_HOP, TEMPORAL, OPEN_DOMAIN, SINGLE_HOP, ADVERSARIAL)

# An adversarial question is answered right by saying the conversation does not hold it.
ABSTENTIONS: Final = ("no information available", "not mentioned")
RECALL_KS: Final = (1, 5, 10, 25, 50)  # LoCoMo's Table 3 reports 5, 10, 25 and 50

_DROPPED_WORDS = re.compile(r"\b(a|an|the|and)\b")
_PUNCTUATION = frozenset(string.punctuation)


def normalise(text: str) -> str:
    """``text`` as LoCoMo compares it: commas dropped, lower case, punctuation removed, the
    words a, an, the and ``and`` removed, whitespace collapsed to single spaces."""
    text = text.replace(",", "").lower()
    text = "".join(c for c in text if c not in _PUNCTUATION)
    text = _DROPPED_WORDS.sub(" ", text)
    return " ".join(text.split())


@functools.cache
def _stemmer() -> Callable[[str], str]:
    # Lazy: nltk is needed only when LoCoMo answers are graded.
    from nltk.stem import PorterStemmer

    return PorterStemmer().stem


def tokens(text: str) -> list[str]:
    """The stemmed tokens of ``text`` after ``normalise``."""
    stem = _stemmer()
    return [stem(w) for w in normalise(text).split()]


def f1(prediction: str, gold: str) -> float:
    """Token F1 of ``prediction`` against ``gold``: 0 when they share no token (so also when
    either is empty), else 2PR/(P+R) over the multiset of shared stemmed tokens."""
    pred, ref = tokens(prediction), tokens(gold)
    same = sum((Counter(pred) & Counter(ref)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(ref)
    return 2 * precision * recall / (precision + recall)


def multi_answer_f1(prediction: str, gold: str) -> float:
    """Category 1: both split on commas; the mean, over the gold parts, of the best F1 any
    predicted part reaches against that part."""
    preds = [p.strip() for p in prediction.split(",")]
    golds = [g.strip() for g in gold.split(",")]
    return sum(max(f1(p, g) for p in preds) for g in golds) / len(golds)


def abstains(prediction: str) -> bool:
    """Whether ``prediction`` says the conversation does not hold the answer (LoCoMo's two
    phrases, any case, anywhere in the text)."""
    low = prediction.lower()
    return any(phrase in low for phrase in ABSTENTIONS)


def score(prediction: str, gold: str, category: int) -> float:
    """The score LoCoMo gives ``prediction`` for a question of ``category`` with answer
    ``gold`` (ignored for category 5): in [0, 1]. ValueError for an unknown category."""
    if category == MULTI_HOP:
        return multi_answer_f1(prediction, gold)
    if category == OPEN_DOMAIN:
        return f1(prediction, gold.split(";")[0].strip())
    if category in (TEMPORAL, SINGLE_HOP):
        return f1(prediction, gold)
    if category == ADVERSARIAL:
        return 1.0 if abstains(prediction) else 0.0
    raise ValueError(f"LoCoMo has no question category {category!r}; categories are 1 to 5")


def session_of(dia_id: str) -> str:
    """The session a dialogue id lies in: ``D3:1`` -> ``S3`` (a session id stays itself)."""
    head = dia_id.split(":", 1)[0].strip()
    return "S" + head[1:] if head[:1] in ("D", "S") else head


def evidence_recall(evidence: Sequence[str], retrieved: Sequence[str]) -> float | None:
    """The share of ``evidence`` found among ``retrieved``; None when there is no evidence.

    Retrieved dialogue ids (``D3:1``) are matched id for id. When every retrieved id is a
    session (``S3``), retrieval was session-level and an evidence id counts as found when
    its session was retrieved.
    """
    if not evidence:
        return None
    got = {r.strip() for r in retrieved}
    if got and all(r.startswith("S") for r in got):
        found = sum(session_of(e) in got for e in evidence)
    else:
        found = sum(e.strip() in got for e in evidence)
    return found / len(evidence)


def recall_at(k: int, evidence: Sequence[str], ranked: Sequence[str]) -> float | None:
    """recall@k: the share of the distinct evidence ids found among the first ``k`` retrieved
    dialogue ids (in rank order, best first); None when there is no evidence."""
    wanted = {e.strip() for e in evidence}
    if not wanted:
        return None
    top = {r.strip() for r in ranked[:k]}
    return len(wanted & top) / len(wanted)


def reciprocal_rank(evidence: Sequence[str], ranked: Sequence[str]) -> float | None:
    """1/r for the 1-based rank r of the first retrieved dialogue id that is evidence, 0 when
    none is; None when there is no evidence. MRR is its mean over questions."""
    wanted = {e.strip() for e in evidence}
    if not wanted:
        return None
    for rank, dia_id in enumerate(ranked, start=1):
        if dia_id.strip() in wanted:
            return 1.0 / rank
    return 0.0
