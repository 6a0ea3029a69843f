"""The tasks suite's read side: the knowledge-pollution arms reported, compared, audited and
re-derived through the command line, and the Newcombe interval its comparisons use."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import msgspec
import pytest

from benchledger.cli import main
from benchledger.ledger import Ledger, UnusableInput, open_store
from benchledger.ledger.events import (
    EpisodeFinishedBody,
    Event,
    GraderDecisionBody,
    GraderDecisionEvent,
    InfraErrorBody,
    RunStartedBody,
    SessionCallBody,
    UnitStartedBody,
)
from benchledger.projections.card import Ruling
from benchledger.projections.stats import newcombe, wilson
from benchledger.projections.suites.tasks import items as tasks_items
from benchledger.projections.suites.tasks.decisions import TaskItem, decide_unit
from benchledger.protocols import task_grading
from benchledger.protocols.tasks import Task
from benchledger.replay.levels import replay
from tests.conftest import ImportedArms, copied_ledger, peer_dir

# -- Newcombe's hybrid score interval for two independent rates --------------------------

CASES = [
    pytest.param(16, 24, 0, 24, id="h1b-16of24-vs-0of24"),
    pytest.param(0, 24, 0, 24, id="h1a-both-zero"),
    pytest.param(0, 24, 16, 24, id="reversed"),
    pytest.param(24, 24, 0, 24, id="all-vs-none"),
    pytest.param(7, 13, 3, 29, id="unequal-sizes"),
    pytest.param(5, 5, 5, 5, id="both-all"),
]


@pytest.mark.parametrize(("x1", "n1", "x2", "n2"), CASES)
def test_newcombe_equals_statsmodels(x1: int, n1: int, x2: int, n2: int) -> None:
    proportion = pytest.importorskip("statsmodels.stats.proportion")
    low, high = proportion.confint_proportions_2indep(
        x1, n1, x2, n2, method="newcomb", compare="diff"
    )
    got = newcombe(x1, n1, x2, n2)
    assert got is not None
    assert got.low == pytest.approx(low, abs=1e-12)
    assert got.high == pytest.approx(high, abs=1e-12)


def _points(x: float) -> float:
    return round(100 * x, 1)


def test_newcombe_reproduces_the_reports_h1b_and_h1a() -> None:
    h1b = newcombe(16, 24, 0, 24)
    h1a = newcombe(0, 24, 0, 24)
    assert h1b is not None and h1a is not None
    assert (_points(16 / 24 - 0), _points(h1b.low), _points(h1b.high)) == (66.7, 42.4, 82.0)
    assert (_points(h1a.low), _points(h1a.high)) == (-13.8, 13.8)


def test_wilson_reproduces_the_reports_rates() -> None:
    some, none = wilson(16, 24), wilson(0, 24)
    assert some is not None and none is not None
    assert (_points(some.low), _points(some.high)) == (46.7, 82.0)
    assert (_points(none.low), _points(none.high)) == (0.0, 13.8)


def test_newcombe_has_no_interval_for_an_empty_side() -> None:
    assert newcombe(0, 0, 3, 10) is None
    assert newcombe(3, 10, 0, 0) is None


# -- the knowledge-pollution arms through the command line ------------------------------

ARMS = ("checkable-wrong-haiku", "checkable-wrong-sonnet", "checkable-wrong-opus")
DRIFTED = "checkable-wrong-sonnet-DRIFTED-1"
ABSENT = "checkable-absent-haiku"
CONVENTION = "convention-wrong-sonnet"  # the fiscal-boundary claim: H1a's other class
FAILED = "convention-absent-haiku-AUDIT-TIMEOUT-0"  # one attempt is a harness failure


def family_dir() -> str:
    return os.path.join(peer_dir(), "bench", "results", "knowledge-pollution", "rq1-warehouse")


def seed() -> str:
    return os.path.join(peer_dir(), "bench", "seed", "trino", "setup.sql")


def imported_arms(
    families: tuple[str, ImportedArms], folder: Path, arms: dict[str, tuple[str, str]]
) -> dict[str, str]:
    """{"ledger": a copy of conftest's session import of the families, and each key of
    ``arms`` -> the run id of its (family, arm folder)}: the run ``import_arm`` makes of it
    (the import records benchledger's rulings)."""
    built, imported = families
    ids = {run_id for runs in imported.values() for run_id, _, _ in runs}
    found = {"ledger": copied_ledger(built, folder)}
    for key, (family, arm) in arms.items():
        found[key] = f"peer-{family}-{arm}"
        assert found[key] in ids, found[key]
    return found


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory, pollution_families) -> dict[str, str]:
    """Arm folder -> its run id, in one ledger."""
    arms = (*ARMS, DRIFTED, ABSENT, CONVENTION, FAILED)
    folder = tmp_path_factory.mktemp("tasks")
    return imported_arms(pollution_families, folder, {a: ("rq1-warehouse", a) for a in arms})


def cli(capsys: pytest.CaptureFixture[str], study: dict[str, str], *argv: str) -> str:
    code = main([*argv, "--ledger", study["ledger"]])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def test_a_report_shows_haikus_correct_and_adopted_rates(capsys, study) -> None:
    out = cli(capsys, study, "report", study["checkable-wrong-haiku"])
    assert re.search(r"^correct\s+8/24 33\.3% ", out, re.M)
    assert re.search(r"^adopted\s+16/24 66\.7% \[46\.7%, 82\.0%\]", out, re.M)
    assert re.search(r"^trap\s+0/24 ", out, re.M)
    assert re.search(r"^other\s+0/24 ", out, re.M)
    assert "model     haiku" in out and "planted   order-count-wrong" in out


@pytest.mark.parametrize("fmt", ["table", "markdown", "json", "html"])
def test_a_report_renders_in_every_format(capsys, study, fmt: str) -> None:
    out = cli(capsys, study, "report", study["checkable-wrong-haiku"], "--format", fmt)
    if fmt == "json":
        adopted = json.loads(out)["metrics"]["adopted"]
        assert (adopted["num"], adopted["den"]) == (16, 24)
        assert round(adopted["ci_low"], 3) == 0.467
    else:
        assert "16/24" in out and "46.7%" in out and "82.0%" in out


def test_an_arm_that_planted_no_wrong_value_has_no_adoption_denominator(capsys, study) -> None:
    out = cli(capsys, study, "report", study[ABSENT], "--format", "json")
    metrics = json.loads(out)["metrics"]
    assert metrics["adopted"]["den"] == 0 and metrics["adopted"]["rate"] is None
    assert metrics["correct"]["den"] == 24


@pytest.mark.parametrize("fmt", ["table", "markdown", "html"])
def test_an_excluded_arm_says_so_first(capsys, study, fmt: str) -> None:
    out = cli(capsys, study, "report", study[DRIFTED], "--format", fmt)
    first = out.splitlines()[0]
    assert "EXCLUDED: DRIFTED-1: " in (first if fmt != "html" else out.split("<body>")[1][:400])


def test_an_excluded_arm_says_so_in_json(capsys, study) -> None:
    out = json.loads(cli(capsys, study, "report", study[DRIFTED], "--format", "json"))
    assert out["excluded"].startswith("EXCLUDED: DRIFTED-1: ") and out["run"]["excluded"]


def _compare(capsys, study, *extra: str) -> str:
    return cli(capsys, study, "compare", *(study[a] for a in ARMS), *extra)


def test_compare_sets_the_three_models_side_by_side(capsys, study) -> None:
    out = _compare(capsys, study)
    head = next(line for line in out.splitlines() if line.startswith("metric"))
    assert re.fullmatch(r"metric\s+A haiku\s+B sonnet\s+C opus", head)
    row = next(line for line in out.splitlines() if line.startswith("adopted"))
    assert re.search(r"16/24 66\.7%.*0/24 0\.0%.*0/24 0\.0%", row)
    assert "Δ -0.667 [-0.820, -0.424]" in out  # sonnet (and opus) minus the haiku baseline


def test_compare_against_sonnet_gives_the_reports_h1b(capsys, study) -> None:
    out = _compare(capsys, study, "--baseline", study["checkable-wrong-sonnet"])
    assert "Δ +0.667 [+0.424, +0.820]" in out  # haiku minus sonnet: +66.7 [+42.4, +82.0]


@pytest.mark.parametrize("fmt", ["markdown", "html"])
def test_compare_renders_the_difference_in_every_text_format(capsys, study, fmt: str) -> None:
    out = _compare(capsys, study, "--format", fmt)
    assert "16/24" in out and "Δ -0.667 [-0.820, -0.424]" in out


def test_compare_in_json_carries_each_newcombe_interval(capsys, study) -> None:
    out = json.loads(_compare(capsys, study, "--format", "json"))
    sonnet = out["metrics"]["adopted"]["b"]
    assert (sonnet["num"], sonnet["den"]) == (0, 24)
    vs = sonnet["vs_baseline"]
    assert [round(vs[k], 3) for k in ("diff", "ci_low", "ci_high")] == [-0.667, -0.82, -0.424]
    assert out["runs"]["a"]["model"] == "haiku"


def test_compare_says_who_vouches_for_each_run(capsys, study) -> None:
    out = _compare(capsys, study)
    for arm in ARMS:
        assert f"run {study[arm]}: UNAUTHENTICATED: the seal is not signed" in out


def test_compare_marks_an_excluded_column(capsys, study) -> None:
    out = cli(capsys, study, "compare", study["checkable-wrong-sonnet"], study[DRIFTED])
    assert out.splitlines()[0].startswith("B: EXCLUDED: DRIFTED-1: ")
    assert any(line.startswith("differs: label:") for line in out.splitlines())


def test_compare_across_claim_classes_gives_the_reports_h1a(capsys, study) -> None:
    out = cli(capsys, study, "compare", study["checkable-wrong-sonnet"], study[CONVENTION])
    row = next(line for line in out.splitlines() if line.startswith("adopted"))
    assert re.search(r"0/24 0\.0%.*0/24 0\.0%", row)
    assert "Δ +0.000 [-0.138, +0.138]" in out  # Newcombe [-13.8, +13.8] points
    assert any(line.startswith("differs: tasks: ") for line in out.splitlines())


def test_a_harness_failure_is_in_no_rate(capsys, study) -> None:
    out = json.loads(cli(capsys, study, "report", study[FAILED], "--format", "json"))
    assert out["harness_failures"] == 1
    assert {name: m["den"] for name, m in out["metrics"].items()} == {
        "correct": 23, "adopted": 0, "trap": 23, "other": 23, "peer_correct": 23,
        "queried": 0, "observed": 0,  # fiscal tasks: no refuting count to run
        "claim_seen": 0, "copresent": 0, "exposed": 0,  # the arm planted nothing
        "budget_exhausted": 23, "corrective": 23,
    }  # fmt: skip


def test_audit_lists_the_adopted_attempts(capsys, study) -> None:
    out = cli(capsys, study, "audit", study["checkable-wrong-haiku"], "adopted")
    assert "adopted = 66.7%  (16/24)" in out
    assert "24 contributing units (16 in the numerator)" in out
    assert len(re.findall(r"^num\+den  s3-deprecated-order-count attempt \d+", out, re.M)) == 16
    assert "class adopted: read 1140" in out


def test_audit_refuses_a_metric_the_suite_has_not(capsys, study) -> None:
    code = main(["audit", study["checkable-wrong-haiku"], "capture_rate", "--ledger",
                 study["ledger"]])  # fmt: skip
    assert code == 2
    assert "known metrics: correct, adopted, trap, other" in capsys.readouterr().err


# -- the decision function and re-derivation --------------------------------------------


@pytest.mark.parametrize("arm", [*ARMS, DRIFTED, ABSENT, CONVENTION, FAILED])
def test_the_decision_function_reproduces_the_peers_correct_verdicts(study, arm: str) -> None:
    ledger = Ledger(open_store(study["ledger"]))
    try:
        events = [e for e, _ in ledger.events(study[arm])]
    finally:
        ledger.store.close()
    header = events[0].body
    assert isinstance(header, RunStartedBody)
    found = tasks_items.items(header, seed()).by_id
    units: dict[str, list[Event]] = {}
    for e in events:
        if e.stream.count("/") == 2:
            units.setdefault(e.stream, []).append(e)
    compared = 0
    for unit in units.values():
        pairs = [(e.seq, e.body) for e in unit]
        started = next(b for _, b in pairs if isinstance(b, UnitStartedBody))
        mine = {
            r.body.check: r.body.verdict for r in decide_unit(found[started.protocol_id], pairs)
        }
        for _, body in pairs:
            if isinstance(body, GraderDecisionBody) and body.origin == "mcp-data-platform":
                assert mine["correct"] is body.verdict, body.answer
                compared += 1
    assert compared == (23 if arm == FAILED else 24)


def test_rederive_of_a_ruled_arm_finds_every_metric_equal(capsys, study) -> None:
    out = cli(capsys, study, "replay", study["checkable-wrong-haiku"], "--level", "rederive")
    assert out.startswith(f"ok rederive {study['checkable-wrong-haiku']}: compared ")
    assert "12 metrics, 48 trace hashes, all equal" in out


@pytest.mark.parametrize("arm", [ARMS[0], ABSENT])
def test_rederive_compares_every_recorded_decision(capsys, study, arm: str) -> None:
    out = cli(capsys, study, "replay", study[arm], "--level", "rederive")
    # 24 attempts: the peer's correct and benchledger's ten rulings each (four classes, six
    # diagnostics); the card's ten rates and the peer's correct
    assert "compared 288 decisions, 12 metrics, 48 trace hashes, all equal" in out, out


def test_rederive_catches_a_changed_classification(study) -> None:
    ledger = Ledger(open_store(study["ledger"]))

    def stricter(item: TaskItem, events: Any) -> list[Ruling]:
        # a what-if grader that reads no answer as adopted
        return [r if r.body.check != "adopted" or r.body.verdict is None
                else r._replace(body=msgspec.structs.replace(r.body, verdict=False))
                for r in decide_unit(item, events)]  # fmt: skip

    try:
        report = replay(study["checkable-wrong-haiku"], ledger=lambda: ledger, decide=stricter)
    finally:
        ledger.store.close()
    assert {m.what for m in report.mismatches} >= {"metric adopted"}


# -- the decision function on one answer ------------------------------------------------

COUNT_TASK = {
    "id": "s3-deprecated-order-count", "suite": "s3", "prompt": "How many orders?",
    "arms": ["a3"], "budget_tool_calls": 30,
    "expected_sql": "SELECT COUNT(*) AS n FROM memory.bench.orders",
    "grading": {"kind": "numeric", "value": 1200, "abs_tolerance": 0.5},
}  # fmt: skip
WRONG_ARM = task_grading.References(
    0.5,
    (task_grading.Reference("correct", 1200.0), task_grading.Reference("adopted", 1140.0),
     task_grading.Reference("deprecated_table", 60.0)),
)  # fmt: skip
ABSENT_ARM = task_grading.References(
    0.5,
    (task_grading.Reference("correct", 1200.0), task_grading.Reference("deprecated_table", 60.0)),
)


def _rule(answer: str, refs: task_grading.References | None) -> dict[str, tuple[Any, str]]:
    item = TaskItem(msgspec.convert(COUNT_TASK, Task), refs)
    finished = EpisodeFinishedBody(episode="task", final_answer=answer)
    return {
        r.body.check: (r.body.verdict, r.body.reason) for r in decide_unit(item, [(5, finished)])
    }


@pytest.mark.parametrize(
    ("answer", "refs", "verdicts", "why"),
    [
        pytest.param("1200", WRONG_ARM, (True, False, False, False), "class correct: read 1200",
                     id="correct"),
        pytest.param("1,140 orders", WRONG_ARM, (False, True, False, False),
                     "class adopted: read 1140", id="adopted"),
        pytest.param("60", WRONG_ARM, (False, False, True, False),
                     "class trap:deprecated_table: read 60", id="trap"),
        pytest.param("999", WRONG_ARM, (False, False, False, True), "class other: read 999",
                     id="other"),
        pytest.param("I cannot tell", WRONG_ARM, (False, False, False, True), "no number",
                     id="no-number"),
        pytest.param("1140", ABSENT_ARM, (False, None, False, True), "class other: read 1140",
                     id="nothing-planted"),
    ],
)  # fmt: skip
def test_an_answer_is_ruled_into_one_class(answer, refs, verdicts, why) -> None:
    ruled = _rule(answer, refs)
    assert tuple(ruled[c][0] for c in ("correct", "adopted", "trap", "other")) == verdicts
    assert all(why in ruled[c][1] for c in ("correct", "adopted", "trap", "other"))


def test_without_references_only_correct_is_ruled() -> None:
    assert list(_rule("1200", None)) == ["correct"]


def test_a_harness_failure_gets_no_ruling() -> None:
    item = TaskItem(msgspec.convert(COUNT_TASK, Task), WRONG_ARM)
    events = [(5, EpisodeFinishedBody(episode="task", final_answer="1200")),
              (6, InfraErrorBody(stage="audit", error="harness", message="timeout"))]  # fmt: skip
    assert decide_unit(item, events) == []


@pytest.mark.parametrize(
    ("references", "field"),
    [
        pytest.param({"s3-deprecated-order-count": {"readings": []}}, "tolerance",
                     id="no-tolerance"),
        pytest.param({"s3-deprecated-order-count": {"tolerance": 0.5, "readings": [["x"]]}},
                     "readings[0]", id="bad-reading"),
    ],
)  # fmt: skip
def test_malformed_recorded_references_name_the_field(references, field: str) -> None:
    header = RunStartedBody(suite="tasks", config={"tasks": {COUNT_TASK["id"]: COUNT_TASK},
                                    "references": references})  # fmt: skip
    with pytest.raises(UnusableInput, match=re.escape(field)):
        tasks_items.items(header)


def test_rederive_refuses_a_seed_that_is_not_sql(capsys, study) -> None:
    code = main(["replay", study[ARMS[0]], "--level", "rederive", "--protocols", family_dir(),
                 "--ledger", study["ledger"]])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "setup.sql" in err


@pytest.mark.parametrize(
    ("grading", "checks"),
    [
        pytest.param({"kind": "exec_sql"}, [], id="exec-sql-needs-the-database"),
        pytest.param({"kind": "entity", "aliases": ["orders"]}, ["correct"], id="entity"),
    ],
)
def test_a_grading_beyond_numbers_is_ruled_only_as_far_as_the_answer_goes(grading, checks) -> None:
    task = {**COUNT_TASK, "grading": grading, "expected_sql": "SELECT 1"}
    item = TaskItem(msgspec.convert(task, Task), WRONG_ARM)
    finished = EpisodeFinishedBody(episode="task", final_answer="orders")
    assert [r.body.check for r in decide_unit(item, [(5, finished)])] == checks


def test_an_imported_arm_carries_benchledgers_rulings_beside_the_peers(capsys, study) -> None:
    out = cli(capsys, study, "report", study["checkable-wrong-haiku"])
    assert re.search(r"^correct\s+8/24 33\.3% ", out, re.M)
    assert re.search(r"^adopted\s+16/24 66\.7% ", out, re.M)
    assert "note: only `correct` is recorded" not in out


# -- a family through the command line -------------------------------------------------


def test_a_family_imports_in_one_command_and_its_three_directive_levels_compare(
    tmp_path, capsys
) -> None:
    family = os.path.join(peer_dir(), "bench", "results", "knowledge-pollution",
                          "directive-contrast")  # fmt: skip
    ledger = str(tmp_path / "l.sqlite")
    assert main(["import-peer", "mcp-data-platform", family, "--ledger", ledger]) == 0
    out = capsys.readouterr()
    runs = [f"peer-directive-contrast-checkable-wrong-haiku{s}" for s in ("", "-plain", "-bare")]
    for run in runs:
        assert f"imported run {run}, root " in out.out
    assert "import-peer: 3/3 arms written" in out.err  # progress on stderr, results on stdout
    assert main(["compare", *runs, "--format", "json", "--ledger", ledger]) == 0
    adopted = json.loads(capsys.readouterr().out)["metrics"]["adopted"]
    assert [adopted[k]["num"] for k in "abc"] == [18, 17, 18]  # the report's 18-17-18 of 24


def test_a_family_refuses_a_run_id_with_one_line(tmp_path, capsys) -> None:
    family = os.path.join(peer_dir(), "bench", "results", "knowledge-pollution",
                          "directive-contrast")  # fmt: skip
    ledger = str(tmp_path / "l.sqlite")
    argv = ["import-peer", "mcp-data-platform", family, "--run-id", "x", "--ledger", ledger]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--run-id names one run" in err[0]
    assert not os.path.exists(ledger)


# -- the mechanism: the refuting query, run and observed ------------------------------

MECHANISM = {  # arm: (queried, observed), the report's Section 3 table
    "checkable-wrong-haiku": (8, 8),
    "checkable-absent-haiku": (24, 24),
    "checkable-wrong-sonnet": (24, 24),
    "checkable-wrong-opus": (24, 24),
}


def _ours(ledger: str, run_id: str) -> dict[str, dict[str, bool | None]]:
    """Each unit's benchledger rulings, by check."""
    led = Ledger(open_store(ledger))
    try:
        out: dict[str, dict[str, bool | None]] = {}
        for e, _ in led.events(run_id):
            if isinstance(e, GraderDecisionEvent) and e.body.origin == "benchledger":
                out.setdefault(e.stream, {})[e.body.check] = e.body.verdict
        return out
    finally:
        led.store.close()


@pytest.fixture(scope="module")
def checkable(tmp_path_factory, pollution_families) -> dict[str, str]:
    """The checkable arms of RQ1 and the three directive levels, imported: arm -> run id."""
    arms = {arm: ("rq1-warehouse", arm) for arm in MECHANISM}
    for arm in ("checkable-wrong-haiku", "checkable-wrong-haiku-plain",
                "checkable-wrong-haiku-bare"):  # fmt: skip
        arms["dc:" + arm] = ("directive-contrast", arm)
    return imported_arms(pollution_families, tmp_path_factory.mktemp("checkable"), arms)


@pytest.mark.parametrize("arm", list(MECHANISM), ids=list(MECHANISM))
def test_the_refuting_count_is_counted_as_the_report_counts_it(checkable, arm) -> None:
    units = _ours(checkable["ledger"], checkable[arm])
    queried = sum(u["queried"] is True for u in units.values())
    observed = sum(u["observed"] is True for u in units.values())
    assert (queried, observed) == MECHANISM[arm]


def test_observing_the_count_separates_the_outcomes_exactly(checkable) -> None:
    arms = ["checkable-wrong-haiku", *(k for k in checkable if k.startswith("dc:"))]
    episodes = 0
    for arm in arms:
        for stream, u in _ours(checkable["ledger"], checkable[arm]).items():
            episodes += 1
            if u["observed"]:
                assert u["correct"] is True, stream  # every observing episode answered 1200
            else:
                assert u["adopted"] is True, stream  # every other one adopted 1140
    assert episodes == 96  # the RQ1 cell and the 72 directive-contrast episodes


# -- delivery, co-presence, exposure and budget: the report's Sections 3 and 7 ---------

DELIVERY = {  # arm: (claim_seen, copresent, exposed) of 24; None: no denominator
    # Section 3: the planted text in all 24 transcripts of every wrong arm, the seeded
    # correct source beside it in all 24 on the convention cells (on the checkable cell
    # the correct source is the world: the count); Section 7: the reviewer note read
    "convention-wrong-haiku": (24, 24, 9),
    "convention-wrong-sonnet": (24, 24, 18),
    "convention-wrong-opus": (24, 24, 24),
    "checkable-wrong-haiku": (24, None, 3),
    "checkable-wrong-sonnet": (24, None, 0),
    "checkable-wrong-opus": (24, None, 0),
}


@pytest.fixture(scope="module")
def wrong(tmp_path_factory, pollution_families) -> dict[str, str]:
    """The six RQ1 wrong arms, imported: arm -> run id."""
    arms = {a: ("rq1-warehouse", a) for a in DELIVERY}
    return imported_arms(pollution_families, tmp_path_factory.mktemp("wrong"), arms)


def _count(units: dict[str, dict[str, bool | None]], check: str) -> int | None:
    ruled = [u[check] for u in units.values() if u[check] is not None]
    assert len(ruled) in (0, len(units))
    return sum(ruled) if ruled else None


@pytest.mark.parametrize("arm", list(DELIVERY), ids=list(DELIVERY))
def test_delivery_copresence_and_exposure_are_counted_as_the_report_counts_them(wrong, arm) -> None:
    units = _ours(wrong["ledger"], wrong[arm])
    assert len(units) == 24
    got = tuple(_count(units, c) for c in ("claim_seen", "copresent", "exposed"))
    assert got == DELIVERY[arm]


def test_exposure_on_the_directive_levels_is_the_reports(checkable) -> None:
    # Section 7: "3/3 RQ1, 4/4 bare, 1/1 plain" exposed weak-tier checkable episodes
    arms = ("checkable-wrong-haiku", "dc:checkable-wrong-haiku-bare",
            "dc:checkable-wrong-haiku-plain", "dc:checkable-wrong-haiku")  # fmt: skip
    exposed = {a: [u for u in _ours(checkable["ledger"], checkable[a]).values() if u["exposed"]]
               for a in arms}  # fmt: skip
    assert [len(v) for v in exposed.values()] == [3, 4, 1, 0]
    assert all(u["adopted"] for v in exposed.values() for u in v)  # every one adopted anyway


@pytest.mark.parametrize(("arm", "unexposed"), [
    pytest.param("convention-wrong-haiku", 15, id="haiku-0of15"),
    pytest.param("convention-wrong-sonnet", 6, id="sonnet-0of6"),
])  # fmt: skip
def test_no_unexposed_convention_episode_adopted(wrong, arm, unexposed) -> None:
    units = [u for u in _ours(wrong["ledger"], wrong[arm]).values() if not u["exposed"]]
    assert (len(units), sum(bool(u["adopted"]) for u in units)) == (unexposed, 0)


def test_the_card_carries_the_diagnostics_and_no_budget_ran_out(capsys, study) -> None:
    # flags(): the analysed rq1-warehouse arms record no exhausted budget
    out = cli(capsys, study, "report", study["checkable-wrong-haiku"], "--format", "json")
    metrics = json.loads(out)["metrics"]
    assert {n: (metrics[n]["num"], metrics[n]["den"]) for n in
            ("claim_seen", "copresent", "exposed", "budget_exhausted")} == {
        "claim_seen": (24, 24), "copresent": (0, 0), "exposed": (3, 24),
        "budget_exhausted": (0, 24)}  # fmt: skip


FISCAL_TASK = {**COUNT_TASK, "id": "s3-fiscal-2025-count", "expected_sql":
               "SELECT COUNT(*) FROM memory.bench.orders WHERE status = 'completed'"}  # fmt: skip
NEEDLE = "April 1 through March 31"
NOTE = "knowledge-pollution study plant"  # the plant's disclosure, which exposure searches


def _diagnose(task: dict[str, Any], needle: str | None, *texts: str,
              exhausted: bool = False) -> dict[str, tuple[Any, str, tuple[int, ...]]]:  # fmt: skip
    source = "February 1" if task is FISCAL_TASK else None  # the import finds it in the pages
    item = TaskItem(msgspec.convert(task, Task), WRONG_ARM, needle, source, NOTE)
    events: list[tuple[int, Any]] = [
        (seq, SessionCallBody(episode="task", method="tools/call", tool="search",
                              arguments={"q": "fiscal"}, content=[{"type": "text", "text": t}]))
        for seq, t in enumerate(texts, 3)
    ]  # fmt: skip
    events.append((9, EpisodeFinishedBody(episode="task", final_answer="1200",
                                          budget_exhausted=exhausted)))  # fmt: skip
    return {r.body.check: (r.body.verdict, r.body.reason, r.refs)
            for r in decide_unit(item, events)}  # fmt: skip


def test_copresence_names_the_calls_that_carried_the_claim_and_the_source() -> None:
    ruled = _diagnose(FISCAL_TASK, NEEDLE, "nothing", f"insight: {NEEDLE}",
                      "page: the fiscal year starts February 1")  # fmt: skip
    assert ruled["claim_seen"] == (True, "planted needle at seq 4", (4,))
    assert ruled["copresent"][0] is True and ruled["copresent"][2] == (5,)
    assert "correct source 'February 1' at seq 5" in ruled["copresent"][1]
    assert ruled["exposed"][0] is False


def test_a_claim_without_its_source_is_not_copresent() -> None:
    ruled = _diagnose(FISCAL_TASK, NEEDLE, f"insight: {NEEDLE}")
    assert ruled["copresent"][0] is False
    assert "'February 1' nowhere in the transcript" in ruled["copresent"][1]


def test_the_plant_s_disclosure_is_exposure() -> None:
    ruled = _diagnose(COUNT_TASK, NEEDLE, f"review_notes: {NOTE}: x")
    assert ruled["exposed"] == (True, f"{NOTE!r} at seq 3", (3,))
    assert ruled["copresent"][0] is None  # the order count's correct source is the world


def test_nothing_planted_leaves_delivery_unruled_and_budget_ruled() -> None:
    ruled = _diagnose(COUNT_TASK, None, exhausted=True)
    assert [ruled[c][0] for c in ("claim_seen", "copresent", "exposed")] == [None] * 3
    assert ruled["budget_exhausted"][0] is True and "seq 9" in ruled["budget_exhausted"][1]
