"""Importing the peer's knowledge-pollution arms (its tasks bench) as sealed runs, one per
arm folder, excluded attempts as runs of their own, and no arm-config secret in a ledger."""

from __future__ import annotations

import collections
import gzip
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest
import yaml

from benchledger.cli import main
from benchledger.harness.peer.arms import flat_arms, is_arm, is_family, split_label
from benchledger.harness.peer.tasks_import import import_arm, import_family
from benchledger.ledger import Ledger, LedgerError, UnusableInput, open_store
from benchledger.ledger.bundle import export_run
from benchledger.ledger.verified import open_run
from benchledger.protocols.errors import InvalidInput
from benchledger.replay.levels import replay
from benchledger.replay.rederive import NOT_RECORDED
from tests.conftest import cli, copied_ledger, one_line_exit_2, peer_dir
from tests.test_replay import rechain

FAMILIES = ("rq1-warehouse", "directive-contrast")
SMALL = "convention-absent-haiku-INCOMPLETE-0"  # one attempt: quick to copy and import
FAILED = "convention-absent-haiku-AUDIT-TIMEOUT-0"  # its q1-net attempt 6 is a harness failure


def family_dir(family: str) -> str:
    return os.path.join(peer_dir(), "bench", "results", "knowledge-pollution", family)


def arm_dirs() -> list[tuple[str, str]]:
    """(family, arm folder) of every arm the study keeps."""
    return [
        (fam, os.path.join(family_dir(fam), name))
        for fam in FAMILIES
        for name in sorted(os.listdir(family_dir(fam)))
        if is_arm(os.path.join(family_dir(fam), name))
    ]


def results_of(arm: str) -> dict[str, Any]:
    with open(os.path.join(arm, "results.json")) as fh:
        data: dict[str, Any] = json.load(fh)
    return data


@pytest.fixture(scope="module")
def imported(tmp_path_factory, pollution_families):
    """Both families imported into one ledger (conftest's session import, copied)."""
    built, runs = pollution_families
    assert tuple(runs) == FAMILIES
    ledger = Ledger(open_store(copied_ledger(built, tmp_path_factory.mktemp("tasks"))))
    yield ledger, runs
    ledger.store.close()


def _bodies(ledger: Ledger, run_id: str, kind: str) -> list[tuple[str, Any]]:
    return [(e.stream, e.body) for e, _ in ledger.events(run_id) if type(e).__name__ == kind]


def _header(ledger: Ledger, run_id: str) -> Any:
    return _bodies(ledger, run_id, "RunStartedEvent")[0][1]


def test_every_arm_folder_of_both_families_is_a_sealed_run_that_verifies(imported):
    ledger, runs = imported
    expected = {f"peer-{fam}-{os.path.basename(d)}" for fam, d in arm_dirs()}
    got = {run for fam in FAMILIES for run, _, _ in runs[fam]}
    assert got == expected and len(got) == 33  # 30 rq1 folders, 3 directive levels
    for fam in FAMILIES:
        assert [r for r, _, _ in runs[fam]] == sorted(r for r, _, _ in runs[fam])
        for run_id, root, _ in runs[fam]:
            failure, summary = ledger.verify(run_id, require_seal=True)
            assert failure is None and summary.sealed_root == root, run_id


@pytest.mark.parametrize("family", FAMILIES)
def test_each_run_has_one_unit_per_attempt_and_the_recorded_correct_counts(imported, family):
    ledger, _ = imported
    for fam, arm in arm_dirs():
        if fam != family:
            continue
        data, run_id = results_of(arm), f"peer-{fam}-{os.path.basename(arm)}"
        units = _bodies(ledger, run_id, "UnitStartedEvent")
        assert len(units) == len(data["attempts"]), run_id
        correct: collections.Counter[str] = collections.Counter()
        graded: collections.Counter[str] = collections.Counter()
        for stream, d in _bodies(ledger, run_id, "GraderDecisionEvent"):
            if d.origin == "benchledger":  # ours, beside the peer's (tests/test_tasks_suite.py)
                continue
            assert d.check == "correct" and d.origin == "mcp-data-platform"
            pid = stream.split("/")[-2]
            graded[pid] += 1
            correct[pid] += d.verdict is True
        for task in data["tasks"]:
            assert correct[task["task_id"]] == task["correct"], (run_id, task["task_id"])
            assert graded[task["task_id"]] == task["graded"], (run_id, task["task_id"])


def test_the_header_records_the_manifest_the_tasks_the_plant_and_the_arm(imported):
    ledger, _ = imported
    arm = os.path.join(family_dir("rq1-warehouse"), "checkable-wrong-haiku")
    h = _header(ledger, "peer-rq1-warehouse-checkable-wrong-haiku")
    manifest = results_of(arm)["manifest"]
    assert (h.suite, h.platform, h.tool_version) == ("tasks", "mcp-data-platform", "import-peer")
    assert (h.protocol_set_hash, h.k, h.protocols) == (manifest["task_set_hash"], 24, 1)
    assert (h.agent, h.model, h.platform_version) == ("claude-cli:haiku", "haiku", "dev")
    c = h.config
    assert (c["origin"], c["shape"], c["family"], c["arm"], c["folder"]) == (
        "mcp-data-platform",
        "tasks",
        "rq1-warehouse",
        "checkable-wrong-haiku",
        "checkable-wrong-haiku",
    )
    assert (c["label"], c["excluded"], c["exclusion"]) == ("", False, "")
    assert c["manifest"] == manifest
    assert c["planted"]["needle"] == "memory.bench.orders table holds 1140 order records"
    assert c["tasks"]["s3-deprecated-order-count"]["grading"]["value"] == 1200
    absent = _header(ledger, "peer-rq1-warehouse-checkable-absent-haiku").config
    assert absent["planted"] is None
    fiscal = _header(ledger, "peer-rq1-warehouse-convention-absent-haiku").config
    assert sorted(fiscal["tasks"]) == [
        "s3-fiscal-2025-count",
        "s3-fiscal-2025-net",
        "s3-fiscal-q1-net",
    ]


def test_every_store_snapshot_present_is_a_read_back_in_the_header_stream(imported):
    ledger, _ = imported
    clean, before, after = "store-clean.json", "store-before-eval.json", "store-after-eval.json"
    datahub = "datahub-orders-baseline.json"
    for folder, names in (
        ("checkable-wrong-haiku", [clean, before, after, datahub]),
        ("checkable-absent-sonnet", ["store-before.json", "store-after.json", datahub]),
        ("checkable-wrong-sonnet-INCOMPLETE-0", [clean, before, datahub]),  # stopped before after
    ):
        run_id = f"peer-rq1-warehouse-{folder}"
        every = _bodies(ledger, run_id, "ReadBackEvent")
        reads = [(s, b) for s, b in every if s == run_id]
        assert [b.path for _, b in reads] == names
        # beside them, each attempt's read of its transcript file (what it says beyond calls)
        units = {s for s, b in every if s != run_id and b.purpose == "transcript_text"}
        assert len(units) == len(every) - len(reads) > 0
        assert {(s, b.stage, b.method, b.status, b.purpose) for s, b in reads} == {
            (run_id, "arm", "FILE", 200, "store_snapshot")
        }
        with open(os.path.join(family_dir("rq1-warehouse"), folder, names[0])) as fh:
            assert reads[0][1].body == json.load(fh)


def test_excluded_attempts_are_runs_of_their_own_labelled_with_the_readmes_meaning(imported):
    ledger, runs = imported
    labels = {run: label for fam in FAMILIES for run, _, label in runs[fam]}
    assert labels["peer-rq1-warehouse-convention-absent-haiku-DRIFTED-1"] == "DRIFTED-1"
    assert labels["peer-rq1-warehouse-convention-correct-sonnet-INTERRUPTED-bells"] == (
        "INTERRUPTED-bells"
    )
    # a lower-case tail is a level of the study, not an exclusion label
    assert labels["peer-directive-contrast-checkable-wrong-haiku-bare"] == ""
    for fam, arm in arm_dirs():
        run, folder = f"peer-{fam}-{os.path.basename(arm)}", os.path.basename(arm)
        c = _header(ledger, run).config
        assert (c["family"], c["folder"], c["label"]) == (fam, folder, labels[run])
        assert c["excluded"] is bool(labels[run]) and folder.startswith(c["arm"])
    c = _header(ledger, "peer-rq1-warehouse-checkable-wrong-sonnet-INCOMPLETE-1").config
    assert (c["arm"], c["exclusion"]) == ("checkable-wrong-sonnet", "interrupted before its k")
    c = _header(ledger, "peer-rq1-warehouse-convention-absent-haiku-AUDIT-TIMEOUT-0").config
    assert c["exclusion"] == "one episode's audit rows arrived outside the read-back window"
    # the analysed arm's run holds only its own attempts
    analysed = _bodies(ledger, "peer-rq1-warehouse-checkable-wrong-sonnet", "UnitStartedEvent")
    assert len(analysed) == 24


def test_a_harness_failure_is_an_infra_error_with_no_verdict(imported):
    ledger, _ = imported
    run_id = f"peer-rq1-warehouse-{FAILED}"
    stream = f"{run_id}/s3-fiscal-q1-net/6"
    events = [type(e).__name__ for e, _ in ledger.events(run_id, stream)]
    assert "GraderDecisionEvent" not in events and "InfraErrorEvent" in events
    (_, finished), *_ = [
        (s, b) for s, b in _bodies(ledger, run_id, "UnitFinishedEvent") if s == stream
    ]
    assert finished.outcome == {"correct": None}
    assert finished.error.startswith("audit read-back: audit rows for session")
    others = [b for s, b in _bodies(ledger, run_id, "UnitFinishedEvent") if s != stream]
    assert all(b.error == "" and isinstance(b.outcome["correct"], bool) for b in others)


def test_each_tool_call_is_a_session_call_with_the_text_it_returned(imported):
    ledger, _ = imported
    arm = os.path.join(family_dir("rq1-warehouse"), "checkable-wrong-haiku")
    record = results_of(arm)["attempts"][0]
    with open(
        os.path.join(arm, "results.json.transcripts", os.path.basename(record["transcript_path"]))
    ) as fh:
        turns = json.load(fh)["transcript"]
    said = {r["call_id"]: r["text"] for t in turns for r in t.get("tool_results") or []}
    recorded = [c for t in turns for c in t.get("tool_calls") or []]
    run_id = "peer-rq1-warehouse-checkable-wrong-haiku"
    stream = f"{run_id}/{record['task_id']}/{record['attempt']}"
    events = [e for e, _ in ledger.events(run_id, stream)]
    calls = [e.body for e in events if type(e).__name__ == "SessionCallEvent"]
    assert [c.tool for c in calls] == [c["name"].removeprefix("mcp__bench__") for c in recorded]
    assert [c.content for c in calls] == [
        [{"type": "text", "text": said[c["id"]]}] for c in recorded
    ]
    assert all(c.method == "tools/call" and c.episode == "task" for c in calls)
    started = next(e.body for e in events if type(e).__name__ == "EpisodeStartedEvent")
    assert started.user_prompt.startswith("How many order records are in the CURRENT")
    finished = next(e for e in events if type(e).__name__ == "EpisodeFinishedEvent")
    assert (finished.body.final_answer, finished.body.tool_calls) == ("1200", 2)
    decision = next(e for e in events if type(e).__name__ == "GraderDecisionEvent")
    assert decision.refs == (finished.seq,)
    assert (decision.body.verdict, decision.body.expected, decision.body.answer) == (
        True,
        [1200],
        "1200",
    )
    assert decision.body.reason == "recorded by mcp-data-platform: correct=true, got_value=1200"


def test_importing_the_same_arm_folder_again_gives_the_same_root(imported, tmp_path):
    _, runs = imported
    first = dict((r, root) for fam in FAMILIES for r, root, _ in runs[fam])
    again = Ledger(open_store(str(tmp_path / "again.sqlite")))
    run_id, root, label = import_arm(again, os.path.join(family_dir("rq1-warehouse"), FAILED))
    assert (run_id, label) == (f"peer-rq1-warehouse-{FAILED}", "AUDIT-TIMEOUT-0")
    assert root == first[run_id]


# -- trace hashes: recorded as a live unit records them, checked by re-derivation -----------


def _trace_checks(report: Any) -> tuple[int, int, list[Any]]:
    """(trace hashes compared, not recorded, their mismatches) of a re-derivation report."""
    found = [m for m in report.mismatches if m.field == "trace_hash"]
    return report.compared["trace hashes"], report.skipped[NOT_RECORDED], found


def test_an_imported_arm_re_derives_with_every_trace_hash_recorded_and_equal(imported):
    ledger, _ = imported
    run_id = "peer-rq1-warehouse-checkable-wrong-haiku"
    arm = os.path.join(family_dir("rq1-warehouse"), "checkable-wrong-haiku")
    attempts = len(results_of(arm)["attempts"])
    report = replay(run_id, ledger=lambda: ledger)
    # one episode and one unit per attempt, each hash recorded and recomputed equal
    assert _trace_checks(report) == (2 * attempts, 0, []), report.lines()
    assert report.ok and attempts == 24


def _edit_one_tool_result(events: list[Any]) -> tuple[Any, Callable[[Any], Any]]:
    """The run's first tool call and an edit that changes the text it returned."""
    victim = next(e for e in events if type(e).__name__ == "SessionCallEvent")

    def edit(e: Any) -> Any:
        if (e.stream, e.seq) != (victim.stream, victim.seq):
            return e
        body = msgspec.structs.replace(
            e.body, content=[{"type": "text", "text": '{"rows": [[1]], "edited": true}'}]
        )
        return msgspec.structs.replace(e, body=body)

    return victim, edit


def test_one_tool_result_edited_in_an_exported_arm_is_caught_by_its_trace_hashes(
    imported, tmp_path
):
    ledger, _ = imported
    run_id = f"peer-rq1-warehouse-{SMALL}"
    bundle, tampered = str(tmp_path / "arm.jsonl"), str(tmp_path / "tampered.jsonl")
    export_run(ledger, run_id, bundle)
    victim, edit = _edit_one_tool_result([e for e, _ in ledger.events(run_id)])
    rechain(bundle, tampered, edit)
    open_run(tampered, require_seal=False, allow_partial=False)  # links recomputed: it verifies
    compared, _, found = _trace_checks(replay(tampered, level="rederive"))
    assert compared == 2
    assert {(m.stream, m.what) for m in found} == {
        (victim.stream, "episode task"),
        (victim.stream, "unit"),
    }


def _secrets(arm: str) -> set[str]:
    """The arm config's credentials: the DSN and its password, keys, tokens, the key names."""
    with open(os.path.join(arm, "arm-config.yaml")) as fh:
        config = yaml.safe_load(fh)
    dsn = config["database"]["dsn"]
    s3 = config["toolkits"]["s3"]["instances"]["e2e"]
    found = {dsn, dsn.split("//", 1)[1].split("@", 1)[0].split(":", 1)[1], s3["secret_access_key"]}
    found.add(config["toolkits"]["datahub"]["instances"]["primary"]["token"])
    found.update(k["key"] for k in config["auth"]["api_keys"]["keys"])
    return found | {"platform_secret", "admin_secret", "API_KEY", "postgres://"}


def test_no_secret_of_an_arm_config_reaches_an_exported_bundle(imported, tmp_path):
    ledger, _ = imported
    for fam, arm in arm_dirs():
        run_id = f"peer-{fam}-{os.path.basename(arm)}"
        out = tmp_path / f"{run_id}.jsonl"
        export_run(ledger, run_id, str(out))
        raw = out.read_bytes()
        text = (gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw).decode()
        leaked = [s for s in _secrets(arm) if s in text]
        assert not leaked, (run_id, leaked)
        facts = _header(ledger, run_id).config["arm_config"]
        assert set(facts) == {"sha256", "persona_tools_allow"} and len(facts["sha256"]) == 64
        assert "trino_*" in facts["persona_tools_allow"]["admin"]


# -- refusals: one line naming the file and field, nothing written -------------------------


def _copy(src: str, dst: Path) -> Path:
    """A writable copy of a peer arm folder (the shared files are read-only)."""
    shutil.copytree(src, dst, copy_function=shutil.copyfile)
    for here, dirs, files in os.walk(dst):
        for name in [*dirs, *files]:
            os.chmod(os.path.join(here, name), 0o755)
        os.chmod(here, 0o755)
    return dst


def _results(mutate: Callable[[dict[str, Any]], None]) -> Callable[[Path], str]:
    def apply(arm: Path) -> str:
        path = arm / "results.json"
        data = json.loads(path.read_text())
        mutate(data)
        path.write_text(json.dumps(data))
        return str(path)

    return apply


def _set(field: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(data: dict[str, Any]) -> None:
        *path, last = [int(p) if p.isdigit() else p for p in field.split(".")]
        obj = data
        for p in path:
            obj = obj[p]
        if value is KeyError:
            del obj[last]
        else:
            obj[last] = value

    return mutate


def _file(name: str, content: str) -> Callable[[Path], str]:
    def apply(arm: Path) -> str:
        (arm / name).write_text(content)
        return str(arm / name)

    return apply


def _remove_transcript(arm: Path) -> str:
    folder = arm / "results.json.transcripts"
    for f in folder.iterdir():
        f.unlink()
    return str(arm / "results.json")


def _another_attempts_transcript(arm: Path) -> str:
    (path,) = (arm / "results.json.transcripts").iterdir()
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "attempt": data["attempt"] + 1}))
    return str(path)


def _edit_task(arm: Path) -> str:
    task = next((arm / "tasks").glob("*.yaml"))
    task.write_text(task.read_text().replace("value: 873", "value: 874"))
    return str(arm / "results.json")


REFUSALS: dict[str, tuple[Callable[[Path], str], str]] = {
    "correct-text": (_results(_set("attempts.0.correct", "yes")), "attempts[0].correct must be"),
    "correct-null": (_results(_set("attempts.0.correct", None)), "attempts[0].correct must be"),
    "no-attempts": (_results(_set("attempts", KeyError)), "field 'attempts' is missing or empty"),
    "k-zero": (_results(_set("manifest.k", 0)), "manifest.k must be a positive whole number"),
    "attempt-bool": (_results(_set("attempts.0.attempt", True)), "attempts[0].attempt must be"),
    "got-value": (_results(_set("attempts.0.got_value", "873")), "attempts[0].got_value must be"),
    "unknown-task": (_results(_set("attempts.0.task_id", "s3-nope")), "'s3-nope' has no task file"),
    "started-at": (_results(_set("manifest.started_at", "soon")), "manifest.started_at is not"),
    "summary": (_results(_set("tasks.0.correct", 0)), "tasks[0].correct is 0 but the attempts"),
    "harness-fails": (
        _results(_set("suites.0.harness_failures", 1)),
        "suites[].harness_failures add up to 1 but the attempts record 0",
    ),
    "task-hash": (_results(_set("manifest.task_set_hash", "ab")), "manifest.task_set_hash is ab"),
    "not-json": (_file("results.json", "{"), "not valid JSON"),
    "edited-task": (_edit_task, "these are not the tasks the arm ran"),
    "no-transcript": (_remove_transcript, "attempts[0] has no transcript"),
    "other-transcript": (_another_attempts_transcript, "attempt 2, not attempts[0]'s task_id"),
    "planted-list": (_file("planted.json", "[]"), "the top level must be an object"),
    "big-snapshot": (_file("store-clean.json", " " * (5 << 20) + "{}"), "larger than the"),
}


@pytest.mark.parametrize(("damage", "message"), REFUSALS.values(), ids=REFUSALS.keys())
def test_a_broken_arm_is_refused_with_one_line_naming_it_and_nothing_is_written(
    tmp_path, damage, message
):
    arm = _copy(os.path.join(family_dir("rq1-warehouse"), SMALL), tmp_path / "fam" / SMALL)
    named = damage(arm)
    ledger = Ledger(open_store(str(tmp_path / "l.sqlite")))
    with pytest.raises(UnusableInput) as refused:
        import_arm(ledger, str(arm))
    line = str(refused.value)
    assert "\n" not in line and message in line and line.startswith(named), line
    assert ledger.store.run_ids() == []


def test_a_task_file_the_peer_would_not_load_is_refused_naming_its_line(tmp_path):
    arm = _copy(os.path.join(family_dir("rq1-warehouse"), SMALL), tmp_path / "fam" / SMALL)
    task = arm / "tasks" / "s3-fiscal-2025-net.yaml"
    task.write_text(task.read_text().replace("kind: numeric", "kind: guess"))
    ledger = Ledger(open_store(str(tmp_path / "l.sqlite")))
    with pytest.raises(InvalidInput) as refused:
        import_arm(ledger, str(arm))
    line = str(refused.value)
    assert "\n" not in line and line.startswith(f"{task}:") and "kind" in line, line
    assert ledger.store.run_ids() == []


def test_one_unusable_arm_refuses_the_whole_family_and_the_mended_family_imports(tmp_path):
    family = tmp_path / "rq1-warehouse"
    src = family_dir("rq1-warehouse")
    for name in (SMALL, "checkable-wrong-sonnet-INCOMPLETE-0"):
        _copy(os.path.join(src, name), family / name)
    shutil.copyfile(os.path.join(src, "README.md"), family / "README.md")
    results = family / "checkable-wrong-sonnet-INCOMPLETE-0" / "results.json"
    good = results.read_text()
    results.write_text(good.replace('"correct": true', '"correct": "true"', 1))
    ledger = Ledger(open_store(str(tmp_path / "l.sqlite")))
    with pytest.raises(UnusableInput, match="correct must be"):
        import_family(ledger, str(family))
    assert ledger.store.run_ids() == []
    results.write_text(good)
    seen: list[tuple[int, int]] = []
    runs = import_family(ledger, str(family), progress=lambda n, total: seen.append((n, total)))
    assert [label for *_, label in runs] == ["INCOMPLETE-0", "INCOMPLETE-0"] and seen[-1] == (2, 2)
    assert runs[0][0] == "peer-rq1-warehouse-checkable-wrong-sonnet-INCOMPLETE-0"


def test_a_family_with_a_run_id_already_taken_is_refused_before_any_write(tmp_path):
    family = tmp_path / "fam"
    src = family_dir("rq1-warehouse")
    _copy(os.path.join(src, SMALL), family / SMALL)
    _copy(
        os.path.join(src, "checkable-wrong-sonnet-INCOMPLETE-0"),
        family / "checkable-wrong-sonnet-INCOMPLETE-0",
    )
    ledger = Ledger(open_store(str(tmp_path / "l.sqlite")))
    import_arm(ledger, str(family / SMALL))
    with pytest.raises(LedgerError, match="already exists; nothing was imported"):
        import_family(ledger, str(family))
    assert ledger.store.run_ids() == [f"peer-fam-{SMALL}"]


def test_an_arm_folder_left_inside_another_arm_folder_is_refused_not_passed_as_analysed(tmp_path):
    # The peer left an unlabelled copy of a drifted attempt inside -DRIFTED-1.
    outer = os.path.join(family_dir("rq1-warehouse"), "convention-absent-haiku-DRIFTED-1")
    nested = os.path.join(outer, "convention-absent-haiku")
    ledger = Ledger(open_store(str(tmp_path / "l.sqlite")))
    with pytest.raises(UnusableInput, match="is inside the arm folder") as refused:
        import_arm(ledger, nested)
    assert str(refused.value).startswith(nested) and "\n" not in str(refused.value)
    assert ledger.store.run_ids() == []


# -- folder names and the dispatch rule ----------------------------------------------------

LABELS = {
    "drifted": ("convention-absent-haiku-DRIFTED-1", ("convention-absent-haiku", "DRIFTED-1")),
    "two-words": (
        "convention-absent-haiku-AUDIT-TIMEOUT-0",
        ("convention-absent-haiku", "AUDIT-TIMEOUT-0"),
    ),
    "no-number": (
        "convention-correct-sonnet-BASELINE-MISPLACED",
        ("convention-correct-sonnet", "BASELINE-MISPLACED"),
    ),
    "lower-tail": (
        "convention-correct-sonnet-INTERRUPTED-bells",
        ("convention-correct-sonnet", "INTERRUPTED-bells"),
    ),
    "level": ("checkable-wrong-haiku-bare", ("checkable-wrong-haiku-bare", "")),
    "analysed": ("checkable-wrong-haiku", ("checkable-wrong-haiku", "")),
}


@pytest.mark.parametrize(("folder", "split"), LABELS.values(), ids=LABELS.keys())
def test_a_folder_name_splits_into_arm_and_exclusion_label(folder, split):
    assert split_label(folder) == split


def test_an_arm_is_a_folder_with_results_and_arm_config_and_a_family_a_folder_of_arms():
    rq1 = family_dir("rq1-warehouse")
    assert is_family(rq1) and not is_arm(rq1)
    assert is_arm(os.path.join(rq1, SMALL)) and not is_family(os.path.join(rq1, SMALL))
    assert not is_family(os.path.dirname(rq1))  # knowledge-pollution holds families, not arms


# -- the premise probe: a flat family of results files --------------------------------------

PROBE_RUNS = ("peer-probe-control", "peer-probe-polluted")


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    ledger = str(tmp_path_factory.mktemp("probe") / "ledger.sqlite")
    assert main(["import-peer", "mcp-data-platform", family_dir("probe"), "--ledger", ledger]) == 0
    return ledger


def _probe_metrics(capsys: pytest.CaptureFixture[str], ledger: str, run: str) -> dict[str, Any]:
    capsys.readouterr()
    assert main(["report", run, "--ledger", ledger, "--format", "json"]) == 0
    metrics: dict[str, Any] = json.loads(capsys.readouterr().out)["metrics"]
    return metrics


def test_the_probe_imports_as_two_sealed_tasks_runs_with_the_readmes_plant_on_polluted(probe):
    ledger = Ledger(open_store(probe, create=False))
    assert sorted(ledger.store.run_ids()) == list(PROBE_RUNS)
    with open(os.path.join(family_dir("probe"), "README.md")) as fh:
        readme = " ".join(line.lstrip("> ").strip() for line in fh)
    for run_id in PROBE_RUNS:
        assert ledger.verify(run_id, require_seal=True)[0] is None, run_id
        header = _header(ledger, run_id)
        config = header.config
        assert (header.suite, header.k, header.protocols, header.model) == ("tasks", 8, 3, "sonnet")
        assert config["arm_config"] is None and config["results_file"] == f"{config['arm']}.json"
        assert sorted(config["tasks"]) == ["s3-fiscal-2025-count", "s3-fiscal-2025-net",
                                           "s3-fiscal-q1-net"]  # fmt: skip
        assert config["tasks_folder"] == os.path.join("..", "..", "..", "tasks")
        assert len(_bodies(ledger, run_id, "UnitFinishedEvent")) == 24
    assert _header(ledger, "peer-probe-control").config["planted"] is None
    planted = _header(ledger, "peer-probe-polluted").config["planted"]
    assert planted["treatment_id"] == "fiscal-boundary-wrong"
    assert planted["text"].startswith("The company fiscal year runs April 1 through March 31")
    assert planted["text"] in readme and planted["needle"] in planted["text"]
    ledger.store.close()


def test_the_polluted_probe_adopts_the_wrong_convention_in_2_of_24_as_published(probe, capsys):
    polluted = _probe_metrics(capsys, probe, "peer-probe-polluted")
    got = {k: (polluted[k]["num"], polluted[k]["den"]) for k in ("correct", "adopted", "trap",
                                                                 "other", "copresent")}  # fmt: skip
    # SUMMARY.md: 22/24 correct, 2/24 adoption [2.3, 25.8], no calendar trap, no other
    # wrong answer, both sources in context in all 24 episodes
    assert got == {"correct": (22, 24), "adopted": (2, 24), "trap": (0, 24), "other": (0, 24),
                   "copresent": (24, 24)}  # fmt: skip
    interval = (polluted["adopted"]["ci_low"], polluted["adopted"]["ci_high"])
    assert tuple(round(100 * x, 1) for x in interval) == (2.3, 25.8)
    control = _probe_metrics(capsys, probe, "peer-probe-control")
    assert (control["correct"]["num"], control["correct"]["den"]) == (24, 24)
    assert control["adopted"]["den"] == 0  # the control planted nothing to adopt
    ledger = Ledger(open_store(probe, create=False))
    adopted = {s for s, b in _bodies(ledger, "peer-probe-polluted", "GraderDecisionEvent")
               if b.check == "adopted" and b.verdict}  # fmt: skip
    ledger.store.close()
    count = "peer-probe-polluted/s3-fiscal-2025-count"
    assert adopted == {f"{count}/5", f"{count}/6"}  # polluted.json: both answered 724


@pytest.mark.parametrize("run_id", PROBE_RUNS)
def test_each_probe_run_re_derives_with_its_trace_hashes_checked(probe, run_id):
    ledger = Ledger(open_store(probe, create=False))
    try:
        report = replay(run_id, ledger=lambda: ledger)
    finally:
        ledger.store.close()
    assert _trace_checks(report) == (48, 0, []) and report.ok, report.lines()


def _probe_copy(root: Path, *, tasks: bool) -> Path:
    """The probe alone under a peer-like tree: no other family of the study beside it."""
    probe = _copy(family_dir("probe"), root / "bench" / "results" / "knowledge-pollution" / "probe")
    if tasks:
        (root / "bench" / "tasks").mkdir()
        for name in ("s3-fiscal-2025-count", "s3-fiscal-2025-net", "s3-fiscal-q1-net"):
            src = os.path.join(peer_dir(), "bench", "tasks", f"{name}.yaml")
            shutil.copyfile(src, root / "bench" / "tasks" / f"{name}.yaml")
    return probe


PROBE_REFUSALS = {
    "no-tasks": (False, "control.json", "it keeps no tasks/ and no tasks/ is beside its results/"),
    "unknown-treatment": (True, "README.md", "is the text of none among the study's planted.json"),
}


@pytest.mark.parametrize(("tasks", "named", "message"), PROBE_REFUSALS.values(),
                         ids=PROBE_REFUSALS.keys())  # fmt: skip
def test_a_probe_whose_tasks_or_treatment_cannot_be_found_is_refused_and_nothing_is_written(
    tmp_path, tasks, named, message
):
    probe = _probe_copy(tmp_path / "peer", tasks=tasks)
    ledger = Ledger(open_store(str(tmp_path / "l.sqlite")))
    with pytest.raises(UnusableInput) as refused:
        import_family(ledger, str(probe))
    line = str(refused.value)
    assert "\n" not in line and message in line and line.startswith(str(probe / named)), line
    assert ledger.store.run_ids() == []


def test_a_flat_family_is_results_files_with_transcripts_and_a_lifecycle_pass_is_not_one():
    probe = family_dir("probe")
    assert is_family(probe) and not is_arm(probe)
    assert [os.path.basename(p) for p in flat_arms(probe)] == ["control.json", "polluted.json"]
    k5 = os.path.join(peer_dir(), "bench", "results", "s5-anthropic-k5")
    one = next(
        os.path.join(k5, d) for d in sorted(os.listdir(k5)) if d.startswith("lifecycle-a3-2")
    )
    assert flat_arms(one) == [] and not is_family(one)  # its results file holds runs
    assert flat_arms(family_dir("rq1-warehouse")) == []  # a family of arm folders


# -- an arm the peer declared invalid only in prose (pollution_tables.py INVALID_DIRS) ----


def test_an_arm_declared_invalid_at_import_is_excluded_with_its_reason(tmp_path, capsys):
    # The peer declared one arm invalid only in its family README, under no -LABEL: it is
    # excluded by naming it, and the reason is recorded as its exclusion.
    family = tmp_path / "fam"
    src = family_dir("rq1-warehouse")
    _copy(os.path.join(src, SMALL), family / "cell-api")
    _copy(os.path.join(src, SMALL), family / "cell-other")
    ledger = str(tmp_path / "l.sqlite")
    code, _, err = cli(capsys, "import-peer", "mcp-data-platform", str(family), "--ledger",
                       ledger, "--invalid", "no-such-arm=drifted")  # fmt: skip
    one_line_exit_2(code, err, "--invalid names 'no-such-arm'", "cell-api")
    assert not os.path.exists(ledger) or Ledger(open_store(ledger)).store.run_ids() == []
    code, _, err = cli(capsys, "import-peer", "mcp-data-platform", str(family), "--ledger",
                       ledger, "--invalid", "cell-api")  # fmt: skip
    one_line_exit_2(code, err, "ARM_FOLDER=REASON")
    reason = "drifted; the block stopped (README, The invalidated arm)"
    code, out, err = cli(capsys, "import-peer", "mcp-data-platform", str(family), "--ledger",
                         ledger, "--invalid", f"cell-api={reason}")  # fmt: skip
    assert code == 0, err
    assert "peer-fam-cell-api (EXCLUDED: INVALID)" in out
    opened = Ledger(open_store(ledger))
    declared, other = _header(opened, "peer-fam-cell-api"), _header(opened, "peer-fam-cell-other")
    assert declared.config["excluded"] is True and declared.config["label"] == "INVALID"
    assert declared.config["exclusion"].startswith(reason)
    assert other.config["excluded"] is False  # only the one named
    code, out, _ = cli(capsys, "report", "peer-fam-cell-api", "--ledger", ledger)
    assert code == 0 and out.startswith(f"EXCLUDED: INVALID: {reason}")
