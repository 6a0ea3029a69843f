"""The tasks suite run live: the peer's tasks answered on the embedded reference platform.

The scripted agent runs each task's ``expected_sql`` through ``trino_query`` and answers
the number, so a run over the peer's s2 and s3 tasks on the peer's own seed is a check
from outside: the peer computed every graded value from that seed, and refplatform's SQL
engine answering the peer's query must reproduce it. Pure parts first (the script's
turns), then one run end to end (run, seal, verify, rederive, report), then refusals.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from benchledger.cli import main
from benchledger.harness.agents import ScriptedAgent
from benchledger.harness.agents.base import Episode
from benchledger.harness.agents.scripted_tasks import UNAVAILABLE, number_text
from benchledger.ledger import Ledger, open_store
from benchledger.ledger.events import (
    EpisodeFinishedEvent,
    GraderDecisionEvent,
    RunStartedEvent,
    SessionCallEvent,
)
from benchledger.projections.suites.tasks.items import items
from benchledger.protocols import tasks as task_files
from benchledger.protocols.task_grading import read_query
from benchledger.protocols.tasks import Task, TaskGrading
from benchledger.replay.levels import replay
from tests.conftest import cli, one_line_exit_2, peer_dir

SQL = "SELECT COUNT(*) AS n FROM memory.bench.orders"
ORDER_COUNT = "s3-deprecated-order-count"
# The s2/s3 tasks the script cannot answer, and why: no query (entity tasks answered by
# reading the catalog), an entity grading (its query returns a name, not a number), an
# exec_sql grading (graded by running the agent's SQL, which decide_unit does not rule).
NO_QUERY = {"s2-top-region-customers", "s2-top-region-orders", "s2-top-tier-orders"}
ENTITY = {"s3-net-top-region"}
EXEC_SQL = {"s2-sql-completed-orders-per-region", "s2-sql-customers-per-region",
            "s2-sql-customers-per-tier", "s2-sql-orders-per-status"}  # fmt: skip
# Peer tasks whose expected_sql refplatform cannot run, or answers other than the peer's
# graded value, on the peer's seed: none today (a finding when one appears).
DISAGREES: set[str] = set()


def _task(kind: str = "numeric", sql: str = SQL) -> Task:
    grading = TaskGrading(kind, value=1200.0 if kind == "numeric" else None,
                          aliases=("West",) if kind == "entity" else ())  # fmt: skip
    return Task("s2-x", "s2", "How many orders?", ("a0",), 30, grading, expected_sql=sql)


def _episode(task: Task) -> Episode:
    return Episode("task", "", task.prompt, task, task.budget_tool_calls)


def _turn(task: Task, messages: list[dict[str, Any]]) -> Any:
    return ScriptedAgent().decide(_episode(task), messages, {"search", "trino_query"})


def _tool(text: str, is_error: bool = False) -> dict[str, Any]:
    return {"role": "tool", "call_id": "c", "name": "t", "text": text, "is_error": is_error}


# -- the scripted agent on a task ---------------------------------------------------------------


def test_the_script_searches_then_runs_the_expected_sql_then_answers_its_first_value():
    task = _task()
    first = _turn(task, [])
    assert [(c.name, c.arguments) for c in first.tool_calls] == [
        ("search", {"intent": "How many orders?", "limit": 5})
    ]
    second = _turn(task, [_tool("{}")])
    assert [(c.name, c.arguments) for c in second.tool_calls] == [("trino_query", {"sql": SQL})]
    result = json.dumps({"columns": [{"name": "n", "type": "bigint"}], "rows": [{"n": 1200}]})
    done = _turn(task, [_tool("{}"), _tool(result + "\n\nSemantic context: ...")])
    assert done.text == "FINAL ANSWER: 1200" and not done.tool_calls


@pytest.mark.parametrize(
    "task",
    [_task(sql=""), _task("entity"), _task("exec_sql")],
    ids=["no-expected-sql", "an-entity-grading", "an-exec-sql-grading"],
)
def test_a_task_the_script_cannot_compute_is_answered_unavailable_without_a_call(task):
    turn = _turn(task, [])
    assert turn.text == f"FINAL ANSWER: {UNAVAILABLE}" and not turn.tool_calls


@pytest.mark.parametrize(
    ("text", "is_error"),
    [("SEARCH_REQUIRED: call search first", True), ('{"columns": [], "rows": []}', False),
     ('{"columns": [{"name": "r"}], "rows": [{"r": "West"}]}', False)],
    ids=["an-errored-query", "no-rows", "not-a-number"],
)  # fmt: skip
def test_a_query_that_gives_no_number_is_answered_unavailable(text, is_error):
    turn = _turn(_task(), [_tool("{}"), _tool(text, is_error)])
    assert turn.text == f"FINAL ANSWER: {UNAVAILABLE}"


@pytest.mark.parametrize(
    ("value", "text"),
    [("948", "948"), ("1187140.04", "1187140.04"), ("1e+21", "1000000000000000000000"),
     ("-2.5", "-2.5"), ("nan", None), (None, None)],
    ids=["whole", "cents", "never-an-exponent", "negative", "nan", "null"],
)  # fmt: skip
def test_a_result_value_is_answered_as_plain_digits(value, text):
    assert number_text(value) == text


# -- one live run of the peer's s2 and s3 tasks on the peer's seed --------------------------------


@pytest.fixture(scope="module")
def live(tmp_path_factory) -> dict[str, Any]:
    peer = peer_dir()
    folder = os.path.join(peer, "bench", "tasks")
    chosen = [t for t in task_files.load(folder).tasks if t.suite in ("s2", "s3")]
    ledger = str(tmp_path_factory.mktemp("tasks-live") / "l.sqlite")
    argv = ["run", "--suite", "tasks", "--tasks", folder, "--pack",
            os.path.join(peer, "bench", "seed"), "--ledger", ledger, "--run-id", "tk1"]  # fmt: skip
    for task in chosen:
        argv += ["--protocol", task.id]
    code = main(argv)
    with open_store(ledger) as store:
        events = [e for e, _ in Ledger(store).events("tk1")]
    return {"code": code, "ledger": ledger, "tasks": {t.id: t for t in chosen},
            "events": events, "set": task_files.load(folder).tasks}  # fmt: skip


def _by_task(events: list[Any], kind: type, pick: Any) -> dict[str, Any]:
    return {e.stream.split("/")[1]: pick(e.body) for e in events
            if isinstance(e, kind) and pick(e.body) is not None}  # fmt: skip


def test_refplatform_answers_every_numeric_s2_s3_task_with_expected_sql_as_the_peer_graded_it(
    live,
):
    assert live["code"] == 0
    tasks = live["tasks"]
    correct = _by_task(live["events"], GraderDecisionEvent,
                       lambda b: b.verdict if b.check == "correct" else None)  # fmt: skip
    numeric = {tid for tid, t in tasks.items() if t.expected_sql and t.grading.kind == "numeric"}
    assert len(numeric) == 62
    wrong = {tid for tid in numeric if correct.get(tid) is not True}
    assert wrong == DISAGREES, {tid: correct.get(tid) for tid in wrong}
    # The rest is what the script cannot compute, each for the reason the constants give.
    assert set(tasks) - numeric == NO_QUERY | ENTITY | EXEC_SQL
    assert {tid for tid, t in tasks.items() if not t.expected_sql} == NO_QUERY
    answers = _by_task(live["events"], EpisodeFinishedEvent, lambda b: b.final_answer)
    for tid in NO_QUERY | ENTITY | EXEC_SQL:
        assert answers[tid] == f"FINAL ANSWER: {UNAVAILABLE}", tid
    assert {tid for tid in EXEC_SQL if tid in correct} == set()  # ruled on nothing
    assert all(correct[tid] is False for tid in NO_QUERY | ENTITY)


def test_every_attempt_searched_before_its_one_query_as_a_fresh_identity(live):
    calls = [(e.stream, e.body.tool) for e in live["events"] if isinstance(e, SessionCallEvent)
             and e.body.tool in ("search", "trino_query")]  # fmt: skip
    queried = {s for s, tool in calls if tool == "trino_query"}
    assert len(queried) == 62  # the numeric tasks with a query
    for stream in queried:
        assert [tool for s, tool in calls if s == stream] == ["search", "trino_query"]
    starts = [e.body for e in live["events"] if type(e).__name__ == "UnitStartedEvent"]
    assert len({s.teacher for s in starts}) == len(live["tasks"]) == 70


def test_the_run_records_its_tasks_and_the_study_readings_so_readers_need_no_file(live):
    header = next(e.body for e in live["events"] if isinstance(e, RunStartedEvent))
    assert header.suite == "tasks" and header.record is not None
    config = header.config
    assert set(config["tasks"]) == {t.id for t in live["set"]}  # the whole set: it hashes so
    assert config["planted"] is None
    # readings for every task whose expected_sql the seeded warehouse model evaluates
    evaluable = set()
    for t in live["set"]:
        try:
            read_query(t.expected_sql)
            evaluable.add(t.id)
        except ValueError:
            pass
    assert {ORDER_COUNT, "s3-fiscal-2025-count", "s3-fiscal-q1-net"} <= evaluable
    assert set(config["references"]) == evaluable
    found = items(header)
    assert found.notes == [] and found.by_id[ORDER_COUNT].references is not None
    assert found.by_id["s3-net-top-region"].references is None  # an entity task


def test_the_live_run_is_sealed_verifies_and_rederives_with_zero_divergences(live, capsys):
    code, out, _ = cli(capsys, "verify", "tk1", "--ledger", live["ledger"])
    assert code == 0 and out.startswith("ok run tk1")
    report = replay("tk1", level="rederive", ledger=lambda: Ledger(open_store(live["ledger"])))
    assert report.ok, report.lines()
    assert "compared" in report.lines()[-1]


def test_a_full_replay_of_the_live_run_reproduces_every_episode_from_the_log(live):
    report = replay("tk1", level="full", ledger=lambda: Ledger(open_store(live["ledger"])))
    assert report.ok, report.lines()
    assert "compared 70 episodes, 70 units" in report.lines()[-1]


def test_the_report_renders_the_tasks_card_with_the_study_tasks_classified(live, capsys):
    code, out, _ = cli(capsys, "report", "tk1", "--ledger", live["ledger"], "--format", "json")
    assert code == 0
    metrics = json.loads(out)["metrics"]
    assert (metrics["correct"]["num"], metrics["correct"]["den"]) == (62, 66)
    # the tasks whose expected_sql the seed's model evaluates have readings (the study's
    # four and seven more aggregates over the orders): classified, none a trap, none planted
    assert (metrics["trap"]["num"], metrics["trap"]["den"]) == (0, 11)
    assert metrics["adopted"]["den"] == 0
    code, text, _ = cli(capsys, "report", "tk1", "--ledger", live["ledger"])
    assert code == 0 and "planted   none planted" in text and "correct        62/66" in text


def test_the_correct_headline_says_how_many_attempts_are_unanswerable_by_design(live, capsys):
    # From the tasks' own fields: graded (not exec_sql), yet no query or not a number.
    graded = [t for t in live["tasks"].values() if t.grading.kind != "exec_sql"]
    by_design = [t.id for t in graded if not (t.expected_sql and t.grading.kind == "numeric")]
    assert set(by_design) == NO_QUERY | ENTITY
    n, den = len(by_design), len(graded)
    code, out, _ = cli(capsys, "report", "tk1", "--ledger", live["ledger"], "--format", "json")
    correct = json.loads(out)["metrics"]["correct"]
    assert code == 0 and correct["unanswerable_by_design"] == n
    code, text, _ = cli(capsys, "report", "tk1", "--ledger", live["ledger"])
    row = next(line for line in text.splitlines() if line.startswith("correct "))
    assert f"{correct['num']}/{den}" in row
    assert f"{n} of the {den} unanswerable by design" in row
    assert f"{correct['num']}/{den - n} of the rest" in row


def test_on_a_pack_without_the_study_tables_only_correct_is_ruled(tmp_path, capsys):
    folder = os.path.join(peer_dir(), "bench", "tasks")
    ledger = str(tmp_path / "l.sqlite")
    code, _, err = cli(capsys, "run", "--suite", "tasks", "--tasks", folder, "--ledger", ledger,
                       "--run-id", "tk2", "--protocol", ORDER_COUNT)  # fmt: skip
    assert code == 0, err
    with open_store(ledger) as store:
        events = [e for e, _ in Ledger(store).events("tk2")]
    header = next(e.body for e in events if isinstance(e, RunStartedEvent))
    assert header.config["references"] == {}
    checks = [e.body.check for e in events if isinstance(e, GraderDecisionEvent)]
    assert checks == ["correct"]


# -- refusals -----------------------------------------------------------------------------------


def test_a_tasks_path_that_is_not_there_is_one_line_and_exit_2(tmp_path, capsys):
    missing = str(tmp_path / "no-such-tasks")
    code, _, err = cli(capsys, "run", "--suite", "tasks", "--tasks", missing,
                       "--ledger", str(tmp_path / "l.sqlite"))  # fmt: skip
    one_line_exit_2(code, err, missing, "no such file or folder")


@pytest.mark.parametrize(
    ("argv", "needles"),
    [(["--protocols", "protocols/data/lifecycle"],
      ("--protocols belongs to suite lifecycle", "suite tasks reads its items with --tasks")),
     (["--cases", "x.jsonl"],
      ("--cases belongs to suite provenance", "suite tasks reads its items with --tasks")),
     ([], ("needs --tasks PATH",))],
    ids=["protocols-instead-of-tasks", "cases-instead-of-tasks", "no-tasks-at-all"],
)  # fmt: skip
def test_the_tasks_suite_refuses_other_suites_item_options_in_one_line(tmp_path, capsys, argv,
                                                                       needles):  # fmt: skip
    code, _, err = cli(capsys, "run", "--suite", "tasks", *argv,
                       "--ledger", str(tmp_path / "l.sqlite"))  # fmt: skip
    one_line_exit_2(code, err, *needles)
