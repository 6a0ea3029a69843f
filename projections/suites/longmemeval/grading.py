"""A LongMemEval answer graded without a judge: a bound, clearly named (docs/longmemeval.md,
"Answers").

LongMemEval grades answers with a model judge and one prompt per question type
(``evaluate_qa.py``'s ``get_anscheck_prompt``); ``PROMPT`` names the prompt each question
gets and ``judge_type`` the type a run's judge picks it by (``protocols.judges.LME_TYPES``;
its verdict is the decision ``decisions.JUDGE``). Beside it, judged or not, two judge-free
numbers, pure and deterministic:

- ``token_f1``: SQuAD-style token F1 of the answer against the gold answer (LoCoMo's
  normalisation, no stemming); an abstention question scores 1 when the answer abstains
  (``abstains``), else 0;
- ``contains_gold``: whether the normalised gold answer is a substring of the normalised
  answer (an abstention question: whether it abstains), the check LongMemEval's judge is
  asked to make for most types ("answer yes if the response contains the correct answer").
"""

from __future__ import annotations

from collections import Counter
from typing import Final

from benchledger.projections.suites.locomo.grading import ABSTENTIONS, normalise
from benchledger.protocols.longmemeval import Question

# evaluate_qa.py's prompt per question type (its ``task``); an abstention question gets
# the abstention prompt whatever its type.
CONTAINS: Final = "contains"
TEMPORAL: Final = "temporal"
UPDATE: Final = "knowledge-update"
PREFERENCE: Final = "preference"
ABSTENTION: Final = "abstention"
PROMPT: Final = {
    "single-session-user": CONTAINS,
    "single-session-assistant": CONTAINS,
    "multi-session": CONTAINS,
    "temporal-reasoning": TEMPORAL,
    "knowledge-update": UPDATE,
    "single-session-preference": PREFERENCE,
}


def prompt_of(question: Question) -> str:
    """The evaluate_qa.py prompt a judge would grade ``question``'s answer with."""
    return ABSTENTION if question.abstention else PROMPT[question.type]


def judge_type(question: Question) -> str:
    """The question type whose prompt the judge grades ``question``'s answer with
    (``protocols.judges.LME_TYPES``): ``abstention`` for an ``_abs`` question."""
    return ABSTENTION if question.abstention else question.type


def abstains(prediction: str) -> bool:
    """Whether the answer says the history does not hold it (LoCoMo's phrases, the reader's)."""
    low = prediction.lower()
    return any(phrase in low for phrase in ABSTENTIONS)


def token_f1(prediction: str, gold: str) -> float:
    """Token F1 of the normalised texts (0 when either has no token)."""
    pred, ref = normalise(prediction).split(), normalise(gold).split()
    same = sum((Counter(pred) & Counter(ref)).values())
    if not pred or not ref or same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(ref)
    return 2 * precision * recall / (precision + recall)


def f1_bound(question: Question, prediction: str) -> float:
    """The question's token-F1 bound (module docstring)."""
    if question.abstention:
        return 1.0 if abstains(prediction) else 0.0
    return token_f1(prediction, question.answer)


def contains_gold(question: Question, prediction: str) -> bool:
    """Whether the answer holds the gold answer (module docstring)."""
    if question.abstention:
        return abstains(prediction)
    gold = normalise(question.answer)
    return bool(gold) and gold in normalise(prediction)


__all__ = ["PROMPT", "abstains", "contains_gold", "f1_bound", "judge_type", "prompt_of", "token_f1"]
