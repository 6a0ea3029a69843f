"""Every arm layout the peer's arm scripts write imports (docs/peer-studies.md, "The arm
scripts").

The file names come from the scripts' own text, parsed here (``bench/scripts/pollution-*.sh``
in the peer's tree): what each arm script writes under its ``--out`` folder, the runner's
``-out`` (a results file, whose transcripts are ``<file>.transcripts``; or a folder holding
``results.json`` and ``transcripts/``, as the peer's ``pollution_tables.py`` reads both), the
world the API arm asks in, and the names the block scripts archive a failed attempt under.
Each arm folder is laid out from those names in a temporary folder, never copied from an
arm at hand, and imported; the contents are the layout tests' (tests/test_peer_layouts.py).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from typing import Any

import pytest

from benchledger.cli import main
from benchledger.harness.peer.tasks_import import import_arm, import_family
from benchledger.ledger import Ledger, open_store
from benchledger.ledger.events import ReadBackBody
from benchledger.projections.source import from_ledger
from benchledger.protocols import tasks as task_files
from tests import test_peer_layouts as layouts
from tests.conftest import peer_dir

ARM_SCRIPTS = ("pollution-arm.sh", "pollution-api-arm.sh")
BLOCK_SCRIPTS = ("pollution-rq1.sh", "pollution-directive.sh", "pollution-metered.sh",
                 "pollution-api-block.sh")  # fmt: skip
_WRITTEN = re.compile(r'"\$OUT/([A-Za-z0-9_.-]+)"')  # a path under the arm's --out folder
_RUNNER_OUT = re.compile(r'-out "\$OUT/([A-Za-z0-9_.-]+)"')
_WORLD = re.compile(r'^WORLD="([^"]+)"', re.M)
_CALLS_ARM = re.compile(r"bench/scripts/(pollution-[a-z-]*arm\.sh)")
_CELL = re.compile(r'cell="([^"]+)"')
# a failed attempt archived: mv "$OUT/$cell" "$OUT/$cell-<LABEL>-<n>", the label literal or
# a variable the script sets to one
_ARCHIVED = re.compile(r'mv "\$OUT/\$cell" "\$OUT/\$cell-(\$\w+|[A-Z][A-Z-]*)-\$\w+"')


def _script_text(name: str) -> str:
    with open(os.path.join(peer_dir(), "bench", "scripts", name), encoding="utf-8") as fh:
        return fh.read()


class Layout:
    """What one arm script writes under ``--out``, by the script's own names."""

    def __init__(self, script: str) -> None:
        text = _script_text(script)
        self.script = script
        self.pkrun = "bench-pkrun" in text  # the runner it evaluates with
        [self.runner_out] = _RUNNER_OUT.findall(text)
        self.written = sorted(set(_WRITTEN.findall(text)) - {self.runner_out})
        world = _WORLD.search(text)
        self.world = world[1] if world else None

    def results(self, arm: str) -> tuple[str, str]:
        """(results file, transcripts folder) the runner's -out gives."""
        out = os.path.join(arm, self.runner_out)
        if out.endswith(".json"):
            return out, out + ".transcripts"
        return os.path.join(out, "results.json"), os.path.join(out, "transcripts")


def _build(bench: str, family: str, arm_name: str, layout: Layout, world: str = "") -> str:
    """The arm folder ``layout``'s script writes, each file by its name's kind (``world``:
    the profile the fixture service served, else the script's own)."""
    world = world or str(layout.world)
    arm = os.path.join(bench, "results", "knowledge-pollution", family, arm_name)
    os.makedirs(arm)
    results, tdir = layout.results(arm)
    for name in layout.written:
        path = os.path.join(arm, name)
        if name == "tasks":
            os.makedirs(path)
            shutil.copyfile(os.path.join(bench, "tasks", f"{layouts.TASK}.yaml"),
                            os.path.join(path, f"{layouts.TASK}.yaml"))  # fmt: skip
        elif name == "planted.json":
            layouts._write(path, layouts.PK_PLANT if layout.pkrun else layouts.PLANT)
        elif name == "fixture-world.json":
            with open(path, "w") as fh:
                fh.write(layouts.go_json(layouts.served_worlds()[world]))
        elif name == "arm-config.yaml":
            with open(path, "w") as fh:
                fh.write("personas:\n  analyst:\n    tools:\n      allow: [\"trino_*\"]\n"
                         "database:\n  dsn: postgres://platform:secret@x/db\n")  # fmt: skip
        elif name.endswith(".json"):  # the store snapshots the script takes
            layouts._write(path, {"insights": [], "pages": []})
        else:  # logs and the summary: text the importer does not read
            with open(path, "w") as fh:
                fh.write(f"=== arm {arm_name} complete: {arm} ===\n")
    if layout.pkrun:
        _pkrun_results(results, tdir, world)
    else:
        _benchrun_results(results, tdir, os.path.join(arm, "tasks"))
    return arm


def _benchrun_results(results: str, tdir: str, tasks: str) -> None:
    attempts = []
    for n, (value, calls) in enumerate(layouts.EPISODES, 1):
        attempts.append({"task_id": layouts.TASK, "attempt": n, "correct": value == "1200",
                         "final_answer": f"FINAL ANSWER: {value}", "got_value": float(value),
                         "tool_calls": len(calls)})  # fmt: skip
        turns: list[dict[str, Any]] = [{"role": "user", "text": "How many orders?"}]
        for c, (tool, args, text) in enumerate(calls):
            turns.append({"role": "assistant",
                          "tool_calls": [{"id": f"c{c}", "name": tool, "args": args}]})  # fmt: skip
            turns.append({"role": "user", "tool_results": [{"call_id": f"c{c}", "text": text}]})
        turns.append({"role": "assistant", "text": f"FINAL ANSWER: {value}"})
        header = {"task_id": layouts.TASK, "arm": "a3", "attempt": n}
        layouts._write(os.path.join(tdir, f"{layouts.TASK}-a3-k{n}.json"),
                       {**header, "transcript": turns})  # fmt: skip
    loaded = task_files.load(tasks)
    manifest = {"started_at": "2026-08-06T10:00:00Z", "arm": "a3", "llm_provider": "claude-cli",
                "model": "haiku", "k": len(layouts.EPISODES),
                "task_set_hash": task_files.task_set_hash(loaded.tasks)}  # fmt: skip
    layouts._write(results, {"manifest": manifest, "attempts": attempts})


def _pkrun_results(results: str, tdir: str, world: str) -> None:
    attempts = []
    for n, (answer, returned) in enumerate(layouts.PK_EPISODES, 1):
        attempts.append({"question_id": layouts.QUESTION, "replicate": n, "final_answer": answer})
        turns = [{"role": "user", "text": "How many monitors does ACME have provisioned?"},
                 {"role": "assistant", "tool_calls": [{"id": "c1", "name": "mcp__api__search",
                                                       "args": {"q": "monitors"}}]},
                 {"role": "user", "tool_results": [{"call_id": "c1", "text": returned}]},
                 {"role": "assistant", "text": answer}]  # fmt: skip
        layouts._write(os.path.join(tdir, f"{layouts.QUESTION}_7_{world}-r{n}.json"), turns)
    layouts._write(results, {"manifest": {"model": "haiku", "llm_provider": "claude-cli"},
                             "attempts": attempts})  # fmt: skip


@pytest.mark.parametrize("script", ARM_SCRIPTS)
def test_an_arm_laid_out_by_each_arm_script_s_own_file_names_imports(tmp_path, script) -> None:
    """(before: a pkrun arm's fixture-world.json as pollution-api-arm.sh writes it was
    refused: field 'name' must be the world's name)"""
    layout = Layout(script)
    print(f"{script} writes {layout.written} and the runner's -out {layout.runner_out}")
    assert "planted.json" in layout.written and "arm-config.yaml" in layout.written
    bench = layouts._bench(str(tmp_path))
    arm = _build(bench, "fam-script", "cell-one", layout)
    ledger = Ledger(open_store(str(tmp_path / "l.sqlite")))
    run_id, _, label = import_arm(ledger, arm)
    assert label == ""
    config = layouts._header(ledger, run_id).config
    assert config["lacks"] == []  # its transcripts, arm config and snapshots, all read
    assert config["planted"]["needle"] in (layouts.PLANT["needle"], layouts.PK_PLANT["needle"])
    assert config["arm_config"]["persona_tools_allow"] == {"analyst": ["trino_*"]}
    events = [e.body for e, _ in from_ledger(ledger, run_id).events]
    snapshots = sorted(
        b.path for b in events if isinstance(b, ReadBackBody) and b.purpose == "store_snapshot"
    )
    # the importer reads every store snapshot the script takes, and nothing else it writes
    assert snapshots == [n for n in layout.written if n.startswith(("store-", "datahub-"))]
    if layout.pkrun:
        assert config["world"]["profile"] == layout.world
    rulings = layouts._rulings(ledger, run_id)
    assert len({rep for rep, _ in rulings}) == (
        len(layouts.PK_EPISODES) if layout.pkrun else len(layouts.EPISODES))  # fmt: skip


def test_an_api_arm_of_every_world_profile_imports_and_study_places_it_by_its_world(
    tmp_path,
) -> None:
    """(before: fixture-world.json as the fixture service writes it was refused: field
    'name' must be the world's name)"""
    layout = Layout("pollution-api-arm.sh")
    worlds = layouts.served_worlds()
    bench = layouts._bench(str(tmp_path))
    path = str(tmp_path / "l.sqlite")
    ledger = Ledger(open_store(path))
    for n, profile in enumerate(worlds):
        arm = _build(bench, "fam-worlds", f"arm{n}", layout, world=profile)
        run_id, _, _ = import_arm(ledger, arm)
        assert layouts._header(ledger, run_id).config["world"] == worlds[profile]
    ledger.store.close()
    out = str(tmp_path / "study.json")
    assert main(["study", "--ledger", path, "--format", "json", "-o", out]) == 0
    with open(out, encoding="utf-8") as fh:
        [arms] = [t for t in json.load(fh)["tables"] if t["id"] == "arms"]
    placed = {r["key"]: r["coords"]["fixture"] for r in arms["rows"]}
    print(f"placed by world: {placed}")
    assert placed == {f"fam-worlds/arm{n}": profile for n, profile in enumerate(worlds)}


def _cell(text: str) -> str:
    """The script's cell name, each ``${var}`` given the first value its loop takes (or its
    own name): the importer reads no arm's name, so any instance is one of the block's."""
    [pattern] = {p for p in _CELL.findall(text) if "${" in p}  # not a function's argument

    def value(m: re.Match[str]) -> str:
        loop = re.search(rf"for {m[1]} in ([\w ]+);", text)
        given = re.search(rf'\b{m[1]}="([^"$]*)"', text)
        return loop[1].split()[0] if loop else given[1] if given else m[1]

    return re.sub(r"\$\{(\w+)\}", value, pattern)


def _labels(text: str) -> list[str]:
    """The labels the script archives a failed attempt under (``mv ... $cell-LABEL-$n``)."""
    out = set()
    for found in _ARCHIVED.findall(text):
        if found.startswith("$"):
            var = found[1:]
            out |= set(re.findall(rf"\b{var}=([A-Z][A-Z-]*)\b", text))
        else:
            out.add(found)
    return sorted(out)


@pytest.mark.parametrize("script", BLOCK_SCRIPTS)
def test_a_family_each_block_script_writes_imports_with_its_archived_attempts_excluded(
    tmp_path, script
) -> None:
    """A block script runs one arm script per cell and archives a failed attempt beside it
    under a label: the family imports, the labelled folders excluded by their label."""
    text = _script_text(script)
    [arm_script] = set(_CALLS_ARM.findall(text))
    layout = Layout(arm_script)
    cell, labels = _cell(text), _labels(text)
    print(f"{script}: cells like {cell!r} by {arm_script}, archived as {labels}")
    assert labels and set(labels) <= {"DRIFTED", "INCOMPLETE"}
    bench = layouts._bench(str(tmp_path))
    family = f"fam-{script.removesuffix('.sh')}"
    folders = [cell, *(f"{cell}-{label}-0" for label in labels)]
    for folder in folders:
        _build(bench, family, folder, layout)
    ledger = Ledger(open_store(str(tmp_path / "l.sqlite")))
    imported = import_family(ledger, os.path.join(bench, "results", "knowledge-pollution", family))
    got = {run_id.removeprefix(f"peer-{family}-"): label for run_id, _, label in imported}
    assert got == {cell: "", **{f"{cell}-{label}-0": f"{label}-0" for label in labels}}
