"""A peer pkrun arm (the cross-fixture arms): its world, its questions and their
references, its transcripts by question, seed, world and replicate, planned as one run.

The pkrun results shape carries ``question_id`` where the tasks shape carries ``task_id``
(``is_pkrun``); ``tasks_import._plan`` hands such an arm here (docs/peer-studies.md).
"""

from __future__ import annotations

import json
import os
import re
from typing import Any, Final

import msgspec

from benchledger.harness.peer import world as world_file
from benchledger.harness.peer.arms import (
    ARM_CONFIG,
    ArmName,
)
from benchledger.harness.peer.results import Fields, start_ns
from benchledger.harness.peer.tasks_arm import (
    EPISODE,
    MAX_JSON,
    MAX_SNAPSHOT,
    ORIGIN,
    PLANTED,
    SHAPE,
    ArmPlan,
    ArmUnit,
    episode_end,
    evidence_of,
    lacking,
    planted_claim,
    read_arm_config,
    read_json,
    required_int,
    run_header,
    said_body,
    snapshots_of,
    stated_value,
    with_evidence,
)
from benchledger.harness.peer.transcript import walk
from benchledger.ledger import UnusableInput
from benchledger.ledger.events import (
    EpisodeStartedBody,
    GraderDecisionBody,
    InfraErrorBody,
    SessionCallBody,
    UnitFinishedBody,
    UnitStartedBody,
)
from benchledger.ledger.names import RULE, is_name
from benchledger.projections.suites.tasks.decisions import TaskItem
from benchledger.projections.suites.tasks.items import planted_needle, references_config
from benchledger.protocols import tasks as task_files
from benchledger.protocols.task_grading import (
    ADOPTED,
    CORRECT,
    FINAL_NUMBER,
    Reference,
    References,
)
from benchledger.protocols.tasks import Task, TaskGrading

WORLD: Final = world_file.WORLD_FILE
PK_SHAPE: Final = "pkrun"
# A pkrun transcript's name: <question>_<seed>_<world>-r<replicate>.json (pollution_tables.py
# ``exposure``); the question ends at the first underscore, the seed at the next.
_PK_TRANSCRIPT: Final = re.compile(
    r"^(?P<q>[^_]+)_(?P<seed>[^_]+)_(?P<world>.+)-r(?P<rep>[0-9]+)\.json$"
)
# A count question (``<thing>-count``) asks how many <thing>s the world provisions.
_COUNT_QUESTION: Final = re.compile(r"^(?P<thing>[a-z][a-z0-9_]*)-count$")
COUNT_TOLERANCE: Final = 0.5  # whole counts: half a unit apart (the peer's count tolerances)
POOL: Final = "pool"  # the pool-total trap: every monitor of the generator's pool


def is_pkrun(attempts: list[dict[str, Any]]) -> bool:
    """Whether a results file's attempts are pkrun's (``question_id``, no ``task_id``)."""
    return all("task_id" not in a for a in attempts) and any("question_id" in a for a in attempts)


def _world(arm_dir: str) -> tuple[str, world_file.World]:
    """The arm's ``fixture-world.json`` as the fixture service served it (``world.py``)."""
    path = os.path.join(arm_dir, WORLD)
    if not os.path.isfile(path):
        raise UnusableInput(arm_dir, f"a pkrun arm holds no {WORLD}: the world its question was "
                            "asked in, and so its reference values, are unknown")  # fmt: skip
    return path, world_file.read_world(path, read_json(path, MAX_SNAPSHOT, "fixture world"))


def _pk_references(
    path: str, world: world_file.World, question: str, planted: dict[str, Any] | None
) -> tuple[References, str]:
    """A count question's readings in the served world, as the generator defines them:
    correct (the count the world provisions), adopted (the planted needle's one number, when
    it differs), the pool total (its trap). A reading within tolerance of an earlier one is
    left out: the peer's script classifies by the first reading that matches, so it could
    never be told (the pool on a world provisioning the whole pool)."""
    asked = _COUNT_QUESTION.match(question)
    if asked is None:
        raise UnusableInput(path, f"question {question!r} is not a count question "
                            "(<thing>-count): its answer in this world is unknown")  # fmt: skip
    correct, pool, field = world_file.counted(path, world, question, asked["thing"])
    readings = [Reference(CORRECT, float(correct))]
    stated = stated_value(planted)
    said = [f"{WORLD} ({field} of world profile {world.profile!r})"]
    candidates = [Reference(ADOPTED, stated)] if stated is not None else []
    for reading in (*candidates, Reference(POOL, float(pool))):
        same = next((r for r in readings if abs(reading.value - r.value) <= COUNT_TOLERANCE), None)
        if same is not None:
            said.append(f"no {reading.name} reading: {reading.value:g} reads {same.name}")
            continue
        readings.append(reading)
        said.append("the planted needle's number" if reading.name == ADOPTED
                    else f"the generator's pool of {pool}")  # fmt: skip
    return References(COUNT_TOLERANCE, tuple(readings)), "; ".join(said)


def _pk_transcripts(folder: str, world_name: str) -> dict[tuple[str, int], str]:
    """The transcript folder's files by (question, replicate); refused when a name is not
    pkrun's, names another world, or two files are one attempt's."""
    out: dict[tuple[str, int], str] = {}
    if not os.path.isdir(folder):
        return out
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".json"):
            continue
        path = os.path.join(folder, name)
        m = _PK_TRANSCRIPT.match(name)
        if m is None:
            raise UnusableInput(path, "not a pkrun transcript name "
                                "(<question>_<seed>_<world>-r<replicate>.json)")  # fmt: skip
        if m["world"] != world_name:
            raise UnusableInput(path, f"names world {m['world']!r} but {WORLD} is "
                                f"{world_name!r}: another world's episode")  # fmt: skip
        key = (m["q"], int(m["rep"]))
        if key in out:
            raise UnusableInput(path, f"is {key[0]} replicate {key[1]} as "
                                f"{os.path.basename(out[key])} is")  # fmt: skip
        out[key] = path
    return out


def _pk_unit(
    f: Fields, run: str, i: int, record: dict[str, Any], items: dict[str, TaskItem],
    files: dict[tuple[str, int], str] | None,
) -> ArmUnit:  # fmt: skip
    where = f"attempts[{i}]"
    qid = f.text(record, "question_id", where)
    if not is_name(qid):  # it names a stream, and files of the run's exports
        raise f.refuse(f"{where}.question_id {qid!r} {RULE}")
    if qid not in items:
        raise f.refuse(f"{where}.question_id {qid!r} is not the arm's question")
    replicate = required_int(f, record, "replicate", where)
    answer = f.text(record, "final_answer", where)
    error = f.text(record, "error", where).strip()
    correct = f.flag(record, "correct", where)  # the peer's verdict, when it recorded one
    calls: tuple[SessionCallBody, ...] = ()
    said = None
    prompt = ""
    if files is not None:
        path = files.get((qid, replicate))
        if path is None:
            raise f.refuse(f"{where} has no transcript {qid}_<seed>_<world>-r{replicate}.json")
        data = read_json(path, MAX_JSON, "transcript")
        t = Fields(path, "pkrun transcript")
        if not isinstance(data, list):
            raise t.refuse("the top level must be a list of turns")
        turns, calls = walk(t, {"transcript": data}, EPISODE, client_names=True, as_content=True)
        said = said_body(path, t, turns)
        prompt = next((str(x["text"]) for x in turns if x.get("role") == "user"
                       and isinstance(x.get("text"), str)), "")  # fmt: skip
    finished = episode_end(f, record, where, answer)
    grading = items[qid].task.grading
    decision = None
    if not error and correct is not None:
        decision = GraderDecisionBody(
            stage=EPISODE, check="correct", verdict=correct,
            reason=f"recorded by {ORIGIN}: correct={json.dumps(correct)}", answer=answer,
            expected=[grading.value], origin=ORIGIN,
        )  # fmt: skip
    infra = None
    if error:
        stage = error.split(":", 1)[0] if ":" in error else "attempt"
        infra = InfraErrorBody(stage=stage, error="harness", message=error)
    outcome: dict[str, Any] = {"correct": None} if error else {}
    return ArmUnit(
        item=items[qid],
        stream=f"{run}/{qid}/{replicate}",
        started=UnitStartedBody(protocol_id=qid, attempt=replicate),
        episode=EpisodeStartedBody(
            episode=EPISODE, identity=f.text(record, "identity", where), user_prompt=prompt
        ),
        calls=calls,
        said=said,
        finished=finished,
        decision=decision,
        infra=infra,
        outcome=UnitFinishedBody(outcome=outcome, error=error.split("\n", 1)[0]),
    )


def plan_pkrun(
    arm_dir: str, name: ArmName, family: str, run: str, path: str, folder: str,
    data: dict[str, Any],
) -> ArmPlan:  # fmt: skip
    """A pkrun arm (``question_id``, ``replicate``; transcripts a bare list of turns): its
    question and reference values from its ``fixture-world.json`` and ``planted.json``."""
    f = Fields(path, "pkrun results file")
    manifest, attempts = data["manifest"], f.items(data, "attempts", "")
    lacks = lacking(arm_dir, folder, False)
    start = start_ns(f, manifest)
    world_path, world = _world(arm_dir)
    planted = planted_claim(arm_dir)
    needle = planted_needle(planted, os.path.join(arm_dir, PLANTED), "needle")
    questions = sorted({f.text(a, "question_id", f"attempts[{i}]")
                        for i, a in enumerate(attempts)})  # fmt: skip
    refs: dict[str, References] = {}
    refs_from: dict[str, str] = {}
    items: dict[str, TaskItem] = {}
    traffic = "transcripts" not in lacks
    for qid in questions:
        refs[qid], refs_from[qid] = _pk_references(world_path, world, qid, planted)
        grading = TaskGrading(FINAL_NUMBER, value=refs[qid].readings[0].value,
                              abs_tolerance=COUNT_TOLERANCE)  # fmt: skip
        task = Task(id=qid, suite=PK_SHAPE, prompt="", arms=(), budget_tool_calls=0,
                    grading=grading)  # fmt: skip
        items[qid] = TaskItem(task, refs[qid], needle, traffic=traffic)
    files = _pk_transcripts(folder, world.profile) if traffic else None
    snapshots = snapshots_of(arm_dir)
    units: list[ArmUnit] = []
    seen: dict[str, int] = {}
    for i, record in enumerate(attempts):
        unit = _pk_unit(f, run, i, record, items, files)
        if unit.stream in seen:
            both = f"{unit.started.protocol_id} replicate {unit.started.attempt}"
            raise f.refuse(f"attempts[{seen[unit.stream]}] and attempts[{i}] are both {both}")
        seen[unit.stream] = i
        units.append(unit)
    k = max(u.started.attempt for u in units)
    said_k = f.positive(manifest, "k", "manifest")
    if said_k is not None and said_k < k:
        raise f.refuse(f"attempts hold replicate {k} but manifest.k is {said_k}")
    found = evidence_of(path, planted, snapshots, units, seeded=False)
    units = with_evidence(units, found)
    tasks = {qid: msgspec.to_builtins(item.task) for qid, item in items.items()}
    config: dict[str, Any] = {
        "origin": ORIGIN,
        "shape": SHAPE,
        "results_shape": PK_SHAPE,
        "family": family,
        "arm": name.arm,
        "folder": name.folder,
        "label": name.label,
        "excluded": name.excluded,
        "exclusion": name.exclusion,
        "manifest": manifest,
        "planted": planted,
        "world": world._asdict(),
        "tasks": tasks,
        "references": references_config(refs),
        "references_from": refs_from,
        "evidence": found,
        "arm_config": None
        if ARM_CONFIG in lacks
        else read_arm_config(os.path.join(arm_dir, ARM_CONFIG)),
        "lacks": lacks,
    }
    set_hash = task_files.task_set_hash(i.task for i in items.values())
    header = run_header(f, manifest, config, set_hash, len(tasks), said_k or k)
    return ArmPlan(run, name, start, header, snapshots, tuple(units))
