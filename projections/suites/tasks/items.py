"""A tasks run's items, found again in the run itself: its tasks, the arm's readings, its
planted claim's needle (``config["planted"]["needle"]``) and the correct source and
reviewer note the import found in the arm's files (``config["evidence"]``).

The importer records every task as the arm's file held it (``config["tasks"]``) and the
reference values computed from the peer's seeded warehouse (``config["references"]``:
task id -> ``{"tolerance", "readings": [[name, value], ...]}``), so no file is needed. A
run recorded before the references were can be given the seed instead
(``--protocols .../bench/seed/trino/setup.sql``): the readings are then computed from it
for the arm's planted claim (its words: ``task_grading.claim_reading``).
"""

from __future__ import annotations

from typing import Any

import msgspec

from benchledger.ledger import UnusableInput
from benchledger.ledger.events import RunStartedBody
from benchledger.projections.suites.base import ItemSet
from benchledger.projections.suites.tasks.decisions import TaskItem
from benchledger.protocols.task_grading import Reference, References, read_warehouse, references
from benchledger.protocols.tasks import Task, task_set_hash

_SEED_SUFFIX = ".sql"


def _task(run: str, task_id: str, data: Any) -> Task:
    try:
        return msgspec.convert(data, Task, strict=False)
    except msgspec.ValidationError as exc:
        raise UnusableInput(run, f"config.tasks[{task_id!r}]: not a task ({exc})") from None


def _recorded(run: str, task_id: str, data: Any) -> References:
    """One task's recorded readings; UnusableInput naming the field when malformed."""
    where = f"config.references[{task_id!r}]"
    if not isinstance(data, dict) or not isinstance(data.get("readings"), list):
        raise UnusableInput(run, f"{where} must be an object with a readings list")
    tolerance = data.get("tolerance")
    if isinstance(tolerance, bool) or not isinstance(tolerance, int | float):
        raise UnusableInput(run, f"{where}.tolerance must be a number")
    readings = []
    for i, pair in enumerate(data["readings"]):
        ok = isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str)
        if not ok or isinstance(pair[1], bool) or not isinstance(pair[1], int | float):
            raise UnusableInput(run, f"{where}.readings[{i}] must be [name, number]")
        readings.append(Reference(pair[0], float(pair[1])))
    return References(float(tolerance), tuple(readings))


def recorded_task(config: dict[str, Any], task_id: str) -> Task | None:
    """The task ``task_id`` as the run recorded it (``config.tasks``), None if absent or
    not a task."""
    tasks = config.get("tasks")
    data = tasks.get(task_id) if isinstance(tasks, dict) else None
    try:
        return _task("run_started", task_id, data) if data is not None else None
    except UnusableInput:
        return None


def recorded_readings(config: dict[str, Any]) -> dict[str, References]:
    """Every task's readings the run recorded (``config.references``); {} if none, and a
    task whose entry is malformed is left out (the card's own reading names it)."""
    recorded = config.get("references")
    out: dict[str, References] = {}
    for tid, data in recorded.items() if isinstance(recorded, dict) else ():
        try:
            out[tid] = _recorded("run_started", tid, data)
        except UnusableInput:
            continue
    return out


def references_config(refs: dict[str, References]) -> dict[str, Any]:
    """``config["references"]`` as a run records it (what ``_recorded`` reads back): task
    id -> its tolerance and its [name, value] readings."""
    return {
        tid: {"tolerance": r.tolerance, "readings": [[x.name, x.value] for x in r.readings]}
        for tid, r in sorted(refs.items())
    }


def _planted(config: dict[str, Any]) -> dict[str, Any] | None:
    """The arm's planted claim as recorded (None on an arm that planted nothing)."""
    planted = config.get("planted")
    return planted if isinstance(planted, dict) else None


def planted_needle(planted: Any, where: str, field: str) -> str | None:
    """The planted claim's needle (None when nothing was planted); UnusableInput if malformed."""
    if planted is None:
        return None
    needle = planted.get("needle") if isinstance(planted, dict) else None
    if not isinstance(needle, str) or not needle:
        raise UnusableInput(where, f"{field} must be non-empty text (the planted claim's needle)")
    return needle


def evidence(config: dict[str, Any]) -> tuple[str | None, str | None]:
    """(correct-source needle, what ``exposed`` searches) the import recorded
    (``config["evidence"]``, harness.peer.evidence): the plant's disclosure; on a run
    imported before the disclosure was recorded, the reviewer note its episodes were
    returned, which that run's rulings searched; None where there is neither."""
    found = config.get("evidence")
    found = found if isinstance(found, dict) else {}
    source = found.get("correct_source")
    needle = source.get("needle") if isinstance(source, dict) else None
    note = found.get("disclosure") if "disclosure" in found else found.get("review_note")
    return (needle if isinstance(needle, str) and needle else None,
            note if isinstance(note, str) and note else None)  # fmt: skip


def items(header: RunStartedBody, given: str | None = None) -> ItemSet:
    """The run's tasks by id, each with its readings (recorded, else from a ``given`` seed)."""
    run = "run_started"
    config = header.config
    tasks = config.get("tasks")
    if not isinstance(tasks, dict) or not tasks:
        raise UnusableInput(run, "config.tasks: the run recorded no tasks (not a tasks import?)")
    loaded = {tid: _task(run, tid, data) for tid, data in sorted(tasks.items())}
    recorded = config.get("references")
    notes: list[str] = []
    by_id: dict[str, Any] = {}
    if given is not None and not given.endswith(_SEED_SUFFIX):
        raise UnusableInput(
            given, "--protocols for a tasks run is the peer's seed (bench/seed/trino/setup.sql)"
        )
    warehouse = read_warehouse(given) if given is not None else None
    needle = planted_needle(config.get("planted"), run, "config.planted.needle")
    source, note = evidence(config)
    lacks = config.get("lacks")
    traffic = not (isinstance(lacks, list) and "transcripts" in lacks)
    for tid, task in loaded.items():
        refs: References | None = None
        if warehouse is not None:
            try:
                refs = references(warehouse, task, _planted(config))
            except ValueError as exc:
                raise UnusableInput(given or run, str(exc)) from None
        elif isinstance(recorded, dict) and tid in recorded:
            refs = _recorded(run, tid, recorded[tid])
        by_id[tid] = TaskItem(task, refs, needle, source, note, traffic)
    if config.get("origin") and needle is not None and "evidence" not in config:
        notes.append(
            "the run was imported before its correct source and reviewer note were recorded "
            "(config.evidence): copresent and exposed re-derive without them; import the arm "
            "again"
        )
    if warehouse is None and not isinstance(recorded, dict):
        notes.append(
            "the run recorded no reference values: only `correct` is re-derived (give the "
            "peer's seed with --protocols .../bench/seed/trino/setup.sql for the rest)"
        )
    if header.protocol_set_hash and task_set_hash(loaded.values()) != header.protocol_set_hash:
        notes.append(
            f"the recorded tasks do not hash to the run's task set "
            f"{header.protocol_set_hash[:12]}: differences may come from changed tasks"
        )
    return ItemSet(by_id, "(recorded in the run)" if given is None else given, notes)
