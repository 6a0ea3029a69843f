"""The graders: pure, deterministic functions from an answer to a verdict and a reason.

Definitions are docs/protocols.md, Graders; they reproduce the peer platform's recorded verdicts.
"""

from __future__ import annotations

import re
from typing import Final, NamedTuple

from benchledger.protocols.schema import Grading

REFUSALS: Final = (
    "insufficient information",
    "insufficient data",
    "not enough information",
    "no information",
    "cannot determine",
    "cannot be determined",
    "can't determine",
    "unable to determine",
    "do not know",
    "don't know",
    "not able to answer",
    "cannot answer",
    "can't answer",
    "unknown",
)
ABSTAIN_ANSWER: Final = "INSUFFICIENT INFORMATION"

_MARKER = re.compile(r"final answer:", re.IGNORECASE)
# A number: optional minus, digits with internal thousands commas, optional decimals.
_NUMBER = re.compile(r"-?\d(?:[\d,]*\d)?(?:\.\d+)?")
_NON_ALNUM = re.compile(r"[^0-9a-z]+")


class Verdict(NamedTuple):
    """A grader's decision: pass or fail, why, and the text that was scored."""

    ok: bool
    reason: str
    scored: str


def final_answer(text: str) -> str:
    """The scored text: the first line after the last ``FINAL ANSWER:``, else the whole text."""
    marks = list(_MARKER.finditer(text))
    if not marks:
        return text.strip()
    rest = text[marks[-1].end() :].strip()
    return rest.split("\n", 1)[0].strip()


def parse_number(text: str) -> float | None:
    """The first number containing ``.`` or ``,``, else the first number; commas stripped."""
    found = _NUMBER.findall(text)
    if not found:
        return None
    chosen = next((n for n in found if "." in n or "," in n), found[0])
    return float(chosen.replace(",", ""))


def _fmt(x: float) -> str:
    return f"{x:.10g}"


def numeric(text: str, value: float, tolerance: float) -> Verdict:
    """Correct when the answer's number is within ``tolerance`` of ``value``."""
    scored = final_answer(text)
    got = parse_number(scored)
    if got is None:
        return Verdict(False, "no number in the answer", scored)
    diff = abs(got - value)
    if diff <= tolerance + 1e-9:
        return Verdict(True, f"{_fmt(got)} is within {_fmt(tolerance)} of {_fmt(value)}", scored)
    return Verdict(False, f"{_fmt(got)} is {_fmt(diff)} from {_fmt(value)}", scored)


def mentions(text: str, term: str) -> bool:
    """Whether ``term`` occurs in ``text`` on word boundaries (letters, digits, ``_``), any case."""
    pattern = r"(?<!\w)" + re.escape(term.strip()) + r"(?!\w)"
    return re.search(pattern, text, re.IGNORECASE) is not None


def entity(text: str, aliases: tuple[str, ...], wrong_aliases: tuple[str, ...] = ()) -> Verdict:
    """Correct when an alias is named and no wrong alias is (a wrong alias vetoes)."""
    scored = final_answer(text)
    wrong = [w for w in wrong_aliases if mentions(scored, w)]
    if wrong:
        return Verdict(False, f"names wrong alias {wrong[0]!r}", scored)
    right = next((a for a in aliases if mentions(scored, a)), None)
    if right is None:
        return Verdict(False, f"names none of {', '.join(map(repr, aliases))}", scored)
    return Verdict(True, f"names {right!r}", scored)


def grade(text: str, grading: Grading) -> Verdict:
    """Grade ``text`` by its grading spec (numeric or entity)."""
    if grading.kind == "numeric":
        return numeric(text, grading.value or 0.0, grading.abs_tolerance)
    return entity(text, grading.aliases, grading.wrong_aliases)


def update(text: str, grading: Grading, superseded: float | str | None) -> Verdict:
    """Correct when the answer gives the new value and never the stale one."""
    verdict = grade(text, grading)
    if not verdict.ok or superseded is None:
        return verdict
    if isinstance(superseded, str):
        if mentions(verdict.scored, superseded):
            return Verdict(False, f"gives the stale value {superseded!r}", verdict.scored)
        return verdict
    stale = numeric(text, float(superseded), grading.abs_tolerance)
    if stale.ok:
        return Verdict(False, f"gives the stale value {_fmt(float(superseded))}", stale.scored)
    return verdict


def abstention(text: str) -> Verdict:
    """Correct when the answer refuses with one of the known refusal phrases."""
    scored = final_answer(text)
    low = scored.lower().replace("’", "'")
    phrase = next((p for p in REFUSALS if p in low), None)
    if phrase is None:
        return Verdict(False, "answers instead of abstaining", scored)
    return Verdict(True, f"abstains ({phrase!r})", scored)


def normalize(text: str) -> str:
    """Lower-case, runs of non-alphanumerics collapsed to one space, trimmed."""
    return _NON_ALNUM.sub(" ", text.lower()).strip()


def surfaced(fact: str, tool_output: str) -> bool:
    """Whether ``fact`` appears (normalized) as a substring of ``tool_output``."""
    needle = normalize(fact)
    return bool(needle) and needle in normalize(tool_output)
