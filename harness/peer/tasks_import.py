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
import glob
import hashlib
import itertools
import json
import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import msgspec
import yaml

from benchledger.harness.peer import evidence
from benchledger.harness.peer import world as world_file
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
    readme_claim,
)
from benchledger.harness.peer.files import check_path, peer_bytes, peer_json, peer_root
from benchledger.harness.peer.layout import beside_results, find_seed
from benchledger.harness.peer.results import Fields, start_ns
from benchledger.harness.peer.transcript import texts, walk
from benchledger.ledger import Ledger, LedgerError, UnusableInput
from benchledger.ledger.events import (
    EpisodeFinishedBody,
    EpisodeStartedBody,
    GraderDecisionBody,
    InfraErrorBody,
    ReadBackBody,
    RunStartedBody,
    SessionCallBody,
    UnitFinishedBody,
    UnitStartedBody,
)
from benchledger.ledger.ledger import StreamWriter, check_run_id
from benchledger.ledger.names import RULE, is_name
from benchledger.projections.suites.tasks.decisions import TRANSCRIPT_TEXT, TaskItem, decide_unit
from benchledger.projections.suites.tasks.items import planted_needle, references_config
from benchledger.projections.trace import traced, unit_trace_hash
from benchledger.protocols import tasks as task_files
from benchledger.protocols.document import read
from benchledger.protocols.task_grading import (
    ADOPTED,
    CORRECT,
    FINAL_NUMBER,
    Reference,
    References,
    read_warehouse,
    references,
)
from benchledger.protocols.tasks import TASK_SUFFIX, Task, TaskGrading, TaskSet

ORIGIN: Final = "mcp-data-platform"
SHAPE: Final = "tasks"
EPISODE: Final = "task"
PLANTED: Final = "planted.json"
TASKS_DIR: Final = "tasks"
# Store snapshots, recorded in this order when present; the earliest arms took two, under
# the shorter names (store-before.json, store-after.json), before store-clean.json existed.
SNAPSHOTS: Final = (
    "store-clean.json",
    "store-before.json",
    "store-before-eval.json",
    "store-after.json",
    "store-after-eval.json",
    "datahub-orders-baseline.json",
)
MAX_SNAPSHOT: Final = 4 << 20  # the study's are under 2 KiB; a larger one is not a snapshot
MAX_JSON: Final = 32 << 20  # results and transcripts (the study's largest is 60 KiB)


@dataclass(frozen=True)
class _Unit:
    """One attempt, checked and turned into event bodies; writing it cannot be refused."""

    stream: str
    started: UnitStartedBody
    episode: EpisodeStartedBody
    calls: tuple[SessionCallBody, ...]
    finished: EpisodeFinishedBody
    decision: GraderDecisionBody | None  # None: a harness failure, which the peer never graded
    infra: InfraErrorBody | None
    outcome: UnitFinishedBody
    item: TaskItem  # what benchledger's own decision function judges the attempt against
    said: ReadBackBody | None = None  # the transcript's text beyond its calls (``_said``)


@dataclass(frozen=True)
class _Plan:
    """One arm folder, checked: everything its run will hold."""

    run_id: str
    name: ArmName
    start_ns: int
    header: RunStartedBody
    snapshots: tuple[ReadBackBody, ...]
    units: tuple[_Unit, ...]


def _read_json(path: str, limit: int, what: str) -> Any:
    """The JSON in ``path``; UnusableInput naming it when missing, too large or broken."""
    try:
        size = os.path.getsize(path)
    except OSError:
        raise UnusableInput(path, f"no such file (an arm folder holds its {what})") from None
    if size > limit:
        raise UnusableInput(path, f"{size} bytes: larger than the {limit} a {what} may be")
    try:
        return peer_json(path)
    except (OSError, UnicodeDecodeError) as exc:
        raise UnusableInput(path, f"cannot read ({exc})") from None
    except ValueError as exc:
        raise UnusableInput(path, f"not valid JSON ({exc})") from None


def _number(f: Fields, obj: dict[str, Any], key: str, where: str) -> int | float | None:
    value = obj.get(key)
    if value is None or (
        isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    ):
        return value
    raise f.refuse(f"{where}.{key} must be a number or null, not {json.dumps(value)[:40]}")


def _required(f: Fields, obj: dict[str, Any], key: str, where: str) -> int:
    value = f.positive(obj, key, where)
    if value is None:
        raise f.refuse(f"{where}.{key} must be a positive whole number")
    return value


def _arm_config(path: str) -> dict[str, Any]:
    """The arm config's non-secret facts: its sha256 and each persona's tool allow list.

    Nothing else is read out of it: its DSN, keys and tokens must never reach a ledger.
    """
    try:
        raw = peer_bytes(path, MAX_JSON)
    except OSError as exc:
        raise UnusableInput(path, f"cannot read ({exc})") from None
    if len(raw) > MAX_JSON:
        raise UnusableInput(path, f"larger than the {MAX_JSON} bytes an arm config may be")
    try:
        data = yaml.load(raw, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as exc:
        # never the parser's message: it quotes the line, which may be the DSN's
        raise UnusableInput(path, f"not valid YAML ({type(exc).__name__})") from None
    personas = data.get("personas") if isinstance(data, dict) else None
    allow: dict[str, list[str]] = {}
    for name, persona in (personas or {}).items() if isinstance(personas, dict) else ():
        tools = persona.get("tools") if isinstance(persona, dict) else None
        listed = tools.get("allow") if isinstance(tools, dict) else None
        if isinstance(listed, list) and all(isinstance(t, str) for t in listed):
            allow[str(name)] = list(listed)
    if not allow:
        raise UnusableInput(path, "names no persona with a tools.allow list of tool names")
    return {"sha256": hashlib.sha256(raw).hexdigest(), "persona_tools_allow": allow}


def _said(path: str, t: Fields, turns: list[dict[str, Any]]) -> ReadBackBody:
    """What the transcript at ``path`` says beyond its tool calls (``transcript.texts``: each
    turn's own text, the model's prose included), as the episode's read-back of that file:
    evidence a redacted bundle may withhold, as it may the calls."""
    return ReadBackBody(stage=EPISODE, method="FILE", path=os.path.basename(path), status=200,
                        body={"texts": texts(t, turns)}, purpose=TRANSCRIPT_TEXT)  # fmt: skip


def _transcript(
    f: Fields, folder: str, record: dict[str, Any], where: str, arm: str
) -> tuple[tuple[SessionCallBody, ...], ReadBackBody]:
    """The attempt's tool calls in order, each with the text it returned, and the rest of
    what its transcript says (``_said``); refused when the file is missing or is another
    attempt's (it would seal wrong evidence into the run)."""
    pid, attempt = record["task_id"], record["attempt"]
    named = os.path.basename(f.text(record, "transcript_path", where).replace("\\", "/"))
    path = os.path.join(folder, named or f"{pid}-{arm}-k{attempt}.json")
    if not os.path.isfile(path):
        raise f.refuse(f"{where} has no transcript {path}")
    data = _read_json(path, MAX_JSON, "transcript")
    own = {"task_id": pid, "attempt": attempt}
    t = Fields(path, "tasks transcript")
    turns, calls = walk(t, data, EPISODE, belongs=own, whose=where, client_names=True,
                        as_content=True)  # fmt: skip
    return calls, _said(path, t, turns)


def _expected(task: dict[str, Any]) -> list[Any]:
    """What the task's grading accepts: its value (numeric), else its aliases."""
    grading = task.get("grading")
    if not isinstance(grading, dict):
        return []
    if grading.get("value") is not None:
        return [grading["value"]]
    aliases = grading.get("aliases")
    return list(aliases) if isinstance(aliases, list) else []


def _unit(
    f: Fields,
    run: str,
    i: int,
    record: dict[str, Any],
    tasks: dict[str, Any],
    folder: str,
    arm: str,
    items: dict[str, TaskItem],
) -> _Unit:
    where = f"attempts[{i}]"
    pid = f.text(record, "task_id", where)
    if not pid or "/" in pid:
        raise f.refuse(f"{where}.task_id must be non-empty text without '/', not {pid!r}")
    if pid not in tasks:
        raise f.refuse(f"{where}.task_id {pid!r} has no task file in {TASKS_DIR}/")
    attempt = _required(f, record, "attempt", where)
    correct = f.flag(record, "correct", where)
    if correct is None:
        raise f.refuse(f"{where}.correct must be true or false")
    got = _number(f, record, "got_value", where)
    answer = f.text(record, "final_answer", where)
    error = f.text(record, "error", where).strip()
    calls, said = _transcript(f, folder, record, where, arm) if items[pid].traffic else ((), None)
    finished = _episode_end(f, record, where, answer)
    decision = None
    if not error:  # the peer grades only attempts without a harness failure
        decision = GraderDecisionBody(
            stage=EPISODE,
            check="correct",
            verdict=correct,
            reason=f"recorded by {ORIGIN}: correct={json.dumps(correct)}, "
            f"got_value={json.dumps(got)}",
            answer=answer,
            expected=_expected(tasks[pid]),
            origin=ORIGIN,
        )
    infra = None
    if error:
        stage = error.split(":", 1)[0] if ":" in error else "attempt"
        infra = InfraErrorBody(stage=stage, error="harness", message=error)
    if not is_name(pid):  # it names a stream, and files of the run's exports
        raise f.refuse(f"{where}: protocol id {pid!r} {RULE}")
    return _Unit(
        item=items[pid],
        stream=f"{run}/{pid}/{attempt}",
        started=UnitStartedBody(protocol_id=pid, attempt=attempt),
        episode=EpisodeStartedBody(
            episode=EPISODE,
            identity=f.text(record, "identity", where),
            user_prompt=str(tasks[pid].get("prompt") or ""),
        ),
        calls=calls,
        said=said,
        finished=finished,
        decision=decision,
        infra=infra,
        outcome=UnitFinishedBody(
            outcome={"correct": None if error else correct}, error=error.split("\n", 1)[0]
        ),
    )


def _check_summaries(f: Fields, data: dict[str, Any], attempts: list[dict[str, Any]]) -> None:
    """The peer's task and suite summaries agree with its attempts: else the file is broken."""
    graded: dict[str, list[int]] = {}
    for a in attempts:
        counts = graded.setdefault(a["task_id"], [0, 0, 0])  # graded, correct, harness failures
        if f.text(a, "error", "").strip():
            counts[2] += 1
        else:
            counts[0] += 1
            counts[1] += a["correct"] is True
    for j, summary in enumerate(f.items(data, "tasks", "")):
        where = f"tasks[{j}]"
        pid = f.text(summary, "task_id", where)
        got = graded.get(pid, [0, 0, 0])
        for key, n in zip(("graded", "correct", "harness_failures"), got, strict=True):
            if f.count(summary, key, where) != n:
                raise f.refuse(
                    f"{where}.{key} is {summary.get(key)} but the attempts for {pid!r} record {n}"
                )
    # the suites' "harness fails" column (harness_failures, left out when 0)
    fails = sum(g[2] for g in graded.values())
    suites = f.items(data, "suites", "")
    said = sum(f.count(s, "harness_failures", f"suites[{j}]") for j, s in enumerate(suites))
    if suites and said != fails:
        raise f.refuse(
            f"suites[].harness_failures add up to {said} but the attempts record {fails}"
        )


def _snapshots(arm_dir: str) -> tuple[ReadBackBody, ...]:
    out = []
    for name in SNAPSHOTS:
        path = os.path.join(arm_dir, name)
        if os.path.isfile(path):
            body = _read_json(path, MAX_SNAPSHOT, "store snapshot")
            out.append(
                ReadBackBody(
                    stage="arm",
                    method="FILE",
                    path=name,
                    status=200,
                    body=body,
                    purpose="store_snapshot",
                )
            )
    return tuple(out)


def _planted(arm_dir: str) -> dict[str, Any] | None:
    path = os.path.join(arm_dir, PLANTED)
    if not os.path.exists(path):
        return None  # the absent arms plant nothing
    data = _read_json(path, MAX_SNAPSHOT, "planted claim")
    if not isinstance(data, dict):
        raise UnusableInput(path, "not a planted claim: the top level must be an object")
    for key in ("needle", "text"):  # what its readings are read from (``_stated_value``)
        said = data.get(key)
        for number in _NUMBER.findall(said) if isinstance(said, str) else ():
            if not math.isfinite(float(number.replace(",", ""))):
                raise UnusableInput(path, f"field {key!r} states a number of {len(number)} "
                                    "characters, too large to be any value read")  # fmt: skip
    return data


_NUMBER: Final = re.compile(r"(?<![\w.-])[0-9][0-9,]*(?:\.[0-9]+)?(?![\w-])")


def _stated_value(planted: dict[str, Any] | None) -> float | None:
    """The one number the planted claim's needle states (None: none, or more than one)."""
    needle = planted.get("needle") if planted else None
    found = _NUMBER.findall(needle) if isinstance(needle, str) else []
    return float(found[0].replace(",", "")) if len(found) == 1 else None


def _from_the_arm(task: Task, planted: dict[str, Any] | None) -> References | None:
    """A task the seed's attribution table does not read: its readings from the arm's own
    files: the task's graded value, and the planted value the claim's needle states (when
    it differs from the graded one: a claim stating the truth plants no wrong value). No
    trap is known this way. None for a task graded by no number."""
    grading = task.grading
    if grading.kind != "numeric" or grading.value is None:
        return None
    readings = [Reference(CORRECT, float(grading.value))]
    stated = _stated_value(planted)
    if stated is not None and abs(stated - grading.value) > grading.abs_tolerance:
        readings.append(Reference(ADOPTED, stated))
    return References(grading.abs_tolerance, tuple(readings))


def _references(
    results: str, tasks: tuple[Task, ...], planted: dict[str, Any] | None
) -> tuple[dict[str, References], dict[str, str]]:
    """Each task's readings (correct, the planted value, the traps) and where they came
    from: computed from the peer's seeded warehouse beside its ``results`` for a task whose
    expected_sql it evaluates (the planted reading from the claim's own words,
    ``task_grading.references``), else from the arm's task and planted claim
    (``_from_the_arm``); a task neither gives is left without readings, and said."""
    seed = find_seed(results)
    if seed is not None:
        check_path(seed)
    warehouse = read_warehouse(seed) if seed is not None else None
    out: dict[str, References] = {}
    said: dict[str, str] = {}
    for task in tasks:
        if warehouse is not None:
            try:
                out[task.id] = references(warehouse, task, planted)
                said[task.id] = "the seeded warehouse"
                continue
            except ValueError:  # an expected_sql the warehouse model does not evaluate
                pass
        found = _from_the_arm(task, planted)
        if found is not None:
            out[task.id] = found
            said[task.id] = "the task's graded value and the planted needle's number"
        else:
            said[task.id] = "none: the task is graded by no number"
    return out, said


def _layout_tasks(f: Fields, data: dict[str, Any], attempts: list[dict[str, Any]]) -> TaskSet:
    """A flat family's tasks: each ``<task id>.yaml`` of the peer's ``bench/tasks`` beside
    ``results/``, for every task its attempts and summaries name (it keeps no ``tasks/``)."""
    folder = beside_results(f.path, TASKS_DIR)
    if folder is None or not os.path.isdir(folder):
        raise f.refuse(f"it keeps no {TASKS_DIR}/ and no {TASKS_DIR}/ is beside its results/")
    named = {f.text(a, "task_id", f"attempts[{i}]") for i, a in enumerate(attempts)}
    named |= {f.text(t, "task_id", f"tasks[{j}]") for j, t in enumerate(f.items(data, "tasks", ""))}
    tasks: list[Task] = []
    files: list[str] = []
    for tid in sorted(named):
        file = os.path.join(folder, tid + TASK_SUFFIX)
        if not tid or "/" in tid or not os.path.isfile(file):
            raise f.refuse(f"task {tid!r} has no file {file}")
        loaded = task_files.load(file)  # InvalidInput names the line
        tasks += loaded.tasks
        files += loaded.files
    return TaskSet(tuple(tasks), tuple(files))


def _readme_planted(family_dir: str, arm: str) -> dict[str, Any] | None:
    """A flat family arm's planted claim, from its README (``arms.readme_claim``): None on an
    arm the README does not say planted it. Its treatment and needle are those of the study's
    archived plant (an arm's planted.json in another family) with the very same text."""
    claim = readme_claim(family_dir)
    if claim is None or arm not in claim[1]:
        return None
    text, _ = claim
    readme = os.path.join(family_dir, README)
    study = os.path.dirname(os.path.abspath(family_dir))
    same = []
    for path in sorted(glob.glob(os.path.join(study, "*", "*", PLANTED))):
        plant = _planted(os.path.dirname(path))
        if plant is not None and plant.get("text") == text:
            where = os.path.relpath(path, study)
            same.append((where, plant.get("treatment_id"), plant.get("needle")))
    kinds = {(tid, needle) for _, tid, needle in same}
    if len(kinds) != 1:
        found = "none" if not same else f"{len(kinds)} different treatments"
        raise UnusableInput(
            readme,
            f"the treatment string planted on arm {arm!r} is the text of {found} among the "
            f"study's {PLANTED} files: its treatment (what adoption reads) is unknown",
        )
    ((treatment, needle),) = kinds
    return {
        "treatment_id": treatment,
        "text": text,
        "needle": needle,
        "source": f"{README}: the treatment string",
        "treatment_from": same[0][0],
    }


def _lacks(arm_dir: str, transcripts: str, flat: bool) -> list[str]:
    """What the arm did not keep, stated in its run (``config["lacks"]``) rather than
    guessed: its transcript folder, its arm config, its store snapshots, its planted claim
    file (an absent arm's plants nothing, so that one says no more than that)."""
    out = [] if os.path.isdir(transcripts) else ["transcripts"]
    if flat or not os.path.isfile(os.path.join(arm_dir, ARM_CONFIG)):
        out.append(ARM_CONFIG)
    if flat or not any(os.path.isfile(os.path.join(arm_dir, n)) for n in SNAPSHOTS):
        out.append("store snapshots")
    return out


def _evidence(
    results: str,
    planted: dict[str, Any] | None,
    snapshots: tuple[ReadBackBody, ...],
    units: list[_Unit],
    seeded: bool = True,
) -> dict[str, Any]:
    """What the arm's diagnostics look for, from its own files (``harness.peer.evidence``):
    the claim's correct source among the pages its snapshots name (else the seeded pages
    beside ``results/``) and the planted insight's reviewer note as its episodes were
    returned it; each None, with where it was looked for, when not found."""
    pages = evidence.snapshot_pages(s.body for s in snapshots)
    where = "the arm's store snapshots" if pages else None
    if not pages and seeded:  # a pkrun arm's world is not the seeded warehouse's
        pages, found = evidence.seeded_pages(results)
        if found is not None:
            check_path(found)
            where = os.path.relpath(found, os.path.dirname(os.path.abspath(results)))
    text = planted.get("text") if planted else None
    source = evidence.correct_source(text, pages) if isinstance(text, str) else None
    insight = planted.get("insight_id") if planted else None
    note = evidence.review_note(
        insight if isinstance(insight, str) else "",
        (call.text() for unit in units for call in unit.calls),
    )
    return {
        "pages_from": where,  # None: the arm names no pages and none is beside results/
        "correct_source": source,
        "review_note": note,
        "disclosure": evidence.DISCLOSURE if planted else None,  # what ``exposed`` searches
    }


# --- the pkrun results shape: the cross-fixture arms ----------------------------------------

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
    return path, world_file.read_world(path, _read_json(path, MAX_SNAPSHOT, "fixture world"))


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
    stated = _stated_value(planted)
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
) -> _Unit:  # fmt: skip
    where = f"attempts[{i}]"
    qid = f.text(record, "question_id", where)
    if not is_name(qid):  # it names a stream, and files of the run's exports
        raise f.refuse(f"{where}.question_id {qid!r} {RULE}")
    if qid not in items:
        raise f.refuse(f"{where}.question_id {qid!r} is not the arm's question")
    replicate = _required(f, record, "replicate", where)
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
        data = _read_json(path, MAX_JSON, "transcript")
        t = Fields(path, "pkrun transcript")
        if not isinstance(data, list):
            raise t.refuse("the top level must be a list of turns")
        turns, calls = walk(t, {"transcript": data}, EPISODE, client_names=True, as_content=True)
        said = _said(path, t, turns)
        prompt = next((str(x["text"]) for x in turns if x.get("role") == "user"
                       and isinstance(x.get("text"), str)), "")  # fmt: skip
    finished = _episode_end(f, record, where, answer)
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
    return _Unit(
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


def _plan_pkrun(
    arm_dir: str, name: ArmName, family: str, run: str, path: str, folder: str,
    data: dict[str, Any],
) -> _Plan:  # fmt: skip
    """A pkrun arm (``question_id``, ``replicate``; transcripts a bare list of turns): its
    question and reference values from its ``fixture-world.json`` and ``planted.json``."""
    f = Fields(path, "pkrun results file")
    manifest, attempts = data["manifest"], f.items(data, "attempts", "")
    lacks = _lacks(arm_dir, folder, False)
    start = start_ns(f, manifest)
    world_path, world = _world(arm_dir)
    planted = _planted(arm_dir)
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
    snapshots = _snapshots(arm_dir)
    units: list[_Unit] = []
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
    found = _evidence(path, planted, snapshots, units, seeded=False)
    units = _with_evidence(units, found)
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
        else _arm_config(os.path.join(arm_dir, ARM_CONFIG)),
        "lacks": lacks,
    }
    header = _header(f, manifest, config, task_files.task_set_hash(i.task for i in items.values()),
                     len(tasks), said_k or k)  # fmt: skip
    return _Plan(run, name, start, header, snapshots, tuple(units))


def _plan(arm_dir: str, name: ArmName, family: str, run_id: str | None) -> _Plan:
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
    lacks = _lacks(arm_dir, folder, flat)
    data = _read_json(path, MAX_JSON, RESULTS)
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
        return _plan_pkrun(arm_dir, name, family, run, path, folder, data)
    start = start_ns(f, manifest, required=True)
    k = _required(f, manifest, "k", "manifest")
    claimed = f.text(manifest, "task_set_hash", "manifest")
    if flat:
        loaded = _layout_tasks(f, data, attempts)
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
    planted = _readme_planted(family_dir, name.arm) if flat else _planted(arm_dir)
    where = os.path.join(family_dir, README) if flat else os.path.join(arm_dir, PLANTED)
    refs, refs_from = _references(path, loaded.tasks, planted)
    needle = planted_needle(planted, where, "needle")
    traffic = "transcripts" not in lacks
    items = {t.id: TaskItem(t, refs.get(t.id), needle, traffic=traffic) for t in loaded.tasks}
    snapshots = () if flat else _snapshots(arm_dir)
    units: list[_Unit] = []
    seen: dict[str, int] = {}
    for i, record in enumerate(attempts):
        unit = _unit(f, run, i, record, tasks, folder, arm, items)
        if unit.stream in seen:
            first, pid = seen[unit.stream], unit.started.protocol_id
            raise f.refuse(
                f"attempts[{first}] and attempts[{i}] are both {pid} attempt {unit.started.attempt}"
            )
        if unit.started.attempt > k:
            raise f.refuse(f"attempts[{i}].attempt is {unit.started.attempt} but manifest.k is {k}")
        seen[unit.stream] = i
        units.append(unit)
    _check_summaries(f, data, attempts)
    found = _evidence(path, planted, snapshots, units)
    units = _with_evidence(units, found)
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
        else _arm_config(os.path.join(arm_dir, ARM_CONFIG)),
        "lacks": lacks,
    }
    if flat:  # where what an arm folder holds was found instead
        config["results_file"] = os.path.basename(path)
        # relative to the family, so a copy of the peer's tree imports to the same root
        config["tasks_folder"] = os.path.relpath(os.path.dirname(loaded.files[0]), family_dir)
    # every task the arm was given, so an interrupted arm reads as incomplete
    header = _header(f, manifest, config, claimed, len(tasks), k)
    return _Plan(run, name, start, header, snapshots, tuple(units))


def _episode_end(f: Any, record: dict[str, Any], where: str, answer: str) -> EpisodeFinishedBody:
    """An attempt's ``episode_finished``: its final answer, its counts and its usage as the
    results file recorded them (both results shapes)."""
    return EpisodeFinishedBody(
        episode=EPISODE,
        final_answer=answer,
        tool_calls=f.count(record, "tool_calls", where),
        tool_errors=f.count(record, "tool_errors", where),
        budget_exhausted=bool(f.flag(record, "budget_exhausted", where)),
        input_tokens=f.count(record, "input_tokens", where),
        output_tokens=f.count(record, "output_tokens", where),
        cache_read_tokens=f.count(record, "cache_read_tokens", where),
        cache_creation_tokens=f.count(record, "cache_creation_tokens", where),
    )


def _with_evidence(units: list[_Unit], found: dict[str, Any]) -> list[_Unit]:
    """Each unit's item with the correct source's needle the import found in the arm's
    files and the disclosure its exposure is read by (``_evidence``)."""
    source, note = found["correct_source"], found["disclosure"]
    needle = source["needle"] if source else None
    return [dataclasses.replace(u, item=u.item._replace(source=needle, note=note)) for u in units]


def _header(
    f: Any, manifest: dict[str, Any], config: dict[str, Any], set_hash: str, protocols: int, k: int
) -> RunStartedBody:
    """An imported arm's ``run_started``: the peer's client and model as its agent."""
    provider = f.text(manifest, "llm_provider", "manifest")
    model = f.text(manifest, "model", "manifest")
    return RunStartedBody(
        suite=SHAPE,
        protocol_set_hash=set_hash,
        protocols=protocols,
        k=k,
        agent=f"{provider}:{model}".strip(":"),
        model=model,
        platform=ORIGIN,
        platform_version=f.text(manifest, "platform_version", "manifest"),
        tool_version="import-peer",
        config=config,
    )


def _write_unit(w: StreamWriter, unit: _Unit) -> None:
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


def _write(ledger: Ledger, plan: _Plan) -> str:
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


def _refuse_existing(ledger: Ledger, plans: list[_Plan]) -> None:
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
