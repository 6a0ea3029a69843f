"""The bad-input corpus (tests/data/bad/cases.yaml): every bad input gets its documented exit
code and one line naming the problem, never a traceback, and nothing is written."""

from __future__ import annotations

import collections
import importlib
import os
from collections.abc import Iterator

import pytest

from benchledger.benchmarks.reliability import CORPUS, Corpus, load_cases
from benchledger.benchmarks.reliability.bad_inputs import needs_peer, peer_data
from benchledger.cli import main
from benchledger.harness import settings

CASES = load_cases()
KINDS = ("bundles", "cases", "cli", "ledger", "peer", "platform", "protocols")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Iterator[Corpus]:
    peer = peer_data(settings.load().peer_data)
    with Corpus(str(tmp_path_factory.mktemp("bad")), main, peer) as c:
        yield c


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_a_bad_input_gets_its_exit_code_and_one_line_and_writes_nothing(corpus, case):
    if needs_peer(case) and not corpus.peer:
        pytest.skip("the peer's folder is not here: set BENCHLEDGER_PEER_DATA to it")
    assert corpus.check(case) == []


def test_the_corpus_holds_at_least_150_cases_of_every_input_kind():
    kinds = collections.Counter(c.kind for c in CASES)
    assert len(CASES) >= 150
    assert sorted(kinds) == sorted(KINDS)
    assert all(n >= 5 for n in kinds.values()), kinds


def test_every_case_names_an_exit_code_for_unusable_input_or_a_failed_check():
    assert {c.exit for c in CASES} <= {1, 2}
    assert all(c.says for c in CASES)
    assert len({c.id for c in CASES}) == len(CASES)


def test_every_corpus_file_is_used_by_some_case():
    used = " ".join(a for c in CASES for a in c.argv)
    files = []
    for sub in ("bundles", "ledgers", "protocols", "cases", "peer"):
        for name in os.listdir(os.path.join(CORPUS, sub)):
            files.append(f"{sub}/{name}")
    fixtures = {"bundles/good.jsonl", "bundles/open.jsonl", "bundles/audit.jsonl"}
    unused = [f for f in files if f"{{bad}}/{f}" not in used and f not in fixtures]
    assert unused == []


def test_a_case_a_change_made_valid_fails_at_its_deadline_instead_of_hanging_the_corpus(
    tmp_path, monkeypatch
):
    """``platform serve`` with a valid pool serves until stopped: the corpus says so."""
    # the module, not the package's re-exported function of the same name
    bad_inputs = importlib.import_module("benchledger.benchmarks.reliability.bad_inputs")
    monkeypatch.setattr(bad_inputs, "CASE_DEADLINE_S", 1.0)
    case = bad_inputs.Case("valid-after-all", ["platform", "serve", "--port", "0"], 2, "x", "cli")
    code, out, err = bad_inputs._invoke(main, list(case.argv), str(tmp_path), {})
    assert code == -1 and "still running after 1 s: accepted, not refused" in err
    assert bad_inputs._judge(case, code, out, err)[0] == "exit -1, documented 2"
