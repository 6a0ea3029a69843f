"""The lifecycle suite as the readers see it: teach, capture, recall, promote, update.

``scorecard`` folds a run into units and metrics, ``decisions`` is the one decision
function (live and re-derived), ``report`` renders the card (and compare and gate
tables), ``audit`` traces a metric, ``items`` finds the run's protocols again. ``SUITE``
is its ``ReadSuite``: several runs merge as passes, compare and gate judge them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from projections.card import FORMATS
from projections.suites.base import ReadSuite
from projections.suites.lifecycle import audit, compare, decisions, items, report, scorecard

NAME = "lifecycle"


def _scorecard(
    folded: Sequence[Any], *, ci: str = "auto", replayed: Mapping[str, bool] | None = None
) -> scorecard.Scorecard:
    return scorecard.scorecard(folded, ci=ci)


def compare_cards(
    a: scorecard.Scorecard, b: scorecard.Scorecard, ids: tuple[str, str], fmt: str
) -> str:
    """Runs A and B per metric, paired by protocol (``compare.Incomparable`` if they differ
    in what a comparison holds fixed)."""
    rows = compare.compare(a, b)
    verified = [a.meta.verified, b.meta.verified]
    progress = [*report.run_completeness(a), *report.run_completeness(b)]
    differs = compare.differences(a.meta, b.meta)
    return report.compare_text(rows, *ids, fmt, differs, verified, progress, [a.meta, b.meta])


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
