"""Re-grading an older results shape compares only what that shape recorded (issue 42, item 3).

The peer's v1.102 results (the shape of ``shape_of``: no intervals, cache tokens, capture
split, and no run-level ``capture_attempted`` or ``teach_budget_exhausted``) are built here
in a temporary folder, never copied: a field the shape never recorded must be recorded as
absent by the import and skipped by ``replay --level rederive``, counted and named, never
reported as a mismatch against the re-derived verdict.
"""

from __future__ import annotations

import json

from benchledger.cli import main
from benchledger.ledger import Ledger, open_store
from benchledger.ledger.events import RunStartedBody
from benchledger.projections.source import from_ledger
from benchledger.protocols import load
from benchledger.protocols.hashing import peer_hash
from tests.conftest import peer_dir
from tests.older_peer_set import write_v1102_set


def _header(ledger: str, run_id: str) -> RunStartedBody:
    with open_store(ledger) as store:
        events = from_ledger(Ledger(store), run_id).events
    return next(e.body for e, _ in events if isinstance(e.body, RunStartedBody))


def _teach(final: str = "saved") -> dict:
    return {"stage": "teach", "identity": "teacher", "email": "t@x", "final_answer": final,
            "tool_calls": 3, "input_tokens": 10, "output_tokens": 5}  # fmt: skip


def _v1102(set_hash: str) -> dict:
    """Two run records as v1.102 wrote them: one graded, one whose teach stage failed in the
    harness before any verdict (so the file records no verdict for it at all)."""
    graded = {
        "protocol_id": "lc-active-customers",
        "attempt": 1,
        "captured": True,
        "recall_correct": False,  # "1" is not the protocol's value
        "recall_surfaced": True,
        "promoted": None,
        "transfer_correct": None,
        "transfer_surfaced": None,
        "update_correct": None,
        "duplicated": None,
        "abstain_correct": None,
        "episodes": [
            _teach(),
            {
                "stage": "recall",
                "identity": "learner",
                "email": "l@x",
                "final_answer": "FINAL ANSWER: 1",
                "tool_calls": 1,
                "search_called": True,
            },
        ],
    }
    failed = {
        "protocol_id": "lc-anchor-region",
        "attempt": 1,
        "error": "teach: agent timed out",
        "episodes": [_teach("")],
    }
    manifest = {"started_at": "2026-07-20T10:00:00Z", "k": 1, "model": "m",
                "llm_provider": "p", "protocol_set_hash": set_hash}  # fmt: skip
    metrics = {"protocols": 2, "capture_rate": {"num": 1, "den": 1, "rate": 1.0}}
    return {"manifest": manifest, "runs": [graded, failed], "metrics": metrics}


def test_a_field_the_v1102_shape_never_recorded_is_skipped_and_named_by_rederive_not_a_mismatch(
    tmp_path, capsys
):
    old_set = write_v1102_set(peer_dir(), str(tmp_path / "set"))
    results = tmp_path / "v1102.json"
    results.write_text(json.dumps(_v1102(peer_hash(load(old_set).protocols))))
    ledger = str(tmp_path / "l.sqlite")
    argv = ["import-peer", "mcp-data-platform", str(results), "--protocols", old_set]
    assert main([*argv, "--ledger", ledger, "--run-id", "old"]) == 0
    capsys.readouterr()
    header = _header(ledger, "old")
    # recorded as absent: the import names what the shape never recorded
    assert header.config["unrecorded"] == ["capture_attempted", "teach_budget_exhausted"]
    rc = main(["replay", "old", "--level", "rederive", "--ledger", ledger, "--format", "json"])
    report = json.loads(capsys.readouterr().out)
    print(json.dumps(report["skipped"]), report["mismatches"])
    assert rc == 0 and report["ok"] and report["mismatches"] == 0, report
    named = {k: v for k, v in report["skipped"].items() if "capture_attempted" in k}
    # both records' teach episodes: capture_attempted and teach_budget_exhausted each
    assert list(named.values()) == [4], report["skipped"]
    assert "teach_budget_exhausted" in next(iter(named)) and "not recorded" in next(iter(named))
    assert report["compared"]["decisions"] >= 1


def test_the_current_shape_records_nothing_as_unrecorded(tmp_path):
    data = _v1102("")
    for run in data["runs"]:
        run["capture_attempted"] = True
        run["teach_budget_exhausted"] = False
    results = tmp_path / "now.json"
    results.write_text(json.dumps(data))
    ledger = str(tmp_path / "l.sqlite")
    argv = ["import-peer", "mcp-data-platform", str(results)]
    assert main([*argv, "--ledger", ledger, "--run-id", "now"]) == 0
    header = _header(ledger, "now")
    assert "unrecorded" not in header.config
