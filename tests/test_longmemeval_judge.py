"""LongMemEval's answers judged (docs/longmemeval.md, "Answers"): ``run --suite longmemeval
--judge SPEC`` grades each answer with evaluate_qa.py's prompt for the question's type (the
abstention prompt for an ``_abs`` question) over the loopback OpenAI-compatible fake, which
judges by rule; every judgment a recorded model call and a ``longmemeval_judge`` decision
citing it; ``regrade`` judges the recorded answers again with no platform or agent call.

One judged run of the shipped set (7 questions, every type and an abstention question)
backs the tests; its two regrades (the strict prompt for every question; two seeded samples
per answer) make no platform call, so they cost only the judge's loopback requests.

THE check (``_anscheck``): evaluate_qa.py's ``get_anscheck_prompt`` is lifted out of the
file in ../shared by its syntax tree (the file imports openai at its top) and run on each
question's own type, question, answer and recorded prediction; each recorded judge request
must be exactly the prompt it returns.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from benchledger.cli import main
from benchledger.harness.suites.longmemeval import DEFAULT_DATA
from benchledger.ledger import Ledger, open_store
from benchledger.ledger.events import (
    GraderDecisionEvent,
    ModelCallEvent,
    RunStartedEvent,
    SessionCallEvent,
)
from benchledger.protocols import longmemeval
from benchledger.protocols.judges import judge_prompt, verdict_of
from benchledger.replay.levels import replay
from tests.conftest import cli, one_line_exit_2
from tests.fakes.openai_api import FakeOpenAI

RUN, STRICT, SAMPLED = "lj1", "lj1-strict", "lj1-sampled"
JUDGE_MODEL = "judge-model"
CHECK = "longmemeval_judge"
SHIPPED = {q.id: q for q in longmemeval.load(DEFAULT_DATA).questions}
LME_EVAL = [
    Path(__file__).resolve().parents[1] / ".." / "shared" / "benchmarks" / "longmemeval",
    Path("/work/shared/benchmarks/longmemeval"),
]


def _events(path: str, run_id: str) -> list[Any]:
    with open_store(path) as store:
        return [e for e, _ in Ledger(store).events(run_id)]


def _opener(path: str) -> Any:
    return lambda: Ledger(open_store(path))


def _anscheck() -> Callable[..., str]:
    """evaluate_qa.py's ``get_anscheck_prompt``, its one function, executed alone."""
    for root in LME_EVAL:
        path = root / "src" / "evaluation" / "evaluate_qa.py"
        if path.is_file():
            tree = ast.parse(path.read_text())
            [fn] = [
                n
                for n in tree.body
                if isinstance(n, ast.FunctionDef) and n.name == "get_anscheck_prompt"
            ]
            scope: dict[str, Any] = {}
            exec(compile(ast.Module([fn], []), str(path), "exec"), scope)
            return scope["get_anscheck_prompt"]  # type: ignore[no-any-return]
    pytest.skip("LongMemEval's evaluate_qa.py (../shared/benchmarks/longmemeval) is not here")


@pytest.fixture(scope="module")
def judged(tmp_path_factory) -> dict[str, Any]:
    """The shipped set answered by the retrieval reader, judged by the loopback fake with
    the suite's default prompts; then regraded twice (no platform started)."""
    ledger = str(tmp_path_factory.mktemp("lmejudge") / "l.sqlite")
    with FakeOpenAI() as fake:
        spec = f"openai:{JUDGE_MODEL}@{fake.url}/v1"
        code = main(["run", "--suite", "longmemeval", "--platform", "embedded", "--agent",
                     "retrieval", "--judge", spec, "--ledger", ledger,
                     "--run-id", RUN])  # fmt: skip
        asked_live = len(fake.seen)
        strict = main(["regrade", RUN, "--judge", spec, "--judge-prompt", "strict",
                       "--run-id", STRICT, "--ledger", ledger])  # fmt: skip
        sampled = main(["regrade", RUN, "--judge", spec, "--judge-samples", "2",
                        "--judge-temperature", "0.7", "--judge-seed", "0",
                        "--run-id", SAMPLED, "--ledger", ledger])  # fmt: skip
        regrade_requests = fake.seen[asked_live:]
    return {"code": code, "strict": strict, "sampled": sampled, "ledger": ledger,
            "asked_live": asked_live, "regrade_requests": regrade_requests,
            "events": _events(ledger, RUN)}  # fmt: skip


def _judgments(events: list[Any]) -> list[tuple[Any, list[Any]]]:
    """Each ``longmemeval_judge`` decision with the judge calls it cites."""
    calls = {(e.stream, e.seq): e for e in events
             if isinstance(e, ModelCallEvent) and e.body.episode == "judge"}  # fmt: skip
    return [(d, [calls[(d.stream, r)] for r in d.refs]) for d in events
            if isinstance(d, GraderDecisionEvent) and d.body.check == CHECK]  # fmt: skip


def _question(event: Any) -> longmemeval.Question:
    return SHIPPED[event.stream.split("/")[1].split(":", 1)[-1]]


def test_a_judged_run_seals_verifies_rederives_and_replays_in_full(judged, capsys):
    assert judged["code"] == 0
    code, out, _ = cli(capsys, "verify", RUN, "--ledger", judged["ledger"])
    assert code == 0 and out.startswith(f"ok run {RUN}")
    for level in ("rederive", "full"):
        report = replay(RUN, level=level, ledger=_opener(judged["ledger"]))
        assert report.ok, report.lines()


def test_each_judge_call_uses_evaluate_qas_prompt_for_its_questions_type(judged):
    anscheck = _anscheck()
    found = _judgments(judged["events"])
    assert len(found) == len(SHIPPED) == judged["asked_live"]
    types = set()
    for d, [call] in found:
        q = _question(d)
        types.add("abstention" if q.abstention else q.type)
        assert call.body.request["model"] == JUDGE_MODEL
        [message] = call.body.request["messages"]
        theirs = anscheck(q.type, q.question, q.answer, d.body.answer, abstention=q.abstention)
        assert message["text"] == theirs, q.id
        assert d.body.verdict is verdict_of(call.body.response["text"])
    assert "abstention" in types and len(types) == 7  # every prompt of the five was sent
    [started] = [e for e in judged["events"] if isinstance(e, RunStartedEvent)]
    j = started.body.record.judge
    assert j["prompt"] == "longmemeval" and j["prompt_sha256"] == judge_prompt("longmemeval").sha256


def test_judge_accuracy_is_on_the_card_overall_and_per_type_beside_the_judge_free_bounds(
    judged, capsys
):
    code, out, _ = cli(capsys, "report", RUN, "--ledger", judged["ledger"], "--format", "json")
    assert code == 0
    card = json.loads(out)
    accuracy = card["metrics"]["judge_accuracy"]
    verdicts = [d.body.verdict for d, _ in _judgments(judged["events"])]
    assert (accuracy["num"], accuracy["den"]) == (sum(v is True for v in verdicts), len(SHIPPED))
    assert (
        accuracy["rate"] is not None and card["metrics"]["answer_contains_gold"]["rate"] is not None
    )
    # The fake judges the abstention prompt by whether the answer abstains: as the bound.
    [abs_q] = [q for q in SHIPPED.values() if q.abstention]
    [abs_d] = [d for d, _ in _judgments(judged["events"]) if _question(d) is abs_q]
    [abs_row] = [i for i in card["items"] if i["id"] == abs_q.id]
    assert abs_d.body.verdict is (abs_row["answer_contains_gold"] == 1.0)
    assert abs_row["judge"]["verdict"] is abs_d.body.verdict
    for group, metrics in card["by_type"].items():
        assert metrics["judge_accuracy"]["den"] >= 1, group
    flips = card["metrics"]["judge_flip_rate"]
    assert flips["rate"] is None and "--judge-samples" in flips["not_measured"]
    assert card["judge"]["prompt"] == "longmemeval"
    code, out, _ = cli(capsys, "report", RUN, "--ledger", judged["ledger"])
    line = next(x for x in out.splitlines() if x.startswith("judge_accuracy "))
    assert "not measured" not in line
    assert f"prompt longmemeval sha256 {judge_prompt('longmemeval').sha256[:12]}" in out
    assert f"{abs_q.id} " in out and f"judge={'yes' if abs_d.body.verdict else 'no'}" in out


def test_regrade_makes_no_session_call_and_the_regraded_runs_verify_rederive_and_replay(
    judged, capsys
):
    assert judged["strict"] == 0 and judged["sampled"] == 0
    # Every request the model server saw while regrading was the judge's: one per answer,
    # then two per answer.
    assert len(judged["regrade_requests"]) == 3 * len(SHIPPED)
    assert {s.body["model"] for s in judged["regrade_requests"]} == {JUDGE_MODEL}

    def calls(events: list[Any], run: str) -> list[tuple[str, int, Any]]:
        return [(e.stream[len(run):], e.seq, e.body) for e in events
                if isinstance(e, SessionCallEvent)]  # fmt: skip

    for run in (STRICT, SAMPLED):
        events = _events(judged["ledger"], run)
        assert calls(events, run) == calls(judged["events"], RUN)
        code, out, _ = cli(capsys, "verify", run, "--ledger", judged["ledger"])
        assert code == 0, out
        for level in ("rederive", "full"):
            report = replay(run, level=level, ledger=_opener(judged["ledger"]))
            assert report.ok, report.lines()


def test_judge_prompt_names_one_prompt_for_every_question(judged):
    strict = judge_prompt("strict")
    events = _events(judged["ledger"], STRICT)
    found = _judgments(events)
    assert len(found) == len(SHIPPED)
    for _, [call] in found:
        assert call.body.request["messages"][0]["text"].startswith(strict.text[:60])
    [started] = [e for e in events if isinstance(e, RunStartedEvent)]
    assert started.body.record.judge["prompt"] == "strict"
    assert started.body.record.regraded["run"] == RUN


def test_judge_samples_give_agreement_and_a_flip_rate(judged, capsys):
    code, out, _ = cli(capsys, "report", SAMPLED, "--ledger", judged["ledger"],
                       "--format", "json")  # fmt: skip
    assert code == 0
    card = json.loads(out)
    samples = [len(calls) for _, calls in _judgments(_events(judged["ledger"], SAMPLED))]
    assert samples == [2] * len(SHIPPED)
    for name in ("judge_agreement", "judge_flip_rate"):
        assert card["metrics"][name]["rate"] is not None, name
    flips = [i for i in card["items"] if len(set(i["judge"]["samples"])) > 1]
    assert card["metrics"]["judge_flip_rate"]["num"] == len(flips)


def test_the_per_type_prompt_is_refused_on_a_suite_without_question_types(tmp_path, capsys):
    code, _, err = cli(capsys, "run", "--suite", "locomo", "--agent", "retrieval", "--judge",
                       "fake:0", "--judge-prompt", "longmemeval", "--ledger",
                       str(tmp_path / "l"))  # fmt: skip
    one_line_exit_2(code, err, "longmemeval", "locomo")
