"""Re-grading recorded answers with benchledger's graders (compare with recorded verdicts)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from projections.lifecycle import (
    ABSTAIN_CORRECT,
    RECALL_CORRECT,
    TRANSFER_CORRECT,
    UPDATE_CORRECT,
    Unit,
)
from protocols import grading
from protocols.schema import Protocol


class Regraded(NamedTuple):
    stream: str
    seq: int
    check: str
    recorded: bool | None
    ours: bool
    reason: str
    answer: str


def regrade(units: Iterable[Unit], protocols: dict[str, Protocol]) -> list[Regraded]:
    """Our verdict for every answer-graded decision whose protocol is known."""
    out = []
    for unit in units:
        p = protocols.get(unit.protocol_id)
        if p is None:
            continue
        for check, d in sorted(unit.decisions.items()):
            if check == RECALL_CORRECT:
                v = grading.grade(d.answer, p.recall.grading)
            elif check == TRANSFER_CORRECT and p.transfer is not None:
                v = grading.grade(d.answer, p.transfer.grading)
            elif check == UPDATE_CORRECT and p.update is not None:
                v = grading.update(d.answer, p.update.recall.grading, p.update.superseded_value)
            elif check == ABSTAIN_CORRECT:
                v = grading.abstention(d.answer)
            else:
                continue
            out.append(Regraded(d.stream, d.seq, check, d.verdict, v.ok, v.reason, d.answer))
    return out
