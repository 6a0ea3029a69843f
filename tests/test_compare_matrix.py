"""``compare RUN RUN [RUN ...] [--baseline RUN]``: runs of one protocol set side by side.

Runs differing in agent, model and platform compare (their first lines say what differs);
runs of another protocol set are refused; every cell pairs its run with the baseline.
"""

from __future__ import annotations

import json

import pytest

from benchledger.cli import main
from benchledger.ledger import Ledger, open_store
from tests.sample import lifecycle_run
from tests.test_reports import outcomes  # twelve protocols, the first few failing recall


@pytest.fixture
def ledger_path(tmp_path) -> str:
    path = str(tmp_path / "l.sqlite")
    ledger = Ledger(open_store(path))
    lifecycle_run(ledger, "scripted", outcomes())
    lifecycle_run(ledger, "haiku", outcomes(recall_fails=4), agent="anthropic:claude-haiku",
                  model="claude-haiku")  # fmt: skip
    lifecycle_run(ledger, "sonnet", outcomes(recall_fails=1), agent="anthropic:claude-sonnet",
                  model="claude-sonnet", platform="memory-server")  # fmt: skip
    lifecycle_run(ledger, "pass2", outcomes(2, recall_fails=2), agent="anthropic:claude-haiku",
                  model="claude-haiku")  # fmt: skip
    lifecycle_run(ledger, "other-set", outcomes(), protocol_set_hash="set-2")
    ledger.store.close()
    return path


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_runs_differing_in_agent_model_and_platform_compare_and_say_so_first(ledger_path, capsys):
    code, out, err = cli(capsys, "compare", "scripted", "haiku", "sonnet", "--ledger", ledger_path)
    assert code == 0, err
    lines = out.splitlines()
    standing = [x for x in lines[:3] if "UNAUTHENTICATED" in x]
    assert len(standing) == 3  # who vouches for each run comes first, then what differs
    assert lines[3] == (
        "differs: agent: A = scripted, B = anthropic:claude-haiku, C = anthropic:claude-sonnet"
    )
    assert lines[4] == "differs: model: A = none, B = claude-haiku, C = claude-sonnet"
    assert lines[5].startswith("differs: platform: A = refplatform test, B = refplatform test")
    # then whether the runs' units behaved the same (these runs recorded no trace hash)
    assert lines[6] == "trace hashes equal: 0 of 12 units (12 with no trace hash recorded)"
    assert lines[9] == "what differs:"  # then the metrics and run facts that differ
    legend = next(i for i, x in enumerate(lines) if x.startswith("A = scripted (none) @ "))
    assert lines[legend - 1] == "" and legend > 7
    assert lines[legend].startswith("A = scripted (none) @ refplatform test (baseline): scripted")


def test_each_cell_is_a_rate_with_its_interval_and_its_paired_difference(ledger_path, capsys):
    code, js, _ = cli(capsys, "compare", "scripted", "haiku", "sonnet", "--format", "json",
                      "--ledger", ledger_path)  # fmt: skip
    doc = json.loads(js)
    recall = doc["metrics"]["personal_recall"]
    assert code == 0 and doc["baseline"] == "a"
    assert (recall["a"]["num"], recall["b"]["num"], recall["c"]["num"]) == (12, 8, 11)
    assert "vs_baseline" not in recall["a"]
    b = recall["b"]["vs_baseline"]
    assert b["diff"] == pytest.approx(-4 / 12) and b["ci_low"] < b["diff"] < b["ci_high"]
    assert b["mcnemar_p"] == pytest.approx(0.125)  # 4 discordant pairs, all one way: 2/16
    assert recall["b"]["ci_low"] < 8 / 12 < recall["b"]["ci_high"]  # the rate's own interval
    assert doc["runs"]["c"]["platform"] == "memory-server"


def test_the_protocols_on_which_runs_disagree_are_listed(ledger_path, capsys):
    code, js, _ = cli(capsys, "compare", "scripted", "haiku", "sonnet", "--format", "json",
                      "--ledger", ledger_path)  # fmt: skip
    rows = {r["protocol"]: (r["a"], r["b"], r["c"]) for r in json.loads(js)["disagree"]}
    assert rows == {
        "p00": ("pass", "fail (recall_correct)", "fail (recall_correct)"),
        **{p: ("pass", "fail (recall_correct)", "pass") for p in ("p01", "p02", "p03")},
    }
    code, out, _ = cli(capsys, "compare", "scripted", "haiku", "sonnet", "--ledger", ledger_path)
    assert code == 0 and "protocols on which the runs disagree (4; full lifecycle passes):" in out


def test_baseline_names_the_column_the_others_are_paired_with(ledger_path, capsys):
    code, js, _ = cli(capsys, "compare", "scripted", "haiku", "--baseline", "haiku",
                      "--format", "json", "--ledger", ledger_path)  # fmt: skip
    doc = json.loads(js)
    assert code == 0 and doc["runs"]["a"]["target"] == "haiku"
    assert doc["metrics"]["personal_recall"]["b"]["vs_baseline"]["diff"] == pytest.approx(4 / 12)


def test_a_column_can_merge_passes(ledger_path, capsys):
    code, js, err = cli(capsys, "compare", "scripted", "haiku+pass2", "--format", "json",
                        "--ledger", ledger_path)  # fmt: skip
    doc = json.loads(js)
    assert code == 0, err
    assert doc["runs"]["b"]["run_ids"] == ["haiku", "pass2"] and doc["runs"]["b"]["k"] == 2
    assert doc["metrics"]["personal_recall"]["b"]["num"] == 8 + 10
    assert "k: A = 1, B = 2" in doc["differs"]
    assert doc["metrics"]["pass_k"]["b"]["vs_baseline"]["diff"] is None  # never across k


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["scripted", "other-set"], "differ in protocol set: set-1 vs set-2"),
        (["scripted"], "compare needs at least two runs"),
        (["scripted", "haiku+"], "join the passes of one column as RUN+RUN"),
        (["scripted", "haiku+sonnet"], "cannot merge these runs"),
    ],
    ids=["other-set", "one-run", "empty-pass", "merge-other-agent"],
)
def test_what_cannot_be_compared_is_one_line_and_exit_2(ledger_path, capsys, argv, message):
    code, out, err = cli(capsys, "compare", *argv, "--ledger", ledger_path)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and message in err, err


@pytest.mark.parametrize("fmt", ["table", "markdown", "json", "html"])
def test_every_format_renders_three_runs(ledger_path, capsys, fmt):
    code, out, err = cli(capsys, "compare", "scripted", "haiku", "sonnet", "--format", fmt,
                         "--ledger", ledger_path)  # fmt: skip
    assert code == 0, err
    assert "anthropic:claude-sonnet" in out
    assert ("personal_<wbr>recall" if fmt == "html" else "personal_recall") in out
    if fmt == "html":
        assert out.startswith("<!doctype html>") and "<script" not in out
        assert "What differs" in out


def test_the_html_page_leads_with_what_differs_then_one_banner_for_every_runs_standing(
    ledger_path, capsys
):
    code, out, err = cli(capsys, "compare", "scripted", "haiku", "sonnet", "--format", "html",
                         "--ledger", ledger_path)  # fmt: skip
    assert code == 0, err
    body = out.split("<body>", 1)[1].lstrip()
    assert body.startswith('<div class="differs">'), body[:200]
    lead = body.split("</div>", 1)[0]
    assert "agent: A = scripted, B = anthropic:claude-haiku" in lead
    assert "personal_recall: A = 12/12 100.0%, B = 8/12 66.7%" in lead  # 4 of 12 lose recall
    assert "B: Δ -0.333" in lead
    assert "protocol(s) on which the runs disagree" in lead
    top = body.split("<h1>", 1)[0]
    assert top.count('class="standing"') == 1 and top.count('role="alert"') == 1
    assert all(f"run {r}: UNAUTHENTICATED" in top for r in ("scripted", "haiku", "sonnet"))


@pytest.fixture(scope="module")
def model_runs(tmp_path_factory) -> str:
    """A scripted and a fake-model run of the same three committed protocols."""
    path = str(tmp_path_factory.mktemp("model-runs") / "l.sqlite")
    for run_id, agent in (("scripted", "scripted"), ("fake", "fake:0")):
        argv = ["run", "--agent", agent, "--limit", "3", "--run-id", run_id, "--ledger", path]
        assert main(argv) == 0
    return path


def test_a_fake_model_run_reports_its_cost_and_latency(model_runs, capsys):
    capsys.readouterr()
    code, js, _ = cli(capsys, "report", "fake", "--format", "json", "--ledger", model_runs)
    usage = json.loads(js)["usage"]
    assert code == 0 and usage["wall_s"] > 0 and usage["unit_s"]["n"] == 3
    calls = usage["model_calls"]
    assert calls["answered"] > 0 and calls["latency_ms"]["p95"] is not None
    assert usage["cost"]["usd"] > 0 and usage["cost"]["nominal"] is True
    assert usage["cost"]["prices_date"] == "2026-08-06"
    code, out, _ = cli(capsys, "report", "fake", "--ledger", model_runs)
    cost = next(x for x in out.splitlines() if x.startswith("cost "))
    assert "a NOMINAL price for fake-model" in cost and "per passed protocol" in cost


def test_compare_shows_cost_and_latency_per_run_at_the_given_prices(model_runs, capsys, tmp_path):
    capsys.readouterr()
    code, out, _ = cli(capsys, "compare", "scripted", "fake", "--ledger", model_runs)
    rows = {x.split("  ")[0]: x for x in out.splitlines()}
    assert code == 0 and "not priced" in rows["cost (USD)"] and "(nominal)" in rows["cost (USD)"]
    assert "ms /" in rows["model call p50 / p95"]
    table = tmp_path / "prices.toml"
    table.write_text(
        'date = 2026-12-01\nsource = "a test table"\n[models."fake-model"]\n'
        "input = 1000000.0\noutput = 0\ncache_read = 0\ncache_creation = 0\n"
    )
    code, js, _ = cli(capsys, "report", "fake", "--format", "json", "--prices", str(table),
                      "--ledger", model_runs)  # fmt: skip
    usage = json.loads(js)["usage"]
    assert usage["cost"]["usd"] == pytest.approx(usage["tokens"]["input"])  # $1 per token in
    assert usage["cost"]["prices_source"] == "a test table"
    code, js, _ = cli(capsys, "compare", "scripted", "fake", "--format", "json", "--prices",
                      str(table), "--ledger", model_runs)  # fmt: skip
    assert json.loads(js)["extra"]["cost (USD)"]["b"] == f"${usage['tokens']['input']:,.2f}"


@pytest.mark.parametrize("command", ["report", "compare"])
def test_a_bad_price_table_is_one_line_and_exit_2_before_any_work(
    ledger_path, capsys, tmp_path, command
):
    table = tmp_path / "prices.toml"
    table.write_text('date = 2026-12-01\nsource = "x"\n[models.m]\ninput = "free"\n')
    runs = ["scripted", "haiku"] if command == "compare" else ["scripted"]
    code, out, err = cli(capsys, command, *runs, "--prices", str(table), "--ledger", ledger_path)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert f'{table}:4: models."m".input' in err
