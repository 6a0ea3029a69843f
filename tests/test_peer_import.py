"""Importing the peer's real k=5 run and reproducing every published rate from events."""

from __future__ import annotations

import copy
import json
import os

import msgspec
import pytest

from benchledger import protocols
from benchledger.cli import main
from benchledger.harness import settings
from benchledger.harness.peer.importer import import_peer
from benchledger.harness.peer.layout import find_transcripts
from benchledger.ledger import Ledger, LedgerError, UnusableInput, open_store
from benchledger.ledger.bundle import export_run
from benchledger.ledger.events import RunStartedBody
from benchledger.ledger.verified import open_run
from benchledger.projections.fold import fold
from benchledger.projections.source import from_bundle, from_ledger
from benchledger.projections.suites.lifecycle.items import items
from benchledger.projections.suites.lifecycle.scorecard import LifecycleFold, by_protocol, scorecard
from benchledger.protocols.hashing import benchledger_hash, peer_hash
from benchledger.replay.levels import replay
from benchledger.replay.rederive import NOT_RECORDED
from tests.conftest import _PEER_CANDIDATES, peer_dir
from tests.older_peer_set import write_v1102_set
from tests.sample import counter_clock
from tests.test_replay import rechain

K5 = "s5-anthropic-k5"


def k5_paths() -> tuple[str, list[str]]:
    base = os.path.join(peer_dir(), "bench", "results", K5)
    with open(os.path.join(base, "passes.txt")) as fh:
        passes = [line.strip().split("/")[-2] for line in fh if line.strip()]
    dirs = [os.path.join(base, p, "lifecycle-a3.json.transcripts") for p in passes]
    return os.path.join(base, "lifecycle-a3-k5.json"), dirs


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    path, dirs = k5_paths()
    ledger_path = str(tmp_path_factory.mktemp("peer") / "ledger.sqlite")
    ledger = Ledger(open_store(ledger_path))
    run_id, root, shape = import_peer(ledger, path, transcripts=dirs)
    with open(path) as fh:
        published = json.load(fh)
    yield ledger, ledger_path, run_id, root, shape, published
    ledger.store.close()


def _card(ledger, run_id):
    return scorecard([fold(LifecycleFold(), from_ledger(ledger, run_id).events)])


def _published_rates(metrics: dict) -> dict[str, tuple[float, int]]:
    out = {}
    for key, value in metrics.items():
        if isinstance(value, dict) and "num" in value and "den" in value:
            out[key] = (value["num"], value["den"])
    split = metrics.get("capture_split", {})
    out["capture_attempt_rate"] = (split["attempt_rate"]["num"], split["attempt_rate"]["den"])
    out["capture_given_attempted"] = (
        split["given_attempted"]["num"],
        split["given_attempted"]["den"],
    )
    return out


def test_projections_reproduce_every_published_rate_of_the_peer_k5_run(imported):
    ledger, _, run_id, _, shape, published = imported
    card = _card(ledger, run_id)
    assert shape == "current"
    rates = _published_rates(published["metrics"])
    assert len(rates) == 14
    for name, (num, den) in rates.items():
        ours = card.metrics[name]  # the same names as the peer's metrics block
        assert (ours.num, ours.den) == (num, den), name
        print(f"{name}: {num}/{den} reproduced")
    m = published["metrics"]
    assert card.harness_failures == m["harness_failures"] == 1
    assert sum(u.graded for u in card.units) == m["attempts"] == 149
    assert card.tokens == {
        "input": m["total_input_tokens"],
        "output": m["total_output_tokens"],
        "cache_read": m["total_cache_read_tokens"],
        "cache_creation": m["total_cache_creation_tokens"],
    }
    misses = m["capture_split"]["misses"]
    assert card.metrics["capture_budget_starved"].den == misses["total"] == 12


def test_every_metric_carries_the_decisions_behind_it(imported):
    ledger, _, run_id, *_ = imported
    card = _card(ledger, run_id)
    events = {(e.stream, e.seq): e for e, _ in from_ledger(ledger, run_id).events}
    capture = card.metrics["capture_rate"]
    assert len(capture.den_refs) == 149 and len(capture.num_refs) == 137
    for ref in capture.num_refs:
        body = events[ref].body
        assert (
            body.check == "captured" and body.verdict is True and body.origin == "mcp-data-platform"
        )


def test_the_imported_run_verifies_and_reimporting_gives_the_same_root(imported, tmp_path):
    ledger, _, run_id, root, *_ = imported
    failure, summary = ledger.verify(run_id, require_seal=True)
    assert failure is None and summary.sealed_root == root
    path, dirs = k5_paths()
    again = Ledger(open_store(str(tmp_path / "again.sqlite")))
    assert import_peer(again, path, transcripts=dirs)[1] == root


def test_transcripts_become_session_calls_with_tool_results(imported):
    ledger, _, run_id, *_ = imported
    calls = [
        e for e, _ in from_ledger(ledger, run_id).events if type(e).__name__ == "SessionCallEvent"
    ]
    assert len(calls) > 2000
    assert any(c.body.tool == "memory_capture" and '"id"' in c.body.result for c in calls)


def test_report_on_the_imported_run_shows_the_published_numbers(imported, capsys):
    _, ledger_path, run_id, root, *_ = imported
    assert main(["report", run_id, "--ledger", ledger_path]) == 0
    out = capsys.readouterr().out
    for needle in (
        root,
        "daeac8a49319",
        "claude-sonnet-5",
        "mcp-data-platform v1.118.0",
        "137/149",
        "142/149",
        "94/95",
        "9/41",
        "19/30",
        "peer-compatible",
    ):
        assert needle in out, needle


def test_the_imported_run_re_derives_with_every_trace_hash_recorded_and_equal(imported):
    ledger, _, run_id, *_ = imported
    events = [type(e).__name__ for e, _ in ledger.events(run_id)]
    finished = events.count("EpisodeFinishedEvent") + events.count("UnitFinishedEvent")
    report = replay(run_id, ledger=lambda: ledger)
    assert report.compared["trace hashes"] == finished > 700
    assert report.skipped[NOT_RECORDED] == 0
    assert report.ok, report.lines()


def test_one_tool_result_edited_in_an_exported_run_is_caught_by_its_trace_hashes(tmp_path):
    base = os.path.join(peer_dir(), "bench", "results", K5)
    one = sorted(d for d in os.listdir(base) if d.startswith("lifecycle-a3-2"))[0]
    ledger = Ledger(open_store(str(tmp_path / "l.sqlite")))
    run_id, *_ = import_peer(ledger, os.path.join(base, one, "lifecycle-a3.json"))
    bundle, tampered = str(tmp_path / "run.jsonl"), str(tmp_path / "tampered.jsonl")
    export_run(ledger, run_id, bundle)
    victim = next(
        e for e, _ in ledger.events(run_id)
        if type(e).__name__ == "SessionCallEvent" and e.body.episode == "recall"
    )  # fmt: skip

    def edit(e):
        if (e.stream, e.seq) != (victim.stream, victim.seq):
            return e
        return msgspec.structs.replace(e, body=msgspec.structs.replace(e.body, result="edited"))

    rechain(bundle, tampered, edit)
    open_run(tampered, require_seal=False, allow_partial=False)  # links recomputed: it verifies
    report = replay(tampered, level="rederive")
    found = {(m.stream, m.what) for m in report.mismatches if m.field == "trace_hash"}
    assert found == {(victim.stream, "episode recall"), (victim.stream, "unit")}


def test_a_single_pass_imports_with_its_transcripts_found_beside_it(tmp_path, capsys):
    base = os.path.join(peer_dir(), "bench", "results", K5)
    one = sorted(d for d in os.listdir(base) if d.startswith("lifecycle-a3-2"))[0]
    results = os.path.join(base, one, "lifecycle-a3.json")
    ledger = str(tmp_path / "l.sqlite")
    assert (
        main(["import-peer", "mcp-data-platform", results, "--ledger", ledger, "--run-id", "pass1"])
        == 0
    )
    capsys.readouterr()
    assert main(["report", "pass1", "--ledger", ledger, "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    with open(results) as fh:
        published = json.load(fh)["metrics"]
    assert [report["metrics"]["capture_rate"]["num"], report["metrics"]["capture_rate"]["den"]] == [
        published["capture_rate"]["num"],
        published["capture_rate"]["den"],
    ]
    streams = Ledger(open_store(ledger)).events("pass1")
    assert any(type(e).__name__ == "SessionCallEvent" for e, _ in streams)


def test_the_older_v1102_shape_is_accepted(tmp_path):
    base = os.path.join(peer_dir(), "bench", "results", K5)
    one = sorted(d for d in os.listdir(base) if d.startswith("lifecycle-a3-2"))[0]
    with open(os.path.join(base, one, "lifecycle-a3.json")) as fh:
        data = json.load(fh)
    old = copy.deepcopy(data)
    old["metrics"] = {
        k: {"num": v["num"], "den": v["den"], "rate": v["rate"]}
        for k, v in data["metrics"].items()
        if isinstance(v, dict) and "num" in v
    }
    for run in old["runs"]:
        for ep in run["episodes"]:
            ep.pop("cache_read_tokens", None)
            ep.pop("cache_creation_tokens", None)
    path = tmp_path / "v1102.json"
    path.write_text(json.dumps(old))
    ledger = Ledger(open_store(str(tmp_path / "l.sqlite")))
    run_id, _, shape = import_peer(ledger, str(path))
    assert shape == "v1.102"
    card = _card(ledger, run_id)
    assert (card.metrics["capture_rate"].num, card.metrics["capture_rate"].den) == (
        data["metrics"]["capture_rate"]["num"],
        data["metrics"]["capture_rate"]["den"],
    )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"foo": 1}', "field 'manifest' is missing"),
        ('{"manifest": {}, "runs": []}', "field 'runs' is missing, empty"),
        ('{"manifest": {}, "runs": [{"protocol_id": "x"}]}', "runs[0] needs a protocol_id"),
        ("[1, 2]", "the top level must be an object"),
        ("{not json", "not valid JSON"),
    ],
    ids=["no-manifest", "no-runs", "bad-run", "list", "broken"],
)
def test_anything_else_is_refused_with_one_line_and_exit_2(tmp_path, capsys, content, message):
    path = tmp_path / "r.json"
    path.write_text(content)
    ledger = str(tmp_path / "l.sqlite")
    assert main(["import-peer", "mcp-data-platform", str(path), "--ledger", ledger]) == 2
    err = capsys.readouterr().err.strip().split("\n")
    assert len(err) == 1 and message in err[0] and str(path) in err[0]


def test_projections_from_a_bundle_equal_those_from_the_ledger(imported, tmp_path):
    ledger, ledger_path, run_id, *_ = imported
    out = str(tmp_path / "run.jsonl.gz")
    assert main(["export", run_id, "-o", out, "--ledger", ledger_path]) == 0
    a = _card(ledger, run_id).metrics
    b = scorecard([fold(LifecycleFold(), from_bundle(out).events)]).metrics
    assert {k: (v.num, v.den, v.num_refs) for k, v in a.items()} == {
        k: (v.num, v.den, v.num_refs) for k, v in b.items()
    }


# -- every published results file, in every shape ----------------------------------------
# Each results file under the shared peers folder is imported and its published metrics
# block re-derived from the events: every num/den, the capture split and its misses, the
# protocol, attempt and harness-failure counts, the token totals. (The peer's ci_low and
# ci_high come from its own bootstrap and are not re-derived.) The same file is also
# imported as it would have been written before update_captured existed, and in the older
# v1.102 shape; both must re-derive what the peer published.


def _peers_root() -> str | None:
    named = settings.load().peer_data
    for candidate in (named, *_PEER_CANDIDATES) if named else _PEER_CANDIDATES:
        if candidate and os.path.isdir(candidate):
            return os.path.dirname(os.path.abspath(candidate))
    return None


def results_files() -> list[str]:
    """Every peer results file (a JSON object with manifest and runs) under the peers folder."""
    root = _peers_root()
    found = []
    for folder, dirs, files in os.walk(root or "/nonexistent"):
        dirs[:] = sorted(d for d in dirs if not d.endswith(".transcripts"))
        for name in sorted(files):
            if not name.endswith(".json"):
                continue
            path = os.path.join(folder, name)
            try:
                with open(path) as fh:
                    data = json.load(fh)
            except (OSError, ValueError):
                continue
            if isinstance(data, dict) and {"manifest", "runs"} <= set(data):
                found.append(path)
    return found


def _file_id(path: str) -> str:
    base = os.path.join(_peers_root() or "", "mcp-data-platform", "bench", "results")
    return os.path.relpath(path, base if path.startswith(base) else (_peers_root() or "/"))


RESULTS = results_files()
SHAPES = ("as-published", "without-update_captured", "v1.102")


def _variant(data: dict, shape: str) -> dict:
    """The published file as the peer wrote it in an older shape."""
    out = copy.deepcopy(data)
    if shape == "as-published":
        return out
    for run in out["runs"]:
        run.pop("update_captured", None)
    if shape == "v1.102":  # no intervals, cache tokens or capture split
        for run in out["runs"]:
            run.pop("capture_attempted", None)
            run.pop("teach_budget_exhausted", None)
            for ep in run["episodes"]:
                ep.pop("cache_read_tokens", None)
                ep.pop("cache_creation_tokens", None)
        out["metrics"] = {
            k: ({"num": v["num"], "den": v["den"], "rate": v["rate"]} if isinstance(v, dict) else v)
            for k, v in data["metrics"].items()
            if k not in ("capture_split", "capture_budget_starved")
            and not k.startswith("total_cache_")
        }
    return out


def published_block(metrics: dict) -> dict[str, object]:
    """The figures of a published metrics block that events can re-derive."""
    out: dict[str, object] = {}
    for key, value in metrics.items():
        if isinstance(value, dict) and "num" in value and "den" in value:
            out[key] = (value["num"], value["den"])
        elif isinstance(value, int) and not isinstance(value, bool):
            out[key] = value
    split = metrics.get("capture_split")
    if split:
        out["capture_attempt_rate"] = (split["attempt_rate"]["num"], split["attempt_rate"]["den"])
        out["capture_given_attempted"] = (
            split["given_attempted"]["num"],
            split["given_attempted"]["den"],
        )
        for key, value in split["misses"].items():
            out[f"misses.{key}"] = value
    return out


def derived_block(card) -> dict[str, object]:
    """The same figures computed from the imported run's events."""
    out: dict[str, object] = {k: (m.num, m.den) for k, m in card.metrics.items()}
    graded = [u for u in card.units if u.graded]
    misses = [u for u in graded if u.verdict("captured") is False]
    attempted, budget = "capture_attempted", "teach_budget_exhausted"
    out |= {
        "protocols": len(by_protocol(card.units)),
        "attempts": len(graded),
        "harness_failures": card.harness_failures,
        "total_input_tokens": card.tokens.get("input", 0),
        "total_output_tokens": card.tokens.get("output", 0),
        "total_cache_read_tokens": card.tokens.get("cache_read", 0),
        "total_cache_creation_tokens": card.tokens.get("cache_creation", 0),
        "misses.total": len(misses),
        "misses.attempted_failed": sum(u.verdict(attempted) is True for u in misses),
        "misses.budget_starved": sum(
            u.verdict(attempted) is False and u.verdict(budget) is True for u in misses
        ),
        "misses.never_attempted": sum(
            u.verdict(attempted) is False and u.verdict(budget) is False for u in misses
        ),
        "misses.budget_unobservable": sum(
            u.verdict(attempted) is False and u.verdict(budget) is None for u in misses
        ),
    }
    return out


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize(
    "results",
    RESULTS or [pytest.param(None, marks=pytest.mark.skip(reason="no peer data on this machine"))],
    ids=[_file_id(p) for p in RESULTS] or ["no-peer-data"],
)
def test_every_published_results_file_re_derives_its_metrics_block_exactly(
    tmp_path, results, shape
):
    with open(results) as fh:
        data = _variant(json.load(fh), shape)
    path = tmp_path / os.path.basename(results)
    path.write_text(json.dumps(data))
    ledger = Ledger(open_store(str(tmp_path / "l.sqlite")))
    run_id, _, got_shape = import_peer(ledger, str(path), transcripts=[])
    assert got_shape.startswith("v1.102" if shape == "v1.102" else "current")
    assert ("update_captured derived" in got_shape) == (shape != "as-published")
    published = published_block(data["metrics"])
    derived = derived_block(_card(ledger, run_id))
    differing = {k: (derived[k], v) for k, v in published.items() if derived.get(k) != v}
    print(f"{_file_id(results)} ({shape}): {len(published)} published figures re-derived")
    assert differing == {}
    for name in ("update_capture_rate", "update_correctness", "duplicate_rate", "pass_k"):
        assert name in published
    assert len(published) == (16 if shape == "v1.102" else 26)


def test_the_peer_files_hold_the_five_passes_and_their_merge():
    names = sorted(_file_id(p) for p in RESULTS)
    if not names:
        pytest.skip("no peer data on this machine")
    assert len(names) == 6 and f"{K5}/lifecycle-a3-k5.json" in names


def test_a_file_without_update_captured_records_derived_decisions_with_their_reason(tmp_path):
    path, _ = k5_paths()
    with open(path) as fh:
        data = _variant(json.load(fh), "without-update_captured")
    out = tmp_path / "old.json"
    out.write_text(json.dumps(data))
    ledger = Ledger(open_store(str(tmp_path / "l.sqlite")))
    run_id, _, _ = import_peer(ledger, str(out), transcripts=[])
    decisions = [
        e.body for e, _ in ledger.events(run_id) if type(e).__name__ == "GraderDecisionEvent"
    ]
    derived = [d for d in decisions if d.check == "update_captured"]
    assert sorted(d.verdict for d in derived) == [False] + [True] * 41
    assert all(d.reason.startswith("derived (the file predates update_captured)") for d in derived)


# -- a merged run's transcripts through passes.txt ---------------------------------------------


def test_a_merged_run_finds_its_per_pass_transcripts_from_passes_txt(imported, tmp_path, capsys):
    path, dirs = k5_paths()
    assert find_transcripts(path) == dirs
    ledger = str(tmp_path / "l.sqlite")
    assert main(["import-peer", "mcp-data-platform", path, "--ledger", ledger]) == 0
    out = capsys.readouterr().out
    assert out.count(".json.transcripts") == 5
    root = imported[3]  # imported with the five folders named explicitly
    assert f"root {root}" in out


def test_a_single_pass_file_does_not_borrow_the_merged_runs_passes_txt(tmp_path):
    path, _ = k5_paths()
    with open(path) as fh:
        data = json.load(fh)
    data["runs"] = [r for r in data["runs"] if r["attempt"] == 1]
    one = tmp_path / "one.json"
    one.write_text(json.dumps(data))
    (tmp_path / "passes.txt").write_text("nowhere/lifecycle-a3.json\n")
    assert find_transcripts(str(one)) == []


def test_a_passes_txt_line_naming_no_pass_is_refused_naming_the_line(tmp_path, capsys):
    path, _ = k5_paths()
    merged = tmp_path / "merged.json"
    with open(path) as fh:
        merged.write_text(fh.read())
    (tmp_path / "passes.txt").write_text("\nbench/results/x/missing-pass/lifecycle-a3.json\n")
    ledger = str(tmp_path / "l.sqlite")
    assert main(["import-peer", "mcp-data-platform", str(merged), "--ledger", ledger]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "passes.txt:2" in err[0] and "missing-pass" in err[0]
    assert _holds_nothing(ledger)


def test_fewer_transcript_folders_than_passes_are_refused(tmp_path):
    path, dirs = k5_paths()
    ledger = Ledger(open_store(str(tmp_path / "l.sqlite")))
    with pytest.raises(UnusableInput, match="have 5 passes but 2 transcript folders"):
        import_peer(ledger, path, transcripts=dirs[:2])


@pytest.mark.parametrize(
    ("pick", "message"),
    [
        (lambda d: d[:1], "the results have 5 passes but 1 transcript folder was given"),
        (lambda d: d[1:], "the results have 5 passes but 4 transcript folders were given"),
        (lambda d: d + d[:1], "the results have 5 passes but 6 transcript folders were given"),
        (lambda d: d[:4] + d[:1], "are both named for pass 1"),
    ],
    ids=["one-folder", "four-folders", "six-folders", "pass-1-twice"],
)
def test_import_peer_refuses_transcript_folders_that_do_not_match_the_passes_one_to_one(
    tmp_path, capsys, pick, message
):
    path, dirs = k5_paths()
    ledger = str(tmp_path / "l.sqlite")
    argv = ["import-peer", "mcp-data-platform", path, "--ledger", ledger]
    for folder in pick(dirs):
        argv += ["--transcripts", folder]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and path in err[0] and message in err[0], err
    assert not os.path.exists(ledger)  # nothing written, not even an empty ledger


@pytest.mark.parametrize("order", [(1, 2, 3, 4, 5), (4, 1, 5, 3, 2)], ids=["in-order", "shuffled"])
def test_the_peers_pass_folders_match_their_passes_through_passes_txt_in_any_order(
    imported, tmp_path, order
):
    path, dirs = k5_paths()
    ledger = Ledger(open_store(str(tmp_path / "l.sqlite")))
    given = [dirs[n - 1] for n in order]
    assert import_peer(ledger, path, transcripts=given)[1] == imported[3]  # same evidence


def test_transcript_folders_named_for_their_pass_are_matched_by_name_in_any_order(
    imported, tmp_path, capsys
):
    path, dirs = k5_paths()
    results = tmp_path / "lifecycle-a3-k5.json"  # no passes.txt here: only the names tell
    results.symlink_to(path)
    names = ["pass-1", "pass2", "k5_pass_3", "PASS4", os.path.join("pass-5", "run.transcripts")]
    links = []
    for name, target in zip(names, dirs, strict=True):
        link = tmp_path / "folders" / name
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(target, target_is_directory=True)
        links.append(str(link))
    ledger = str(tmp_path / "l.sqlite")
    argv = ["import-peer", "mcp-data-platform", str(results), "--ledger", ledger]
    # the set the fixture's import found beside the peer's results (its folder is recorded)
    argv += ["--protocols", os.path.join(peer_dir(), "bench", "protocols")]
    for n in (5, 3, 1, 4, 2):
        argv += ["--transcripts", links[n - 1]]
    assert main(argv) == 0
    assert f"root {imported[3]}" in capsys.readouterr().out  # each pass got its own transcripts


def test_the_k5_reports_intervals_are_clustered_by_protocol(imported, capsys):
    _, ledger_path, run_id, *_ = imported
    assert main(["report", run_id, "--ledger", ledger_path, "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    capture = report["metrics"]["capture_rate"]
    assert report["intervals"]["method"] == "protocol-cluster bootstrap"
    assert capture["ci_method"] == "protocol-cluster bootstrap"
    # Wilson over 149 attempts would say [0.865, 0.953]: misses concentrate on two protocols.
    assert (capture["ci_low"], capture["ci_high"]) == pytest.approx((0.820, 0.993), abs=1e-3)
    methods = {m["ci_method"] for m in report["metrics"].values() if m["den"]}
    assert methods <= {"protocol-cluster bootstrap", "wilson over protocols"}
    assert (
        main(["report", run_id, "--ledger", ledger_path, "--ci", "wilson", "--format", "json"]) == 0
    )
    wilson = json.loads(capsys.readouterr().out)["metrics"]["capture_rate"]
    assert (wilson["ci_low"], wilson["ci_high"]) == pytest.approx((0.8645, 0.9533), abs=1e-4)


# -- refusals write nothing -----------------------------------------------------------
# A small synthetic peer file: two units, so a bad second record shows whether the first
# was already written.


def _record(pid: str, attempt: int = 1) -> dict:
    return {
        "protocol_id": pid,
        "attempt": attempt,
        "capture_attempted": True,
        "teach_budget_exhausted": False,
        "captured": True,
        "recall_correct": True,
        "recall_surfaced": None,  # null: not recorded, so no decision
        "episodes": [
            {"stage": "teach", "identity": "teacher", "email": "t@x", "final_answer": "saved"},
            {
                "stage": "recall",
                "identity": "learner",
                "email": "l@x",
                "final_answer": "FINAL ANSWER: 1",
                "tool_calls": 1,
                "search_called": True,
                "input_tokens": 12,
            },
        ],
    }


def _peer_data() -> dict:
    manifest = {"started_at": "2026-08-01T18:58:03Z", "k": 1, "model": "m", "llm_provider": "p"}
    return {"manifest": manifest, "runs": [_record("lc-a"), _record("lc-b")]}


def _write_peer(path, data: dict) -> str:
    path.write_text(json.dumps(data))
    return str(path)


def _holds_nothing(ledger_path: str) -> bool:
    with open_store(ledger_path) as store:
        return store.run_ids() == [] and list(store.scan(None)) == []


def _set(where: str, value):
    """A mutation of the synthetic file: ``where`` is "manifest.k" or "runs.1.captured"."""

    def apply(data: dict) -> None:
        *parents, key = where.split(".")
        node = data
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        node[key if isinstance(node, dict) else int(key)] = value

    return apply


REFUSALS = {
    "duplicate-record": (_set("runs.1.protocol_id", "lc-a"), "two run records for lc-a attempt 1"),
    "verdict-no": (
        _set("runs.1.captured", "no"),
        'runs[1].captured must be true, false or null, not "no"',
    ),
    "verdict-1": (_set("runs.1.recall_correct", 1), "runs[1].recall_correct must be true, false"),
    "verdict-text-true": (
        _set("runs.1.teach_budget_exhausted", "true"),
        "runs[1].teach_budget_exhausted must be true, false",
    ),
    "verdict-0": (_set("runs.1.capture_attempted", 0), "runs[1].capture_attempted must be true"),
    "episode-flag": (
        _set("runs.1.episodes.1.search_called", "yes"),
        "runs[1].episodes[1].search_called must be true, false or null",
    ),
    "episode-count": (
        _set("runs.1.episodes.1.input_tokens", "12"),
        "runs[1].episodes[1].input_tokens must be a whole number",
    ),
    "k-negative": (_set("manifest.k", -3), "manifest.k must be a positive whole number, not -3"),
    "k-zero": (_set("manifest.k", 0), "manifest.k must be a positive whole number, not 0"),
    "k-text": (_set("manifest.k", "5"), "manifest.k must be a positive whole number"),
    "k-below-attempts": (
        _set("runs.1.attempt", 2),
        "manifest.k is 1 but a run record has attempt 2",
    ),
    "attempt-zero": (_set("runs.1.attempt", 0), "runs[1].attempt must be a positive whole number"),
    "attempt-negative": (_set("runs.1.attempt", -1), "runs[1].attempt must be a positive whole"),
    "attempt-bool": (_set("runs.1.attempt", True), "runs[1].attempt must be a positive whole"),
    "started-at": (_set("manifest.started_at", "yesterday"), "manifest.started_at is not an ISO"),
}


@pytest.mark.parametrize(("mutate", "message"), REFUSALS.values(), ids=REFUSALS.keys())
def test_a_refused_import_writes_nothing_and_the_fixed_file_then_imports(
    tmp_path, capsys, mutate, message
):
    data = _peer_data()
    mutate(data)
    results = _write_peer(tmp_path / "peer.json", data)
    ledger = str(tmp_path / "l.sqlite")
    assert main(["import-peer", "mcp-data-platform", results, "--ledger", ledger]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0] and results in err[0], err
    assert _holds_nothing(ledger)
    _write_peer(tmp_path / "peer.json", _peer_data())
    assert main(["import-peer", "mcp-data-platform", results, "--ledger", ledger]) == 0
    with open_store(ledger) as store:
        assert store.run_ids() == ["peer-peer"]


def test_a_damaged_transcript_is_refused_naming_it_before_anything_is_written(tmp_path, capsys):
    results = _write_peer(tmp_path / "peer.json", _peer_data())
    folder = tmp_path / "peer.json.transcripts"  # found beside the results file
    folder.mkdir()
    turns = [
        {"role": "user", "text": "How many?"},
        {"role": "assistant", "tool_calls": [{"id": "c1", "name": "search", "args": ["x"]}]},
    ]
    bad = folder / "lc-b-recall-l@x.json"
    bad.write_text(json.dumps({"transcript": turns}))
    ledger = str(tmp_path / "l.sqlite")
    assert main(["import-peer", "mcp-data-platform", results, "--ledger", ledger]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(bad) in err[0]
    assert "transcript[1].tool_calls[0].args must be an object or null" in err[0]
    assert _holds_nothing(ledger)
    turns[1]["tool_calls"][0]["args"] = {"intent": "x"}
    bad.write_text(json.dumps({"transcript": turns}))
    assert main(["import-peer", "mcp-data-platform", results, "--ledger", ledger]) == 0


def test_an_existing_run_id_is_refused_without_writing_and_the_first_run_stays_intact(tmp_path):
    results = _write_peer(tmp_path / "peer.json", _peer_data())
    ledger = Ledger(open_store(str(tmp_path / "l.sqlite")))
    _, root, _ = import_peer(ledger, results)
    events = len(list(ledger.store.scan(None)))
    with pytest.raises(LedgerError, match="already exists"):
        import_peer(ledger, results)
    assert len(list(ledger.store.scan(None))) == events
    assert ledger.verify("peer-peer", require_seal=True)[1].sealed_root == root


def test_null_verdicts_are_accepted_as_not_recorded_and_booleans_become_decisions(tmp_path):
    results = _write_peer(tmp_path / "peer.json", _peer_data())
    ledger = Ledger(open_store(str(tmp_path / "l.sqlite")))
    run_id, _, _ = import_peer(ledger, results)
    decisions = [
        e.body for e, _ in ledger.events(run_id) if type(e).__name__ == "GraderDecisionEvent"
    ]
    assert {(d.check, d.verdict) for d in decisions} == {
        ("capture_attempted", True),
        ("teach_budget_exhausted", False),
        ("captured", True),
        ("recall_correct", True),
    }


def test_import_peer_gives_the_callers_ledger_its_own_clock_back_also_on_error(tmp_path):
    results = _write_peer(tmp_path / "peer.json", _peer_data())
    mine = counter_clock(start=5, step=1)
    ledger = Ledger(open_store(str(tmp_path / "l.sqlite")), clock=mine)
    run_id, _, _ = import_peer(ledger, results)
    assert ledger.clock is mine
    # The import's own timestamps came from the manifest's start time, not from ours.
    first, _ = next(iter(ledger.events(run_id)))
    assert first.at == 1785610683000000000
    with pytest.raises(LedgerError):  # fails while writing: the run already exists
        import_peer(ledger, results)
    assert ledger.clock is mine
    with pytest.raises(UnusableInput):  # refused while checking, before any write
        import_peer(ledger, _write_peer(tmp_path / "bad.json", {"manifest": {}, "runs": []}))
    assert ledger.clock is mine


# -- the protocol set's content identity (run_started.protocol_set_id) -------------------

PEER_SET_HASH = "daeac8a49319e6240541f905e1acf45d99e47fa4e4958ee0203d5f4fe1245695"


def _run_started(ledger: Ledger, run_id: str) -> RunStartedBody:
    events = from_ledger(ledger, run_id).events
    return next(e.body for e, _ in events if isinstance(e.body, RunStartedBody))


def _header_in(ledger_path: str, run_id: str) -> RunStartedBody:
    with open_store(ledger_path) as store:
        return _run_started(Ledger(store), run_id)


def test_the_k5_import_records_the_content_identity_of_the_set_beside_its_results(imported):
    ledger, _, run_id, *_ = imported
    header = _run_started(ledger, run_id)
    folder = os.path.join(peer_dir(), "bench", "protocols")
    # what a benchledger run of the same folder records as its protocol_set_hash
    assert header.protocol_set_id == benchledger_hash(protocols.load(folder).protocols)
    assert header.protocol_set_hash == PEER_SET_HASH  # the manifest's claim, kept
    assert os.path.samefile(header.config["protocols_path"], folder)


def test_a_protocols_folder_with_another_peer_hash_is_refused_naming_both_hashes(tmp_path, capsys):
    data = _peer_data()
    data["manifest"]["protocol_set_hash"] = PEER_SET_HASH
    results = _write_peer(tmp_path / "peer.json", data)
    ledger = str(tmp_path / "l.sqlite")
    committed = protocols.LIFECYCLE_DIR
    argv = ["import-peer", "mcp-data-platform", results, "--protocols", committed]
    assert main([*argv, "--ledger", ledger]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    theirs = peer_hash(protocols.load(committed).protocols)
    assert len(err) == 1 and theirs in err[0] and PEER_SET_HASH in err[0], err
    assert not os.path.exists(ledger) or _holds_nothing(ledger)


def test_a_set_found_by_layout_with_another_peer_hash_is_ignored_with_a_note(tmp_path, capsys):
    bench = tmp_path / "bench"
    write_v1102_set(peer_dir(), str(bench / "protocols"))  # not the set the manifest names
    (bench / "results" / "run").mkdir(parents=True)
    data = _peer_data()
    data["manifest"]["protocol_set_hash"] = PEER_SET_HASH
    results = _write_peer(bench / "results" / "run" / "peer.json", data)
    ledger = str(tmp_path / "l.sqlite")
    assert main(["import-peer", "mcp-data-platform", results, "--ledger", ledger]) == 0
    out = capsys.readouterr().out
    assert "note:" in out and str(bench / "protocols") in out and PEER_SET_HASH in out, out
    header = _header_in(ledger, "peer-peer")
    assert header.protocol_set_id == "" and "protocols_path" not in header.config


def test_an_older_run_re_derives_against_the_older_set_it_was_made_with(tmp_path, capsys):
    old_set = write_v1102_set(peer_dir(), str(tmp_path / "v1102-protocols"))
    loaded = protocols.load(old_set).protocols
    base = os.path.join(peer_dir(), "bench", "results", K5)
    one = sorted(d for d in os.listdir(base) if d.startswith("lifecycle-a3-2"))[0]
    with open(os.path.join(base, one, "lifecycle-a3.json")) as fh:
        old = _variant(json.load(fh), "v1.102")
    old["manifest"]["protocol_set_hash"] = peer_hash(loaded)
    results = _write_peer(tmp_path / "v1102.json", old)
    ledger = str(tmp_path / "l.sqlite")
    argv = ["import-peer", "mcp-data-platform", results, "--protocols", old_set]
    assert main([*argv, "--ledger", ledger, "--run-id", "old"]) == 0
    capsys.readouterr()
    header = _header_in(ledger, "old")
    assert header.protocol_set_id == benchledger_hash(loaded)
    assert header.config["protocols_path"] == old_set
    # no --protocols: the set is found again from the folder the import recorded
    assert main(["replay", "old", "--level", "rederive", "--ledger", ledger]) == 0
    shown = capsys.readouterr()
    assert "not the recorded one" not in shown.out + shown.err, shown.out
    assert main(["replay", "old", "--ledger", ledger, "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] and report["mismatches"] == 0 and report["compared"]["decisions"] > 80


def test_a_set_with_the_recorded_peer_hash_but_other_content_is_noted_on_re_derivation(tmp_path):
    folder = write_v1102_set(peer_dir(), str(tmp_path / "set"))
    data = _peer_data()
    data["manifest"]["protocol_set_hash"] = peer_hash(protocols.load(folder).protocols)
    results = _write_peer(tmp_path / "peer.json", data)
    ledger = str(tmp_path / "l.sqlite")
    argv = ["import-peer", "mcp-data-platform", results, "--protocols", folder]
    assert main([*argv, "--ledger", ledger]) == 0
    header = _header_in(ledger, "peer-peer")
    assert items(header).notes == []
    # benchledger's own `query` extension: the peer hash cannot see it, the content id does
    page = os.path.join(folder, "lc-active-customers.yaml")
    with open(page) as fh:
        text = fh.read().replace("\nrecall:\n", "\nrecall:\n    query: SELECT 80\n", 1)
    with open(page, "w") as fh:
        fh.write(text)
    assert peer_hash(protocols.load(folder).protocols) == header.protocol_set_hash
    (note,) = items(header).notes
    assert "not the recorded one" in note and header.protocol_set_id[:12] in note
