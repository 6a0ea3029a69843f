"""The wordllama embedder: loaded from its wheel's own files with no network, semantic
where the lexical one is not, usable by a whole run, and refused in one line when absent."""

from __future__ import annotations

import json
import socket
import sqlite3
import sys

import pytest

from benchledger.harness.record import read_record
from benchledger.ledger import Ledger, open_store
from benchledger.refplatform.embedder import (
    WORDLLAMA_DIM,
    LexicalEmbedder,
    WordLlamaEmbedder,
    cosine,
    parse_spec,
)
from benchledger.running import config
from tests.conftest import cli, interrupted_after, one_line_exit_2

PARAPHRASE = ("refunded purchases", "returned orders")
UNRELATED = ("refunded purchases", "fiscal calendar")


@pytest.fixture
def no_network(monkeypatch):
    """Every name lookup and outbound connection attempt is refused and remembered, so a
    test can assert that none was made (a download resolves its host, then connects)."""
    attempts: list[object] = []

    def refuse(_sock, address, *_a, **_k):
        attempts.append(address)
        raise OSError(f"network disabled by the test: connect to {address!r}")

    def refuse_create(address, *_a, **_k):
        attempts.append(address)
        raise OSError(f"network disabled by the test: connect to {address!r}")

    def refuse_lookup(host, *_a, **_k):
        attempts.append(host)
        raise OSError(f"network disabled by the test: lookup of {host!r}")

    monkeypatch.setattr(socket, "getaddrinfo", refuse_lookup)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse_create)
    return attempts


def test_wordllama_loads_its_shipped_weights_and_embeds_with_no_network(no_network):
    embedder = parse_spec("wordllama")
    vector = embedder.embed("the focus region for this study is north")
    assert isinstance(embedder, WordLlamaEmbedder) and embedder.name == "wordllama"
    assert len(vector) == WORDLLAMA_DIM and any(vector)
    assert no_network == []


def test_the_network_guard_sees_wordllama_s_default_load_try_to_download(no_network, tmp_path):
    # Guards the guard: the test above would pass vacuously if a download slipped past it.
    # Loaded as the package's default does (a cache folder without the files), wordllama
    # reaches for Hugging Face; offline it then fails.
    from wordllama import WordLlama

    with pytest.raises(FileNotFoundError, match="download"):
        WordLlama.load(cache_dir=tmp_path)
    assert any("huggingface" in str(a) for a in no_network), no_network


def test_a_paraphrase_scores_higher_than_an_unrelated_phrase_where_lexical_sees_neither():
    wl, lex = WordLlamaEmbedder(), LexicalEmbedder()
    close = cosine(wl.embed(PARAPHRASE[0]), wl.embed(PARAPHRASE[1]))
    far = cosine(wl.embed(UNRELATED[0]), wl.embed(UNRELATED[1]))
    # Measured with wordllama 0.4.0.post1: 0.403 and 0.054.
    assert close == pytest.approx(0.403, abs=0.01)
    assert far == pytest.approx(0.054, abs=0.01)
    assert close > far + 0.3
    # The lexical embedder shares no word between either pair: it cannot tell them apart.
    assert cosine(lex.embed(PARAPHRASE[0]), lex.embed(PARAPHRASE[1])) == 0.0
    assert cosine(lex.embed(UNRELATED[0]), lex.embed(UNRELATED[1])) == 0.0


def test_a_run_on_the_embedded_platform_with_wordllama_seals_verifies_and_records_it(
    tmp_path, capsys
):
    ledger = str(tmp_path / "wl.sqlite")
    code, out, err = cli(
        capsys, "run", "--ledger", ledger, "--run-id", "wl", "--embedder", "wordllama"
    )
    assert code == 0, err
    assert "run wl sealed" in out
    code, out, err = cli(capsys, "verify", "wl", "--ledger", ledger)
    assert code == 0 and "ok run wl" in out, err
    # What the platform says it embeds with is recorded, as for lexical: platform_info.
    conn = sqlite3.connect(ledger)
    try:
        states = [str(s) for (s,) in conn.execute("SELECT state FROM benchledger_events")]
    finally:
        conn.close()
    said = [s for s in states if '"embedder":"wordllama"' in s.replace(" ", "")]
    assert said and not any('"embedder":"lexical"' in s.replace(" ", "") for s in states)


def test_a_live_replay_rebuilds_the_platform_with_the_embedder_the_run_recorded(tmp_path, capsys):
    # Before, a live replay always re-drove on the lexical embedder: every platform_info
    # answer (and any ranking that differs) diverged from the record.
    ledger = str(tmp_path / "wl.sqlite")
    picked = ["--protocol", "bl-focus-region", "--protocol", "bl-anchor-tier"]
    code, _, err = cli(capsys, "run", "--ledger", ledger, "--run-id", "wl", "--embedder",
                       "wordllama", "--concurrency", "1", *picked)  # fmt: skip
    assert code == 0, err
    code, out, err = cli(
        capsys, "replay", "wl", "--level", "full", "--tools", "live", "--ledger", ledger
    )
    assert code == 0 and out.startswith("ok full wl: compared "), out + err
    assert "INFO" not in err  # nothing logged to the console on the way


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "--embedder", "word2vec"],
        ["platform", "serve", "--port", "0", "--embedder", "word2vec"],
    ],
    ids=["run", "serve"],
)
def test_an_unknown_embedder_is_refused_in_one_line_naming_wordllama(argv, tmp_path, capsys):
    code, _, err = cli(
        capsys, *argv, *(["--ledger", str(tmp_path / "l.sqlite")] * (argv[0] == "run"))
    )
    one_line_exit_2(code, err, "--embedder", "'word2vec'", "'wordllama'")


def test_wordllama_not_installed_is_refused_in_one_line_naming_the_extra(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "wordllama", None)  # import wordllama -> ImportError
    code, out, err = cli(capsys, "platform", "serve", "--port", "0", "--embedder", "wordllama")
    one_line_exit_2(code, err, "--embedder", "benchledger[wordllama]")
    assert "serving" not in out


def test_bench_embedder_prints_wordllama_beside_lexical_and_the_ratio(capsys):
    code, out, err = cli(capsys, "bench", "embedder", "--texts", "50", "--json")
    assert code == 0, err
    figures = json.loads(out)
    assert figures["texts"] == 50
    assert figures["lexical"]["embedder"] == "lexical"
    assert figures["wordllama"]["embedder"] == "wordllama"
    assert figures["throughput_vs_lexical"] > 0 and figures["wordllama"]["p99_ms"] > 0


def test_a_resumed_run_keeps_the_embedder_it_recorded_and_refuses_another(tmp_path, capsys):
    ledger = str(tmp_path / "wl.sqlite")
    # A run interrupted after 2 of its 4 units, as Ctrl-C leaves one.
    cfg = config(limit=4, run_id="wl", platform_options={"embedder": "wordllama"})
    store = open_store(ledger)
    try:
        interrupted_after(Ledger(store), cfg, 2)
        assert read_record(Ledger(store), "wl").platform_options == {"embedder": "wordllama"}
    finally:
        store.close()
    code, _, err = cli(capsys, "run", "--ledger", ledger, "--resume", "wl", "--embedder", "lexical")
    assert code == 2 and "--embedder lexical (the run recorded wordllama)" in err, err
    # Given nothing, the resume provisions what the run recorded: every unit said wordllama.
    code, out, err = cli(capsys, "run", "--ledger", ledger, "--resume", "wl")
    assert code == 0 and "sealed" in out, err
    conn = sqlite3.connect(ledger)
    try:
        states = [
            str(s).replace(" ", "") for (s,) in conn.execute("SELECT state FROM benchledger_events")
        ]
    finally:
        conn.close()
    said = [s for s in states if '"embedder":"' in s and "platform_info" in s]
    assert len(said) >= 4 and all('"embedder":"wordllama"' in s for s in said), said


def test_loading_wordllama_leaves_the_processes_logging_as_it_was():
    # wordllama configures the root logger at import (an INFO handler on stderr), which
    # put every HTTP request of a live replay on the console. A fresh process, since
    # pytest holds handlers of its own on the root logger.
    import subprocess

    probe = (
        "import logging; from benchledger.refplatform.embedder import WordLlamaEmbedder; "
        "WordLlamaEmbedder(); r = logging.getLogger(); print(r.level, len(r.handlers))"
    )
    said = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert said.stdout.split() == [str(30), "0"], said.stderr  # WARNING, no handler
