"""What the probe could not do is declared before the run: a metric that depends on it is
"not measured: <why>" on every display and in the JSON, never a 0, never a pass.

The platform is docs/plugins.md's worked adapter (tiny-memory), registered in the test
alone (tests/test_vocabulary.py), run to a sealed run and read back by the commands.
"""

from __future__ import annotations

import asyncio
import html
import json
import re
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from benchledger.cli import main
from benchledger.harness.platforms.base import CaptureCheck, Promotion, UpdateCheck
from benchledger.harness.probe import probe
from benchledger.ledger.events import HitRule
from benchledger.projections import measured
from tests.test_vocabulary import SEALED, _example, _registered, _run

RETRIEVAL = ("recall_at_1", "recall_at_5", "recall_at_10", "mrr")
FORMATS = ("table", "markdown", "json", "html")


@pytest.fixture
def example() -> types.ModuleType:
    return _example()


@pytest.fixture
def idless(example: types.ModuleType) -> Iterator[None]:
    """tiny-memory declaring its hits without their ids (its answers are lists of
    ``{"id", "text"}``, but the adapter says nothing of ``id``)."""

    class Idless(example.TinyClient):  # type: ignore[misc, name-defined]
        vocabulary = example.VOCABULARY._replace(hits=HitRule(path="$"))

    yield from _registered(example, Idless)


def _sealed(tmp_path: Path, capsys: Any) -> tuple[str, str]:
    code, out, err, db = _run(tmp_path, capsys)
    assert code == 0, err
    return SEALED.search(out)[1], db  # type: ignore[index]


def _report(capsys: Any, run_id: str, db: str, fmt: str) -> str:
    assert main(["report", run_id, "--ledger", db, "--format", fmt]) == 0
    return str(capsys.readouterr().out)


def test_a_platform_whose_hits_have_no_ids_shows_retrieval_not_measured_in_every_format(
    idless, tmp_path, capsys
):
    run_id, db = _sealed(tmp_path, capsys)
    shown = {fmt: _report(capsys, run_id, db, fmt) for fmt in FORMATS}
    metrics = json.loads(shown["json"])["metrics"]
    for name in RETRIEVAL:
        m = metrics[name]
        assert m["rate"] is None and m["num"] is None and m["den"] is None, m
        assert m["not_measured"].startswith("the probe's hit ids check failed: its hit has no")
    # The terminal, Markdown and HTML say so, with why, and show no number for them.
    why = "not measured: the probe's hit ids check failed: its hit has no"
    assert why in shown["table"] and why in shown["markdown"]
    assert html.escape(why) in shown["html"]
    row = next(x for x in shown["table"].splitlines() if x.startswith("  recall "))
    assert row.split()[2:] == ["not", "measured"] * 4, row
    # Declared in the header, before any metric: what failed, and what it leaves unmeasured.
    head = next(x for x in shown["table"].splitlines() if x.startswith("not measured "))
    assert "hit ids (its hit has no id (its id pattern)): recall_at_k, mrr" in head, head
    row = next(x for x in shown["markdown"].splitlines() if x.startswith("| recall |"))
    assert row.count("| not measured") == 4, row
    for name in RETRIEVAL:
        cells = re.search(rf'<td class="name">{name}</td>(.*?)</tr>', shown["html"])
        assert cells is not None and "not measured" in cells[1], name
        assert not re.search(r"\d+/\d+|\d%", cells[1].split("<td>")[0]), cells[1]
    # What the probe could do is measured as before.
    assert (
        metrics["personal_recall"]["rate"] == 1.0
        and "not_measured" not in metrics["personal_recall"]
    )


def test_a_platform_without_a_capture_check_shows_capture_metrics_not_measured(
    example, tmp_path, capsys
):
    for _ in _registered(example):  # tiny-memory offers no LifecycleCapability
        run_id, db = _sealed(tmp_path, capsys)
        table = _report(capsys, run_id, db, "table")
        doc = json.loads(_report(capsys, run_id, db, "json"))
    row = next(x for x in table.splitlines() if x.startswith("capture_rate "))
    assert row.split()[1:3] == ["-", "not"], row
    assert "not measured: the probe's capture check failed: the platform offers no capture" in row
    for name in ("capture_rate", "update_correctness", "transfer_rate", "pass_k"):
        assert doc["metrics"][name]["rate"] is None and doc["metrics"][name]["not_measured"]
    # A capture attempt needs no capture check: still measured.
    assert doc["metrics"]["capture_attempt_rate"]["rate"] == 1.0


class _Blind:
    """A lifecycle capability whose capture check never finds the capture it was shown
    (the probe's memory, taught by the scripted agent): a broken check, seeded."""

    async def check_capture(self, ev: Any, *, identity: int, target: Any, since: float,
                            poll: Any) -> CaptureCheck:  # fmt: skip
        return CaptureCheck(None, "no capture by the identity on the target", [])

    async def promote(self, ev: Any, *, capture: str, target: Any) -> Promotion:
        raise AssertionError("never asked: no capture was found")

    async def check_update(self, ev: Any, *, identity: int, original: str, target: Any,
                           since: float) -> UpdateCheck:  # fmt: skip
        raise AssertionError("never asked: no capture was found")


def test_a_platform_whose_capture_check_fails_in_the_probe_shows_lifecycle_not_measured(
    example, tmp_path, capsys
):
    class Blind(example.TinyClient, _Blind):  # type: ignore[misc, name-defined]
        pass

    for _ in _registered(example, Blind):
        run_id, db = _sealed(tmp_path, capsys)
        table = _report(capsys, run_id, db, "table")
        doc = json.loads(_report(capsys, run_id, db, "json"))
    why = (
        "the probe's capture check failed: after the scripted agent's teach, the capture "
        "check returned None, not the capture's id (no capture by the identity on the target)"
    )
    for name in ("capture_rate", "recall_surfaced", "pass_k"):
        assert doc["metrics"][name]["rate"] is None, name
        assert doc["metrics"][name]["not_measured"] == why, doc["metrics"][name]
    for name in ("update_correctness", "transfer_rate"):  # never checked without a capture
        assert doc["metrics"][name]["not_measured"].endswith(
            "not checked: its capture check found no capture"), name  # fmt: skip
    assert f"not measured: {why}" in next(
        x for x in table.splitlines() if x.startswith("capture_rate "))  # fmt: skip
    assert doc["metrics"]["capture_attempt_rate"]["rate"] == 1.0  # an attempt needs no check
    # The probe's teach, its capture check's reading and its findings are the run's events.
    assert main(["log", run_id, "probe", "--ledger", db]) == 0
    log = capsys.readouterr().out
    assert "episode_started" in log and "probe_finished" in log


def test_a_lifecycle_check_that_raises_is_a_failed_finding_not_a_traceback(example):
    class Broken(example.TinyClient, _Blind):  # type: ignore[misc, name-defined]
        async def check_capture(self, ev: Any, **kw: Any) -> CaptureCheck:
            return "x".partition(None)  # type: ignore[arg-type, return-value]  # seeded bug

    found = asyncio.run(probe(Broken(2), "tiny"))
    said = {f.what: (f.ok, f.detail) for f in found.findings}
    assert not found.refused and said["search"][0], said
    ok, why = said["capture"]
    assert not ok and why.startswith("not checked: the capture check failed: TypeError: "), why
    assert not said["update"][0] and not said["promote"][0], said


def test_a_gate_never_passes_a_metric_its_runs_could_not_measure(example, tmp_path, capsys):
    for _ in _registered(example):
        run_id, db = _sealed(tmp_path, capsys)
        code = main(["gate", run_id, "--baseline", run_id, "--ledger", db, "--format", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert doc["passed"] is False and code != 0
    row = next(r for r in doc["rows"] if r["metric"] == "capture_rate")
    assert row["verdict"] == "inconclusive" and row["baseline"] is None, row
    assert row["reason"].startswith("not measured in the baseline: the probe's capture check")


def test_audit_compare_and_both_exports_give_no_number_for_retrieval_they_could_not_measure(
    idless, tmp_path, capsys
):
    run_id, db = _sealed(tmp_path, capsys)
    why = "not measured: the probe's hit ids check failed: its hit has no"
    assert main(["audit", run_id, "recall_at_5", "--ledger", db]) == 0
    text = capsys.readouterr().out
    assert f"recall_at_5: {why}" in text and "num+den" not in text, text
    assert main(["audit", run_id, "recall_at_5", "--ledger", db, "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["metric"]["rate"] is None and doc["metric"]["num"] is None
    assert doc["metric"]["not_measured"] and doc["contributions"] == []
    assert main(["compare", run_id, run_id, "--ledger", db, "--format", "json"]) == 0
    cells = json.loads(capsys.readouterr().out)["metrics"]["recall_at_5"]
    assert all(c["rate"] is None and c["not_measured"] for c in cells.values()), cells
    assert main(["compare", run_id, run_id, "--ledger", db]) == 0
    row = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("recall_at_5"))
    assert why in row, row
    # Inspect's eval log scores no unit on it; Every Eval Ever's record names it, with why.
    out = tmp_path / "log.json"
    assert main(["export", run_id, "--format", "inspect", "-o", str(out), "--ledger", db]) == 0
    log = json.loads(out.read_text())
    scored = {s["name"] for s in log["results"]["scores"]}
    assert not any(n.startswith(("recall_at_", "mrr")) for n in scored), scored
    folder = tmp_path / "eee"
    folder.mkdir()
    capsys.readouterr()
    assert main(["export", run_id, "--format", "eee", "-o", str(folder), "--ledger", db]) == 0
    (aggregate,) = folder.rglob("*.json")
    record = json.loads(aggregate.read_text())
    details = record["source_metadata"]["additional_details"]
    whys = json.loads(details["not_measured_why"])
    assert whys["recall_at_5"].startswith("the probe's hit ids check failed"), whys
    results = {r["evaluation_name"] for r in record["evaluation_results"]}
    assert not any("recall_at_" in n or "mrr" in n for n in results), results


def test_a_locomo_run_whose_hits_have_no_ids_shows_retrieval_not_measured_in_every_format(
    idless, tmp_path, capsys
):
    code, out, err, db = _run(tmp_path, capsys, "--suite", "locomo", "--agent", "retrieval")
    assert code == 0, err
    run_id = SEALED.search(out)[1]  # type: ignore[index]
    shown = {fmt: _report(capsys, run_id, db, fmt) for fmt in FORMATS}
    doc = json.loads(shown["json"])
    why = "not measured: the probe's hit ids check failed: its hit has no"
    for name in ("evidence_recall", "recall_at_5", "mrr"):
        m = doc["metrics"][name]
        assert m["rate"] is None and m["den"] is None and m["not_measured"], m
        row = next(x for x in shown["table"].splitlines() if x.startswith(name + " "))
        assert why in row and "(n=-)" in row, row
        row = next(x for x in shown["markdown"].splitlines() if x.startswith(f"| {name} |"))
        assert why in row, row
        assert f"<td>{name}</td><td>{html.escape(why)}" in shown["html"], name
    assert all(q["evidence_recall"] is None for q in doc["items"]), doc["items"][:1]
    assert doc["metrics"]["locomo_f1"]["rate"] is not None  # answers are still graded


def test_locomo_compare_pairs_nothing_it_could_not_measure(idless, tmp_path, capsys):
    code, out, err, db = _run(tmp_path, capsys, "--suite", "locomo", "--agent", "retrieval")
    assert code == 0, err
    run_id = SEALED.search(out)[1]  # type: ignore[index]
    assert main(["compare", run_id, run_id, "--ledger", db, "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["metrics"]["evidence_recall"] == {run_id: None}
    assert doc["not_measured"]["evidence_recall"][run_id].startswith("the probe's hit ids")
    assert doc["paired"]["evidence_recall"][run_id]["pairs"] == 0
    assert main(["compare", run_id, run_id, "--ledger", db]) == 0
    row = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("evidence_recall"))
    assert "not measured: the probe's hit ids check failed" in row, row


def test_which_metrics_each_failed_finding_leaves_not_measured():
    probe = {
        "findings": [
            {"what": "search", "ok": True, "detail": "found it at rank 1"},
            {"what": "hit ids", "ok": False, "detail": "its hit has no id"},
            {"what": "update", "ok": False, "detail": "no update check"},
        ]
    }
    for name in ("recall_at_5", "recall_at_1.transfer", "mrr", "mrr.recall",
                 "abstain_leak_at_5", "evidence_recall"):  # fmt: skip
        why = measured.why_not(probe, name)
        assert why == "the probe's hit ids check failed: its hit has no id", name
    for name in ("update_correctness", "duplicate_rate", "update_capture_rate"):
        assert measured.why_not(probe, name).startswith("the probe's update check failed")
    for name in ("personal_recall", "capture_rate", "transfer_rate", "locomo_f1", "pass_k"):
        assert measured.why_not(probe, name) == "", name
    # A run recorded before the probe, or not probed, declares nothing.
    assert measured.why_not({}, "recall_at_5") == ""
    unprobed = {"findings": [{"what": "probe", "ok": False, "detail": "not probed: shared"}]}
    assert measured.why_not(unprobed, "capture_rate") == ""


def test_platform_check_says_what_a_run_on_it_would_not_measure(idless, capsys):
    assert main(["platform", "check", "tiny-vocab"]) == 0
    out = capsys.readouterr().out
    assert "FAIL hit ids: its hit has no id" in out
    assert "so a run on it does not measure recall_at_k, mrr, abstain_leak_at_5, evidence" in out
    assert "FAIL capture: the platform offers no capture check" in out
