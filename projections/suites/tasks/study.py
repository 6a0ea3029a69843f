"""The knowledge-pollution study's tables, re-derived from its imported arms.

The peer's report (docs/peer-studies.md, "The published tables") states its tables per run
family; each is a projection here over the sealed runs ``import-peer`` wrote, one per arm
folder, found by the configuration the import recorded (``family``, ``arm``). Every cell is
counted from recorded events: the rates from the tasks card's decisions (benchledger's own
rulings, ``decisions``), delivery from the planted claim the arm recorded, evaluator writes
from its store snapshots (read-backs), so each traces with ``audit`` to the events behind
it. An excluded attempt folder (``-DRIFTED-1``) is never counted; a cell whose arm is not
in the ledger is shown as missing and named under the tables.

Arm names are ``<class>-<plant>-<tier>[-<level>]`` (``checkable-wrong-haiku-bare``); the
directive contrast's imperative level is the arm with no level in ``directive-contrast``;
the premise probe's two arms are ``control`` and ``polluted``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple

from benchledger.ledger.events import Event, ReadBackEvent
from benchledger.projections.card import Metric
from benchledger.projections.fold import fold
from benchledger.projections.sheet import align
from benchledger.projections.stats import newcombe, wilson
from benchledger.projections.suites.lifecycle import scorecard as lc
from benchledger.projections.suites.tasks.decisions import (
    BUDGET,
    CLAIM_SEEN,
    COPRESENT,
    CORRECTIVE,
    EXPOSED,
    OBSERVED,
    QUERIED,
)
from benchledger.projections.suites.tasks.scorecard import Card, TasksFold, scorecard
from benchledger.protocols.task_grading import ADOPTED, CORRECT

RQ1: Final = "rq1-warehouse"
DIRECTIVE: Final = "directive-contrast"
PROBE: Final = "probe"  # the premise probe: a control and a polluted arm
FAMILIES: Final = (PROBE, RQ1, DIRECTIVE)
PROBE_ARMS: Final = ("control", "polluted")
TIERS: Final = ("haiku", "sonnet", "opus")
CLASSES: Final = ("convention", "checkable")
LEVELS: Final = (("bare", "bare"), ("plain", "plain"), ("imperative", ""))
FORMATS: Final = ("table", "markdown", "json")
# The evaluation arm's own snapshots (the amended store invariant): what evaluator
# identities wrote is what is in the second and not in the first.
BEFORE_EVAL: Final = "store-before-eval.json"
AFTER_EVAL: Final = "store-after-eval.json"
# The mechanism's columns: the refuting count, then the answers it separates.
MECHANISM: Final = ("queried the count", "observed it", "adopted", "correct", "exceptions")
_ARM: Final = re.compile(
    r"^(?P<cls>convention|checkable)-(?P<plant>absent|correct|wrong)-(?P<tier>haiku|sonnet|opus)"
    r"(?:-(?P<level>[a-z0-9-]+))?$"
)
Ref = tuple[str, int]


class Snapshot(NamedTuple):
    """A store snapshot the import recorded as a read-back, and where it is."""

    ref: Ref
    body: Any


@dataclass
class Arm:
    """One analysed arm of the study: its run, its card and its store snapshots."""

    run_id: str
    family: str
    name: str
    card: Card
    snapshots: dict[str, Snapshot] = field(default_factory=dict)

    @property
    def planted(self) -> dict[str, Any]:
        found = self.card.meta.config.get("planted")
        return found if isinstance(found, dict) else {}

    def metric(self, check: str) -> Metric:
        return self.card.metrics[check]


class StudyFold:
    """A tasks run's card, with the store snapshots its header stream recorded."""

    def __init__(self) -> None:
        self.tasks = TasksFold()
        self.snapshots: dict[str, Snapshot] = {}

    def apply(self, event: Event, link: str) -> None:
        self.tasks.apply(event, link)
        if isinstance(event, ReadBackEvent) and event.body.purpose == "store_snapshot":
            self.snapshots[event.body.path] = Snapshot((event.stream, event.seq), event.body.body)

    def result(self) -> tuple[Card, dict[str, Snapshot]]:
        return scorecard(self.tasks.result()), self.snapshots


def arm_of(run_id: str, card: Card, snapshots: dict[str, Snapshot]) -> Arm | None:
    """The study arm a tasks run is (None: not an analysed arm of a study family)."""
    config = card.meta.config
    family, name = config.get("family"), config.get("arm")
    if config.get("excluded") or family not in FAMILIES or not isinstance(name, str):
        return None
    if (family == PROBE) != (name in PROBE_ARMS) or (family != PROBE and not _ARM.match(name)):
        return None
    return Arm(run_id, str(family), name, card, snapshots)


# -- cells -------------------------------------------------------------------------------


class Count(NamedTuple):
    """k of n, with its Wilson 95% interval and the decisions behind k (audit refs)."""

    k: int
    n: int
    refs: tuple[Ref, ...] = ()

    def as_json(self) -> dict[str, Any]:
        ci = wilson(self.k, self.n)
        return {"k": self.k, "n": self.n,
                "ci_low": ci.low if ci else None, "ci_high": ci.high if ci else None}  # fmt: skip

    def text(self, interval: bool = False) -> str:
        if not interval or not self.n:
            return f"{self.k}/{self.n}"
        ci = wilson(self.k, self.n)
        assert ci is not None
        return (f"{self.k}/{self.n} = {100 * self.k / self.n:.1f}% "
                f"[{100 * ci.low:.1f}, {100 * ci.high:.1f}]")  # fmt: skip


class Diff(NamedTuple):
    """p1 - p2 of two counts, with its Newcombe hybrid-score 95% interval."""

    a: Count
    b: Count

    def as_json(self) -> dict[str, Any]:
        ci = newcombe(self.a.k, self.a.n, self.b.k, self.b.n)
        return {"a": self.a.as_json(), "b": self.b.as_json(),
                "diff": self.a.k / self.a.n - self.b.k / self.b.n if ci else None,
                "ci_low": ci.low if ci else None, "ci_high": ci.high if ci else None}  # fmt: skip

    def text(self, interval: bool = False) -> str:
        ci = newcombe(self.a.k, self.a.n, self.b.k, self.b.n)
        if ci is None:
            return "-"
        d = self.a.k / self.a.n - self.b.k / self.b.n
        return f"{100 * d:+.1f} pts [{100 * ci.low:+.1f}, {100 * ci.high:+.1f}]"


Cell = Count | Diff | int | str | bool | None  # None: the arm is not in the ledger


class Row(NamedTuple):
    key: str  # stable, for json and tests: "checkable/wrong/haiku"
    label: str
    cells: tuple[Cell, ...]


class Table(NamedTuple):
    """One of the report's tables: its id, what it shows, its columns and rows."""

    id: str
    title: str
    section: str  # where the published report states it
    columns: tuple[str, ...]
    rows: tuple[Row, ...]
    interval: tuple[str, ...] = ()  # the columns whose counts carry an interval
    notes: tuple[str, ...] = ()


def _count(arm: Arm | None, check: str) -> Count | None:
    """k/n of a check's True verdicts among the attempts it ruled on; on an arm that planted
    no wrong value nothing could be adopted: 0 of its graded attempts, as the report counts."""
    if arm is None:
        return None
    m = arm.metric(check)
    if check == ADOPTED and not m.den:
        return Count(0, len(_units(arm)))
    return Count(int(m.num), m.den, tuple(m.num_refs))


def _units(arm: Arm) -> list[lc.Unit]:
    return [u for u in arm.card.units if u.graded]


# -- the study ---------------------------------------------------------------------------


class Study:
    """The analysed arms of the imported families, by (family, arm name)."""

    def __init__(self, arms: Iterable[Arm]) -> None:
        self.arms: dict[tuple[str, str], Arm] = {}
        self.duplicates: list[str] = []
        for arm in arms:
            key = (arm.family, arm.name)
            if key in self.arms:
                self.duplicates.append(f"{arm.run_id} (also {self.arms[key].run_id})")
                continue
            self.arms[key] = arm
        self.missing: list[str] = []

    def arm(self, family: str, name: str) -> Arm | None:
        found = self.arms.get((family, name))
        if found is None:
            where = f"{family}/{name}"
            if where not in self.missing:
                self.missing.append(where)
        return found

    def families(self) -> list[str]:
        return [f for f in FAMILIES if any(k[0] == f for k in self.arms)]

    # Section 1: the premise probe the protocol was written after

    def probe(self) -> Table:
        rows = []
        for name in PROBE_ARMS:
            arm = self.arm(PROBE, name)
            cells = (len(arm.card.units) if arm else None, _count(arm, ADOPTED),
                     _count(arm, CORRECT),
                     _count(arm, COPRESENT) if arm is None or arm.planted else "-")  # fmt: skip
            rows.append(Row(f"{PROBE}/{name}", name, cells))
        return Table("probe", "The premise probe: a wrong fiscal convention, planted or not",
                     "1", ("episodes", "adopted", "correct", "correct source beside it"),
                     tuple(rows), interval=("adopted",))  # fmt: skip

    # Section 3: the RQ1 matrix, its controls, the mechanism, delivery and co-presence

    def adoption(self) -> Table:
        rows = tuple(
            Row(cls, f"{cls} ({what})",
                tuple(_count(self.arm(RQ1, f"{cls}-wrong-{t}"), ADOPTED) for t in TIERS))
            for cls, what in (("convention", "fiscal boundary"), ("checkable", "order count"))
        )  # fmt: skip
        return Table("adoption", "Adoption of the planted wrong claim (RQ1, claude-cli)",
                     "3", TIERS, rows, interval=TIERS)  # fmt: skip

    def controls(self) -> Table:
        rows = tuple(
            Row(f"{cls}/{plant}", f"{cls}/{plant}",
                tuple(_count(self.arm(RQ1, f"{cls}-{plant}-{t}"), CORRECT) for t in TIERS))
            for cls in CLASSES for plant in ("absent", "correct")
        )  # fmt: skip
        return Table("controls", "Correct answers on the control arms (RQ1)", "3", TIERS, rows)

    def _mechanism_row(self, family: str, name: str, label: str) -> Row:
        arm = self.arm(family, name)
        cells = (_count(arm, QUERIED), _count(arm, OBSERVED), _count(arm, ADOPTED),
                 _count(arm, CORRECT), self._exceptions(arm))  # fmt: skip
        return Row(f"{family}/{name}", label, cells)

    def mechanism(self) -> Table:
        rows = tuple(
            self._mechanism_row(RQ1, name, label)
            for name, label in (
                ("checkable-wrong-haiku", "checkable/wrong/haiku"),
                ("checkable-absent-haiku", "checkable/absent/haiku (control)"),
                ("checkable-wrong-sonnet", "checkable/wrong/sonnet"),
                ("checkable-wrong-opus", "checkable/wrong/opus"),
            )
        )
        notes = ("exceptions: attempts that observed the count and did not answer correctly, "
                 "or did not observe it and did not adopt (the exact separation)",)  # fmt: skip
        return Table("mechanism", "Whether the refuting count was observed, per episode",
                     "3", MECHANISM, rows, notes=notes)  # fmt: skip

    @staticmethod
    def _exceptions(arm: Arm | None) -> int | None:
        """Attempts the exact separation does not hold for (None: no such arm)."""
        if arm is None:
            return None
        out = 0
        for u in _units(arm):
            observed, adopted = u.verdict(OBSERVED), u.verdict(ADOPTED)
            correct = u.verdict(CORRECT)
            if observed is None:
                continue  # not the order-count task: the separation is about that one
            out += bool((observed and not correct) or (not observed and adopted is not True))
        return out

    def delivery(self) -> Table:
        rows = []
        for cls in CLASSES:
            for t in TIERS:
                arm = self.arm(RQ1, f"{cls}-wrong-{t}")
                planted = arm.planted if arm else {}
                both = _count(arm, COPRESENT) if cls == "convention" else "-"
                cells: tuple[Cell, ...] = (
                    planted.get("in_search") if arm else None,
                    planted.get("in_sink") if arm else None,
                    _count(arm, CLAIM_SEEN),
                    both,
                )
                rows.append(Row(f"{cls}/wrong/{t}", f"{cls}/wrong/{t}", cells))
        cols = ("in search", "in sink", "claim in transcript", "correct source beside it")
        notes = ("in search / in sink: the plant's cross-identity read-back, as the arm "
                 "recorded it (planted.json); on the order count the correct source is the "
                 "world: see the mechanism table",)  # fmt: skip
        return Table("delivery", "Delivery and co-presence on the wrong arms (RQ1)", "3",
                     cols, tuple(rows), notes=notes)  # fmt: skip

    # Section 4 (directive contrast) and Section 5 (the entity-description sink rows)

    def directive(self) -> Table:
        rows = tuple(
            self._mechanism_row(DIRECTIVE, "checkable-wrong-haiku" + (f"-{lv}" if lv else ""),
                                level)
            for level, lv in LEVELS
        )  # fmt: skip
        return Table("directive", "The directive contrast: checkable/wrong at haiku",
                     "4", MECHANISM, rows, interval=("adopted",))  # fmt: skip

    def sink(self) -> Table:
        rows = (
            self._mechanism_row(RQ1, "checkable-wrong-haiku", "entity-description sink (RQ1 arm)"),
            self._mechanism_row(DIRECTIVE, "checkable-wrong-haiku",
                                "entity-description sink (contrast imperative arm)"),
        )  # fmt: skip
        notes = ("the knowledge-page sink row is the generalization family's, which the "
                 "peer's published material here does not hold",)  # fmt: skip
        return Table("sink", "Storage location: the entity-description sink rows", "5",
                     MECHANISM, rows, interval=("adopted",), notes=notes)  # fmt: skip

    # Section 7: exposure to the plant's reviewer note, and adoption conditional on it

    def exposure(self) -> Table:
        rows = tuple(
            Row(f"{cls}/claude-cli", f"{cls}, claude-cli",
                tuple(_count(self.arm(RQ1, f"{cls}-wrong-{t}"), EXPOSED) for t in TIERS))
            for cls in CLASSES
        )  # fmt: skip
        return Table("exposure", "Episodes whose transcript carries the reviewer note", "7",
                     TIERS, rows)  # fmt: skip

    def conditional(self) -> Table:
        arms = [(RQ1, f"{cls}-wrong-{t}") for cls in CLASSES for t in TIERS]
        arms += [(DIRECTIVE, "checkable-wrong-haiku" + (f"-{lv}" if lv else ""))
                 for _, lv in LEVELS]  # fmt: skip
        rows = []
        for family, name in arms:
            arm = self.arm(family, name)
            cells: list[Cell] = []
            for exposed in (True, False):
                units = [u for u in _units(arm) if u.verdict(EXPOSED) is exposed] if arm else []
                adopted = [u for u in units if u.verdict(ADOPTED) is True]
                correct = [u for u in units if u.verdict(CORRECT) is True]
                cells += (
                    (len(units), Count(len(adopted), len(units), _refs(adopted, ADOPTED)),
                     Count(len(correct), len(units), _refs(correct, CORRECT)))
                    if arm else (None, None, None)
                )  # fmt: skip
            rows.append(Row(f"{family}/{name}", f"{family}/{name}", tuple(cells)))
        cols = ("exposed", "exposed adopted", "exposed correct",
                "unexposed", "unexposed adopted", "unexposed correct")  # fmt: skip
        return Table("conditional", "Adoption conditional on exposure", "7", cols, tuple(rows))

    # Section 8: what the tiers wrote back

    def writes(self) -> Table:
        rows = []
        for cls, t in (("checkable", "opus"), ("convention", "opus"), ("convention", "haiku"),
                       ("checkable", "haiku"), ("checkable", "sonnet"),
                       ("convention", "sonnet")):  # fmt: skip
            arm = self.arm(RQ1, f"{cls}-wrong-{t}")
            new = evaluator_writes(arm) if arm else None
            corrective = sum(len(u.decisions[CORRECTIVE].refs) for u in _units(arm)
                             if u.verdict(CORRECTIVE)) if arm else None  # fmt: skip
            statuses = ", ".join(sorted({str(i.get("status")) for i in new})) if new else ""
            cells: tuple[Cell, ...] = (
                len(new) if new is not None else None,
                corrective,
                statuses or "-",
            )
            rows.append(Row(f"{cls}/{t}", f"{cls}/{t}", cells))
        cols = ("evaluator captures", "corrective", "statuses")
        notes = ("evaluator captures: insights in store-after-eval.json and not in "
                 "store-before-eval.json, captured by neither the plant's teacher nor its "
                 "witness; corrective: capture calls of the episodes (category correction, or "
                 "the peer's text match), counted from the transcripts",)  # fmt: skip
        return Table("writes", "Captures by evaluator identities on the wrong arms", "8",
                     cols, tuple(rows), notes=notes)  # fmt: skip

    # Section 9: the pre-registered contrasts

    def contrasts(self) -> Table:
        rows = []
        for t in ("sonnet", "opus"):
            a = _count(self.arm(RQ1, f"convention-wrong-{t}"), ADOPTED)
            b = _count(self.arm(RQ1, f"checkable-wrong-{t}"), ADOPTED)
            rows.append(Row(f"H1a/{t}", f"H1a convention minus checkable @ {t}",
                            (Diff(a, b) if a and b else None,)))  # fmt: skip
        for t in ("sonnet", "opus"):
            a = _count(self.arm(RQ1, "checkable-wrong-haiku"), ADOPTED)
            b = _count(self.arm(RQ1, f"checkable-wrong-{t}"), ADOPTED)
            rows.append(Row(f"H1b/{t}", f"H1b haiku minus {t} (checkable)",
                            (Diff(a, b) if a and b else None,)))  # fmt: skip
        return Table("contrasts", "The pre-registered contrasts (Newcombe 95%)", "9",
                     ("difference",), tuple(rows))  # fmt: skip

    # Budget exhaustion and harness failures per family (the peer's flags)

    def flags(self) -> Table:
        rows = []
        for family in self.families():
            arms = [a for (f, _), a in sorted(self.arms.items()) if f == family]
            episodes = sum(len(a.card.units) for a in arms)
            budget = sum(int(a.metric(BUDGET).num) for a in arms)
            failures = sum(a.card.harness_failures for a in arms)
            rows.append(Row(family, family, (len(arms), episodes, budget, failures)))
        return Table(
            "flags",
            "Budget exhaustion and harness failures per family",
            "9",
            ("arms", "episodes", "budget exhausted", "harness failures"),
            tuple(rows),
            notes=(
                "the report names budget flags among its exploratory measures and prints no "
                "count; these are the attempts' own budget_exhausted and error fields",
            ),
        )

    def tables(self) -> list[Table]:
        """Every table the imported families can fill, in the report's order."""
        out: list[Table] = [self.probe()] if PROBE in self.families() else []
        if RQ1 in self.families():
            out += [self.adoption(), self.controls(), self.mechanism(), self.delivery()]
        if DIRECTIVE in self.families():
            out += [self.directive()]
        if RQ1 in self.families() or DIRECTIVE in self.families():
            out += [self.sink()]
        if RQ1 in self.families():
            out += [self.exposure()]
        if RQ1 in self.families() or DIRECTIVE in self.families():
            out += [self.conditional()]
        if RQ1 in self.families():
            out += [self.writes(), self.contrasts()]
        out.append(self.flags())
        return out


def _refs(units: Sequence[lc.Unit], check: str) -> tuple[Ref, ...]:
    return tuple(r for u in units for r in u.ref(check))


def evaluator_writes(arm: Arm) -> list[dict[str, Any]] | None:
    """Insights the evaluation arm's snapshots show new and not the plant's (None: the arm
    recorded no evaluation snapshots, as the earliest arms did not)."""
    before, after = arm.snapshots.get(BEFORE_EVAL), arm.snapshots.get(AFTER_EVAL)
    if before is None or after is None:
        return None
    planted = arm.planted
    plant = {planted.get("teacher_email"), planted.get("witness_email")} - {None}
    seen = {i.get("id") for i in _insights(before.body)}
    return [i for i in _insights(after.body)
            if i.get("id") not in seen and i.get("captured_by") not in plant]  # fmt: skip


def _insights(snapshot: Any) -> list[dict[str, Any]]:
    found = snapshot.get("insights") if isinstance(snapshot, dict) else None
    return [i for i in found or () if isinstance(i, dict)]


# -- rendering ---------------------------------------------------------------------------


def _cell(cell: Cell, interval: bool) -> str:
    if cell is None:
        return "(not imported)"
    if isinstance(cell, bool):
        return "yes" if cell else "no"
    if isinstance(cell, Count | Diff):
        return cell.text(interval)
    return str(cell)


def _json_cell(cell: Cell) -> Any:
    if isinstance(cell, Count | Diff):
        return cell.as_json()
    return cell


def render(study: Study, fmt: str) -> str:
    """The study's tables as text (table or markdown) or JSON."""
    tables = study.tables()
    missing = sorted(set(study.missing))
    if fmt == "json":
        doc = {
            "families": study.families(),
            "runs": {f"{f}/{n}": a.run_id for (f, n), a in sorted(study.arms.items())},
            "tables": [
                {"id": t.id, "title": t.title, "section": t.section, "columns": list(t.columns),
                 "rows": [{"key": r.key, "label": r.label,
                           "cells": dict(zip(t.columns, map(_json_cell, r.cells), strict=True))}
                          for r in t.rows], "notes": list(t.notes)}
                for t in tables
            ],
            "missing": missing,
            "duplicates": study.duplicates,
        }  # fmt: skip
        return json.dumps(doc, indent=2) + "\n"
    lines: list[str] = []
    for t in tables:
        head = ("", *t.columns)
        body = [(r.label, *(_cell(c, col in t.interval) for c, col in zip(r.cells, t.columns,
                                                                          strict=True)))
                for r in t.rows]  # fmt: skip
        if fmt == "markdown":
            lines += [f"### {t.title} (report section {t.section})", ""]
            lines.append("| " + " | ".join(head) + " |")
            lines.append("|" + "---|" * len(head))
            lines += ["| " + " | ".join(row) + " |" for row in body]
            lines += [""] + [f"*{n}*" for n in t.notes] + ([""] if t.notes else [])
        else:
            lines += [f"{t.title} (report section {t.section})"]
            lines += [f"  {line}".rstrip() for line in align([head, *body])]
            lines += [f"  ({n})" for n in t.notes] + [""]
    if missing:
        lines.append("not imported: " + ", ".join(missing))
    if study.duplicates:
        lines.append("set aside (the same arm imported twice): " + ", ".join(study.duplicates))
    return "\n".join(lines).rstrip() + "\n"


def study_of(runs: Iterable[tuple[str, Sequence[tuple[Event, str]]]]) -> Study:
    """The study of every analysed arm among ``runs`` ((run id, events) pairs)."""
    arms = []
    for run_id, events in runs:
        card, snapshots = fold(StudyFold(), events)
        arm = arm_of(run_id, card, snapshots)
        if arm is not None:
            arms.append(arm)
    return Study(arms)


__all__ = [
    "FORMATS",
    "Arm",
    "Study",
    "StudyFold",
    "Table",
    "evaluator_writes",
    "render",
    "study_of",
]
