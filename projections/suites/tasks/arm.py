"""A planted-claim study's arms: each imported arm's run, placed by its coordinates.

An arm is one sealed run ``import-peer`` wrote (docs/peer-studies.md); ``StudyFold`` folds
its events to the tasks card and its store snapshots, ``coords_of`` reads the coordinates
it recorded (no rule reads a family's, an arm's or a treatment's name), and
``evaluator_writes`` what its evaluation snapshots show new. The study (``study.py``) lays
its tables out from these.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple

from benchledger.ledger.events import Event, ReadBackEvent
from benchledger.projections.card import Metric
from benchledger.projections.suites.lifecycle import scorecard as lc
from benchledger.projections.suites.tasks.scorecard import Card, TasksFold, scorecard
from benchledger.protocols.task_grading import ADOPTED

# The evaluation arm's own snapshots (the amended store invariant): what evaluator
# identities wrote is what is in the second and not in the first.
BEFORE_EVAL: Final = "store-before-eval.json"
AFTER_EVAL: Final = "store-after-eval.json"
# The mechanism's columns: the refuting count, then the answers it separates.
MECHANISM: Final = ("queried the count", "observed it", "adopted", "correct", "exceptions")
# A claim's class (the Go generator's Class: its relation to the world, not a label).
WORLD: Final = "settled by one query"  # the world states the answer: one query refutes it
PAGE: Final = "stated by a seeded page"  # only a seeded page states the correct reading
UNKNOWN: Final = "class not recorded"
# The plant (the Go generator's Arm): nothing planted, a true reading, an adoptable one.
ABSENT, TRUE, WRONG = "absent", "correct", "wrong"
PLANTS: Final = (ABSENT, TRUE, WRONG)
# Where the claim was stored: the target of the plant's changeset in the arm's store
# snapshot (a catalog entity), else a knowledge page carrying its needle.
ENTITY: Final = "entity description"
PAGE_SINK: Final = "knowledge page"
SINKS: Final = (ENTITY, PAGE_SINK)
NOT_RECORDED: Final = "not recorded"
_TOKEN: Final = re.compile(r"[-_.:/@ ]+")
Ref = tuple[str, int]


class Snapshot(NamedTuple):
    """A store snapshot the import recorded as a read-back, and where it is."""

    ref: Ref
    body: Any


class Coords(NamedTuple):
    """Where an arm sits in the study's design, each read from what its run recorded."""

    family: str  # the folder it was imported from: a grouping, displayed, never parsed
    cell: tuple[str, ...]  # the tasks it is graded on
    plant: str  # ABSENT, TRUE or WRONG
    model: str  # manifest.model, as recorded (``Study.model`` groups aliases)
    client: str  # manifest.llm_provider
    variant: str  # the planted claim's text ("" when nothing was planted)
    sink: str  # ENTITY, PAGE_SINK, NOT_RECORDED ("" when nothing was planted)
    fixture: str  # the world the tasks are about: a pkrun arm's profile, else their suites


@dataclass
class Arm:
    """One arm of the study: its run, its card, its store snapshots and its coordinates."""

    run_id: str
    name: str  # the folder: displayed, never parsed
    card: Card
    snapshots: dict[str, Snapshot] = field(default_factory=dict)
    coords: Coords = field(default_factory=lambda: Coords("", (), ABSENT, "", "", "", "", ""))

    @property
    def planted(self) -> dict[str, Any]:
        found = self.card.meta.config.get("planted")
        return found if isinstance(found, dict) else {}

    @property
    def family(self) -> str:
        return self.coords.family

    @property
    def excluded(self) -> bool:
        return bool(self.card.meta.config.get("excluded"))

    @property
    def variant_id(self) -> str:
        """The plant's own id for its claim (display only)."""
        return str(self.planted.get("treatment_id") or ("" if self.planted else "none"))

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


def coords_of(card: Card, snapshots: dict[str, Snapshot]) -> Coords:
    """An arm's coordinates, read from its recorded configuration and snapshots."""
    config = card.meta.config
    manifest, tasks = _dict(config.get("manifest")), _dict(config.get("tasks"))
    refs = _dict(config.get("references"))
    planted = _dict(config.get("planted")) if config.get("planted") is not None else None
    # wrong: some task reads the plant's value as an adoptable reading; correct: it does not
    adoptable = any(isinstance(r, dict) and any(x and x[0] == ADOPTED for x in r.get("readings")
                                                or ()) for r in refs.values())  # fmt: skip
    plant = ABSENT if planted is None else WRONG if adoptable else TRUE
    suites = sorted({str(t.get("suite")) for t in tasks.values() if isinstance(t, dict)}
                    or {str(manifest.get("suite") or "")})  # fmt: skip
    return Coords(
        family=str(config.get("family") or ""),
        cell=tuple(sorted(tasks)) or card.task_ids,
        plant=plant,
        model=str(manifest.get("model") or card.meta.started.model or ""),
        client=str(manifest.get("llm_provider") or ""),
        variant=str(planted.get("text") or "") if planted else "",
        sink=_sink(planted, snapshots) if planted else "",
        fixture=str(_dict(config.get("world")).get("profile") or "+".join(suites)),
    )


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _sink(planted: dict[str, Any], snapshots: dict[str, Snapshot]) -> str:
    """Where the plant stored its claim: a recorded ``sink``, else what the snapshots show."""
    if isinstance(planted.get("sink"), str):
        return str(planted["sink"])
    change, needle = planted.get("changeset_id"), planted.get("needle") or "\0"
    for snap in snapshots.values():
        body = snap.body if isinstance(snap.body, dict) else {}
        for cs in body.get("changesets") or ():
            if isinstance(cs, dict) and cs.get("id") == change and cs.get("target_urn"):
                return ENTITY  # a changeset applies to a catalog entity's description
        for page in body.get("pages") or ():
            if needle in json.dumps(page):
                return PAGE_SINK
    return NOT_RECORDED


def arm_of(run_id: str, card: Card, snapshots: dict[str, Snapshot]) -> Arm | None:
    """The study arm a tasks run is (None: no imported study arm: no family recorded)."""
    config = card.meta.config
    family, name = config.get("family"), config.get("arm")
    if not isinstance(family, str) or not family or not isinstance(name, str):
        return None
    return Arm(run_id, name, card, snapshots, coords_of(card, snapshots))


def same_model(a: str, b: str) -> bool:
    """Two recorded model names are one model when equal or one is a token of the other
    ('mini' and 'vendor-mini-4-5-20250101')."""
    return a == b or a.lower() in _TOKEN.split(b.lower()) or b.lower() in _TOKEN.split(a.lower())


def graded_units(arm: Arm) -> list[lc.Unit]:
    return [u for u in arm.card.units if u.graded]


def refs_of(units: Sequence[lc.Unit], check: str) -> tuple[Ref, ...]:
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


__all__ = [
    "ABSENT",
    "AFTER_EVAL",
    "BEFORE_EVAL",
    "ENTITY",
    "MECHANISM",
    "NOT_RECORDED",
    "PAGE",
    "PAGE_SINK",
    "PLANTS",
    "SINKS",
    "TRUE",
    "UNKNOWN",
    "WORLD",
    "WRONG",
    "Arm",
    "Coords",
    "Ref",
    "Snapshot",
    "StudyFold",
    "arm_of",
    "coords_of",
    "evaluator_writes",
    "graded_units",
    "refs_of",
    "same_model",
]
