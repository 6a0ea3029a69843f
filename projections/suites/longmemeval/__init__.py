"""The longmemeval suite as the readers see it: LongMemEval's questions, each asked of a
platform that ingested its own haystack (docs/longmemeval.md).

``ranking`` is LongMemEval's retrieval evaluation (eval_utils.py's metrics), ``grading``
the judge-free answer bounds and the prompt type a judge grades each question with,
``items`` finds the run's questions
again in the run itself, ``decisions`` is the one decision function (live and
re-derived), ``scorecard`` folds a run into the metrics overall and per question type,
``report`` renders it, ``audit`` traces a metric to the turns retrieved. ``SUITE`` is its
``ReadSuite``: a run is reported on its own; nothing is gated or compared yet.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from benchledger.projections.card import FORMATS
from benchledger.projections.suites.base import ReadSuite
from benchledger.projections.suites.longmemeval import (
    audit,
    decisions,
    items,
    report,
    scorecard,
)


def _scorecard(
    folded: Sequence[Any], *, ci: str = "auto", replayed: Mapping[str, bool] | None = None
) -> scorecard.Card:
    return scorecard.score(folded)


def unit_status(outcome: Any) -> str:
    """A finished question for the progress line: whether its answer held the gold one."""
    if outcome.error:
        return f"error: {outcome.error}"
    return "right" if outcome.outcome.get(decisions.ANSWER) is True else "not right"


SUITE = ReadSuite(
    name=scorecard.SUITE,
    noun=scorecard.NOUN,
    fold=scorecard.LocomoFold,
    scorecard=_scorecard,
    render=report.render,
    formats=FORMATS,
    decide=decisions.decide_unit,
    audit=audit.audit,
    metric_names=audit.AUDITABLE,
    items=items.items,
    unit_status=unit_status,
    item_hash=items.item_hash,
    merges=False,
    replayed_stage=None,
    unit_values=scorecard.unit_values,
    answer_checks=frozenset({decisions.ANSWER}),
    scored_checks=frozenset({decisions.ANSWER, decisions.RETRIEVAL, decisions.INGESTED}),
    descriptions=scorecard.DESCRIPTIONS,
)
