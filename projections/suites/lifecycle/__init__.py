"""The lifecycle suite as the readers see it: teach, capture, recall, promote, update.

``scorecard`` folds a run into units and metrics, ``decisions`` is the one decision
function (live and re-derived), ``report`` renders the card (and the gate's table),
``matrix`` sets runs side by side, ``audit`` traces a metric, ``items`` finds the run's
protocols again. ``SUITE`` is its ``ReadSuite``: several runs merge as passes, compare
and gate judge them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from benchledger.projections.card import FORMATS
from benchledger.projections.prices import PriceTable
from benchledger.projections.suites.base import ReadSuite
from benchledger.projections.suites.lifecycle import (
    audit,
    decisions,
    items,
    matrix,
    report,
    scorecard,
)

NAME = "lifecycle"


def _scorecard(
    folded: Sequence[Any],
    *,
    ci: str = "auto",
    replayed: Mapping[str, bool] | None = None,
    prices: PriceTable | None = None,
) -> scorecard.Scorecard:
    return scorecard.scorecard(folded, ci=ci)._replace(prices=prices)


def compare_cards(cards: Sequence[scorecard.Scorecard], ids: Sequence[str], fmt: str) -> str:
    """The runs side by side, ``cards[0]`` the baseline, paired by protocol
    (``compare.Incomparable`` if their protocol sets differ)."""
    return matrix.render(matrix.matrix(cards, ids), fmt)


def unit_status(outcome: Any) -> str:
    """A finished lifecycle unit for the progress line: pass, fail, or its error."""
    if outcome.error:
        return f"error: {outcome.error}"
    return "pass" if outcome.passed else "fail"


SUITE = ReadSuite(
    name=NAME,
    noun=scorecard.NOUN,
    fold=scorecard.LifecycleFold,
    scorecard=_scorecard,
    render=report.render,
    formats=FORMATS,
    decide=decisions.decide_unit,
    audit=audit.audit,
    metric_names=scorecard.METRIC_NAMES,
    items=items.items,
    unit_status=unit_status,
    item_hash=items.item_hash,
    merges=True,
    compare=compare_cards,
)
