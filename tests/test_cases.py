"""Provenance cases: the committed splits and the loader's errors."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest

from benchledger import protocols
from benchledger.cli import main
from benchledger.protocols.cases import CATEGORIES, SOURCE_KINDS
from benchledger.protocols.errors import InvalidInput

GOOD = {
    "id": "H-1",
    "category": "vault_recall",
    "prime": ["Remember X."],
    "prompt": "X?",
    "expected_sources": ["vault"],
}


@pytest.mark.parametrize(
    ("path", "minimum"),
    [(protocols.CASES_DEV, 10), (protocols.CASES_PUBLIC_V1, 30)],
    ids=["dev", "public-v1"],
)
def test_committed_splits_cover_every_category_and_source_kind(path, minimum):
    cases = protocols.load_cases(path).cases
    assert len(cases) >= minimum
    assert {c.category for c in cases} == set(CATEGORIES)
    assert {k for c in cases for k in c.expected_sources} == set(SOURCE_KINDS)
    by_prompt = defaultdict(set)
    for c in cases:
        by_prompt[c.prompt].add(c.prime)
    assert any(len(primes) >= 2 for primes in by_prompt.values()), (
        "need a same-prompt, different-prime pair"
    )


def test_dev_and_public_splits_do_not_share_cases():
    dev = {c.prompt for c in protocols.load_cases(protocols.CASES_DEV).cases}
    public = {c.prompt for c in protocols.load_cases(protocols.CASES_PUBLIC_V1).cases}
    assert not dev & public


def test_a_holdout_file_outside_the_repo_loads(tmp_path):
    path = tmp_path / "holdout.jsonl"
    path.write_text(json.dumps(GOOD) + "\n\n" + json.dumps(dict(GOOD, id="H-2")) + "\n")
    assert [c.id for c in protocols.load_cases(str(path)).cases] == ["H-1", "H-2"]


BAD = [
    ({"category": "pack_axiom"}, "id", "non-empty"),
    ({"category": "gossip"}, "category", "must be one of"),
    ({"expected_sources": []}, "expected_sources", "non-empty"),
    ({"expected_sources": ["wiki"]}, "expected_sources", "unknown kind 'wiki'"),
    ({"expected_sources": ["vault", "vault"]}, "expected_sources", "twice"),
    ({"expected_sources": ["pack"]}, "expected_sources", "must expect 'vault'"),
    ({"category": "mixed"}, "expected_sources", "at least two kinds"),
    ({"prime": []}, "prime", "need prime prompts"),
    ({"prime": "Remember X."}, "prime", "list of non-empty prompts"),
    ({"extra": 1}, "extra", "unknown field"),
]


@pytest.mark.parametrize(
    ("change", "field", "message"), BAD, ids=[b[1] + "-" + b[2][:14] for b in BAD]
)
def test_case_errors_name_the_file_line_and_field(tmp_path, change, field, message):
    row = dict(GOOD, **change)
    if change == {"category": "pack_axiom"}:
        row.pop("id")
    path = tmp_path / "cases.jsonl"
    path.write_text(json.dumps(GOOD) + "\n" + json.dumps(row) + "\n")
    with pytest.raises(InvalidInput) as info:
        protocols.load_cases(str(path))
    hits = [p for p in info.value.problems if p.field == field and message in p.message]
    assert hits, info.value.problems
    assert (hits[0].file, hits[0].line) == (str(path), 2)


def test_broken_json_and_duplicate_ids_are_reported_together(tmp_path, capsys):
    path = tmp_path / "cases.jsonl"
    path.write_text(json.dumps(GOOD) + "\n{not json\n" + json.dumps(GOOD) + "\n")
    assert main(["protocols", "validate", str(path)]) == 2
    err = capsys.readouterr().err.strip().split("\n")
    assert len(err) == 2
    assert f"{path}:2:" in err[0] and "not valid JSON" in err[0]
    assert f"{path}:3: id:" in err[1] and "line 1" in err[1]


def test_a_folder_is_read_through_its_cases_file(capsys):
    assert main(["protocols", "list", protocols.CASES_DEV.rsplit("/", 1)[0]]) == 0
    assert "PROV-DEV-001" in capsys.readouterr().out
