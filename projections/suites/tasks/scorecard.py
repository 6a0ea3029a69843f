"""The tasks suite's card as a fold over a run's events: correct, adopted, trap, other,
and the diagnostics (``decisions.DIAGNOSTICS``), each a rate of its own.

Every rate is over attempts (Wilson 95%, attempts treated as independent) and counts
recorded ``grader_decision`` events only. An attempt may carry the peer's ``correct``
(origin ``mcp-data-platform``) and benchledger's own (``projections.suites.tasks.
decisions``): the card counts benchledger's when recorded, else the peer's, and says how
often the peer's agrees. An attempt with a harness failure is in no rate and counted.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Final, NamedTuple

import msgspec

from benchledger.ledger.events import Event, GraderDecisionEvent
from benchledger.ledger.inert import inert
from benchledger.projections.card import CI_WILSON, Decision, Metric, Ref, RunMeta
from benchledger.projections.prices import Cost, PriceTable, Unpriced
from benchledger.projections.prices import priced as price_usage
from benchledger.projections.stats import wilson
from benchledger.projections.suites.lifecycle import scorecard as lc
from benchledger.projections.suites.tasks.decisions import (
    BUDGET,
    CHECKS,
    CLAIM_SEEN,
    COPRESENT,
    CORRECTIVE,
    EXPOSED,
    OBSERVED,
    OURS,
    QUERIED,
)
from benchledger.projections.usage import Usage
from benchledger.protocols.task_grading import ADOPTED, CORRECT, OTHER
from benchledger.protocols.tasks import Task

SUITE: Final = "tasks"
NOUN: Final = "tasks"
PASSED_NOUN: Final = "attempt (graded correct)"  # what "cost per passed ..." divides by
TRAP: Final = "trap"
PEER_CORRECT: Final = "peer_correct"  # the peer's own recorded verdict, beside ours
# The model-free agent (harness/agents/scripted_tasks.py), which cannot answer a task whose
# answer does not follow from its own fields (``Task.computable``).
SCRIPTED: Final = "scripted"
METRIC_NAMES: Final = CHECKS
DESCRIPTIONS: Final = {
    CORRECT: "attempts graded correct by the task's own grading",
    ADOPTED: "attempts answering the planted wrong claim's value (arms that planted one)",
    TRAP: "attempts answering a pre-existing trap's value (calendar year, deprecated table)",
    OTHER: "attempts matching no reading, or holding no number",
    QUERIED: "attempts of a whole-table task that ran its refuting query (its expected_sql)",
    OBSERVED: "attempts of a whole-table task whose refuting query's result came back "
    "(not an error)",
    CLAIM_SEEN: "attempts whose tool calls carried the planted claim's needle "
    "(arms that planted one)",
    COPRESENT: "attempts carrying the planted needle and the seeded correct source beside it "
    "(arms whose claim a seeded page contradicts)",
    EXPOSED: "attempts that read the plant's reviewer note (arms that planted one)",
    BUDGET: "attempts that ran out of their tool-call budget",
    CORRECTIVE: "attempts that filed a corrective capture (category correction, or text "
    "saying the claim is wrong)",
    PEER_CORRECT: "attempts the peer's results file records as correct",
}


class TasksFold:
    """Folds a run's events into attempts (a ``Fold`` of ``(RunMeta, [Unit], peer)``).

    ``peer`` maps a stream to the peer's own recorded ``correct`` decision, when the
    attempt also carries benchledger's (whose decision the unit then holds).
    """

    def __init__(self) -> None:
        self.base = lc.LifecycleFold(NOUN)
        self.ours: dict[str, dict[str, Decision]] = {}
        self.theirs: dict[str, dict[str, Decision]] = {}

    def apply(self, event: Event, link: str) -> None:
        self.base.apply(event, link)
        if isinstance(event, GraderDecisionEvent):
            gd = event.body
            side = self.ours if gd.origin == OURS else self.theirs
            side.setdefault(event.stream, {})[gd.check] = Decision(
                event.stream, event.seq, link, gd.stage, gd.check, gd.verdict, gd.reason,
                gd.answer, gd.expected, gd.origin, tuple(event.refs),
            )  # fmt: skip

    def result(self) -> tuple[RunMeta, list[lc.Unit], dict[str, Decision]]:
        meta, units = self.base.result()
        peer: dict[str, Decision] = {}
        for u in units:
            ours, theirs = self.ours.get(u.stream, {}), self.theirs.get(u.stream, {})
            u.decisions = {**theirs, **ours}  # benchledger's decision wins where both are
            if CORRECT in ours and CORRECT in theirs:
                peer[u.stream] = theirs[CORRECT]
        return meta, units, peer


class Card(NamedTuple):
    """One tasks run's rates, the attempts behind them and what the run is."""

    meta: RunMeta
    units: tuple[lc.Unit, ...]
    metrics: dict[str, Metric]
    harness_failures: int
    incomplete: int
    peer: dict[str, Decision]  # stream -> the peer's correct, where ours is recorded too
    notes: tuple[str, ...] = ()
    prices: PriceTable | None = None  # what cost is computed at (None: the packaged table)
    # Attempts in correct's denominator the agent cannot answer by design (streams).
    by_design: tuple[str, ...] = ()

    def definition(self, name: str) -> str:
        """What metric ``name`` counts; ``correct`` also says how many of its attempts
        could not be answered by design, and the rate over the rest."""
        if name != CORRECT or not self.by_design:
            return DESCRIPTIONS[name]
        m, n = self.metrics[CORRECT], len(self.by_design)
        rest = sum(u.stream not in self.by_design and u.verdict(CORRECT) is True
                   for u in self.units if u.graded)  # fmt: skip
        return (
            f"{DESCRIPTIONS[name]}; {n} of the {m.den} unanswerable by design (the scripted "
            "agent, with no model, answers UNAVAILABLE to a task without expected_sql or not "
            f"graded by a number): {rest}/{m.den - n} of the rest"
        )

    @property
    def usage(self) -> Usage | None:
        """The run's durations, model calls and tokens (``projections.usage``)."""
        return self.meta.usage

    def priced(self) -> Cost | Unpriced | None:
        """The run's cost at its price table (the packaged one unless given)."""
        return price_usage(self.usage, self.prices)

    @property
    def passed_units(self) -> int:
        """Attempts graded correct (what cost per passed attempt divides by)."""
        return sum(u.graded and u.verdict(CORRECT) is True for u in self.units)

    @property
    def excluded(self) -> str:
        """``EXCLUDED: <label>: <meaning>`` for an attempt the peer set aside ("" if analysed),
        one inert line: the label and the reason are the import's words (``--invalid``, or
        a bundle's config), shown as the first line of a report and of each compare column."""
        config = self.meta.config
        if not config.get("excluded"):
            return ""
        label = str(config.get("label") or "")
        meaning = str(config.get("exclusion") or label)
        return inert(f"EXCLUDED: {label}: {meaning}", value=True)

    def setting(self, key: str) -> str:
        """A text fact the import recorded (family, arm, folder, label)."""
        value = self.meta.config.get(key)
        return value if isinstance(value, str) else ""

    @property
    def treatment(self) -> str:
        planted = self.meta.config.get("planted")
        found = planted.get("treatment_id") if isinstance(planted, dict) else None
        return found if isinstance(found, str) else "none planted"

    @property
    def task_ids(self) -> tuple[str, ...]:
        return tuple(sorted({u.protocol_id for u in self.units if u.protocol_id}))

    def agreement(self) -> tuple[int, int]:
        """(agree, both): attempts where the peer's correct matches benchledger's."""
        units = {u.stream: u for u in self.units}
        agree = sum(s in units and units[s].verdict(CORRECT) is d.verdict
                    for s, d in self.peer.items())  # fmt: skip
        return agree, len(self.peer)


def _metric(name: str, check: str, units: Sequence[lc.Unit]) -> Metric:
    den = [u for u in units if u.graded and u.verdict(check) is not None]
    num = [u for u in den if u.verdict(check) is True]
    num_refs: tuple[Ref, ...] = tuple(r for u in num for r in u.ref(check))
    den_refs: tuple[Ref, ...] = tuple(r for u in den for r in u.ref(check))
    return Metric(name, len(num), len(den), wilson(len(num), len(den)), num_refs, den_refs,
                  DESCRIPTIONS[name], tuple(u.stream for u in den), CI_WILSON,
                  tuple((u.stream, float(u.verdict(check) is True)) for u in den))  # fmt: skip


def _peer_metric(units: Sequence[lc.Unit], peer: dict[str, Decision]) -> Metric:
    den = [u for u in units if u.graded and u.stream in peer]
    num = [u for u in den if peer[u.stream].verdict is True]
    num_refs = tuple((peer[u.stream].stream, peer[u.stream].seq) for u in num)
    den_refs = tuple((peer[u.stream].stream, peer[u.stream].seq) for u in den)
    values = tuple((u.stream, float(peer[u.stream].verdict is True)) for u in den)
    return Metric(PEER_CORRECT, len(num), len(den), wilson(len(num), len(den)), num_refs,
                  den_refs, DESCRIPTIONS[PEER_CORRECT], tuple(u.stream for u in den),
                  CI_WILSON, values)  # fmt: skip


def scorecard(folded: tuple[RunMeta, list[lc.Unit], dict[str, Decision]]) -> Card:
    """The run's rates (``METRIC_NAMES``) over its graded attempts (and the peer's correct)."""
    meta, units, peer = folded
    metrics = {name: _metric(name, name, units) for name in CHECKS}
    if peer:
        metrics[PEER_CORRECT] = _peer_metric(units, peer)
    errored = sum(1 for u in units if u.counted and u.error)
    incomplete = sum(1 for u in units if u.finished is None and not u.abandoned)
    notes = []
    if not any(m.den for name, m in metrics.items() if name != CORRECT):
        notes.append(
            "only `correct` is recorded: the run holds no adopted/trap/other decisions "
            "(imported before benchledger's own rulings were recorded)"
        )
    return Card(meta, tuple(units), metrics, errored, incomplete, peer, tuple(notes),
                by_design=_by_design(meta, units))  # fmt: skip


def _by_design(meta: RunMeta, units: Sequence[lc.Unit]) -> tuple[str, ...]:
    """The attempts of ``correct``'s denominator the run's agent cannot answer by design:
    the scripted agent's, on tasks whose recorded fields give no answer to compute."""
    tasks = meta.config.get("tasks")
    if meta.agent != SCRIPTED or not isinstance(tasks, dict):
        return ()
    uncomputable = set()
    for tid, data in tasks.items():
        try:
            if not msgspec.convert(data, Task, strict=False).computable():
                uncomputable.add(tid)
        except msgspec.ValidationError:
            continue  # items() names a malformed task where it is read
    in_correct = [u for u in units if u.graded and u.verdict(CORRECT) is not None]
    return tuple(u.stream for u in in_correct if u.protocol_id in uncomputable)


def score(folded: Iterable[Any]) -> Card:
    """The card of one folded run (a tasks run is reported on its own)."""
    [one] = list(folded)
    return scorecard(one)
