"""What a reader needs of a suite, and the registry that finds it by a run's recorded name.

A run names its suite once, in ``run_started.suite`` (``RunRecord.suite``); every reader
(report, compare, gate, audit, the runs table, re-derivation, replay's item lookup) asks
``lookup(name)`` for that suite's ``ReadSuite`` instead of testing the name itself.

A suite is installed as one ``SuitePlugin`` in the ``SUITES`` registry (entry-point group
``benchledger.suites``): its name, its item option, and two factories, ``reader()`` for
this floor and ``harness()`` for the driver's (``harness.suites``), each loaded only when
asked, so a reader never imports the harness. The built-in three (lifecycle, provenance,
tasks) are registered in ``projections.suites.builtin``.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple

from benchledger.ledger import UnusableInput
from benchledger.ledger.completeness import Completeness
from benchledger.ledger.events import RunStartedBody, RunStartedEvent
from benchledger.ledger.registry import BrokenPlugin, Registry, UnknownName
from benchledger.projections.audit import Audit
from benchledger.projections.card import RunMeta
from benchledger.projections.fold import Fold, fold
from benchledger.projections.source import RunEvents


class UnknownSuite(UnusableInput):
    """A run (or ``--suite``) names a suite not installed here (its name, and the known ones).

    Unusable input (exit 2 on the command line): a run naming it is fine, this installation
    cannot read it.
    """

    def __init__(self, name: str, known: Sequence[str]) -> None:
        self.name, self.known = name, tuple(known)
        super().__init__(
            f"suite {name!r}",
            f"no such suite is installed (known suites: {', '.join(self.known) or 'none'})",
        )


class ItemSet(NamedTuple):
    """A run's items (protocols, cases) by id, where they came from, and notes on them."""

    by_id: dict[str, Any]
    path: str
    notes: list[str]


Outcome = Mapping[str, bool | None]  # a finished unit's verdict per check (None: not judged)


class UnitScore(NamedTuple):
    """A unit's whole score, as an exported eval log shows it: the score's name, whether a
    unit that finished without an error passed, and the words for either way."""

    name: str
    passed: Callable[[Outcome], bool]
    yes: str
    no: str


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
    # Several runs merge as passes into one card: ``scorecard`` takes one fold per run
    # (and ``prices=``), each fold's result a ``(RunMeta, units)`` pair.
    merges: bool = False
    replayed_stage: str | None = None
    # Its cards side by side, as text in ``fmt``: compare(cards, ids, fmt), ``cards[0]`` the
    # baseline; a ValueError says why they cannot be compared. None: runs are not compared.
    compare: Callable[[Sequence[Any], Sequence[str], str], str] | None = None
    # Its gate: gate(baseline card, candidate card, tolerance) -> one verdict row per gated
    # metric, ``gated`` the metrics it may judge (a pre-registration names some of them).
    # None: its runs are not gated.
    gate: Callable[[Any, Any, float], Sequence[Any]] | None = None
    gated: tuple[str, ...] = ()
    # Its gate's verdict table: gate_text(rows, tolerance) (``benchledger gate`` prints it).
    gate_text: Callable[[list[Any], float], str] | None = None
    # Its live view for ``report --watch``: from its fold's result as events land, the run's
    # meta and how much of the plan has finished. None: its runs are not watched.
    live: Callable[[Any], tuple[RunMeta, Completeness]] | None = None
    # A unit's whole score in an exported eval log (None: "finished without an error").
    unit_score: UnitScore | None = None
    # Its card's metrics that are means of per-unit values (locomo's F1, recall@k, MRR):
    # unit_values(card) -> {unit stream: {metric: value}}. An exported eval log scores each
    # unit by them under the metric's name, so each score's mean is the card's number.
    unit_values: Callable[[Any], Mapping[str, Mapping[str, float]]] | None = None
    # The checks it grades from a recorded answer alone: the only verdicts of an imported
    # (peer) run re-derivation recomputes; the others were recorded without their evidence.
    answer_checks: frozenset[str] = frozenset()
    # The checks an exported eval log shows as scores (each's true verdict the good outcome);
    # its other decisions (diagnostics, and checks whose true verdict is the bad outcome)
    # are the sample's metadata, never an accuracy. None: every decision is a score.
    scored_checks: frozenset[str] | None = None
    # Its metrics where lower is better (every other one: higher is better), and what each
    # metric measures in one line: exports state them as the metric's definition.
    lower_is_better: frozenset[str] = frozenset()
    descriptions: Mapping[str, str] = field(default_factory=dict)

    def card(
        self,
        runs: Sequence[RunEvents],
        *,
        ci: str = "auto",
        replayed: Mapping[str, bool] | None = None,
    ) -> Any:
        """The card of ``runs`` (read through the door), folded and scored by this suite."""
        return self.scorecard([fold(self.fold(), r.events) for r in runs], ci=ci, replayed=replayed)


@dataclass(frozen=True)
class ItemOption:
    """The run option naming a suite's items (``--protocols PATH``), as ``run`` offers it.

    Suites may share one flag; a flag given with a suite that does not take it is refused,
    naming the suites it belongs to."""

    flag: str  # "--protocols"
    help: str
    metavar: str = "PATH"

    @property
    def dest(self) -> str:
        """The option's attribute on the parsed arguments (``--protocols`` -> ``protocols``)."""
        return self.flag.lstrip("-").replace("-", "_")


@dataclass(frozen=True)
class SuitePlugin:
    """One installed suite: what an entry point in ``benchledger.suites`` names.

    ``reader()`` gives its ``ReadSuite``; ``harness`` makes a fresh write-side suite (a
    ``harness.suites.Suite``: what the driver and full replay run), called only when a run
    or a full replay needs it: a factory, or its ``"package.module:NAME"`` (how
    benchledger's own name theirs: this floor may not import the harness); None for a
    suite that is read only. ``items`` is its item option (None: it takes none);
    ``summary`` one line for ``run --help`` and ``benchledger suites``. ``grading_needs``:
    the modules its grading imports that a plain install may lack (``importlib`` names); a
    run of the suite is refused up front, nothing written, when one is absent
    (``missing_modules``), rather than every unit failing on it.
    """

    name: str
    reader: Callable[[], ReadSuite]
    harness: Callable[[], object] | str | None = None
    items: ItemOption | None = None
    summary: str = ""
    grading_needs: tuple[str, ...] = ()

    def missing_modules(self) -> list[str]:
        """The modules of ``grading_needs`` this interpreter cannot import (found, not
        imported: a heavy grading library loads only when answers are graded)."""
        return [name for name in self.grading_needs if not _importable(name)]


def _importable(name: str) -> bool:
    """Whether ``name`` can be imported here (a dotted name's parents are imported to tell)."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # a parent missing, or a module without a spec
        return False


def _plugin(obj: object) -> SuitePlugin:
    if not isinstance(obj, SuitePlugin):
        raise TypeError(f"is a {type(obj).__name__}, not a SuitePlugin")
    return obj


# The suite a run is read as when it records no suite name (runs from before suites were
# named), and the one ``run`` runs by default.
DEFAULT_SUITE: Final = "lifecycle"

SUITES: Final = Registry[SuitePlugin]("suite", "benchledger.suites", check=_plugin)


def register(plugin: SuitePlugin, *, where: str = "") -> SuitePlugin:
    """Make ``plugin`` the suite of its name (replacing one of that name); returns it."""
    SUITES.register(plugin.name, lambda: plugin, where=where)
    return plugin


def unregister(name: str) -> None:
    """Forget the suite ``name`` (a test's toy suite, once the test is done)."""
    SUITES.unregister(name)


def plugin(name: str) -> SuitePlugin:
    """The installed suite ``name`` ("": the default one); UnknownSuite when none is,
    BrokenPlugin (one line) when its entry point cannot be loaded."""
    key = name or DEFAULT_SUITE
    try:
        found = SUITES.lookup(key)
    except UnknownName as exc:
        raise UnknownSuite(name, exc.known) from None
    if found.name != key:  # its runs would record a name no reader finds
        raise BrokenPlugin(
            "suite", key, f"is registered as {key!r} but names itself {found.name!r}"
        )
    return found


def lookup(name: str) -> ReadSuite:
    """The reader of suite ``name`` ("": the default one); UnknownSuite when none is."""
    found = plugin(name)
    try:
        reader = found.reader()
    except UnusableInput:
        raise
    except Exception as exc:  # a third party's read side: one line, never a traceback
        raise BrokenPlugin("suite", name, f"its reader cannot be loaded ({exc})") from exc
    if not isinstance(reader, ReadSuite):
        raise BrokenPlugin(
            "suite", name, f"its reader is a {type(reader).__name__}, not a ReadSuite"
        )
    return reader


def names() -> tuple[str, ...]:
    """The installed suites' names, sorted."""
    return SUITES.names()


def installed() -> list[SuitePlugin]:
    """Every installed suite that loads (a broken one is skipped here: it is refused, in one
    line, where it is named)."""
    out = []
    for name in names():
        try:
            out.append(SUITES.lookup(name, quiet=True))  # choosing none: no shadow warning
        except BrokenPlugin:
            continue
    return out


def owners(flag: str) -> list[str]:
    """The installed suites whose item option is ``flag``."""
    return [p.name for p in installed() if p.items is not None and p.items.flag == flag]


def gated_metrics() -> tuple[str, ...]:
    """Every metric some installed suite's gate may judge, each once."""
    found: dict[str, None] = {}
    for p in installed():
        try:
            reader = lookup(p.name)
        except UnusableInput:  # a broken plugin gates nothing; it is refused where named
            continue
        if reader.gate is not None:
            found.update(dict.fromkeys(reader.gated))
    return tuple(found)


def of_run(run: RunEvents) -> ReadSuite:
    """The suite ``run``'s ``run_started`` names (the default suite when it has none)."""
    first = next((e for e, _ in run.events if isinstance(e, RunStartedEvent)), None)
    return lookup(first.body.suite if first is not None else "")
