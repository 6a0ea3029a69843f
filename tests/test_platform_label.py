"""Every display names what a run measured: its platform with the options it ran with.

Two runs of the embedded platform, one searching with the lexical embedder and one with
wordllama, are two platforms to every reader (``runs``, ``report`` in every format,
``compare``, the JSON and the Inspect export); a mapped server shows its mapping's own name
and hash; mem0 shows the mode it stored memories in (docs/mem0.md).
"""

from __future__ import annotations

import json
import os
import shlex
import sys

import pytest

from benchledger.harness.platforms.mem0 import server_argv
from benchledger.ledger.events import PlatformRecord, RunRecord, RunStartedBody
from benchledger.projections.platform_label import platform_facts, platform_label
from tests.conftest import cli

LEXICAL = "mcp-data-platform (embedded) refplatform-2.0 · embedder lexical"
WORDLLAMA = "mcp-data-platform (embedded) refplatform-2.0 · embedder wordllama"
MAPPING = os.path.join(os.path.dirname(__file__), "..", "harness", "platforms", "mappings",
                       "mcp-memory-service.toml")  # fmt: skip


@pytest.fixture(scope="module")
def two_embedders(tmp_path_factory) -> str:
    """A ledger holding a three-protocol run with each embedder: "lex" and "wl"."""
    pytest.importorskip("wordllama", reason="the wordllama extra")
    from benchledger.cli import main

    ledger = str(tmp_path_factory.mktemp("labels") / "l.sqlite")
    for run_id, extra in (("lex", []), ("wl", ["--embedder", "wordllama"])):
        argv = ["run", "--limit", "3", "--ledger", ledger, "--run-id", run_id, *extra]
        assert main(argv) == 0
    return ledger


def test_runs_tells_a_lexical_run_from_a_wordllama_run_by_its_embedder(two_embedders, capsys):
    code, out, _ = cli(capsys, "runs", "--ledger", two_embedders)
    assert code == 0
    rows = {line.split()[0]: line for line in out.splitlines()[1:]}
    assert LEXICAL in rows["lex"] and WORDLLAMA in rows["wl"]
    code, out, _ = cli(capsys, "runs", "--json", "--ledger", two_embedders)
    listed = {r["run_id"]: r for r in json.loads(out)}
    assert listed["wl"]["platform"] == WORDLLAMA
    assert listed["lex"]["platform_facts"]["embedder"] == "lexical"


@pytest.mark.parametrize("fmt", ["table", "markdown", "json", "html"])
def test_report_names_the_embedder_in_every_format(two_embedders, capsys, fmt):
    code, out, _ = cli(capsys, "report", "wl", "--format", fmt, "--ledger", two_embedders)
    assert code == 0
    if fmt != "json":
        assert "· embedder wordllama" in out
    else:
        doc = json.loads(out)
        run = doc["runs"][0] if "runs" in doc else doc
        assert run["platform_label"] == WORDLLAMA
        assert run["platform_facts"]["embedder"] == "wordllama"


def test_compare_names_each_runs_platform_with_its_embedder(two_embedders, capsys):
    code, out, _ = cli(capsys, "compare", "lex", "wl", "--ledger", two_embedders)
    assert code == 0 and LEXICAL in out and WORDLLAMA in out
    code, out, _ = cli(capsys, "compare", "lex", "wl", "--format", "json",
                       "--ledger", two_embedders)  # fmt: skip
    assert code == 0 and WORDLLAMA in json.dumps(json.loads(out), ensure_ascii=False)


def test_the_inspect_export_names_the_platform_with_its_embedder(two_embedders, tmp_path, capsys):
    target = str(tmp_path / "wl.json")
    code, _, err = cli(capsys, "export", "wl", "--format", "inspect", "-o", target,
                       "--ledger", two_embedders)  # fmt: skip
    assert code == 0, err
    with open(target, encoding="utf-8") as fh:
        meta = json.load(fh)["eval"]["metadata"]
    assert meta["platform_label"] == WORDLLAMA and meta["platform_facts"]["embedder"] == "wordllama"


def _started(platform: PlatformRecord, **options: str) -> RunStartedBody:
    record = RunRecord(suite="lifecycle", platform=platform, platform_options=options)
    return RunStartedBody(suite="lifecycle", platform=platform.name,
                          platform_version=platform.version, record=record)  # fmt: skip


def test_a_mapped_server_is_named_by_its_mapping_and_the_mappings_hash():
    with open(MAPPING, encoding="utf-8") as fh:
        text = fh.read()
    mapped = PlatformRecord(kind="mcp", url="mcp:x.toml", name="memory", version="12.4.0",
                            mapping=text, mapping_hash="ab" * 32)  # fmt: skip
    started = _started(mapped)
    assert platform_label(started) == (
        "memory 12.4.0 · mapping mcp-memory-service 12.4.0, blake3 abababababab"
    )
    assert platform_facts(started)["mapping"] == {"name": "mcp-memory-service 12.4.0",
                                                  "hash": "ab" * 32}  # fmt: skip


def test_mem0_as_benchledger_runs_it_is_labelled_vector_store_only():
    started = _started(PlatformRecord(kind="mem0", url="pypi:mem0ai==2.2.1", name="mem0",
                                      version="2.2.1"))  # fmt: skip
    assert platform_label(started) == "mem0 2.2.1 · vector store only: infer=False, wordllama"


def test_a_mem0_run_on_the_dictionary_backend_says_it_measured_no_mem0(tmp_path, capsys):
    ledger = str(tmp_path / "l.sqlite")
    served = shlex.join((*server_argv(sys.executable), "--backend", "memory"))
    code, _, err = cli(capsys, "run", "--platform", "mem0", "--mem0-cmd", served, "--limit", "1",
                       "--ledger", ledger, "--run-id", "dict")  # fmt: skip
    assert code == 0, err
    for argv in (["runs"], ["report", "dict"], ["report", "dict", "--format", "markdown"]):
        code, out, _ = cli(capsys, *argv, "--ledger", ledger)
        assert code == 0 and "mem0 memory · no mem0: benchledger's dictionary backend" in out


def test_a_mapped_servers_run_is_named_by_its_mapping_in_runs_and_report(
    tmp_path, monkeypatch, capsys
):
    pytest.importorskip("mcp.server.mcpserver")
    from tests.test_mcp_mapping import ECHO_SERVER, _echo_mapping
    from tests.test_runner import subset

    server = tmp_path / "echo_server.py"
    server.write_text(ECHO_SERVER)
    mapping = tmp_path / "echo.toml"
    mapping.write_text(_echo_mapping(server))
    monkeypatch.setenv("ECHO_TOKEN", "tok-" + "5e" * 8)
    ledger = str(tmp_path / "l.sqlite")
    protocols = subset(tmp_path, ["bl-audit-channel"])
    code, _, err = cli(capsys, "run", "--platform", f"mcp:{mapping}", "--ledger", ledger,
                       "--protocols", protocols, "--run-id", "echo")  # fmt: skip
    assert code == 0, err
    code, out, _ = cli(capsys, "report", "echo", "--format", "json", "--ledger", ledger)
    facts = json.loads(out)["runs"][0]["platform_facts"]
    assert facts["mapping"]["name"] == "echo" and len(facts["mapping"]["hash"]) == 64
    shown = f"· mapping echo, blake3 {facts['mapping']['hash'][:12]}"
    for argv in (["runs"], ["report", "echo"]):
        code, out, _ = cli(capsys, *argv, "--ledger", ledger)
        assert code == 0 and shown in out, out


def test_a_lifecycle_exports_per_stage_recall_and_mrr_scores_are_the_cards(
    two_embedders, tmp_path, capsys
):
    """Each unit has one ranked episode per stage, so a per-stage retrieval metric's mean
    over the samples is the card's number under the card's name."""
    code, out, _ = cli(capsys, "report", "wl", "--format", "json", "--ledger", two_embedders)
    card = json.loads(out)["metrics"]
    target = str(tmp_path / "wl.json")
    code, _, err = cli(capsys, "export", "wl", "--format", "inspect", "-o", target,
                       "--ledger", two_embedders)  # fmt: skip
    assert code == 0, err
    with open(target, encoding="utf-8") as fh:
        scores = {s["name"]: s for s in json.load(fh)["results"]["scores"]}
    for name in ("recall_at_1.recall", "recall_at_5.transfer", "mrr.recall", "mrr.transfer"):
        assert scores[name]["metrics"]["mean"]["value"] == pytest.approx(card[name]["rate"])
        assert scores[name]["scored_samples"] == card[name]["den"]
