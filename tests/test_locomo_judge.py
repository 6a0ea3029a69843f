"""A judge as a recorded instrument (docs/locomo.md, "The judge"): ``run --judge`` grades
LoCoMo answers with a model over loopback (the OpenAI-compatible fake, which judges by
rule), every judgment a recorded model call and a decision citing it; ``regrade`` judges
the recorded answers again with another prompt, with no platform or agent call.

One judged run of the first conversation of the shipped set (12 questions, every category)
backs most tests; its regrade with the strict prompt backs the regrade tests.
"""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path
from typing import Any

import pytest

from benchledger.cli import main
from benchledger.harness.agents.fake import judge_reply
from benchledger.ledger import Ledger, open_store
from benchledger.ledger.events import (
    GraderDecisionEvent,
    ModelCallEvent,
    RunStartedEvent,
    SessionCallEvent,
)
from benchledger.protocols.judges import fill, judge_prompt, prompt_file, verdict_of
from benchledger.replay.levels import replay
from tests.conftest import cli, one_line_exit_2
from tests.fakes.openai_api import FakeOpenAI

RUN, REGRADED = "jd1", "jd1-strict"
JUDGE_MODEL = "judge-model"
LME_EVAL = (
    Path(__file__).resolve().parents[1] / ".." / "shared" / "benchmarks" / "longmemeval",
    Path("/work/shared/benchmarks/longmemeval"),
)


def _events(path: str, run_id: str) -> list[Any]:
    with open_store(path) as store:
        return [e for e, _ in Ledger(store).events(run_id)]


def _opener(path: str) -> Any:
    return lambda: Ledger(open_store(path))


@pytest.fixture(scope="module")
def judged(tmp_path_factory) -> dict[str, Any]:
    """The first conversation answered by the retrieval reader, judged leniently by the
    loopback OpenAI-compatible fake; then regraded with the strict prompt."""
    ledger = str(tmp_path_factory.mktemp("judge") / "l.sqlite")
    with FakeOpenAI() as fake:
        spec = f"openai:{JUDGE_MODEL}@{fake.url}/v1"
        code = main(["run", "--suite", "locomo", "--agent", "retrieval", "--limit", "12",
                     "--judge", spec, "--ledger", ledger, "--run-id", RUN])  # fmt: skip
        asked_live = len(fake.seen)
        regraded = main(["regrade", RUN, "--judge", spec, "--judge-prompt", "strict",
                         "--run-id", REGRADED, "--ledger", ledger])  # fmt: skip
        regrade_requests = fake.seen[asked_live:]
    return {"code": code, "regraded": regraded, "ledger": ledger, "asked_live": asked_live,
            "regrade_requests": regrade_requests, "events": _events(ledger, RUN),
            "regraded_events": _events(ledger, REGRADED)}  # fmt: skip


# -- the fake judge (item 8) --------------------------------------------------------------------


def test_the_fake_judges_by_rule_and_its_lenient_and_strict_prompts_disagree():
    cases = [("Lima, Oslo", "I flew to Lima"), ("pottery", "She took up pottery"),
             ("no information available", "Lima")]  # fmt: skip
    said = {name: [verdict_of(judge_reply(fill(judge_prompt(name), "Q?", g, a)) or "")
                   for g, a in cases] for name in ("lenient", "strict")}  # fmt: skip
    assert said == {"lenient": [True, True, False], "strict": [False, True, False]}
    # LongMemEval's prompts ask for yes or no, and get it.
    lme = judge_prompt("longmemeval", question_type="temporal-reasoning")
    assert judge_reply(fill(lme, "When?", "May 2023", "In May 2023")) == "yes"


def test_a_judges_reply_is_read_as_a_verdict_or_as_not_understood():
    assert verdict_of('Same topic. {"label": "CORRECT"}') is True
    assert verdict_of('It is correct that... {"label": "WRONG"}') is False
    assert verdict_of("yes") is True and verdict_of("No.") is False
    assert verdict_of("I cannot tell") is None


def _lme_templates() -> dict[str, str]:
    for root in LME_EVAL:
        path = root / "src" / "evaluation" / "evaluate_qa.py"
        if path.is_file():
            tree = ast.parse(path.read_text())
            found = [n.value.value for n in ast.walk(tree) if isinstance(n, ast.Assign)
                     and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)
                     and "Model Response: {}" in n.value.value]  # fmt: skip
            return {t: t for t in found}
    pytest.skip("LongMemEval's evaluation (../shared/benchmarks/longmemeval) is not here")


def test_longmemevals_prompts_are_reproduced_word_for_word():
    theirs = _lme_templates()
    assert len(theirs) == 5
    ours = {judge_prompt("longmemeval", question_type=t).text
            for t in ("multi-session", "temporal-reasoning", "knowledge-update",
                      "single-session-preference", "abstention")}  # fmt: skip
    as_theirs = {t.replace("{question}", "{}").replace("{gold}", "{}").replace("{answer}", "{}")
                 for t in ours}  # fmt: skip
    assert as_theirs == set(theirs)


# -- a judged run (item 2) ----------------------------------------------------------------------


def test_a_judged_run_seals_verifies_rederives_and_replays_in_full(judged, capsys):
    assert judged["code"] == 0
    code, out, _ = cli(capsys, "verify", RUN, "--ledger", judged["ledger"])
    assert code == 0 and out.startswith(f"ok run {RUN}")
    rederived = replay(RUN, level="rederive", ledger=_opener(judged["ledger"]))
    assert rederived.ok, rederived.lines()
    full = replay(RUN, level="full", ledger=_opener(judged["ledger"]))
    assert full.ok, full.lines()


def test_every_judgment_is_a_recorded_model_call_and_a_decision_citing_it(judged):
    events = judged["events"]
    calls = {(e.stream, e.seq): e for e in events
             if isinstance(e, ModelCallEvent) and e.body.episode == "judge"}  # fmt: skip
    decisions = [e for e in events if isinstance(e, GraderDecisionEvent)
                 and e.body.check == "locomo_j"]  # fmt: skip
    assert len(calls) == len(decisions) == 12 == judged["asked_live"]
    for d in decisions:
        [ref] = d.refs
        call = calls[(d.stream, ref)]
        assert call.body.request["model"] == JUDGE_MODEL
        assert call.body.request["params"] == {"temperature": 0.0}
        reply = call.body.response["text"]
        assert d.body.verdict is verdict_of(reply)
        assert d.body.answer in call.body.request["messages"][0]["text"]


def test_the_judges_settings_are_in_the_run_header(judged):
    [started] = [e for e in judged["events"] if isinstance(e, RunStartedEvent)]
    j = started.body.record.judge
    lenient = judge_prompt("lenient")
    assert j["model"] == JUDGE_MODEL and j["prompt"] == "lenient"
    assert j["prompt_sha256"] == lenient.sha256 and j["prompt_text"] == lenient.text
    assert (j["temperature"], j["seed"], j["samples"]) == (0.0, None, 1)


def test_the_card_shows_j_over_categories_1_to_4_and_all_beside_f1(judged, capsys):
    code, out, _ = cli(capsys, "report", RUN, "--ledger", judged["ledger"])
    assert code == 0
    lines = out.splitlines()
    f1 = next(i for i, line in enumerate(lines) if line.startswith("locomo_f1 "))
    assert lines[f1 + 1].startswith("j_cat_1_4") and "/10)" in lines[f1 + 1]
    assert lines[f1 + 2].startswith("j_all") and "/12)" in lines[f1 + 2]
    assert f"prompt lenient sha256 {judge_prompt('lenient').sha256[:12]}" in out
    code, out, _ = cli(capsys, "report", RUN, "--ledger", judged["ledger"], "--format", "json")
    card = json.loads(out)
    accepted = [i["judge"]["verdict"] for i in card["items"]]
    assert card["metrics"]["j_all"]["num"] == sum(v is True for v in accepted)
    assert card["metrics"]["j_all"]["den"] == 12 and card["metrics"]["j_cat_1_4"]["den"] == 10


def test_without_a_judge_j_is_not_measured_never_zero(tmp_path, capsys):
    ledger = str(tmp_path / "l.sqlite")
    code, _, _ = cli(capsys, "run", "--suite", "locomo", "--agent", "retrieval", "--limit", "2",
                     "--ledger", ledger, "--run-id", "nj")  # fmt: skip
    assert code == 0
    code, out, _ = cli(capsys, "report", "nj", "--ledger", ledger, "--format", "json")
    j = json.loads(out)["metrics"]["j_cat_1_4"]
    assert j["rate"] is None and j["not_measured"].startswith("no judge")


def test_a_bad_judge_prompt_file_or_a_model_free_judge_is_refused_in_one_line(tmp_path, capsys):
    bad = tmp_path / "mine.txt"
    bad.write_text("Grade {answer} against the gold.\n")
    code, _, err = cli(
        capsys,
        "run",
        "--suite",
        "locomo",
        "--agent",
        "retrieval",
        "--judge",
        "fake:0",
        "--judge-prompt",
        str(bad),
        "--ledger",
        str(tmp_path / "l"),
    )
    one_line_exit_2(code, err, "mine.txt", "{question}", "{gold}")
    code, _, err = cli(capsys, "run", "--suite", "locomo", "--agent", "retrieval", "--judge",
                       "scripted", "--ledger", str(tmp_path / "l"))  # fmt: skip
    one_line_exit_2(code, err, "--judge")
    code, _, err = cli(capsys, "run", "--judge", "fake:0", "--ledger", str(tmp_path / "l"))
    one_line_exit_2(code, err, "--judge", "lifecycle suite has none")
    code, _, err = cli(capsys, "run", "--suite", "locomo", "--judge-prompt", "strict",
                       "--ledger", str(tmp_path / "l"))  # fmt: skip
    one_line_exit_2(code, err, "--judge-prompt sets up a judge")
    assert not os.path.exists(tmp_path / "l")
    with pytest.raises(Exception, match="no \\{question\\}"):
        prompt_file(str(bad))


# -- regrade (item 3) ---------------------------------------------------------------------------


def test_regrade_calls_neither_the_platform_nor_the_agent_and_seals_a_run_naming_its_source(
    judged,
):
    assert judged["regraded"] == 0
    # Every request the model server saw while regrading was the judge's: 12 answers.
    assert len(judged["regrade_requests"]) == 12
    assert {s.body["model"] for s in judged["regrade_requests"]} == {JUDGE_MODEL}

    # No session call was made: those of the new run are the source's, seq for seq.
    def calls(events: list[Any], run: str) -> list[tuple[str, int, Any]]:
        return [(e.stream[len(run):], e.seq, e.body) for e in events
                if isinstance(e, SessionCallEvent)]  # fmt: skip

    assert calls(judged["regraded_events"], REGRADED) == calls(judged["events"], RUN)
    [started] = [e for e in judged["regraded_events"] if isinstance(e, RunStartedEvent)]
    source = started.body.record.regraded
    with open_store(judged["ledger"]) as store:
        root = Ledger(store).run_info(RUN).root
    assert (source["run"], source["root"]) == (RUN, root)
    unit = source["units"][f"{REGRADED}/synth-1:q1/1"]
    assert unit["stream"] == f"{RUN}/synth-1:q1/1" and unit["seq"] > 0 and unit["hash"]
    assert started.body.record.judge["prompt"] == "strict"


def test_a_regraded_run_verifies_rederives_and_replays_in_full(judged, capsys):
    code, out, _ = cli(capsys, "verify", REGRADED, "--ledger", judged["ledger"])
    assert code == 0, out
    for level in ("rederive", "full"):
        report = replay(REGRADED, level=level, ledger=_opener(judged["ledger"]))
        assert report.ok, report.lines()


def test_compare_shows_the_strict_judge_gives_another_j_from_the_same_answers(judged, capsys):
    code, out, _ = cli(capsys, "compare", RUN, REGRADED, "--ledger", judged["ledger"],
                       "--format", "json")  # fmt: skip
    assert code == 0
    compared = json.loads(out)
    metrics = compared["metrics"]
    assert metrics["locomo_f1"][RUN] == metrics["locomo_f1"][REGRADED]
    assert metrics["j_cat_1_4"][RUN] > metrics["j_cat_1_4"][REGRADED]
    # Question by question: the strict judge rejects what the lenient one accepted (the
    # reader's session dates against relative temporal golds), never the other way.
    changes = compared["judge_changes"][REGRADED]
    assert changes and {(c["baseline"], c["verdict"]) for c in changes} == {("CORRECT", "WRONG")}
    assert all(c["answer"] == c["baseline_answer"] for c in changes)
    code, out, _ = cli(capsys, "compare", RUN, REGRADED, "--ledger", judged["ledger"])
    assert f"judge verdicts that differ, {REGRADED} vs {RUN} ({len(changes)} questions):" in out


# -- judge variance (item 4) ---------------------------------------------------------------------


def test_judge_samples_report_agreement_and_a_flip_rate(tmp_path, capsys):
    """Sampled above temperature 0 the fake judges a borderline answer by its seed's parity,
    so three seeded samples (seeds 0, 1, 2) disagree on some answers."""
    ledger = str(tmp_path / "l.sqlite")
    code, _, _ = cli(capsys, "run", "--suite", "locomo", "--agent", "retrieval", "--limit", "12",
                     "--judge", "fake:0", "--judge-samples", "3", "--judge-temperature", "0.7",
                     "--judge-seed", "0", "--ledger", ledger, "--run-id", "js")  # fmt: skip
    assert code == 0
    code, out, _ = cli(capsys, "report", "js", "--ledger", ledger, "--format", "json")
    card = json.loads(out)
    flips = [i for i in card["items"] if len(set(i["judge"]["samples"])) > 1]
    assert flips and card["metrics"]["judge_flip_rate"]["num"] == len(flips)
    assert card["metrics"]["judge_agreement"]["rate"] < 1.0
    assert all(i["judge"]["agreement"] == 2 / 3 for i in flips)
    seeds = [e.body.request["params"]["seed"] for e in _events(ledger, "js")
             if isinstance(e, ModelCallEvent) and e.stream.endswith("synth-1:q1/1")]  # fmt: skip
    assert seeds == [0, 1, 2]
    assert replay("js", level="rederive", ledger=_opener(ledger)).ok
    # J's interval in compare has the judge's variance in it: over questions and samples,
    # wider than (or other than) the questions' bootstrap of the majority verdicts.
    from benchledger.projections.stats import MIN_BOOTSTRAP_GROUPS, bootstrap
    from benchledger.projections.suites.locomo.compare import column
    from benchledger.scoring import report

    col = column("js", report("js", ledger=ledger).card)  # type: ignore[arg-type]
    majority = bootstrap(col.terms("j_all"), lambda xs: sum(xs) / len(xs),
                         min_groups=MIN_BOOTSTRAP_GROUPS)  # fmt: skip
    assert col.intervals["j_all"] is not None and col.intervals["j_all"] != majority


def test_the_committed_calibration_set_is_what_its_builder_writes():
    from benchledger.protocols.locomo_calibration import CALIBRATION, render

    with open(CALIBRATION, encoding="utf-8") as f:
        assert f.read() == render()


def test_judge_calibrate_seals_a_run_with_false_accept_and_false_reject_rates(tmp_path, capsys):
    """The lenient fake accepts a wrong date that shares words with the gold (a false accept);
    it rejects no planted correct or paraphrased answer."""
    ledger = str(tmp_path / "l.sqlite")
    code, out, _ = cli(capsys, "judge", "calibrate", "--judge", "fake:0", "--run-id", "jc",
                       "--ledger", ledger)  # fmt: skip
    assert code == 0
    assert "false accept 6/30 (0.200) of wrong on-topic answers, false reject 0/60" in out
    assert "run jc sealed, root " in out
    code, out, _ = cli(capsys, "report", "jc", "--ledger", ledger, "--format", "json")
    assert json.loads(out)["calibration"].startswith("false accept 6/30")
    assert replay("jc", level="rederive", ledger=_opener(ledger)).ok


def test_an_anthropic_judge_over_the_loopback_fake_is_recorded_and_replays(tmp_path):
    """The Anthropic path: the judge's key from the settings (never recorded), its default
    reply limit recorded with its params, its calls served from the log in a full replay."""
    from benchledger.harness.settings import Settings
    from tests.fakes.anthropic_api import FakeAnthropic

    ledger = str(tmp_path / "l.sqlite")
    key = "sk-ant-judge-test-key"
    with FakeAnthropic(key=key) as fake:
        conf = Settings(ledger="", test_postgres="", anthropic_api_key=key,
                        anthropic_base_url=fake.url)  # fmt: skip
        code = main(["run", "--suite", "locomo", "--agent", "retrieval", "--limit", "3",
                     "--judge", "anthropic:judge-a", "--ledger", ledger, "--run-id", "ja"],
                    conf)  # fmt: skip
        assert code == 0 and fake.judged == 3
    events = _events(ledger, "ja")
    calls = [e for e in events if isinstance(e, ModelCallEvent)]
    assert len(calls) == 3 and all(c.body.request["model"] == "judge-a" for c in calls)
    assert all("max_tokens" in c.body.request["params"] for c in calls)
    with open(ledger, "rb") as fh:
        assert key.encode() not in fh.read()
    assert replay("ja", level="full", ledger=_opener(ledger)).ok
