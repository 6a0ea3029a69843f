"""The provenance lane as the readers see it: cited sources, resolved and judged.

``scorecard`` folds a run into case units and its four gated metrics, ``decisions`` is
the one decision function for a case, ``report`` renders the card with its overall
verdict, ``audit`` traces a metric, ``items`` finds the run's cases again. ``SUITE`` is
its ``ReadSuite``: a run is reported on its own, and its card counts the log-driven
replay of the scored turn (M1 over the log).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from benchledger.projections.card import FORMATS
from benchledger.projections.suites.base import ReadSuite
from benchledger.projections.suites.provenance import audit, decisions, items, report, scorecard


def _scorecard(
    folded: Sequence[Any], *, ci: str = "auto", replayed: Mapping[str, bool] | None = None
) -> scorecard.Card:
    [one] = folded  # a provenance run is reported on its own
    return scorecard.scorecard(one, log_replay=replayed)


def unit_status(outcome: Any) -> str:
    """A finished provenance unit for the progress line: ok, or the checks that failed."""
    if outcome.error:
        return f"error: {outcome.error}"
    failed = [check for check, v in outcome.outcome.items() if v is False]
    return "ok" if not failed else "failed " + ", ".join(failed)


def _passed(card: scorecard.Card) -> bool:
    return bool(card.overall_pass)


SUITE = ReadSuite(
    name=scorecard.SUITE,
    noun=scorecard.NOUN,
    fold=scorecard.ProvenanceFold,
    scorecard=_scorecard,
    render=report.render,
    formats=FORMATS,
    decide=decisions.decide_case,
    audit=audit.audit,
    metric_names=audit.AUDITABLE,
    items=items.items,
    unit_status=unit_status,
    passed=_passed,
    replayed_stage=decisions.SCORED,
    descriptions=scorecard.DESCRIPTIONS,
)
