"""Judge prompts: the shipped ones, one's own from a file, filled in, and a verdict read back.

A judge prompt is a template with three fields, ``{question}``, ``{gold}`` and ``{answer}``,
sent as one user message (docs/locomo.md, "The judge"). Shipped (``data/judges/``, their
sources in its NOTICE.md): ``lenient`` (LoCoMo's J as memory vendors run it: generous, on
topic is CORRECT), ``strict`` (every detail of the gold answer), and LongMemEval's
answer-check prompt per question type (``judge_prompt("longmemeval", question_type=...)``).
``judge_prompt("longmemeval")`` without a type is the set of them (its text a JSON object,
question type -> template, so a run records every one it may use), and ``for_question``
picks the question's own from it (docs/longmemeval.md, "Answers").
A prompt is pinned by the sha256 of its text, which a run records with the text.

``verdict_of`` reads a judge's reply as a verdict, a pure function of the recorded text,
so re-derivation reads the same verdict from the recorded call.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from typing import Final, NamedTuple

from benchledger.protocols import DATA_DIR
from benchledger.protocols.errors import InvalidInput, Problem

__all__ = [
    "FIELDS",
    "LME_TYPES",
    "PER_TYPE",
    "SHIPPED",
    "JudgePrompt",
    "fill",
    "for_question",
    "judge_prompt",
    "prompt_file",
    "verdict_of",
]

FIELDS: Final = ("{question}", "{gold}", "{answer}")
_DIR: Final = os.path.join(DATA_DIR, "judges")
SHIPPED: Final = ("lenient", "strict", "longmemeval")
PER_TYPE: Final = "longmemeval"  # the prompt that is one per question type
# LongMemEval's question types -> its prompt (evaluate_qa.py, get_anscheck_prompt).
LME_TYPES: Final = {
    "single-session-user": "lme-default",
    "single-session-assistant": "lme-default",
    "multi-session": "lme-default",
    "temporal-reasoning": "lme-temporal-reasoning",
    "knowledge-update": "lme-knowledge-update",
    "single-session-preference": "lme-single-session-preference",
    "abstention": "lme-abstention",
}


class JudgePrompt(NamedTuple):
    """A judge prompt: its name (a shipped one's, or ``file:NAME``), its text and the
    sha256 of the text's UTF-8 bytes."""

    name: str
    text: str
    sha256: str


def _prompt(name: str, text: str) -> JudgePrompt:
    return JudgePrompt(name, text, hashlib.sha256(text.encode()).hexdigest())


def judge_prompt(name: str, question_type: str = "") -> JudgePrompt:
    """A shipped prompt by name; ``longmemeval`` needs the question's ``question_type``
    (one of ``LME_TYPES``; ``abstention`` for an ``_abs`` question), or none for the set
    of them (module docstring). ValueError, one line, for an unknown name or type."""
    if name == PER_TYPE and not question_type:
        texts = {t: judge_prompt(PER_TYPE, t).text for t in LME_TYPES}
        return _prompt(PER_TYPE, json.dumps(texts, sort_keys=True, ensure_ascii=False))
    if name == "longmemeval" or name.startswith("lme-"):
        file = LME_TYPES.get(question_type) if name == "longmemeval" else name
        if file is None or file not in LME_TYPES.values():
            known = ", ".join(LME_TYPES)
            raise ValueError(
                f"judge prompt {name}: question_type {question_type!r} is not one of {known}"
            )
        name = file
    elif name not in SHIPPED:
        raise ValueError(
            f"judge prompt {name!r} is not shipped: use one of {', '.join(SHIPPED)}, or "
            "--judge-prompt FILE for your own"
        )
    with open(os.path.join(_DIR, f"{name}.txt"), encoding="utf-8") as f:
        return _prompt(name, f.read())


def for_question(prompt: JudgePrompt, question_type: str) -> JudgePrompt:
    """The prompt a question of ``question_type`` is judged with: the set's own for its type
    (read from the set's recorded text, so a replay uses what the run recorded), any other
    prompt as it is. ValueError, one line, when the set has no prompt for the type."""
    if prompt.name != PER_TYPE:
        return prompt
    try:
        texts = json.loads(prompt.text)
        text = texts[question_type]
    except (ValueError, KeyError, TypeError):
        raise ValueError(
            f"judge prompt {PER_TYPE}: no prompt for question type {question_type!r} (a "
            f"LongMemEval question's type is one of {', '.join(LME_TYPES)})"
        ) from None
    return _prompt(LME_TYPES.get(question_type, PER_TYPE), str(text))


def prompt_file(path: str) -> JudgePrompt:
    """One's own prompt from ``path`` (UTF-8 text holding each of ``FIELDS``);
    InvalidInput naming the file and the problem (exit 2) otherwise."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise InvalidInput(
            [Problem(path, None, "judge prompt", f"cannot be read: {why}")]
        ) from None
    missing = [f for f in FIELDS if f not in text]
    if missing:
        raise InvalidInput([Problem(path, None, "judge prompt",
                                     f"has no {', '.join(missing)} field (a judge prompt "
                                     f"needs {', '.join(FIELDS)})")])  # fmt: skip
    return _prompt(f"file:{os.path.basename(path)}", text)


def fill(prompt: JudgePrompt, question: str, gold: str, answer: str) -> str:
    """The prompt's text with its fields replaced (once each, in one pass: a field's
    value that spells another field's name is left as written)."""
    values = {"{question}": question, "{gold}": gold, "{answer}": answer}
    return re.sub(r"\{question\}|\{gold\}|\{answer\}", lambda m: values[m[0]], prompt.text)


_LABEL: Final = re.compile(r'"label"\s*:\s*"\s*(CORRECT|WRONG)\s*"', re.IGNORECASE)
_WORD: Final = re.compile(r"\b(CORRECT|WRONG)\b")
_YES: Final = re.compile(r"\byes\b", re.IGNORECASE)
_NO: Final = re.compile(r"^\W*no\b", re.IGNORECASE)


def verdict_of(reply: str) -> bool | None:
    """A judge's reply as a verdict: the JSON ``"label"`` when it has one, else the last
    upper-case CORRECT or WRONG, else "yes" anywhere (LongMemEval's reading) or a reply
    opening with "no"; None: the reply says neither (not understood, never a pass)."""
    found = _LABEL.findall(reply)
    if found:
        return found[-1].upper() == "CORRECT"
    words = _WORD.findall(reply)
    if words:
        return words[-1] == "CORRECT"
    if _YES.search(reply):
        return True
    if _NO.search(reply):
        return False
    return None
