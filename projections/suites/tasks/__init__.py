"""The tasks suite as the readers see it: a peer tasks-bench arm's answers, classified.

``decisions`` is the one decision function (correct, adopted, trap, other from an
attempt's final answer), ``items`` finds the run's tasks and reference values again in
the run itself, ``scorecard`` folds a run into its four rates, ``report`` renders one
run, ``compare`` sets runs side by side with Newcombe differences, ``audit`` traces a
rate to its decisions; ``study`` lays a planted-claim study's tables out over its arms
(``arm``; cells ``study_tables``, printed by ``study_render``). ``SUITE`` is its
``ReadSuite``: a run is reported on its own and compared with others; nothing is gated.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from benchledger.projections.card import FORMATS
from benchledger.projections.suites.base import ReadSuite
from benchledger.projections.suites.tasks import audit, compare, decisions, items, report, scorecard


def _scorecard(
    folded: Sequence[Any], *, ci: str = "auto", replayed: Mapping[str, bool] | None = None
) -> scorecard.Card:
    return scorecard.score(folded)  # Wilson over attempts: ``ci`` has no other choice here


def compare_cards(cards: Sequence[scorecard.Card], ids: Sequence[str], fmt: str) -> str:
    """The runs side by side, ``cards[0]`` the baseline, each rate's Newcombe difference."""
    return compare.render(compare.sheet(cards, ids), fmt)


def unit_status(outcome: Any) -> str:
    """A finished attempt for the progress line: correct, not correct, or its error."""
    if outcome.error:
        return f"error: {outcome.error}"
    verdict = outcome.outcome.get(decisions.CORRECT)
    return "correct" if verdict is True else "not correct"


SUITE = ReadSuite(
    name=scorecard.SUITE,
    noun=scorecard.NOUN,
    fold=scorecard.TasksFold,
    scorecard=_scorecard,
    render=report.render,
    formats=FORMATS,
    decide=decisions.decide_unit,
    audit=audit.audit,
    metric_names=audit.AUDITABLE,
    items=items.items,
    unit_status=unit_status,
    merges=False,
    compare=compare_cards,
    answer_checks=frozenset({decisions.CORRECT}),  # an attempt's verdict, from its answer
    # An eval log scores correct only: adopted, trap and other are true when bad, and the
    # diagnostics decide nothing, so they are each sample's metadata.
    scored_checks=frozenset({decisions.CORRECT}),
    # Answering the planted claim's value, a trap's, or no reading: each is the bad outcome.
    lower_is_better=frozenset({decisions.ADOPTED, decisions.TRAP, decisions.OTHER}),
    descriptions=scorecard.DESCRIPTIONS,
)
