"""Reports, merging passes, compare, gate, audit bundles and live views, through the CLI."""

from __future__ import annotations

import json
import os
import re

import pytest

from benchledger import protocols
from benchledger.cli import main
from benchledger.ledger import Ledger, open_store
from benchledger.ledger.events import SessionCallEvent
from benchledger.projections.fold import LiveView, fold
from benchledger.projections.source import from_ledger
from benchledger.projections.suites.lifecycle.scorecard import LifecycleFold, scorecard
from tests.sample import PASSING, PROMOTE, UPDATE, lifecycle_run

PROTOCOLS = [f"p{i:02d}" for i in range(12)]


def outcomes(attempt: int = 1, *, recall_fails: int = 0, dup: bool = False) -> dict:
    out = {}
    for i, pid in enumerate(PROTOCOLS):
        checks = dict(PASSING) | (dict(UPDATE) if i % 3 == 0 else dict(PROMOTE))
        if i < recall_fails:
            checks["recall_correct"] = False
        if dup and i % 3 == 0:
            checks["duplicated"] = True
        out[(pid, attempt)] = checks
    return out


@pytest.fixture
def ledger_path(tmp_path) -> str:
    path = str(tmp_path / "l.sqlite")
    ledger = Ledger(open_store(path))
    lifecycle_run(ledger, "base", outcomes())
    lifecycle_run(ledger, "same", outcomes())
    lifecycle_run(ledger, "worse", outcomes(recall_fails=12, dup=True))
    lifecycle_run(ledger, "pass2", outcomes(2, recall_fails=3))
    lifecycle_run(ledger, "k2", outcomes(1) | outcomes(2), k=2)
    lifecycle_run(ledger, "other-set", outcomes(), protocol_set_hash="set-2")
    lifecycle_run(ledger, "empty", {})
    ledger.store.close()
    return path


def run(capsys, *argv) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_table_names_the_run_and_its_metadata(ledger_path, capsys):
    code, out, _ = run(capsys, "report", "base", "--ledger", ledger_path)
    assert code == 0
    for needle in (
        "run           base",
        "protocol set  set-1",
        "agent         scripted",
        "platform      refplatform test",
        "tokens        in 36, out 24, cache read 0, cache write 0",
        "capture_rate",
        "12/12",
        "pass_k",
    ):
        assert needle in out, needle


def test_markdown_json_and_html_formats(ledger_path, capsys, tmp_path):
    code, md, _ = run(capsys, "report", "base", "--ledger", ledger_path, "--format", "markdown")
    assert code == 0 and "| capture_rate | 12/12 | 100.0% |" in md
    code, js, _ = run(capsys, "report", "base", "--ledger", ledger_path, "--format", "json")
    data = json.loads(js)
    assert set(data["metrics"]["capture_rate"]) >= {"num", "den", "rate", "ci_low", "ci_high"}
    assert data["runs"][0]["run_id"] == "base" and data["runs"][0]["root"]
    assert data["protocols"]["p00"][0]["passed"] is True
    out = tmp_path / "card.html"
    code, _, _ = run(
        capsys, "report", "worse", "--ledger", ledger_path, "--format", "html", "-o", str(out)
    )
    page = out.read_text()
    assert code == 0 and page.startswith("<!doctype html>")
    assert "<svg" in page and "Lifecycle funnel" in page and "p11" in page
    assert not re.search(r"(src|href)=|https?://|<script|@import", page), "must be self-contained"


def test_several_runs_merge_as_passes_of_one_scorecard(ledger_path, capsys):
    code, js, _ = run(
        capsys, "report", "base", "pass2", "--ledger", ledger_path, "--format", "json"
    )
    data = json.loads(js)
    assert code == 0 and data["k"] == 2
    assert (
        data["metrics"]["personal_recall"]["num"],
        data["metrics"]["personal_recall"]["den"],
    ) == (21, 24)
    assert data["metrics"]["pass_k"]["k"] == 2
    assert data["metrics"]["pass_k"]["num"] == pytest.approx(9)


def test_mismatched_runs_are_refused_with_the_reason(ledger_path, capsys):
    code, _, err = run(capsys, "report", "base", "other-set", "--ledger", ledger_path)
    assert code == 2 and "differ in protocol set" in err and len(err.strip().split("\n")) == 1


def test_compare_pairs_by_protocol_with_tango_and_mcnemar(ledger_path, capsys):
    code, out, _ = run(capsys, "compare", "base", "worse", "--ledger", ledger_path)
    lines = out.split("\n")
    i = next(i for i, x in enumerate(lines) if x.startswith("personal_recall"))
    rates, diff = lines[i], lines[i + 1]  # the rates, then B's paired difference with A
    assert code == 0 and "12/12" in rates and "0/12" in rates and "Δ -1.000" in diff
    assert "p=0.000488" in diff  # 12 discordant pairs: McNemar p = 2 / 4096
    assert "intervals: 95%, Tango score interval, protocols as pairs" in out
    code, js, _ = run(
        capsys, "compare", "base", "same", "--ledger", ledger_path, "--format", "json"
    )
    capture = json.loads(js)["metrics"]["capture_rate"]["b"]["vs_baseline"]
    assert capture["diff"] == 0 and capture["ci_low"] < 0 < capture["ci_high"]  # never [0, 0]
    assert capture["pairs"] == 12 and capture["resolution"] == pytest.approx(0.2425, abs=1e-4)


def test_compare_of_an_empty_sample_is_skipped_not_a_rate_of_zero(tmp_path, capsys):
    path = str(tmp_path / "l.sqlite")
    ledger = Ledger(open_store(path))
    only_promote = {k: v for k, v in outcomes().items() if "update_captured" not in v}
    lifecycle_run(ledger, "a", outcomes())
    lifecycle_run(ledger, "b", only_promote)
    ledger.store.close()
    code, js, _ = run(capsys, "compare", "a", "b", "--ledger", path, "--format", "json")
    row = json.loads(js)["metrics"]["update_correctness"]["b"]
    assert code == 0 and (row["num"], row["den"]) == (0, 0)
    assert row["vs_baseline"]["diff"] is None and row["vs_baseline"]["ci_low"] is None


def test_compare_never_compares_pass_k_across_different_k(ledger_path, capsys):
    code, js, _ = run(capsys, "compare", "base", "k2", "--ledger", ledger_path, "--format", "json")
    row = json.loads(js)["metrics"]["pass_k"]["b"]["vs_baseline"]
    assert code == 0 and row["diff"] is None
    assert "k differs (A k=1, B k=2)" in row["note"]
    capture = json.loads(js)["metrics"]["capture_rate"]["b"]["vs_baseline"]
    assert capture["ci_method"].startswith("protocol-cluster bootstrap")  # k=2: clustered
    assert capture["mcnemar_p"] is None


def _verdicts(out: str) -> dict[str, str]:
    return {row.split()[0]: row.split()[6] for row in out.split("\n") if " ±" in row}


def test_gate_on_small_identical_runs_is_inconclusive_and_a_regression_regresses(
    ledger_path, capsys
):
    code, out, _ = run(capsys, "gate", "same", "--baseline", "base", "--ledger", ledger_path)
    assert code == 3 and "gate: undecided: 7 inconclusive" in out
    assert set(_verdicts(out).values()) == {"inconclusive"}
    code, out, _ = run(capsys, "gate", "worse", "--baseline", "base", "--ledger", ledger_path)
    verdicts = _verdicts(out)
    assert code == 1 and verdicts["personal_recall"] == "regress"
    assert verdicts["duplicate_rate"] == "inconclusive"  # 4 update protocols only
    assert verdicts["capture_rate"] == "inconclusive"  # 12 protocols cannot show "not worse"
    assert "gate: FAILED: personal_recall, pass_k regressed" in out


def test_gate_strict_fails_on_inconclusive(ledger_path, capsys):
    code, out, _ = run(capsys, "gate", "same", "--baseline", "base", "--ledger", ledger_path)
    assert "inconclusive" in out and code == 3
    code, _, _ = run(
        capsys, "gate", "same", "--baseline", "base", "--ledger", ledger_path, "--strict"
    )
    assert code == 1


@pytest.mark.parametrize(
    ("candidate", "message"),
    [
        ("other-set", "differ in protocol set"),
        ("empty", "zero finished units"),
        ("k2", "differ in k: 1 vs 2"),
    ],
    ids=["protocol-set", "zero-units", "k"],
)
def test_gate_refuses_incomparable_runs(ledger_path, capsys, candidate, message):
    code, _, err = run(capsys, "gate", candidate, "--baseline", "base", "--ledger", ledger_path)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1


def test_gate_reports_empty_denominators_as_skipped(tmp_path, capsys):
    path = str(tmp_path / "l.sqlite")
    ledger = Ledger(open_store(path))
    only_promote = {k: v for k, v in outcomes().items() if "update_captured" not in v}
    lifecycle_run(ledger, "a", only_promote)
    lifecycle_run(ledger, "b", only_promote)
    ledger.store.close()
    code, out, _ = run(capsys, "gate", "b", "--baseline", "a", "--ledger", path)
    assert code == 3 and re.search(r"update_correctness .* skipped", out)


def test_a_gate_whose_only_metric_is_skipped_is_undecided_never_passed(tmp_path, capsys):
    path = str(tmp_path / "l.sqlite")
    ledger = Ledger(open_store(path))
    only_promote = {k: v for k, v in outcomes().items() if "update_captured" not in v}
    lifecycle_run(ledger, "a", only_promote)
    lifecycle_run(ledger, "b", only_promote)
    ledger.store.close()
    code, out, _ = run(capsys, "gate", "b", "--baseline", "a", "--ledger", path,
                       "--gate-metrics", "update_correctness")  # fmt: skip
    last = out.strip().splitlines()[-1]
    assert code == 3 and last.startswith("gate: undecided: 1 skipped"), out
    assert "no gated metric applies to these runs" in last


def test_audit_prints_every_contributing_decision_and_writes_a_verifiable_bundle(
    ledger_path, capsys, tmp_path
):
    bundle = str(tmp_path / "audit.jsonl")
    code, out, _ = run(
        capsys, "audit", "worse", "personal_recall", "--ledger", ledger_path, "--bundle", bundle
    )
    assert code == 0 and "personal_recall = 0.0%  (0/12)" in out
    assert (
        out.count("decision seq") == 12
        and "recall_correct=false" in out
        and "evidence seq 1" in out
    )
    root = re.search(r"--root ([0-9a-f]{64})", out).group(1)
    code, out, _ = run(capsys, "verify", bundle, "--root", root)
    assert code == 0 and "13 streams" in out
    code, out, _ = run(capsys, "verify", bundle, "--root", "0" * 64)
    assert code == 1
    code, again, _ = run(capsys, "audit", bundle, "personal_recall")
    assert code == 0 and "(0/12)" in again


def test_a_tampered_audit_bundle_fails_offline(ledger_path, capsys, tmp_path):
    bundle = tmp_path / "audit.jsonl"
    code, out, _ = run(
        capsys, "audit", "base", "capture_rate", "--ledger", ledger_path, "--bundle", str(bundle)
    )
    root = re.search(r"--root ([0-9a-f]{64})", out).group(1)
    lines = bundle.read_text().split("\n")
    lines[5] = lines[5].replace('"verdict":true', '"verdict":false')
    assert any('"verdict":false' in x for x in lines)
    bundle.write_text("\n".join(lines))
    code, out, _ = run(capsys, "verify", str(bundle), "--root", root)
    assert code == 1 and "FAILED" in out


def test_unknown_metric_lists_the_known_ones(ledger_path, capsys):
    code, _, err = run(capsys, "audit", "base", "speed", "--ledger", ledger_path)
    assert code == 2 and "known metrics: capture_rate" in err


@pytest.fixture(scope="module")
def scripted(tmp_path_factory) -> dict[str, str]:
    """One real scripted run on the embedded platform: its ledger, bundle and audit bundle."""
    base = tmp_path_factory.mktemp("scripted")
    folder = base / "protocols"
    folder.mkdir()
    with open(os.path.join(protocols.LIFECYCLE_DIR, "bl-margin-region.yaml")) as fh:
        (folder / "bl-margin-region.yaml").write_text(fh.read())
    ledger = str(base / "l.sqlite")
    assert main(["run", "--protocols", str(folder), "--ledger", ledger, "--run-id", "s"]) == 0
    bundle, partial = str(base / "s.jsonl"), str(base / "audit.jsonl")
    assert main(["export", "s", "-o", bundle, "--ledger", ledger]) == 0
    assert main(["audit", "s", "capture_rate", "--ledger", ledger, "--bundle", partial]) == 0
    return {"ledger": ledger, "bundle": bundle, "audit-bundle": partial}


@pytest.mark.parametrize("source", ["ledger", "bundle", "audit-bundle"])
def test_audit_shows_each_tool_calls_recorded_result_shortened_with_a_marker_or_whole_with_full(
    scripted, capsys, source
):
    with open_store(scripted["ledger"]) as store:
        call, link = next(
            (e, link)
            for e, link in Ledger(store).events("s")
            if isinstance(e, SessionCallEvent) and e.body.tool == "memory_capture"
        )
    recorded = call.body.text()
    assert call.body.content and call.body.result is None and len(recorded) > 100
    argv = ["audit", "s", "capture_rate", "--ledger", scripted["ledger"]]
    if source != "ledger":
        argv = ["audit", scripted[source], "capture_rate"]
    code, out, _ = run(capsys, *argv)
    assert code == 0 and "-> null" not in out
    line = next(x for x in out.splitlines() if link[:12] in x)
    shown, left = re.fullmatch(r"(.*)… \(\+(\d+) chars\)", line.split(" -> ", 1)[1]).groups()
    one_line = " ".join(recorded.split())  # shortened on one line, whitespace folded
    assert len(shown) > 40 and one_line.startswith(shown)
    assert len(shown) + int(left) == len(one_line)
    code, out, _ = run(capsys, *argv, "--full")
    assert code == 0 and "-> " + recorded.replace("\n", "\n        ") in out


def test_a_live_view_resumes_where_it_stopped_and_equals_a_rebuild(ledger_path):
    store = open_store(ledger_path)
    whole = fold(LifecycleFold(), from_ledger(Ledger(store), "worse").events)
    view = LiveView(store, LifecycleFold(), run_id="worse")
    view.catch_up(limit=40)
    stopped_at = view.position
    resumed = LiveView(store, view.projection, run_id="worse", position=stopped_at)
    resumed.catch_up()
    assert stopped_at > 0 and resumed.position > stopped_at
    a = scorecard([resumed.projection.result()]).metrics
    b = scorecard([whole]).metrics
    assert {k: (m.num, m.den, m.num_refs) for k, m in a.items()} == {
        k: (m.num, m.den, m.num_refs) for k, m in b.items()
    }
    assert resumed.catch_up() == 0  # nothing new: a no-op
    store.close()


def test_an_empty_denominator_has_a_null_interval_beside_its_null_rate(ledger_path, capsys):
    code, js, _ = run(capsys, "report", "base", "--ledger", ledger_path, "--format", "json")
    starved = json.loads(js)["metrics"]["capture_budget_starved"]
    assert code == 0 and starved["den"] == 0
    assert starved["rate"] is None and starved["ci_low"] is None and starved["ci_high"] is None


def test_pass_k_with_unequal_attempts_says_so_and_lists_the_protocols_left_out(tmp_path, capsys):
    path = str(tmp_path / "l.sqlite")
    ledger = Ledger(open_store(path))
    units = outcomes(1) | outcomes(2)
    del units[("p05", 2)], units[("p07", 2)]  # two protocols got only one attempt
    lifecycle_run(ledger, "uneven", units, k=2)
    ledger.store.close()
    code, out, _ = run(capsys, "report", "uneven", "--ledger", path)
    line = next(x for x in out.splitlines() if x.startswith("pass_k"))
    assert code == 0 and "10/10" in line  # k stays 2: scored on the ten with two attempts
    assert "k=2; attempts differ: 2 protocol(s) with fewer than 2 attempts left out" in line
    assert "p05 (1), p07 (1)" in line
    code, js, _ = run(capsys, "report", "uneven", "--ledger", path, "--format", "json")
    pass_k = json.loads(js)["metrics"]["pass_k"]
    assert pass_k["k"] == 2 and pass_k["left_out"] == [
        {"protocol": "p05", "attempts": 1},
        {"protocol": "p07", "attempts": 1},
    ]


def test_merged_passes_get_protocol_clustered_intervals_and_wilson_stays_available_labelled(
    ledger_path, capsys
):
    code, out, _ = run(capsys, "report", "base", "pass2", "--ledger", ledger_path)
    assert code == 0
    assert "intervals     95%, protocol-cluster bootstrap (2000 resamples, seed 20251129)" in out
    code, js, _ = run(capsys, "report", "base", "pass2", "--ledger", ledger_path,
                      "--format", "json", "--ci", "wilson")  # fmt: skip
    data = json.loads(js)
    assert data["intervals"]["method"] == "wilson"
    assert data["metrics"]["personal_recall"]["ci_method"] == "wilson"
    code, out, _ = run(capsys, "report", "base", "pass2", "--ledger", ledger_path, "--ci", "wilson")
    assert "Wilson (attempts treated as independent); chosen with --ci wilson" in out
