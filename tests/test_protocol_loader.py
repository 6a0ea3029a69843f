"""The protocol loader and validator: every problem, each with file, line and field."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import re

import pytest
import yaml

from benchledger import protocols
from benchledger.cli import main
from benchledger.protocols.errors import InvalidInput
from benchledger.protocols.hashing import (
    benchledger_hash,
    content_id,
    go_float,
    go_json,
    go_string,
    peer_hash,
)
from tests.older_peer_set import write_v1102_set

PEER_SET_HASH = "daeac8a49319e6240541f905e1acf45d99e47fa4e4958ee0203d5f4fe1245695"
# The benchledger-recipe hash of the committed set: changes to the set or the recipe
# show up here as a reviewable diff.
COMMITTED_SET_HASH = "9fc5ac3350ad01ddee3694cdd55c2b0a704eaa06268c0124f3d8702b158ad460"

VALID = {
    "id": "t-one",
    "title": "One",
    "fact": "The 'one region' is North.",
    "entity_urn": "urn:li:dataset:(urn:li:dataPlatform:sqlite,x.orders,PROD)",
    "sink": "knowledge_page",
    "page": {"slug": "one", "title": "One", "summary": "s", "body": "# One\n\nb"},
    "budget_tool_calls": 15,
    "teach": {"prompt": "Remember it."},
    "recall": {"prompt": "Which?", "grading": {"kind": "entity", "aliases": ["North"]}},
    "transfer": {
        "prompt": "Which?",
        "grading": {"kind": "numeric", "value": 3, "abs_tolerance": 0.5},
    },
    "abstain": {"prompt": "What else?"},
}


def write_yaml(path, data) -> str:
    with open(path, "w") as fh:
        yaml.safe_dump(data, fh, sort_keys=False)
    return str(path)


def problems_of(path) -> list[tuple[str, str]]:
    with pytest.raises(InvalidInput) as info:
        protocols.load(str(path))
    return [(p.field, p.message) for p in info.value.problems]


def test_the_committed_set_has_30_protocols_split_across_sinks_and_stages():
    pset = protocols.load(protocols.LIFECYCLE_DIR)
    promote = [p for p in pset.protocols if p.promotes]
    update = [p for p in pset.protocols if p.update is not None]
    assert len(pset.protocols) == 30
    assert len(promote) == 20 and len(update) == 10
    assert {p.sink for p in promote} == {"datahub", "knowledge_page"}
    assert sum(p.sink == "knowledge_page" for p in promote) == 10
    assert all(p.abstain is not None for p in pset.protocols)


def test_the_committed_set_hash_is_pinned():
    pset = protocols.load(protocols.LIFECYCLE_DIR)
    assert benchledger_hash(pset.protocols) == COMMITTED_SET_HASH


def test_the_peer_protocols_hash_to_the_peers_recorded_set_hash(peer):
    pset = protocols.load(os.path.join(peer, "bench", "protocols"))
    assert len(pset.protocols) == 30
    assert peer_hash(pset.protocols) == PEER_SET_HASH
    # the peer's own run manifest records the same hash
    results = os.path.join(peer, "bench", "results", "s5-anthropic-k5", "lifecycle-a3-k5.json")
    with open(results) as fh:
        assert json.load(fh)["manifest"]["protocol_set_hash"] == PEER_SET_HASH


def test_set_hashes_do_not_depend_on_load_order(peer):
    pset = protocols.load(os.path.join(peer, "bench", "protocols"))
    backwards = tuple(reversed(pset.protocols))
    assert peer_hash(backwards) == peer_hash(pset.protocols)
    assert benchledger_hash(backwards) == benchledger_hash(pset.protocols)


def test_the_peer_recipe_ignores_benchledgers_query_extension():
    pset = protocols.load(protocols.LIFECYCLE_DIR)
    assert '"query"' not in go_json(list(pset.protocols))


@pytest.mark.parametrize(
    ("value", "go"),
    [
        (80.0, "80"),
        (0.5, "0.5"),
        (322536.2, "322536.2"),
        (-0.0, "-0"),
        (1e-7, "1e-7"),
        (1.5e-5, "0.000015"),
        (1e20, "100000000000000000000"),
        (1e21, "1e+21"),
        (123456789012345678.0, "123456789012345680"),
    ],
    ids=["integral", "half", "cents", "neg-zero", "tiny-exp", "small-fixed", "1e20", "1e21", "big"],
)
def test_go_float_matches_encoding_json(value, go):
    assert go_float(value) == go


def test_go_string_escapes_html_characters_and_controls():
    assert (
        go_string('a<b>&"\\\n\t\x01\u2028é')
        == '"a\\u003cb\\u003e\\u0026\\"\\\\\\n\\t\\u0001\\u2028é"'
    )


def test_one_yaml_file_loads_and_json_loads_the_same(tmp_path):
    y = protocols.load(write_yaml(tmp_path / "one.yaml", VALID))
    (tmp_path / "j").mkdir()
    j = tmp_path / "j" / "one.json"
    j.write_text(json.dumps(VALID, indent=2))
    assert protocols.load(str(j)).protocols == y.protocols


def test_a_json_file_may_hold_a_list_of_protocols(tmp_path):
    second = dict(VALID, id="t-two")
    path = tmp_path / "set.json"
    path.write_text(json.dumps([VALID, second]))
    assert [p.id for p in protocols.load(str(path)).protocols] == ["t-one", "t-two"]


def test_a_folder_loads_in_filename_order(tmp_path):
    write_yaml(tmp_path / "b.yaml", dict(VALID, id="t-b"))
    write_yaml(tmp_path / "a.yml", dict(VALID, id="t-a"))
    assert [p.id for p in protocols.load(str(tmp_path)).protocols] == ["t-a", "t-b"]


def _mutate(path: str, value):
    data = copy.deepcopy(VALID)
    keys = path.split(".")
    target = data
    for key in keys[:-1]:
        target = target[key]
    if value is KeyError:
        del target[keys[-1]]
    else:
        target[keys[-1]] = value
    return data


CASES = [
    ("id", "", "id", "must not be empty"),
    ("id", "../../../../tmp/x", "id", "must start with a letter or digit"),
    ("id", "p\x1b[2K", "id", "must start with a letter or digit"),
    ("id", "p one", "id", "must start with a letter or digit"),
    ("title", KeyError, "title", "is required and missing"),
    ("budget_tool_calls", 0, "budget_tool_calls", "above 0"),
    ("budget_tool_calls", True, "budget_tool_calls", "above 0"),
    ("sink", "wiki", "sink", "must be one of datahub, knowledge_page"),
    ("page", KeyError, "page", "the knowledge_page sink needs a page"),
    ("page.summary", "", "page.summary", "must not be empty"),
    ("teach.prompt", "  ", "teach.prompt", "must not be empty"),
    ("recall.grading.kind", "fuzzy", "recall.grading.kind", "must be one of numeric, entity"),
    ("recall.grading.aliases", [], "recall.grading.aliases", "needs at least one alias"),
    ("recall.grading.wrong_aliases", ["north"], "recall.grading.wrong_aliases", "also listed"),
    ("transfer.grading.value", KeyError, "transfer.grading.value", "needs a value"),
    ("transfer.grading.value", "ten", "transfer.grading.value", "must be a number"),
    ("transfer.grading.abs_tolerance", -1, "transfer.grading.abs_tolerance", "zero or more"),
    ("transfer.grading.tolerance", 1, "transfer.grading.tolerance", "unknown field"),
    ("recall", KeyError, "recall", "is required and missing"),
    (
        "update",
        {
            "prompt": "fix",
            "fact": "f",
            "recall": {"prompt": "q", "grading": {"kind": "numeric", "value": 1}},
        },
        "update",
        "an applied insight can never be superseded",
    ),
]


@pytest.mark.parametrize(
    ("path", "value", "field", "message"), CASES, ids=[f"{c[0]}-{c[3][:18]}" for c in CASES]
)
def test_validation_names_the_field_and_its_line(tmp_path, path, value, field, message):
    file = write_yaml(tmp_path / "p.yaml", _mutate(path, value))
    with pytest.raises(InvalidInput) as info:
        protocols.load(file)
    hits = [p for p in info.value.problems if p.field == field and message in p.message]
    assert hits, info.value.problems
    assert hits[0].file == file
    assert hits[0].line is not None
    if value is not KeyError:  # a present field is named on its own line
        with open(file) as fh:
            line = fh.read().split("\n")[hits[0].line - 1]
        assert line.lstrip().startswith(field.split(".")[-1] + ":"), line


def test_every_problem_of_a_load_is_reported_in_one_pass(tmp_path):
    bad = _mutate("sink", "wiki")
    bad["budget_tool_calls"] = -2
    bad["teach"] = {"prompt": ""}
    write_yaml(tmp_path / "a.yaml", bad)
    write_yaml(tmp_path / "b.yaml", dict(VALID, title=""))
    got = problems_of(tmp_path)
    assert ("sink", "must be one of datahub, knowledge_page, got 'wiki'") in got
    assert any(f == "budget_tool_calls" for f, _ in got)
    assert any(f == "teach.prompt" for f, _ in got)
    assert ("title", "must not be empty") in got
    assert any(f == "id" and "already used" in m for f, m in got)


def test_duplicate_ids_across_files_name_the_first_use(tmp_path):
    write_yaml(tmp_path / "a.yaml", VALID)
    write_yaml(tmp_path / "b.yaml", VALID)
    with pytest.raises(InvalidInput) as info:
        protocols.load(str(tmp_path))
    (problem,) = info.value.problems
    assert problem.file.endswith("b.yaml") and problem.line == 1
    assert "a.yaml:1" in problem.message


def test_an_empty_folder_is_refused(tmp_path):
    assert problems_of(tmp_path) == [("", "holds no protocols; the set must not be empty")]


def test_broken_yaml_and_json_name_their_line(tmp_path):
    (tmp_path / "a.yaml").write_text("id: x\ntitle: [unclosed\n")
    (tmp_path / "b.json").write_text('{"id": "x",\n  "title": }\n')
    with pytest.raises(InvalidInput) as info:
        protocols.load(str(tmp_path))
    got = {(os.path.basename(p.file), p.line) for p in info.value.problems}
    assert ("b.json", 2) in got
    assert any(name == "a.yaml" for name, _ in got)


def test_a_field_given_twice_is_refused(tmp_path):
    (tmp_path / "a.yaml").write_text(yaml.safe_dump(VALID, sort_keys=False) + "title: Again\n")
    with pytest.raises(InvalidInput) as info:
        protocols.load(str(tmp_path / "a.yaml"))
    (problem,) = info.value.problems
    assert (problem.field, problem.message) == ("title", "field appears twice in one mapping")


def test_cli_validate_prints_every_problem_with_file_and_line_and_exits_2(tmp_path, capsys):
    bad = _mutate("sink", "wiki")
    bad["budget_tool_calls"] = 0
    file = write_yaml(tmp_path / "bad.yaml", bad)
    assert main(["protocols", "validate", file]) == 2
    err = capsys.readouterr().err.strip().split("\n")
    assert len(err) == 2
    assert err[0].startswith(f"benchledger: error: {file}:5: sink:")
    assert err[1].startswith(f"benchledger: error: {file}:") and "budget_tool_calls" in err[1]


def test_cli_hash_prints_the_hash_alone_on_its_last_line(peer, capsys):
    folder = os.path.join(peer, "bench", "protocols")
    assert main(["protocols", "hash", folder, "--recipe", "peer"]) == 0
    assert capsys.readouterr().out.strip().split("\n")[-1] == PEER_SET_HASH


def test_cli_list_and_validate_the_committed_set(capsys):
    assert main(["protocols", "validate"]) == 0
    assert "30 protocols (20 promote, 10 update)" in capsys.readouterr().out
    assert main(["protocols", "list"]) == 0
    out = capsys.readouterr().out
    assert "bl-showcase-region" in out and "teach,recall,update,abstain" in out


def test_a_missing_path_exits_2(tmp_path, capsys):
    assert main(["protocols", "validate", str(tmp_path / "nope")]) == 2
    assert "no such file or folder" in capsys.readouterr().err


# -- the peer's older schema: a page without a summary ------------------------------------


def test_a_page_without_a_summary_loads_with_an_empty_summary(tmp_path):
    file = write_yaml(tmp_path / "p.yaml", _mutate("page.summary", KeyError))
    (p,) = protocols.load(file).protocols
    assert p.page is not None and p.page.summary == "" and p.page.body == "# One\n\nb"


def test_a_summary_given_must_still_be_text(tmp_path):
    file = write_yaml(tmp_path / "p.yaml", _mutate("page.summary", 5))
    assert ("page.summary", "must be text, got int") in problems_of(file)


def test_the_peers_v1102_set_loads_and_hashes_as_its_go_struct_without_summary(peer, tmp_path):
    today = protocols.load(os.path.join(peer, "bench", "protocols")).protocols
    old = protocols.load(write_v1102_set(peer, str(tmp_path / "v1102"))).protocols
    assert len(old) == 30 and all(p.page is None or p.page.summary == "" for p in old)
    assert sum(p.page is not None for p in old) == 15
    # the Go JSON of a struct with no Summary: today's encoding minus each "summary" member
    by_id = sorted(today, key=lambda p: p.id)
    without = re.sub(r'"summary":"(?:[^"\\]|\\.)*",', "", go_json(by_id))
    assert go_json(sorted(old, key=lambda p: p.id)) == without
    assert peer_hash(old) == hashlib.sha256(without.encode()).hexdigest() != PEER_SET_HASH
    assert benchledger_hash(old) != benchledger_hash(today)


def test_the_content_identity_is_the_benchledger_recipe_hash(peer):
    pset = protocols.load(os.path.join(peer, "bench", "protocols"))
    assert content_id(pset.protocols) == benchledger_hash(pset.protocols)
    assert content_id(protocols.load(protocols.LIFECYCLE_DIR).protocols) == COMMITTED_SET_HASH
