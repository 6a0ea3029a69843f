"""``export RUN --format eee``: a run as an Every Eval Ever record, checked against the
coalition's published JSON schemas (read from ../shared, never copied) and against the
run's own card: every result is a measured metric at its card value, and the mean of a
result's instance scores is that value."""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from pathlib import Path

import jsonschema
import pytest

from benchledger import report
from benchledger.cli import main
from benchledger.harness.suites.locomo import DEFAULT_DATA
from tests.conftest import cli, one_line_exit_2, protocol_subset

SCHEMAS = [
    Path(__file__).resolve().parents[1] / ".." / "shared" / "benchmarks" / "every-eval-ever",
    Path("/work/shared/benchmarks/every-eval-ever"),
]


def _schemas() -> tuple[dict, dict]:
    for root in SCHEMAS:
        folder = root / "every_eval_ever" / "schemas"
        if folder.is_dir():
            aggregate = json.loads((folder / "eval.schema.json").read_text())
            return aggregate, json.loads((folder / "instance_level_eval.schema.json").read_text())
    pytest.skip("Every Eval Ever's schemas (../shared/benchmarks/every-eval-ever) are not here")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A sealed scripted lifecycle run, a sealed locomo run and a sealed longmemeval run:
    (ledger, {suite: run id})."""
    tmp = tmp_path_factory.mktemp("eee")
    ledger = str(tmp / "l.sqlite")
    protocols = protocol_subset(tmp, ["bl-keystone-region", "bl-margin-region", "bl-anchor-tier"])
    argv = ["run", "--protocols", protocols, "--ledger", ledger, "--run-id", "life"]
    assert main(argv) == 0
    argv = ["run", "--suite", "locomo", "--agent", "retrieval", "--platform", "embedded",
            "--limit", "6", "--ledger", ledger, "--run-id", "loco"]  # fmt: skip
    assert main(argv) == 0
    argv = ["run", "--suite", "longmemeval", "--agent", "retrieval", "--platform", "embedded",
            "--ledger", ledger, "--run-id", "lme"]  # fmt: skip
    assert main(argv) == 0
    return ledger, {"lifecycle": "life", "locomo": "loco", "longmemeval": "lme"}


def _exported(tmp_path: Path, ledger: str, run: str, capsys) -> tuple[dict, list[dict], Path]:
    out = tmp_path / "out"
    out.mkdir()
    code, printed, err = cli(capsys, "export", run, "--format", "eee", "-o", str(out),
                             "--ledger", ledger)  # fmt: skip
    assert code == 0, err
    (aggregate,) = [p for p in out.rglob("*.json")]
    lines = [
        json.loads(x) for p in out.rglob("*_samples.jsonl") for x in p.read_text().splitlines()
    ]
    assert "Every Eval Ever record" in printed
    return json.loads(aggregate.read_text()), lines, out


@pytest.mark.parametrize("suite", ["lifecycle", "locomo", "longmemeval"])
def test_a_runs_record_validates_against_both_published_schemas(runs, suite, tmp_path, capsys):
    eval_schema, instance_schema = _schemas()
    ledger, ids = runs
    aggregate, lines, out = _exported(tmp_path, ledger, ids[suite], capsys)
    jsonschema.validate(aggregate, eval_schema)
    assert lines, "every suite here itemises its metrics"
    for line in lines:
        jsonschema.validate(line, instance_schema)
        assert line["evaluation_id"] == aggregate["evaluation_id"]
        assert line["model_id"] == aggregate["model_info"]["id"]
    detail = aggregate["detailed_evaluation_results"]
    data = (out / detail["file_path"]).read_bytes()
    assert detail["checksum"] == hashlib.sha256(data).hexdigest()
    assert detail["total_rows"] == len(lines)


@pytest.mark.parametrize("suite", ["lifecycle", "locomo", "longmemeval"])
def test_every_result_is_the_cards_value_and_its_instances_mean_it(runs, suite, tmp_path, capsys):
    ledger, ids = runs
    aggregate, lines, _ = _exported(tmp_path, ledger, ids[suite], capsys)
    card = report(ids[suite], ledger=ledger)
    measured = {n: r.rate for n, r in card.metrics.items() if r.rate is not None}
    results = {r["metric_config"]["metric_name"]: r for r in aggregate["evaluation_results"]}
    assert set(results) == set(measured)
    scores = defaultdict(list)
    for line in lines:
        scores[line["evaluation_result_id"]].append(line["evaluation"]["score"])
    for name, result in results.items():
        assert result["score_details"]["score"] == pytest.approx(measured[name], abs=1e-12)
        mine = scores[result["evaluation_result_id"]]
        assert sum(mine) / len(mine) == pytest.approx(measured[name], abs=1e-12), name
    unmeasured = sorted(n for n, r in card.metrics.items() if r.rate is None)
    named = aggregate["source_metadata"]["additional_details"].get("not_measured")
    assert (json.loads(named) if named else []) == unmeasured


def test_the_record_names_the_run_root_the_bundle_and_the_dataset(runs, tmp_path, capsys):
    ledger, ids = runs
    aggregate, _, _ = _exported(tmp_path, ledger, ids["locomo"], capsys)
    bundle = tmp_path / "loco.jsonl"
    assert cli(capsys, "export", "loco", "-o", str(bundle), "--ledger", ledger)[0] == 0
    details = aggregate["source_metadata"]["additional_details"]
    assert details["bundle_sha256"] == hashlib.sha256(bundle.read_bytes()).hexdigest()
    assert details["dataset_sha256"] == hashlib.sha256(Path(DEFAULT_DATA).read_bytes()).hexdigest()
    assert details["run_root"] == report("loco", ledger=ledger).card.meta.root
    # The bundle exports to the same record, its digest the file's.
    again = tmp_path / "again"
    again.mkdir()
    assert cli(capsys, "export", str(bundle), "--format", "eee", "-o", str(again))[0] == 0
    (copy,) = list(again.rglob("*.json"))
    assert json.loads(copy.read_text())["evaluation_results"] == aggregate["evaluation_results"]


def test_a_record_is_never_overwritten(runs, tmp_path, capsys):
    ledger, ids = runs
    _, _, out = _exported(tmp_path, ledger, ids["lifecycle"], capsys)
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    code, _, err = cli(capsys, "export", ids["lifecycle"], "--format", "eee", "-o", str(out),
                       "--ledger", ledger)  # fmt: skip
    one_line_exit_2(code, err, "already exists", "never overwritten")
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
