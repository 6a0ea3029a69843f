"""The lifecycle suite as the readers see it: teach, capture, recall, promote, update.

``scorecard`` folds a run into units and metrics, ``decisions`` is the one decision
function (live and re-derived), ``report`` renders the card (and the gate's table),
``matrix`` sets runs side by side, ``audit`` traces a metric, ``items`` finds the run's
protocols again. ``SUITE`` is its ``ReadSuite``: several runs merge as passes, compare
and gate judge them, ``report --watch`` follows one live, and an exported eval log scores
each unit by whether it passed the whole lifecycle.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from benchledger.ledger.completeness import Completeness
from benchledger.projections.card import FORMATS, RunMeta
from benchledger.projections.prices import PriceTable
from benchledger.projections.retrieval import KS
from benchledger.projections.source import completeness
from benchledger.projections.suites.base import Outcome, ReadSuite, UnitScore
from benchledger.projections.suites.lifecycle import (
    audit,
    compare,
    decisions,
    items,
    matrix,
    page,
    ranks,
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
    known, why = ranks.known_facts([meta for meta, _ in folded])
    card = scorecard.scorecard(folded, ci=ci, facts=known, facts_note=why)
    return card._replace(prices=prices)


def unit_values(card: scorecard.Scorecard) -> dict[str, dict[str, float]]:
    """Each unit's term in the card's per-stage retrieval means (``recall_at_5.recall``,
    ``mrr.transfer``): a unit ranks at most one episode per stage, so an exported eval
    log's score of that name has the card's number as its mean. The pooled ones
    (``recall_at_5``, ``mrr``) average a unit's stages, so no unit has a term of its own."""
    cells: dict[str, dict[str, list[float]]] = {}
    for r in card.ranked:
        if r.stage not in ranks.RANKED:
            continue
        mine = cells.setdefault(r.stream, {})
        for k in KS:
            hit = float(r.rank is not None and r.rank <= k)
            mine.setdefault(ranks.recall_name(k, r.stage), []).append(hit)
        reciprocal = 0.0 if r.rank is None else 1.0 / r.rank
        mine.setdefault(ranks.mrr_name(r.stage), []).append(reciprocal)
    return {s: {n: sum(v) / len(v) for n, v in d.items()} for s, d in cells.items()}


def compare_cards(cards: Sequence[scorecard.Scorecard], ids: Sequence[str], fmt: str) -> str:
    """The runs side by side, ``cards[0]`` the baseline, paired by protocol
    (``compare.Incomparable`` if their protocol sets differ)."""
    return matrix.render(matrix.matrix(cards, ids), fmt)


def unit_status(outcome: Any) -> str:
    """A finished lifecycle unit for the progress line: pass, fail, or its error."""
    if outcome.error:
        return f"error: {outcome.error}"
    return "pass" if outcome.passed else "fail"


def live(folded: tuple[RunMeta, list[scorecard.Unit]]) -> tuple[RunMeta, Completeness]:
    """A run being watched: its meta and how many planned units have finished so far."""
    meta, units = folded
    return meta, completeness(meta, units)


def _unit_passed(outcome: Outcome) -> bool:
    return scorecard.lifecycle_passed(outcome.get)


# A unit's whole score in an exported eval log: the whole lifecycle passed.
UNIT_SCORE = UnitScore("lifecycle_pass", _unit_passed, "every applicable stage passed",
                       "not every applicable stage passed")  # fmt: skip

# The checks graded from an answer alone (an imported peer run re-derives only these).
ANSWER_CHECKS = frozenset({scorecard.RECALL_CORRECT, scorecard.TRANSFER_CORRECT,
                           scorecard.UPDATE_CORRECT, scorecard.ABSTAIN_CORRECT})  # fmt: skip

# What an exported eval log scores: the checks that decide a unit's pass and are true when
# good; the diagnostics and `duplicated` (true is bad) go to its metadata (docs/inspect.md).
SCORED_CHECKS = frozenset(page.DECIDES_PASS - set(page.GOOD_WHEN_FALSE))

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
    gate=compare.gate,
    gated=scorecard.GATED,
    gate_text=report.gate_text,
    live=live,
    unit_score=UNIT_SCORE,
    unit_values=unit_values,
    answer_checks=ANSWER_CHECKS,
    scored_checks=SCORED_CHECKS,
    lower_is_better=frozenset(
        {
            *(m.name for m in scorecard.METRICS if not m.higher_is_better),
            "capture_budget_starved",
            ranks.LEAK,
        }
    ),
    descriptions={
        **{m.name: m.description for m in scorecard.METRICS},
        "pass_k": "protocols all of whose k attempts passed (unbiased pass^k)",
        **ranks.DESCRIPTIONS,
    },
)
