"""The judge's calibration set: the shipped LoCoMo-shaped conversations, each asked three
times over with a planted answer of a known kind (docs/locomo.md, "Calibrating a judge").

Built from ``data/locomo/synthetic.json`` by a pure function, so the same command writes the
same bytes (a test checks the committed file):

    python -m benchledger.protocols.locomo_calibration protocols/data/locomo/calibration.json

Each conversation appears as three samples, ``SAMPLE.correct``, ``SAMPLE.paraphrase`` and
``SAMPLE.wrong``, holding its questions of categories 1 to 4 (an adversarial question has no
gold to plant) that have an on-topic wrong answer. The planted answer (``planted``) is:

- ``correct``: the gold (an open-domain question's first ``;`` alternative);
- ``paraphrase``: the gold said otherwise: a list's items in reverse order joined by "and"
  (``Lima, Oslo`` -> ``Oslo and Lima``), anything else as ``That would be GOLD.``;
- ``wrong``: deliberately wrong but on topic: the gold of the next question of the same
  category in the same conversation (cyclically) asked the same way (its first two
  words), so another speaker's hobby for a hobby, city for a city.

A judge should accept the first two and reject the third: a rejected correct or paraphrase
is a false reject, an accepted wrong answer a false accept.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Final

from benchledger.protocols import DATA_DIR
from benchledger.protocols.locomo import Question, Sample

KINDS: Final = ("correct", "paraphrase", "wrong")
SHOULD_ACCEPT: Final = frozenset({"correct", "paraphrase"})
SOURCE: Final = os.path.join(DATA_DIR, "locomo", "synthetic.json")
CALIBRATION: Final = os.path.join(DATA_DIR, "locomo", "calibration.json")
_ANSWERED: Final = (1, 2, 3, 4)

__all__ = ["CALIBRATION", "KINDS", "SHOULD_ACCEPT", "build", "kind_of", "planted"]


def _gold(category: int, answer: str) -> str:
    return answer.split(";")[0].strip() if category == 3 else answer


def _shape(question: Any) -> list[str]:
    return str(question).lower().split()[:2]  # "what hobby", "where did", "what is"


def _wrong(qa: list[dict[str, Any]], i: int) -> str | None:
    """The gold of the next question of question ``i``'s category (cyclically) that differs
    from its own, one asked the same way first (its first two words: a hobby for a hobby);
    None when there is none."""
    mine = qa[i]
    same = [q for q in qa[i + 1 :] + qa[:i] if q["category"] == mine["category"]]
    same.sort(key=lambda q: _shape(q.get("question")) != _shape(mine.get("question")))
    own = _gold(mine["category"], str(mine["answer"])).lower()
    return next((_gold(q["category"], str(q["answer"])) for q in same
                 if _gold(q["category"], str(q["answer"])).lower() != own), None)  # fmt: skip


def _paraphrase(gold: str) -> str:
    parts = [p.strip() for p in gold.split(",") if p.strip()]
    return " and ".join(reversed(parts)) if len(parts) > 1 else f"That would be {gold}."


def build(source: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The calibration set (module docstring) from a LoCoMo-shaped list of samples."""
    out = []
    for kind in KINDS:
        for sample in source:
            qa = [q for q in sample["qa"] if q["category"] in _ANSWERED]
            kept = [q for i, q in enumerate(qa) if _wrong(qa, i) is not None]
            out.append({**sample, "sample_id": f"{sample['sample_id']}.{kind}", "qa": kept})
    return out


def kind_of(sample_id: str) -> str:
    """A calibration sample's kind ("" for any other sample)."""
    kind = sample_id.rpartition(".")[2]
    return kind if "." in sample_id and kind in KINDS else ""


def planted(sample: Sample, question: Question) -> str:
    """The answer planted for ``question`` of calibration ``sample`` (module docstring)."""
    kind = kind_of(sample.sample_id)
    gold = _gold(question.category, question.answer)
    if kind == "paraphrase":
        return _paraphrase(gold)
    if kind == "wrong":
        qa = [{"category": q.category, "answer": q.answer, "question": q.question}
              for q in sample.questions]  # fmt: skip
        i = next(n for n, q in enumerate(sample.questions) if q.id == question.id)
        return _wrong(qa, i) or gold
    return gold


def render() -> str:
    """The committed file's text."""
    with open(SOURCE, encoding="utf-8") as f:
        return json.dumps(build(json.load(f)), indent=1, ensure_ascii=False) + "\n"


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m benchledger.protocols.locomo_calibration OUT.json")
        return 2
    with open(argv[0], "w", encoding="utf-8") as f:
        f.write(render())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
