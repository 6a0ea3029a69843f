"""What a reader needs of a suite, and the registry that finds it by a run's recorded name.

A run names its suite once, in ``run_started.suite`` (``RunRecord.suite``); every reader
(report, compare, gate, audit, the runs table, re-derivation, replay's item lookup) asks
``lookup(name)`` for that suite's ``ReadSuite`` instead of testing the name itself. A suite
registers itself with ``register``; the built-in two are registered by ``projections.suites``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from benchledger.ledger import UnusableInput
from benchledger.ledger.events import RunStartedBody, RunStartedEvent
from benchledger.projections.audit import Audit
from benchledger.projections.fold import Fold, fold
from benchledger.projections.source import RunEvents


class UnknownSuite(UnusableInput):
    """A run names a suite no reader here knows (its name, and the ones registered).

    Unusable input (exit 2 on the command line): the run is fine, this reader cannot read it.
    """

    def __init__(self, name: str, known: Sequence[str]) -> None:
        self.name, self.known = name, tuple(known)
        super().__init__(
            f"suite {name!r}",
            f"no reader for this suite here (known suites: {', '.join(self.known) or 'none'})",
        )


class ItemSet(NamedTuple):
    """A run's items (protocols, cases) by id, where they came from, and notes on them."""

    by_id: dict[str, Any]
    path: str
    notes: list[str]


@dataclass(frozen=True)
class ReadSuite:
    """One suite as the readers see it: everything is a function of the recorded run.

    ``scorecard(folded, ci=, replayed=)`` turns fold results (one per run; several only when
    ``merges``; a merging suite's also takes ``prices=``, the table its cost is computed
    at) into the suite's card; ``render(card, fmt)`` is the card in one of
    ``formats``; ``decide(item, events)`` is the one decision function re-derivation calls;
    ``audit(run, metric)`` traces a metric (``projections.audit.render`` prints it);
    ``items(header, given)`` finds the run's items again; ``unit_status(outcome)`` is a
    finished unit on the progress line; ``item_hash`` hashes one item for pre-registration
    (None when the suite pre-registers no items); ``passed(card)`` is the card's overall
    verdict (None when it has none); ``replayed_stage`` names the episode a log-driven full
    replay must reproduce for the card (None: the card needs no replay).
    """

    name: str
    noun: str  # what its items are called: "protocols", "cases"
    fold: Callable[[], Fold[Any]]
    scorecard: Callable[..., Any]
    render: Callable[[Any, str], str]
    formats: tuple[str, ...]
    decide: Callable[[Any, Sequence[tuple[int, Any]]], list[Any]]
    audit: Callable[[RunEvents, str], Audit]
    metric_names: tuple[str, ...]
    items: Callable[[RunStartedBody, str | None], ItemSet]
    unit_status: Callable[[Any], str]
    item_hash: Callable[[Any], str] | None = None
    passed: Callable[[Any], bool | None] = lambda card: None
    # Several runs merge as passes, and compare and gate judge its runs (its card is then a
    # ``projections.suites.lifecycle.scorecard.Scorecard``, the shape compare reads).
    merges: bool = False
    replayed_stage: str | None = None
    # Its cards side by side, as text in ``fmt``: compare(cards, ids, fmt), ``cards[0]`` the
    # baseline; a ValueError says why they cannot be compared. None: runs are not compared.
    compare: Callable[[Sequence[Any], Sequence[str], str], str] | None = None

    def card(
        self,
        runs: Sequence[RunEvents],
        *,
        ci: str = "auto",
        replayed: Mapping[str, bool] | None = None,
    ) -> Any:
        """The card of ``runs`` (read through the door), folded and scored by this suite."""
        return self.scorecard([fold(self.fold(), r.events) for r in runs], ci=ci, replayed=replayed)


_SUITES: dict[str, ReadSuite] = {}
_DEFAULT: list[str] = []  # the suite a run without a recorded name is read as


def register(suite: ReadSuite, *, default: bool = False) -> ReadSuite:
    """Make ``suite`` the reader of runs recording its name (replacing one of that name)."""
    _SUITES[suite.name] = suite
    if default:
        _DEFAULT[:] = [suite.name]
    return suite


def unregister(name: str) -> None:
    """Forget the suite ``name`` (a test's toy suite, once the test is done)."""
    _SUITES.pop(name, None)


def lookup(name: str) -> ReadSuite:
    """The registered suite ``name`` ("": the default one); UnknownSuite when none is."""
    key = name or (_DEFAULT[0] if _DEFAULT else "")
    found = _SUITES.get(key)
    if found is None:
        raise UnknownSuite(name, sorted(_SUITES))
    return found


def names() -> tuple[str, ...]:
    """The registered suites' names, sorted."""
    return tuple(sorted(_SUITES))


def of_run(run: RunEvents) -> ReadSuite:
    """The suite ``run``'s ``run_started`` names (the default suite when it has none)."""
    first = next((e for e, _ in run.events if isinstance(e, RunStartedEvent)), None)
    return lookup(first.body.suite if first is not None else "")
