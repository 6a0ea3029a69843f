"""A locomo run shown anywhere says the card's numbers in the card's units.

The Inspect export scores each question by the card's own per-question values under the
card's metric names (so each score's mean is the card's number, recall@k and MRR
included); ``audit`` shows a mean as a mean; ``compare`` gives each run's interval, the
paired difference with its interval and test, and who vouches for each run.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

import pytest

from benchledger.cli import main
from benchledger.projections.suites.locomo.scorecard import METRIC_NAMES
from tests.conftest import cli

READER, SCRIPTED = "lr", "ls"


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> str:
    """The shipped set with the retrieval reader ("lr") and the scripted agent ("ls")."""
    ledger = str(tmp_path_factory.mktemp("locomo-display") / "l.sqlite")
    for run_id, agent in ((READER, "retrieval"), (SCRIPTED, "scripted")):
        argv = ["run", "--suite", "locomo", "--agent", agent, "--ledger", ledger,
                "--run-id", run_id]  # fmt: skip
        assert main(argv) == 0
    return ledger


def _card(capsys, ledger: str, run_id: str) -> dict[str, Any]:
    code, out, _ = cli(capsys, "report", run_id, "--format", "json", "--ledger", ledger)
    assert code == 0
    return json.loads(out)["metrics"]


def test_the_inspect_exports_scores_are_the_cards_numbers_under_the_cards_names(
    runs, capsys, tmp_path
):
    card = _card(capsys, runs, READER)
    target = str(tmp_path / "lr.json")
    code, _, err = cli(capsys, "export", READER, "--format", "inspect", "-o", target,
                       "--ledger", runs)  # fmt: skip
    assert code == 0, err
    with open(target, encoding="utf-8") as fh:
        log = json.load(fh)
    scores = {s["name"]: s for s in log["results"]["scores"]}
    for name in METRIC_NAMES:
        # a judge's metrics on a run without one; recall@25 and @50 beyond the reader's depth
        if card[name].get("not_measured"):
            assert name not in scores, name
            continue
        assert name in scores, name
        mean = scores[name]["metrics"]["mean"]["value"]
        assert mean == pytest.approx(card[name]["rate"], abs=1e-12), name
        assert scores[name]["scored_samples"] == card[name]["den"], name
    # Every sample carries the numbers, so Inspect's own reader sees the same means.
    inspect_log = pytest.importorskip("inspect_ai.log", reason="inspect_ai is in the test extra")
    read = inspect_log.read_eval_log(target)
    f1 = [s.scores["locomo_f1"].value for s in read.samples if "locomo_f1" in s.scores]
    assert sum(f1) / len(f1) == pytest.approx(card["locomo_f1"]["rate"], abs=1e-12)


@pytest.mark.parametrize("metric", ["mrr", "locomo_f1", "recall_at_5"])
def test_audit_shows_a_locomo_mean_as_the_card_does_not_as_a_percentage(runs, capsys, metric):
    card = _card(capsys, runs, READER)
    code, out, _ = cli(capsys, "audit", READER, metric, "--ledger", runs)
    assert code == 0
    line = next(x for x in out.splitlines() if x.startswith(f"{metric} = "))
    assert line.startswith(f"{metric} = {card[metric]['rate']:.3f}  (mean of "), line
    assert "%" not in line.split("95% CI", 1)[0]
    code, out, _ = cli(capsys, "audit", READER, metric, "--format", "json", "--ledger", runs)
    assert code == 0 and json.loads(out)["metric"]["mean"] is True


def test_audit_shows_a_lifecycle_mrr_as_a_mean_and_a_rate_as_a_percentage(tmp_path, capsys):
    ledger = str(tmp_path / "l.sqlite")
    assert main(["run", "--limit", "2", "--ledger", ledger, "--run-id", "lc"]) == 0
    capsys.readouterr()
    code, out, _ = cli(capsys, "audit", "lc", "mrr", "--ledger", ledger)
    assert code == 0 and re.search(r"^mrr = 1\.000  \(mean of \d+ scores", out, re.M), out
    code, out, _ = cli(capsys, "audit", "lc", "capture_rate", "--ledger", ledger)
    assert code == 0 and "capture_rate = 100.0%" in out


def test_compare_gives_intervals_a_paired_test_and_who_vouches_for_each_run(runs, capsys):
    code, out, _ = cli(capsys, "compare", READER, SCRIPTED, "--ledger", runs)
    assert code == 0
    lines = out.splitlines()
    assert f"run {READER}: UNAUTHENTICATED: the seal is not signed" in lines
    assert f"run {SCRIPTED}: UNAUTHENTICATED: the seal is not signed" in lines
    assert any(x.startswith("intervals: 95%, bootstrap over questions") for x in lines)
    row = next(x.split() for x in lines if x.split()[:1] == ["locomo_f1"])
    # metric, A, B, A's interval, B's interval, B - A, its interval, McNemar's p, verdict
    assert row[2] == "1.000" and re.fullmatch(r"\[\d\.\d{3},\d\.\d{3}\]", row[3]), row
    assert row[5].startswith("+") and row[8] == "resolved", row
    adversarial = next(x.split() for x in lines if x.split()[:1] == ["adversarial_accuracy"])
    assert re.fullmatch(r"p=\d\.\d{3}", adversarial[7]), adversarial  # 0/1 pairs: McNemar
    code, out, _ = cli(capsys, "compare", READER, SCRIPTED, "--format", "json", "--ledger", runs)
    doc = json.loads(out)
    paired = doc["paired"]["locomo_f1"][SCRIPTED]
    assert paired["pairs"] == doc["intervals"]["locomo_f1"][READER]["n"] and paired["resolved"]
    assert paired["ci_low"] > 0
    assert doc["standing"][READER]["authentication"]["authenticated"] is False
    for fmt, needle in (("markdown", "| locomo_f1 |"), ("html", "<td>locomo_f1</td>")):
        code, out, _ = cli(capsys, "compare", READER, SCRIPTED, "--format", fmt, "--ledger", runs)
        assert code == 0 and needle in out and "UNAUTHENTICATED" in out and "95%" in out


def test_exporting_a_locomo_run_in_two_processes_writes_the_same_bytes(runs, tmp_path):
    """The card's scores are written in the card's order, never a hash-seeded set's."""
    import subprocess
    import sys

    written = []
    for seed in ("1", "2"):
        target = tmp_path / f"lr-{seed}.eval"
        env = {**os.environ, "PYTHONHASHSEED": seed}
        subprocess.run([sys.executable, "-m", "benchledger", "export", READER, "--format",
                        "inspect", "-o", str(target), "--ledger", runs], env=env, check=True,
                       capture_output=True)  # fmt: skip
        written.append(target.read_bytes())
    assert written[0] == written[1]


def test_recall_beyond_the_search_depth_is_not_measured_and_every_mean_has_its_interval(
    runs, capsys
):
    """LoCoMo reported as its paper needs: recall@k at 1, 5, 10, 25 and 50 up to the depth
    the searches reached (the reader asks for 10), by category, each with its interval."""
    code, out, _ = cli(capsys, "report", READER, "--format", "json", "--ledger", runs)
    assert code == 0
    doc = json.loads(out)
    card, items = doc["metrics"], doc["items"]
    assert doc["search_depth"] == 10
    for name in ("recall_at_25", "recall_at_50", "recall_at_25_single_hop"):
        assert card[name]["not_measured"] == "search depth 10" and card[name]["rate"] is None
    assert all(i["recall_at_25"] is None and i["recall_at_50"] is None for i in items)
    # A category's recall@k is the mean over that category's questions.
    single = [i["recall_at_5"] for i in items if i["category"] == 4]
    assert card["recall_at_5_single_hop"]["rate"] == pytest.approx(sum(single) / len(single))
    assert card["recall_at_5_single_hop"]["den"] == len(single) == 12
    # Every measured mean over 10 questions or more has its interval, its method and seed.
    assert "resampled within conversations" in doc["interval_method"]
    assert "seed 20251129" in doc["interval_method"]
    for name in METRIC_NAMES:
        m = card[name]
        if m.get("not_measured") or m["den"] < 10:
            continue
        assert m["ci_low"] <= m["rate"] <= m["ci_high"], name
    # The table says it too, and compare shows the report's own interval.
    code, out, _ = cli(capsys, "report", READER, "--ledger", runs)
    line = next(x for x in out.splitlines() if x.startswith("recall_at_50 "))
    assert "not measured: search depth 10" in line and " 0" not in line
    assert re.search(r"^locomo_f1 +\d\.\d{3}  \[\d\.\d{3},\d\.\d{3}\]", out, re.M), out
    assert "95% CI: bootstrap over questions resampled within conversations" in out
    for fmt in ("markdown", "html"):
        code, page, _ = cli(capsys, "report", READER, "--format", fmt, "--ledger", runs)
        assert code == 0 and "resampled within conversations" in page
        assert "not measured: search depth 10" in page
    code, out, _ = cli(capsys, "compare", READER, SCRIPTED, "--format", "json", "--ledger", runs)
    interval = json.loads(out)["intervals"]["locomo_f1"][READER]
    assert (interval["low"], interval["high"]) == (card["locomo_f1"]["ci_low"],
                                                   card["locomo_f1"]["ci_high"])  # fmt: skip
    assert "within conversations" in interval["method"]


def test_a_deeper_search_measures_recall_at_25_and_50(tmp_path, capsys):
    # At --search-k 50 a conversation's 28 turns all come back, and recall@25 and @50 are
    # measured.
    ledger = str(tmp_path / "deep.sqlite")
    assert main(["run", "--suite", "locomo", "--agent", "retrieval", "--protocol", "synth-1:*",
                 "--search-k", "50", "--ledger", ledger, "--run-id", "deep"]) == 0  # fmt: skip
    capsys.readouterr()
    code, out, _ = cli(capsys, "report", "deep", "--format", "json", "--ledger", ledger)
    assert code == 0
    doc = json.loads(out)
    card = doc["metrics"]
    assert doc["search_depth"] == 50
    for name in ("recall_at_25", "recall_at_50", "recall_at_50_single_hop"):
        assert "not_measured" not in card[name] and card[name]["rate"] is not None, name
    assert card["recall_at_50"]["rate"] >= card["recall_at_10"]["rate"]
    assert card["recall_at_50"]["rate"] == pytest.approx(card["evidence_recall"]["rate"])
