"""The locomo suite as the readers see it: LoCoMo's questions asked of a platform that
ingested the conversations (docs/locomo.md).

``grading`` is LoCoMo's own grading, ``items`` finds the run's questions again in the run
itself, ``decisions`` is the one decision function (live and re-derived), ``scorecard``
folds a run into F1 per category and the retrieval metrics, ``report`` renders it,
``compare`` sets runs side by side (intervals, paired differences), ``audit`` traces a
metric to the turns retrieved. ``SUITE`` is its ``ReadSuite``: a run is reported on its
own and compared; nothing is gated.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from benchledger.projections.card import FORMATS
from benchledger.projections.suites.base import ReadSuite
from benchledger.projections.suites.locomo import (
    audit,
    compare,
    decisions,
    items,
    report,
    scorecard,
)


def _scorecard(
    folded: Sequence[Any], *, ci: str = "auto", replayed: Mapping[str, bool] | None = None
) -> scorecard.Card:
    return scorecard.score(folded)  # means, reported without an interval


def unit_status(outcome: Any) -> str:
    """A finished question for the progress line: its F1 verdict, or its error."""
    if outcome.error:
        return f"error: {outcome.error}"
    verdict = outcome.outcome.get(decisions.F1)
    return "right" if verdict is True else "not right"


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
    compare=compare.compare,
    unit_values=scorecard.unit_values,
    answer_checks=frozenset({decisions.F1}),
    scored_checks=frozenset({decisions.F1, decisions.EVIDENCE, decisions.INGESTED}),
    descriptions=scorecard.DESCRIPTIONS,
)
