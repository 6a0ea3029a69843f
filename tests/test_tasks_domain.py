"""The tasks bench's domain layer, checked against the peer's recorded knowledge-pollution study.

Every expectation here comes from data benchledger did not write: the peer's task files,
its run manifests and graded attempts, its planted claims, its seed and its published
headline numbers (bench/results/knowledge-pollution/*/README.md, the published report).
"""

from __future__ import annotations

import ast
import json
import os
from collections import Counter
from typing import Any

import pytest

from benchledger.protocols.errors import InvalidInput
from benchledger.protocols.task_grading import (
    ADOPTED,
    Warehouse,
    claim_reading,
    classify,
    grade,
    read_warehouse,
    references,
)
from benchledger.protocols.tasks import Task, TaskGrading, load, task_set_hash
from tests.conftest import peer_dir

STUDY = ("bench", "results", "knowledge-pollution")
ORDER_COUNT = "s3-deprecated-order-count"  # the study's checkable task (its tasks/ file)
# One wrong arm's planted claim per class: what the probe's README and the controls'
# counterparts planted or would have (a test may name the study's arms; code may not).
FISCAL_WRONG = ("rq1-warehouse", "convention-wrong-haiku")
COUNT_WRONG = ("rq1-warehouse", "checkable-wrong-haiku")
RESULT_FILES = ("results.json", "control.json", "polluted.json")


def _study() -> str:
    return os.path.join(peer_dir(), *STUDY)


def _runs() -> list[str]:
    """Every recorded run file of the study, excluded attempts (-DRIFTED-1 ...) included."""
    found = []
    for root, _dirs, files in os.walk(_study()):
        found += [os.path.join(root, f) for f in files if f in RESULT_FILES]
    return sorted(found)


def _read(path: str) -> Any:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def _tasks_of(run: str) -> dict[str, Task]:
    """The tasks a run used: its arm's tasks/ folder, else the bench's tasks by the run's ids."""
    folder = os.path.join(os.path.dirname(run), "tasks")
    if os.path.isdir(folder):
        return load(folder).by_id()
    everything = load(os.path.join(peer_dir(), "bench", "tasks")).by_id()
    ids = {a["task_id"] for a in _read(run)["attempts"]}
    return {i: everything[i] for i in ids}


@pytest.fixture(scope="module")
def warehouse() -> Warehouse:
    return read_warehouse(os.path.join(peer_dir(), "bench", "seed", "trino", "setup.sql"))


def _label(run: str) -> str:
    return os.path.relpath(run, _study())


# --- (a) grading reproduces every recorded verdict ---------------------------------


def test_grading_reproduces_every_recorded_attempt_of_the_study():
    runs = _runs()
    assert len(runs) == 36  # 33 arm folders, a copy nested in one of them, the probe's two arms
    checked = harness_failed = 0
    mismatches = []
    for run in runs:
        tasks = _tasks_of(run)
        for a in _read(run)["attempts"]:
            if a.get("error"):
                # A harness failure is recorded ungraded: never correct, no value read.
                harness_failed += 1
                assert a["correct"] is False and "got_value" not in a, _label(run)
                continue
            got = grade(a["final_answer"], tasks[a["task_id"]].grading)
            checked += 1
            if (got.correct, got.got_value) != (a["correct"], a.get("got_value")):
                mismatches.append((_label(run), a["attempt"], a["final_answer"], got))
    assert mismatches == []
    assert (checked, harness_failed) == (817, 1)


@pytest.mark.parametrize(
    ("answer", "correct", "value"),
    [
        ("FINAL ANSWER: 1,200", True, 1200.0),
        ("draft\nFINAL ANSWER: 1140\nFINAL ANSWER: 1200 orders", True, 1200.0),
        ("final answer: 1200\nbut legacy_orders has 60", True, 1200.0),
        ("In 2025, 1,200 orders", False, 2025.0),  # Go keeps the comma: "2025," is chosen
        ("$1,200.60 total", False, 1200.6),
        ("no count available", False, None),
        ("9" * 400, False, None),  # past float64: Go's ParseFloat fails, so no number
    ],
    ids=[
        "commas",
        "last-marker",
        "first-line-only",
        "trailing-comma",
        "tolerance",
        "none",
        "overflow",
    ],
)
def test_a_numeric_answer_is_read_as_the_peer_reads_it(answer, correct, value):
    grading = TaskGrading("numeric", value=1200.0, abs_tolerance=0.5)
    assert tuple(grade(answer, grading)) == (correct, value)


@pytest.mark.parametrize(
    ("answer", "correct"),
    [
        ("memory.bench.orders", True),
        ("MEMORY.BENCH.ORDERS is current", True),
        ("memory.bench.legacy_orders", False),
        ("memory.bench.orders, not legacy_orders", False),
        ("memory.bench.orders2", False),
        ("memory.bench.orders\nlegacy_orders is deprecated", True),
    ],
    ids=["alias", "any-case", "trap-only", "trap-vetoes", "word-boundary", "second-line-ignored"],
)
def test_an_entity_answer_names_an_alias_and_no_wrong_alias(answer, correct):
    grading = TaskGrading(
        "entity", aliases=("memory.bench.orders", "bench.orders"), wrong_aliases=("legacy_orders",)
    )
    assert grade(answer, grading) == (correct, None)


def test_an_answer_alone_cannot_grade_an_exec_sql_task():
    with pytest.raises(ValueError, match="needs the episode"):
        grade("SELECT 1", TaskGrading("exec_sql"))


# --- (b) classification reproduces the published counts ----------------------------


def _discriminants() -> dict[str, dict[str, float]]:
    """The DISCRIMINANTS literal of the peer's pollution_tables.py (read, not imported)."""
    path = os.path.join(
        peer_dir(), "bench", "reports", "knowledge-pollution", "pollution_tables.py"
    )
    with open(path, encoding="utf-8") as fh:
        tree = ast.parse(fh.read())
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "DISCRIMINANTS":
            return ast.literal_eval(node.value)
    raise AssertionError("pollution_tables.py has no DISCRIMINANTS table")


def _bench_tasks() -> dict[str, Task]:
    return load(os.path.join(peer_dir(), "bench", "tasks")).by_id()


def _plants() -> list[tuple[str, dict[str, Any]]]:
    return sorted(
        (os.path.join(root, "planted.json"), _read(os.path.join(root, "planted.json")))
        for root, _d, files in os.walk(_study())
        if "planted.json" in files
    )


def _plant(family_arm: tuple[str, str]) -> dict[str, Any]:
    return _read(os.path.join(_study(), *family_arm, "planted.json"))


def test_the_reference_table_computed_from_the_seed_is_the_peers_table(warehouse):
    # Each task's readings under every planted claim of the study: the claims that plant a
    # wrong value on it give the peer's row exactly, read from the claim's words alone.
    tasks = _bench_tasks()
    plants = _plants()
    compared = 0
    for task_id, theirs in _discriminants().items():
        if task_id not in tasks:
            continue  # the API fixture's question: its fixture is not among the peer's files
        want = {k: v for k, v in theirs.items() if k != "tol"}
        found = set()
        for _, plant in plants:
            refs = references(warehouse, tasks[task_id], plant)
            assert refs.tolerance == theirs["tol"], task_id
            got = {r.name: r.value for r in refs.readings}
            if ADOPTED in got:
                found.add(tuple(sorted(got.items())))
        assert found == {tuple(sorted(want.items()))}, task_id
        compared += 1
    assert compared == 4


def test_the_correct_reference_is_what_every_task_file_grades_against(warehouse):
    checked = 0
    for task_id, task in _bench_tasks().items():
        try:
            refs = references(warehouse, task, None)
        except ValueError:
            continue  # an expected_sql the warehouse model does not evaluate
        assert refs.readings[0].value == task.grading.value, task_id
        checked += 1
    assert checked >= 4


def test_every_planted_claim_plants_a_value_exactly_when_it_is_wrong(warehouse):
    # A wrong arm's claim reads as another value on its arm's tasks; a correct arm's reads
    # as the correct value itself (nothing to adopt). Read from the words, not the id.
    plants = _plants()
    assert len(plants) >= 20
    for path, p in plants:
        assert claim_reading(p) is not None, path
        tasks = load(os.path.join(os.path.dirname(path), "tasks")).by_id().values()
        adopted = [any(r.name == ADOPTED for r in references(warehouse, t, p).readings)
                   for t in tasks]  # fmt: skip
        assert set(adopted) == {"-wrong" in p["treatment_id"]}, path


def test_a_claim_reads_the_same_under_a_treatment_id_the_study_never_used(warehouse):
    # The planted reading is the claim's words: its treatment id decides nothing.
    tasks = _bench_tasks()
    for path, plant in _plants():
        renamed = {**plant, "treatment_id": "t-never-used"}
        for task in load(os.path.join(os.path.dirname(path), "tasks")).tasks:
            assert references(warehouse, task, renamed) == references(
                warehouse, tasks[task.id], plant), path  # fmt: skip


def _tally(family: str, arm: str, warehouse: Warehouse,
           plant: dict[str, Any] | None = None) -> Counter:  # fmt: skip
    base = os.path.join(_study(), family, arm)
    run = base + ".json" if os.path.isfile(base + ".json") else os.path.join(base, "results.json")
    planted = os.path.join(base, "planted.json")
    if plant is None and os.path.isfile(planted):
        plant = _read(planted)
    tasks = _tasks_of(run)
    out: Counter = Counter()
    for a in _read(run)["attempts"]:
        value = grade(a["final_answer"], tasks[a["task_id"]].grading).got_value
        out[classify(value, references(warehouse, tasks[a["task_id"]], plant))] += 1
    out["n"] = sum(out.values())
    return out


@pytest.mark.parametrize(
    ("family", "arm", "adopted", "correct"),
    [
        ("rq1-warehouse", "checkable-wrong-haiku", 16, 8),
        ("rq1-warehouse", "checkable-wrong-sonnet", 0, 24),
        ("rq1-warehouse", "checkable-wrong-opus", 0, 24),
        ("rq1-warehouse", "convention-wrong-haiku", 0, None),
        ("rq1-warehouse", "convention-wrong-sonnet", 0, None),
        ("rq1-warehouse", "convention-wrong-opus", 0, None),
        ("directive-contrast", "checkable-wrong-haiku-bare", 18, 6),
        ("directive-contrast", "checkable-wrong-haiku-plain", 17, 7),
        ("directive-contrast", "checkable-wrong-haiku", 18, 6),  # the imperative level
    ],
    ids=lambda v: str(v),
)
def test_a_wrong_arm_adopts_as_many_times_as_the_study_published(
    family, arm, adopted, correct, warehouse
):
    # The report's T1, T3 and T7 (correct = the episodes that observed the count).
    tally = _tally(family, arm, warehouse)
    assert (tally["adopted"], tally["n"]) == (adopted, 24)
    if correct is not None:
        assert tally["correct"] == correct


@pytest.mark.parametrize(
    ("arm", "correct"),
    [
        ("checkable-absent-haiku", 24),
        ("convention-absent-haiku", 9),
        ("convention-absent-sonnet", 23),
        ("convention-absent-opus", 20),
    ],
    ids=lambda v: str(v),
)
def test_an_absent_arm_is_as_accurate_as_the_study_published(arm, correct, warehouse):
    tally = _tally("rq1-warehouse", arm, warehouse)
    assert (tally["correct"], tally["n"], tally["adopted"]) == (correct, 24, 0)


def test_the_strong_tiers_convention_misses_are_other_never_a_trap(warehouse):
    # The report: every sonnet and opus convention miss is the correct figure at reduced
    # precision (317090.5, 1187140), classified "other" by the 0.01 tolerance.
    for tier in ("sonnet", "opus"):
        for arm in ("absent", "correct", "wrong"):
            tally = _tally("rq1-warehouse", f"convention-{arm}-{tier}", warehouse)
            assert set(tally) <= {"n", "correct", "other"}, (arm, tier, tally)


def test_the_checkable_haiku_arm_splits_into_adopters_and_counters(warehouse):
    # rq1-warehouse/README.md: 16 adopted; the 8 that ran the COUNT answered correctly.
    tally = _tally("rq1-warehouse", "checkable-wrong-haiku", warehouse)
    assert tally == Counter({"n": 24, "adopted": 16, "correct": 8})


def test_the_probe_polluted_arm_adopted_twice_and_fell_into_no_trap(warehouse):
    # probe/SUMMARY.md: 2/24 exact adoption of 724, zero calendar-trap answers, zero other.
    polluted = _tally("probe", "polluted", warehouse, plant=_plant(FISCAL_WRONG))
    assert polluted == Counter({"n": 24, "correct": 22, "adopted": 2})
    assert _tally("probe", "control", warehouse) == Counter({"n": 24, "correct": 24})


def test_no_control_arm_answer_is_a_planted_value(warehouse):
    # pollution_tables.py scores "adopted" on every arm; ours only on wrong arms. On the
    # recorded data the two agree: no absent or correct arm ever answered a planted value.
    for run in _runs():
        arm = os.path.basename(os.path.dirname(run))
        if "-wrong-" in arm or run.endswith("polluted.json"):
            continue
        tasks = _tasks_of(run)
        for a in _read(run)["attempts"]:
            wrong = _plant(COUNT_WRONG if a["task_id"] == ORDER_COUNT else FISCAL_WRONG)
            refs = references(warehouse, tasks[a["task_id"]], wrong)
            assert classify(a.get("got_value"), refs) != "adopted", (_label(run), a["attempt"])


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (873.0, "correct"),
        (724.4, "adopted"),
        (948.0, "trap:calendar"),
        (870.0, "other"),
        (None, "no_number"),
    ],
    ids=["correct", "adopted-within-tolerance", "calendar-trap", "other", "no-number"],
)
def test_classification_names_the_reading_an_answer_came_from(value, expected, warehouse):
    refs = references(warehouse, _bench_tasks()["s3-fiscal-2025-count"], _plant(FISCAL_WRONG))
    assert classify(value, refs) == expected


def test_an_absent_arm_has_no_adopted_reading_but_keeps_its_traps(warehouse):
    refs = references(warehouse, _bench_tasks()[ORDER_COUNT], None)
    assert classify(1140.0, refs) == "other"
    assert classify(60.0, refs) == "trap:deprecated_table"


# --- (c) the loader refuses bad task files, one line each --------------------------

GOOD = """\
id: s3-test
suite: s3
prompt: How many?
arms: [a0, a3]
budget_tool_calls: 30
grading:
  kind: numeric
  value: 42.5
  abs_tolerance: 0.01
"""


HEAD = GOOD.split("grading:")[0] + "grading:\n"
WITH_ALIAS = "  value: 42.5\n  aliases: [x]\n"


@pytest.mark.parametrize(
    ("text", "line", "field", "says"),
    [
        (GOOD.replace("suite: s3\n", "suite: s3\ncolour: red\n"), 3, "colour", "unknown field"),
        (GOOD.replace("id: s3-test\n", ""), 1, "id", "is required and missing"),
        (GOOD.replace("arms: [a0, a3]", "arms: []"), 4, "arms", "at least one"),
        (
            GOOD.replace("budget_tool_calls: 30", "budget_tool_calls: 0"),
            5,
            "budget_tool_calls",
            "above 0",
        ),
        (GOOD.replace("  value: 42.5\n", ""), 6, "grading.value", "needs a value"),
        (GOOD.replace("0.01", "-1"), 9, "grading.abs_tolerance", "zero or more"),
        (GOOD.replace("kind: numeric", "kind: vibes"), 7, "grading.kind", "must be one of"),
        (GOOD.replace("  value: 42.5\n", WITH_ALIAS), 9, "grading.aliases", "takes no aliases"),
        (
            HEAD + "  kind: entity\n  aliases: [legacy_orders_v2]\n"
            "  wrong_aliases: [legacy_orders]\n",
            9,
            "grading.wrong_aliases",
            "contains wrong alias",
        ),
        (HEAD + "  kind: entity\n", 6, "grading.aliases", "at least one"),
        (HEAD + "  kind: exec_sql\n", 1, "expected_sql", "needs the task"),
        (HEAD + "  kind: state\n", 6, "grading.state_checks", "at least one"),
        (GOOD + "rubric:\n  - id: caveat\n    nope: x\n", 12, "rubric[0].nope", "unknown field"),
        (GOOD.replace("prompt: How many?", "prompt: 7"), 3, "prompt", "must be text"),
        ("- just\n- a list\n", 1, "", "must be a mapping"),
        ("id: [unclosed\n", 2, "", "not valid YAML"),
    ],
    ids=[
        "unknown-field",
        "missing-id",
        "no-arms",
        "zero-budget",
        "numeric-without-value",
        "negative-tolerance",
        "unknown-kind",
        "alias-on-numeric",
        "alias-contains-trap",
        "entity-without-aliases",
        "exec-sql-without-sql",
        "state-without-checks",
        "unknown-rubric-field",
        "prompt-not-text",
        "not-a-mapping",
        "broken-yaml",
    ],
)
def test_the_loader_refuses_a_bad_task_file_in_one_line(tmp_path, text, line, field, says):
    path = tmp_path / "bad.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InvalidInput) as caught:
        load(str(path))
    problems = caught.value.problems
    assert len(problems) == 1, [str(p) for p in problems]
    (p,) = problems
    assert (p.file, p.line, p.field) == (str(path), line, field)
    assert says in p.message and "\n" not in str(p)


def test_a_value_go_wrote_in_exponent_form_loads_as_a_number(tmp_path):
    # Go's yaml writes 1000000.0 as 1e+06, which YAML 1.1 would read as text.
    path = tmp_path / "big.yaml"
    path.write_text(GOOD.replace("value: 42.5", "value: 1e+06"), encoding="utf-8")
    assert load(str(path)).tasks[0].grading.value == 1_000_000.0


def test_the_loader_refuses_a_task_id_used_twice(tmp_path):
    (tmp_path / "a.yaml").write_text(GOOD, encoding="utf-8")
    (tmp_path / "b.yaml").write_text(GOOD, encoding="utf-8")
    with pytest.raises(InvalidInput) as caught:
        load(str(tmp_path))
    (p,) = caught.value.problems
    assert (p.file, p.line, p.field) == (str(tmp_path / "b.yaml"), 1, "id")
    assert f"already used at {tmp_path / 'a.yaml'}:1" in p.message


def test_the_loader_refuses_a_folder_without_task_files(tmp_path):
    (tmp_path / "notes.json").write_text("{}", encoding="utf-8")
    with pytest.raises(InvalidInput, match="holds no tasks"):
        load(str(tmp_path))


def test_the_loader_reads_every_task_of_the_peers_bench():
    tasks = load(os.path.join(peer_dir(), "bench", "tasks")).tasks
    assert len(tasks) == 87  # every *.yaml; scripted-smoke.json is not a task, as for the peer
    assert Counter(t.grading.kind for t in tasks) == {"numeric": 62, "entity": 21, "exec_sql": 4}


# --- (d) the peer's task-set hash ----------------------------------------------------


def test_every_arms_tasks_hash_to_the_manifests_task_set_hash():
    runs = _runs()
    for run in runs:
        recorded = _read(run)["manifest"]["task_set_hash"]
        folder = os.path.join(os.path.dirname(run), "tasks")
        if os.path.isdir(folder):
            assert task_set_hash(load(folder).tasks) == recorded, _label(run)
        # The bench's own task files, filtered to the ids the run attempted, hash the same.
        bench = load(os.path.join(peer_dir(), "bench", "tasks")).by_id()
        ids = {a["task_id"] for a in _read(run)["attempts"]}
        if len(ids) == len(_tasks_of(run)):  # an incomplete run may not have reached every task
            assert task_set_hash(bench[i] for i in ids) == recorded, _label(run)


def test_the_task_set_hash_writes_a_zero_value_but_drops_a_zero_tolerance():
    base = Task("t", "s3", "p", ("a0",), 1, TaskGrading("numeric", value=0.0))
    other = Task("t", "s3", "p", ("a0",), 1, TaskGrading("numeric", value=None))
    assert task_set_hash([base]) != task_set_hash([other])
    same = Task("t", "s3", "p", ("a0",), 1, TaskGrading("numeric", value=0.0, abs_tolerance=0.0))
    assert task_set_hash([same]) == task_set_hash([base])
