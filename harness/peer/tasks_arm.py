"""A peer tasks-bench arm's files, read and checked into the bodies its run will hold.

The reading half of ``import-peer`` for the tasks shape (``tasks_import.py`` plans and
writes the run; ``pkrun_arm.py`` reads the pkrun shape): the arm's JSON files within their
size limits, its config's digest, its snapshots and planted claim, each attempt checked and
turned into event bodies (``ArmUnit``), the references a task is graded against, and the
evidence the diagnostics look for. Every refusal names the file (docs/peer-studies.md).
"""

from __future__ import annotations

import dataclasses
import glob
import hashlib
import json
import math
import os
import re
from dataclasses import dataclass
from typing import Any, Final

import yaml

from benchledger.harness.peer import evidence
from benchledger.harness.peer.arms import (
    ARM_CONFIG,
    README,
    ArmName,
    readme_claim,
)
from benchledger.harness.peer.files import check_path, peer_bytes, peer_json
from benchledger.harness.peer.layout import beside_results, find_seed
from benchledger.harness.peer.results import Fields
from benchledger.harness.peer.transcript import texts, walk
from benchledger.ledger import UnusableInput
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
from benchledger.ledger.names import RULE, is_name
from benchledger.projections.suites.tasks.decisions import TRANSCRIPT_TEXT, TaskItem
from benchledger.protocols import tasks as task_files
from benchledger.protocols.task_grading import (
    ADOPTED,
    CORRECT,
    Reference,
    References,
    read_warehouse,
    references,
)
from benchledger.protocols.tasks import TASK_SUFFIX, Task, TaskSet

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
class ArmUnit:
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
    said: ReadBackBody | None = None  # the transcript's text beyond its calls (``said_body``)


@dataclass(frozen=True)
class ArmPlan:
    """One arm folder, checked: everything its run will hold."""

    run_id: str
    name: ArmName
    start_ns: int
    header: RunStartedBody
    snapshots: tuple[ReadBackBody, ...]
    units: tuple[ArmUnit, ...]


def read_json(path: str, limit: int, what: str) -> Any:
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


def required_int(f: Fields, obj: dict[str, Any], key: str, where: str) -> int:
    value = f.positive(obj, key, where)
    if value is None:
        raise f.refuse(f"{where}.{key} must be a positive whole number")
    return value


def read_arm_config(path: str) -> dict[str, Any]:
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


def said_body(path: str, t: Fields, turns: list[dict[str, Any]]) -> ReadBackBody:
    """What the transcript at ``path`` says beyond its tool calls (``transcript.texts``: each
    turn's own text, the model's prose included), as the episode's read-back of that file:
    evidence a redacted bundle may withhold, as it may the calls."""
    return ReadBackBody(stage=EPISODE, method="FILE", path=os.path.basename(path), status=200,
                        body={"texts": texts(t, turns)}, purpose=TRANSCRIPT_TEXT)  # fmt: skip


def _transcript(
    f: Fields, folder: str, record: dict[str, Any], where: str, arm: str
) -> tuple[tuple[SessionCallBody, ...], ReadBackBody]:
    """The attempt's tool calls in order, each with the text it returned, and the rest of
    what its transcript says (``said_body``); refused when the file is missing or is another
    attempt's (it would seal wrong evidence into the run)."""
    pid, attempt = record["task_id"], record["attempt"]
    named = os.path.basename(f.text(record, "transcript_path", where).replace("\\", "/"))
    path = os.path.join(folder, named or f"{pid}-{arm}-k{attempt}.json")
    if not os.path.isfile(path):
        raise f.refuse(f"{where} has no transcript {path}")
    data = read_json(path, MAX_JSON, "transcript")
    own = {"task_id": pid, "attempt": attempt}
    t = Fields(path, "tasks transcript")
    turns, calls = walk(t, data, EPISODE, belongs=own, whose=where, client_names=True,
                        as_content=True)  # fmt: skip
    return calls, said_body(path, t, turns)


def _expected(task: dict[str, Any]) -> list[Any]:
    """What the task's grading accepts: its value (numeric), else its aliases."""
    grading = task.get("grading")
    if not isinstance(grading, dict):
        return []
    if grading.get("value") is not None:
        return [grading["value"]]
    aliases = grading.get("aliases")
    return list(aliases) if isinstance(aliases, list) else []


def unit_of(
    f: Fields,
    run: str,
    i: int,
    record: dict[str, Any],
    tasks: dict[str, Any],
    folder: str,
    arm: str,
    items: dict[str, TaskItem],
) -> ArmUnit:
    where = f"attempts[{i}]"
    pid = f.text(record, "task_id", where)
    if not pid or "/" in pid:
        raise f.refuse(f"{where}.task_id must be non-empty text without '/', not {pid!r}")
    if pid not in tasks:
        raise f.refuse(f"{where}.task_id {pid!r} has no task file in {TASKS_DIR}/")
    attempt = required_int(f, record, "attempt", where)
    correct = f.flag(record, "correct", where)
    if correct is None:
        raise f.refuse(f"{where}.correct must be true or false")
    got = _number(f, record, "got_value", where)
    answer = f.text(record, "final_answer", where)
    error = f.text(record, "error", where).strip()
    calls, said = _transcript(f, folder, record, where, arm) if items[pid].traffic else ((), None)
    finished = episode_end(f, record, where, answer)
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
    return ArmUnit(
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


def check_summaries(f: Fields, data: dict[str, Any], attempts: list[dict[str, Any]]) -> None:
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


def snapshots_of(arm_dir: str) -> tuple[ReadBackBody, ...]:
    out = []
    for name in SNAPSHOTS:
        path = os.path.join(arm_dir, name)
        if os.path.isfile(path):
            body = read_json(path, MAX_SNAPSHOT, "store snapshot")
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


def planted_claim(arm_dir: str) -> dict[str, Any] | None:
    path = os.path.join(arm_dir, PLANTED)
    if not os.path.exists(path):
        return None  # the absent arms plant nothing
    data = read_json(path, MAX_SNAPSHOT, "planted claim")
    if not isinstance(data, dict):
        raise UnusableInput(path, "not a planted claim: the top level must be an object")
    for key in ("needle", "text"):  # what its readings are read from (``stated_value``)
        said = data.get(key)
        for number in _NUMBER.findall(said) if isinstance(said, str) else ():
            if not math.isfinite(float(number.replace(",", ""))):
                raise UnusableInput(path, f"field {key!r} states a number of {len(number)} "
                                    "characters, too large to be any value read")  # fmt: skip
    return data


_NUMBER: Final = re.compile(r"(?<![\w.-])[0-9][0-9,]*(?:\.[0-9]+)?(?![\w-])")


def stated_value(planted: dict[str, Any] | None) -> float | None:
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
    stated = stated_value(planted)
    if stated is not None and abs(stated - grading.value) > grading.abs_tolerance:
        readings.append(Reference(ADOPTED, stated))
    return References(grading.abs_tolerance, tuple(readings))


def references_of(
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


def layout_tasks(f: Fields, data: dict[str, Any], attempts: list[dict[str, Any]]) -> TaskSet:
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


def readme_planted(family_dir: str, arm: str) -> dict[str, Any] | None:
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
        plant = planted_claim(os.path.dirname(path))
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


def lacking(arm_dir: str, transcripts: str, flat: bool) -> list[str]:
    """What the arm did not keep, stated in its run (``config["lacks"]``) rather than
    guessed: its transcript folder, its arm config, its store snapshots, its planted claim
    file (an absent arm's plants nothing, so that one says no more than that)."""
    out = [] if os.path.isdir(transcripts) else ["transcripts"]
    if flat or not os.path.isfile(os.path.join(arm_dir, ARM_CONFIG)):
        out.append(ARM_CONFIG)
    if flat or not any(os.path.isfile(os.path.join(arm_dir, n)) for n in SNAPSHOTS):
        out.append("store snapshots")
    return out


def evidence_of(
    results: str,
    planted: dict[str, Any] | None,
    snapshots: tuple[ReadBackBody, ...],
    units: list[ArmUnit],
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


def episode_end(f: Any, record: dict[str, Any], where: str, answer: str) -> EpisodeFinishedBody:
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


def with_evidence(units: list[ArmUnit], found: dict[str, Any]) -> list[ArmUnit]:
    """Each unit's item with the correct source's needle the import found in the arm's
    files and the disclosure its exposure is read by (``evidence_of``)."""
    source, note = found["correct_source"], found["disclosure"]
    needle = source["needle"] if source else None
    return [dataclasses.replace(u, item=u.item._replace(source=needle, note=note)) for u in units]


def run_header(
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
