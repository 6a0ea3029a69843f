"""A peer tasks-bench arm (mcp-data-platform's knowledge-pollution study) as a sealed run.

An arm folder holds ``results.json`` (``manifest``, ``attempts``, ``tasks``, ``suites``),
its ``results.json.transcripts`` (one ``<task>-<arm>-k<attempt>.json`` per attempt, the
lifecycle transcripts' turn format under another header), the ``tasks/`` it ran, the
``planted.json`` claim (absent on the absent arms), store snapshots and ``arm-config.yaml``.
One run per folder: excluded attempts (a labelled folder, ``arms``) are runs of their own
marked ``excluded``, never merged into the analysed arm's. The ``tasks/`` files load through
``protocols.tasks`` and must hash to the manifest's ``task_set_hash``: then the task
objects the header carries are the ones the arm ran.

``arm-config.yaml`` carries the arm's database password and storage keys: only its digest
and the persona tool allow lists reach the ledger. An attempt whose ``error`` is set is a
harness failure the peer did not grade: it records an infra error and no verdict.

A flat family (``<arm>.json`` files beside their transcripts, ``arms.flat_arms``) goes through
the same plan: its tasks are the peer's ``bench/tasks`` files by id (they must hash to the
manifest's claim too), its plant the README's treatment string, and it has no arm config.

The whole folder (every attempt, transcript, task and snapshot) is checked before the first
write, and a family's every arm before its first: a refused import leaves nothing. Times
are the manifest's start plus one nanosecond per event, so a folder gives the same root;
each episode and unit records its trace hash as a live one does.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
from collections.abc import Callable, Mapping
from typing import Any, Final

import msgspec

from benchledger.harness.peer.arms import (
    ARM_CONFIG,
    README,
    RESULTS,
    RESULTS_DIR,
    TRANSCRIPTS,
    ArmName,
    arm_files,
    arm_folders,
    flat_arms,
    is_arm,
    label_meanings,
    name_of,
)
from benchledger.harness.peer.files import check_path, peer_root
from benchledger.harness.peer.pkrun_arm import (
    WORLD,
    is_pkrun,
    plan_pkrun,
)
from benchledger.harness.peer.results import Fields, start_ns
from benchledger.harness.peer.tasks_arm import (
    MAX_JSON,
    ORIGIN,
    PLANTED,
    SHAPE,
    TASKS_DIR,
    ArmPlan,
    ArmUnit,
    check_summaries,
    evidence_of,
    lacking,
    layout_tasks,
    planted_claim,
    read_arm_config,
    read_json,
    readme_planted,
    references_of,
    required_int,
    run_header,
    snapshots_of,
    unit_of,
    with_evidence,
)
from benchledger.ledger import Ledger, LedgerError, UnusableInput
from benchledger.ledger.ledger import StreamWriter, check_run_id
from benchledger.projections.suites.tasks.decisions import TaskItem, decide_unit
from benchledger.projections.suites.tasks.items import planted_needle, references_config
from benchledger.projections.trace import traced, unit_trace_hash
from benchledger.protocols import tasks as task_files
from benchledger.protocols.document import read


def _plan(arm_dir: str, name: ArmName, family: str, run_id: str | None) -> ArmPlan:
    """Every file of the arm checked and built into bodies: all refusals happen here.

    ``arm_dir`` is an arm folder, or a flat family's ``<arm>.json`` (``arms.flat_arms``):
    its tasks then come from the peer's layout, its plant from the family README, and it
    has no arm config or snapshots.
    """
    flat = arm_dir.endswith(".json") and os.path.isfile(arm_dir)
    files = None if flat else arm_files(arm_dir)
    if not flat and files is None:
        raise UnusableInput(arm_dir, f"holds no {RESULTS} (nor {RESULTS_DIR}/{RESULTS})")
    path, folder = (arm_dir, arm_dir + TRANSCRIPTS) if files is None else files
    lacks = lacking(arm_dir, folder, flat)
    data = read_json(path, MAX_JSON, RESULTS)
    f = Fields(path, "tasks results file")
    if not isinstance(data, dict):
        raise f.refuse("the top level must be an object with manifest and attempts")
    manifest = data.get("manifest")
    if not isinstance(manifest, dict):
        raise f.refuse("field 'manifest' is missing or not an object")
    attempts = f.items(data, "attempts", "")
    if not attempts:
        raise f.refuse("field 'attempts' is missing or empty")
    run = run_id or f"peer-{family}-{name.folder}"
    try:
        check_run_id(run)
    except ValueError as exc:
        raise UnusableInput(arm_dir if run_id is None else "--run-id", str(exc)) from None
    if is_pkrun(attempts):
        if flat:
            raise f.refuse("pkrun attempts (question_id) in a flat family: an arm folder holds "
                           f"its {WORLD}")  # fmt: skip
        return plan_pkrun(arm_dir, name, family, run, path, folder, data)
    start = start_ns(f, manifest, required=True)
    k = required_int(f, manifest, "k", "manifest")
    claimed = f.text(manifest, "task_set_hash", "manifest")
    if flat:
        loaded = layout_tasks(f, data, attempts)
    else:
        loaded = task_files.load(os.path.join(arm_dir, TASKS_DIR))  # InvalidInput names the line
    for file in loaded.files:  # read by the task loader: refused after, before any write
        check_path(file)
    theirs = task_files.task_set_hash(loaded.tasks)
    # each file as written (the peer's YAML object), so the read side needs no files
    tasks = {t.id: read(file).data for t, file in zip(loaded.tasks, loaded.files, strict=True)}
    if theirs != claimed:
        raise f.refuse(
            f"manifest.task_set_hash is {claimed or '(none)'} but "
            f"{os.path.dirname(loaded.files[0]) if flat else TASKS_DIR + '/'} "
            f"hashes to {theirs}: these are not the tasks the arm ran"
        )
    arm = f.text(manifest, "arm", "manifest")
    family_dir = os.path.dirname(path)
    planted = readme_planted(family_dir, name.arm) if flat else planted_claim(arm_dir)
    where = os.path.join(family_dir, README) if flat else os.path.join(arm_dir, PLANTED)
    refs, refs_from = references_of(path, loaded.tasks, planted)
    needle = planted_needle(planted, where, "needle")
    traffic = "transcripts" not in lacks
    items = {t.id: TaskItem(t, refs.get(t.id), needle, traffic=traffic) for t in loaded.tasks}
    snapshots = () if flat else snapshots_of(arm_dir)
    units: list[ArmUnit] = []
    seen: dict[str, int] = {}
    for i, record in enumerate(attempts):
        unit = unit_of(f, run, i, record, tasks, folder, arm, items)
        if unit.stream in seen:
            first, pid = seen[unit.stream], unit.started.protocol_id
            raise f.refuse(
                f"attempts[{first}] and attempts[{i}] are both {pid} attempt {unit.started.attempt}"
            )
        if unit.started.attempt > k:
            raise f.refuse(f"attempts[{i}].attempt is {unit.started.attempt} but manifest.k is {k}")
        seen[unit.stream] = i
        units.append(unit)
    check_summaries(f, data, attempts)
    found = evidence_of(path, planted, snapshots, units)
    units = with_evidence(units, found)
    config: dict[str, Any] = {
        "origin": ORIGIN,
        "shape": SHAPE,
        "family": family,
        "arm": name.arm,
        "folder": name.folder,
        "label": name.label,
        "excluded": name.excluded,
        "exclusion": name.exclusion,
        "manifest": manifest,
        "planted": planted,
        "tasks": tasks,
        **({"references": references_config(refs)} if refs else {}),
        "references_from": refs_from,
        "evidence": found,
        "arm_config": None
        if ARM_CONFIG in lacks
        else read_arm_config(os.path.join(arm_dir, ARM_CONFIG)),
        "lacks": lacks,
    }
    if flat:  # where what an arm folder holds was found instead
        config["results_file"] = os.path.basename(path)
        # relative to the family, so a copy of the peer's tree imports to the same root
        config["tasks_folder"] = os.path.relpath(os.path.dirname(loaded.files[0]), family_dir)
    # every task the arm was given, so an interrupted arm reads as incomplete
    header = run_header(f, manifest, config, claimed, len(tasks), k)
    return ArmPlan(run, name, start, header, snapshots, tuple(units))


def _write_unit(w: StreamWriter, unit: ArmUnit) -> None:
    """The attempt's events: the peer's verdict, then ours from the one decision function
    (``projections.suites.tasks.decisions``), which re-derivation calls again; the trace
    hashes a live unit records (``w`` keeps its log), which re-derivation checks."""
    w.append(unit.started)
    read = (unit.episode, *unit.calls, *((unit.said,) if unit.said is not None else ()))
    refs = [w.append(body) for body in read]
    done = traced(unit.finished, [body for seq, body in w.log if seq >= refs[0]])
    finished = w.append(done, refs=refs)
    seen: list[tuple[int, Any]] = [*zip(refs, read, strict=True)]
    seen.append((finished, done))
    if unit.decision is not None:
        w.append(unit.decision, refs=[finished])
    if unit.infra is not None:
        seen.append((w.append(unit.infra), unit.infra))
    outcome = dict(unit.outcome.outcome)
    for ruling in decide_unit(unit.item, seen):
        w.append(ruling.body, refs=list(ruling.refs))
        outcome[ruling.body.check] = ruling.body.verdict  # the last decision of a check rules
    trace = unit_trace_hash(body for _, body in w.log)
    w.append(msgspec.structs.replace(unit.outcome, outcome=outcome, trace_hash=trace))


def _write(ledger: Ledger, plan: ArmPlan) -> str:
    """Write a checked plan as one sealed run; return its root."""
    ticks = itertools.count(plan.start_ns)
    # Deterministic timestamps (same folder, same root) need our clock while writing; the
    # caller's ledger gets its own clock back however the import ends.
    callers_clock = ledger.clock
    ledger.clock = lambda: next(ticks)
    try:
        header = ledger.start_run(plan.run_id, plan.header)
        for snapshot in plan.snapshots:
            header.append(snapshot)
        ledger.commit(header)
        for unit in plan.units:
            writer = ledger.new_stream(unit.stream, keep_log=True)
            _write_unit(writer, unit)
            ledger.commit(writer)
        return ledger.seal(plan.run_id)
    finally:
        ledger.clock = callers_clock


def _refuse_existing(ledger: Ledger, plans: list[ArmPlan]) -> None:
    taken = set(ledger.store.run_ids())
    clash = [p.run_id for p in plans if p.run_id in taken]
    if clash:
        raise LedgerError(f"run {clash[0]!r} already exists; nothing was imported")


INVALID_LABEL: Final = "INVALID"  # an arm declared invalid at import (``--invalid``)


def _declared(name: ArmName, invalid: Mapping[str, str]) -> ArmName:
    """The arm's name, excluded when the import was told it is invalid (``--invalid
    FOLDER=REASON``): an arm the peer declared invalid only in prose, under no label."""
    reason = invalid.get(name.folder)
    if reason is None:
        return name
    said = f"{reason} (declared invalid at import: --invalid)"
    exclusion = "; ".join(x for x in (name.exclusion, said) if x)
    return dataclasses.replace(name, label=name.label or INVALID_LABEL, exclusion=exclusion)


def _check_invalid(where: str, invalid: Mapping[str, str], folders: set[str]) -> None:
    """Every --invalid names one of the arm folders imported, with a reason."""
    for folder, reason in sorted(invalid.items()):
        if folder not in folders:
            raise UnusableInput(where, f"--invalid names {folder!r}, which is not an arm folder "
                                f"imported here ({', '.join(sorted(folders))})")  # fmt: skip
        if not reason.strip():
            raise UnusableInput(where, f"--invalid {folder}: give the reason (FOLDER=REASON)")


def import_arm(
    ledger: Ledger,
    arm_dir: str,
    *,
    family: str = "",
    run_id: str | None = None,
    invalid: Mapping[str, str] | None = None,
) -> tuple[str, str, str]:
    """Import one arm folder as a sealed run; return (run id, root, exclusion label).

    ``family`` defaults to the name of the folder holding the arm; the run id to
    ``peer-<family>-<folder>``. ``invalid``: folder -> reason, arms to mark excluded
    (``_declared``). Refused input (UnusableInput; InvalidInput for a task
    file) and an existing run id (LedgerError) write nothing. An arm folder inside another
    arm folder is refused: its unlabelled name would pass an attempt set aside as analysed.
    """
    with peer_root(arm_dir):  # every file it reads, from there down (files.py)
        here = os.path.normpath(arm_dir)
        family_dir = os.path.dirname(os.path.abspath(here))
        if is_arm(family_dir):
            raise UnusableInput(
                arm_dir,
                f"is inside the arm folder {family_dir}, not one of a family's arms: its name "
                "carries no exclusion label (move it beside the family's arms under a labelled "
                "name)",
            )
        fam = family or os.path.basename(family_dir)
        name = name_of(here, label_meanings(family_dir))
        _check_invalid(arm_dir, invalid or {}, {name.folder})
        plan = _plan(here, _declared(name, invalid or {}), fam, run_id)
        _refuse_existing(ledger, [plan])
        return plan.run_id, _write(ledger, plan), plan.name.label


def import_family(
    ledger: Ledger,
    family_dir: str,
    progress: Callable[[int, int], None] | None = None,
    invalid: Mapping[str, str] | None = None,
) -> list[tuple[str, str, str]]:
    """Import every arm folder of a family, sorted, each as its own sealed run; return
    (run id, root, label) per arm. Every arm is checked first: one unusable arm, or one
    run id already taken, refuses the family with nothing written."""
    with peer_root(family_dir):  # every file it reads, from there down (files.py)
        here = os.path.normpath(family_dir)
        family = os.path.basename(os.path.abspath(here))
        meanings = label_meanings(here)
        arms = flat_arms(here) or arm_folders(here)
        names = [name_of(d, meanings) for d in arms]
        _check_invalid(family_dir, invalid or {}, {n.folder for n in names})
        plans = [_plan(d, _declared(n, invalid or {}), family, None)
                 for d, n in zip(arms, names, strict=True)]  # fmt: skip
        _refuse_existing(ledger, plans)
        out = []
        for n, plan in enumerate(plans, 1):
            out.append((plan.run_id, _write(ledger, plan), plan.name.label))
            if progress:
                progress(n, len(plans))
        return out
