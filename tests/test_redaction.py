"""Redacted bundles: withheld events show as withheld, with their digests, never as absent.

A redacted bundle verifies against the full run's root and signature; in event format 2
every placeholder's stream, seq, kind, time, prev and refs are proven by its link, only
its body is hidden. Its report marks what is withheld instead of counting it as zero,
``audit`` names the decisions that rest on withheld evidence, decisions themselves are
never withheld, and ``verify --reveal FULL`` proves every placeholder matches. Format-1
runs still verify, with their placeholders' envelopes called UNBOUND. (Forgeries by a
third party: tests/test_attacks.py.)
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from benchledger.cli import main
from benchledger.ledger import Ledger, open_store
from benchledger.ledger.bundle import export_redacted, export_run
from benchledger.ledger.codec import canonical_json
from benchledger.ledger.events import (
    NEVER_WITHHELD,
    WITHHOLDABLE,
    EpisodeFinishedBody,
    GraderDecisionBody,
    ModelCallBody,
    ReadBackBody,
    RunStartedBody,
    SessionCallBody,
    UnitFinishedBody,
    UnitStartedBody,
)
from benchledger.ledger.redaction import CopyFinder, Selection, read_placeholder
from benchledger.ledger.verified import open_run
from benchledger.projections.suites.lifecycle.scorecard import OUTCOME_KINDS
from tests.conftest import cli, keypair, one_line_exit_2, signing_ledger
from tests.sample import PASSING, build_run, counter_clock


def _signed(tmp_path: Path, fmt: int) -> dict[str, str]:
    key, pub = keypair(tmp_path / "k")
    db = str(tmp_path / "l.sqlite")
    store = open_store(db)
    ledger = signing_ledger(store, key, event_format=fmt)
    root = build_run(ledger, "r1", units=4)
    full = str(tmp_path / "full.jsonl")
    export_run(ledger, "r1", full)
    store.close()
    return {"db": db, "root": root, "full": full, "pub": pub, "dir": str(tmp_path)}


@pytest.fixture
def signed(tmp_path) -> dict[str, str]:
    """A signed run with model calls (tests.sample.build_run), its full bundle and keys."""
    return _signed(tmp_path, 2)


@pytest.fixture
def signed_v1(tmp_path) -> dict[str, str]:
    """The same, recorded in event format 1 (before placeholders proved their envelope)."""
    return _signed(tmp_path, 1)


def redact(signed: dict[str, str], name: str, *options: str) -> str:
    out = str(Path(signed["dir"]) / name)
    assert main(["export", "r1", "-o", out, "--ledger", signed["db"], *options]) == 0
    return out


def model_calls(path: str) -> int:
    return sum('"kind":"model_call"' in x for x in Path(path).read_text().splitlines())


# -- the case: every model call withheld --------------------------------------------


def test_every_model_call_withheld_still_verifies_against_the_root_and_the_signature(
    signed, capsys
):
    red = redact(signed, "red.jsonl", "--withhold", "model_call")
    lines = Path(red).read_text().splitlines()
    placeholders = [x for x in lines[1:] if read_placeholder(x.encode())]
    assert len(placeholders) == model_calls(signed["full"]) > 0
    assert all('"kind":"model_call"' in x for x in placeholders)
    assert all(re.fullmatch("[0-9a-f]{64}", json.loads(x)["body"]) for x in placeholders)
    code, out, _ = cli(capsys, "verify", red, "--root", signed["root"], "--pubkey", signed["pub"])
    assert code == 0, out
    assert f"root {signed['root']}" in out and "authenticated:" in out
    assert f"withheld: {len(placeholders)} events" in out
    code, out, _ = cli(capsys, "report", red)
    row = next(x for x in out.splitlines() if x.startswith("withheld"))
    assert (
        code == 0 and f"{len(placeholders)} events withheld ({len(placeholders)} model_call)" in row
    )


def test_revealing_with_the_full_bundle_matches_every_placeholder(signed, capsys):
    red = redact(signed, "red.jsonl", "--withhold", "model_call")
    code, out, _ = cli(capsys, "verify", red, "--reveal", signed["full"])
    n = model_calls(signed["full"])
    assert code == 0 and f"revealed: all {n} withheld events match" in out


def _edit_placeholder(path: str, which: int, field: str, value: object) -> str:
    lines = Path(path).read_text().splitlines()
    idx = [i for i, x in enumerate(lines) if i and read_placeholder(x.encode())][which]
    obj = json.loads(lines[idx])
    obj[field] = value
    lines[idx] = json.dumps(obj, sort_keys=True, separators=(",", ":"))
    bad = path.replace(".jsonl", f"-{field}-{which}.jsonl")
    Path(bad).write_text("\n".join(lines) + "\n")
    return bad


@pytest.mark.parametrize(
    ("kinds", "which"),
    [("model_call", 0), ("model_call,session_call", 0)],
    ids=["followed-by-an-event", "followed-by-a-placeholder"],
)
def test_a_placeholder_whose_body_digest_was_edited_fails_verify(signed, capsys, kinds, which):
    red = redact(signed, "red.jsonl", "--withhold", kinds)
    bad = _edit_placeholder(red, which, "body", "0" * 64)
    code, out, _ = cli(capsys, "verify", bad)
    assert code == 1 and "link hash mismatch" in out and "withheld event" in out


@pytest.mark.parametrize(
    ("field", "value"), [("kind", "read_back"), ("at", 5), ("refs", [])], ids=str
)
def test_a_placeholder_that_lies_about_its_envelope_fails_verify(signed, capsys, field, value):
    red = redact(signed, "red.jsonl", "--withhold", "model_call,read_back")
    bad = _edit_placeholder(red, 0, field, value)
    code, out, _ = cli(capsys, "verify", bad, "--pubkey", signed["pub"])
    assert code == 1 and "link hash mismatch" in out, out


# -- event format 1: still verifiable, its placeholders unbound -------------------------------


def test_a_format_1_redacted_bundle_verifies_but_says_its_placeholders_are_unbound(
    signed_v1, capsys
):
    red = redact(signed_v1, "red.jsonl", "--withhold", "model_call")
    assert '"withheld":true' in Path(red).read_text()  # the format-1 placeholder
    code, out, _ = cli(capsys, "verify", red)
    assert code == 0 and "UNBOUND: 8 withheld events are event format 1" in out, out
    code, out, _ = cli(capsys, "verify", red, "--pubkey", signed_v1["pub"])
    assert code == 1 and "not authenticated" in out
    assert not any(x.startswith("authenticated:") for x in out.splitlines())
    code, out, _ = cli(capsys, "verify", red, "--pubkey", signed_v1["pub"], "--reveal",
                       signed_v1["full"])  # fmt: skip
    assert code == 0 and "revealed: all 8" in out and "authenticated:" in out


def test_a_format_1_placeholder_that_lies_about_its_kind_is_caught_only_by_reveal(
    signed_v1, capsys
):
    red = redact(signed_v1, "red.jsonl", "--withhold", "model_call,session_call")
    bad = _edit_placeholder(red, 0, "kind", "session_call")
    code, out, _ = cli(capsys, "verify", bad)
    assert code == 0 and "UNBOUND" in out  # format 1: a kind is a claim no hash checks...
    code, out, _ = cli(capsys, "verify", bad, "--reveal", signed_v1["full"])
    assert code == 1 and "does not match its placeholder" in out  # ...the full run can


def test_a_format_1_run_resumed_or_sealed_stays_in_format_1(tmp_path):
    store = open_store(str(tmp_path / "l.sqlite"))
    build_run(Ledger(store, clock=counter_clock(), event_format=1), "old", seal=False)
    later = Ledger(store, clock=counter_clock(1_790_000_000_000_000_000))  # new code, format 2
    w = later.new_stream("old/p99/0")
    w.append(UnitStartedBody(protocol_id="p99", attempt=0))
    w.append(UnitFinishedBody())
    later.commit(w)
    later.seal("old")
    failure, summary = later.verify("old", require_seal=True)
    assert failure is None and summary.format == 1
    assert all(b'"v":' not in row[3] for row in store.scan("old"))
    store.close()


def test_reveal_refuses_a_full_bundle_of_another_run(signed, tmp_path, capsys):
    red = redact(signed, "red.jsonl", "--withhold", "model_call")
    store = open_store(str(tmp_path / "other.sqlite"))
    ledger = Ledger(store, clock=counter_clock())
    build_run(ledger, "r1", units=4, seed=99)
    other = str(tmp_path / "other.jsonl")
    export_run(ledger, "r1", other)
    store.close()
    code, out, _ = cli(capsys, "verify", red, "--reveal", other)
    assert code == 1 and "FAILED reveal" in out and "root mismatch" in out


def test_a_redacted_bundle_is_never_imported(signed, tmp_path, capsys):
    red = redact(signed, "red.jsonl", "--withhold", "model_call")
    code, _, err = cli(capsys, "import", red, "--ledger", str(tmp_path / "new.sqlite"))
    one_line_exit_2(code, err, "cannot be imported")


# -- reports and audit: withheld, never zero ---------------------------------------------------


def _lifecycle_run(ledger: Ledger, run_id: str, outcomes: dict[str, dict[str, bool]]) -> str:
    """A sealed lifecycle run: per unit a read-back (evidence), the episode summary that
    cites it, and the grader decisions that cite the summary."""
    ledger.start_run(run_id, RunStartedBody(suite="lifecycle", protocol_set_hash="s", k=1))
    for pid, checks in sorted(outcomes.items()):
        w = ledger.new_stream(f"{run_id}/{pid}/1")
        w.append(UnitStartedBody(protocol_id=pid, attempt=1))
        rb = w.append(ReadBackBody(stage="capture", method="GET", path="/i", body={"n": 1}))
        fin = w.append(EpisodeFinishedBody(episode="recall", final_answer="1"), refs=[rb])
        for check, verdict in checks.items():
            w.append(
                GraderDecisionBody(stage=check.split("_")[0], check=check, verdict=verdict),
                refs=[fin],
            )
        w.append(UnitFinishedBody(outcome=dict(checks)))
        ledger.commit(w)
    return ledger.seal(run_id)


@pytest.fixture
def lifecycle(tmp_path) -> dict[str, str]:
    """Three units (p2 fails capture) in a sealed run, each with one read-back."""
    db = str(tmp_path / "lc.sqlite")
    store = open_store(db)
    ledger = Ledger(store, clock=counter_clock())
    outcomes = {"p1": dict(PASSING), "p2": dict(PASSING, captured=False), "p3": dict(PASSING)}
    root = _lifecycle_run(ledger, "lc", outcomes)
    store.close()
    return {"db": db, "root": root, "dir": str(tmp_path)}


def _export(lc: dict[str, str], name: str, *options: str) -> str:
    out = str(Path(lc["dir"]) / name)
    assert main(["export", "lc", "-o", out, "--ledger", lc["db"], *options]) == 0
    return out


def test_a_report_marks_withheld_evidence_and_keeps_the_decisions(lifecycle, capsys):
    red = _export(lifecycle, "ev.jsonl", "--withhold", "read_back")
    capsys.readouterr()
    code, out, _ = cli(capsys, "report", red)
    assert code == 0
    row = next(x for x in out.splitlines() if x.startswith("withheld"))
    assert "3 events withheld (3 read_back)" in row
    assert "evidence of 3 units withheld, decisions shown" in row
    assert re.search(r"^capture_rate\s+2/3 ", out, re.M)  # the decisions still count


def test_withholding_a_stream_withholds_its_evidence_and_never_its_decisions(lifecycle, capsys):
    red = _export(lifecycle, "p2.jsonl", "--withhold-stream", "p2/*")
    capsys.readouterr()
    withheld = [read_placeholder(x.encode()) for x in Path(red).read_text().splitlines()[1:]]
    assert [(p.stream, p.kind) for p in withheld if p] == [("lc/p2/1", "read_back")]
    code, out, _ = cli(capsys, "report", red, "--format", "json")
    assert code == 0
    cap = json.loads(out)["metrics"]["capture_rate"]
    assert (cap["num"], cap["den"]) == (2, 3)  # p2's failed capture still counts as a 0


def test_the_full_runs_report_has_no_withheld_row(lifecycle, capsys):
    full = _export(lifecycle, "full.jsonl")
    capsys.readouterr()
    out = cli(capsys, "report", full)[1]
    assert "withheld" not in out
    assert "withheld" not in json.loads(cli(capsys, "report", full, "--format", "json")[1])


def test_audit_lists_the_decisions_that_rest_on_withheld_evidence(lifecycle, capsys):
    red = _export(lifecycle, "ev.jsonl", "--withhold", "read_back")
    capsys.readouterr()
    code, out, _ = cli(capsys, "audit", red, "capture_rate")
    assert code == 0
    assert "3 of 3 decisions rest on withheld evidence" in out
    assert out.count("rests on withheld evidence") == 3
    assert re.search(r"evidence seq 1 read_back [0-9a-f]{12}  WITHHELD", out)


def test_every_kind_a_metric_is_decided_from_is_never_withheld():
    assert OUTCOME_KINDS | {"run_started", "run_sealed"} <= NEVER_WITHHELD
    assert set(WITHHOLDABLE) == {"session_call", "model_call", "read_back"}


# -- refused exports: one line, exit 2, nothing written -----------------------------------------


@pytest.mark.parametrize(
    ("options", "needle"),
    [
        (("--withhold", "no_such_kind"), "no event kind 'no_such_kind'"),
        (("--withhold", "run_sealed"), "run_sealed is never withheld"),
        (("--withhold", "grader_decision"), "grader_decision is never withheld"),
        (("--withhold", "model_call,unit_finished"), "unit_finished is never withheld"),
        (("--withhold-stream", "nowhere/*"), "matches no stream"),
    ],
    ids=["unknown-kind", "the-seal", "a-decision", "a-unit-end", "glob-matches-nothing"],
)
def test_a_bad_withhold_option_is_one_line_exit_2_and_writes_nothing(
    lifecycle, capsys, options, needle
):
    out = Path(lifecycle["dir"]) / "x.jsonl"
    code, _, err = cli(
        capsys, "export", "lc", "-o", str(out), "--ledger", lifecycle["db"], *options
    )
    one_line_exit_2(code, err, needle)
    assert not out.exists()


def test_an_unsealed_run_cannot_be_published_redacted(tmp_path, capsys):
    db = str(tmp_path / "u.sqlite")
    store = open_store(db)
    build_run(Ledger(store, clock=counter_clock()), "u1", seal=False)
    store.close()
    out = tmp_path / "x.jsonl"
    code, _, err = cli(
        capsys, "export", "u1", "-o", str(out), "--ledger", db, "--withhold", "model_call"
    )
    one_line_exit_2(code, err, "not sealed")
    assert not out.exists()


# -- copies of withheld text in shown events ---------------------------------------------------

ANSWER = "FINAL ANSWER: the user's favourite colour is teal, set on 2024-03-01"
QUERY = "which colour did the user say they like best, and since when"


@pytest.fixture
def copied(tmp_path) -> dict[str, str]:
    """A sealed run whose model answer is repeated in its grader decision and episode end,
    and whose model-written search query is repeated in the session call it made."""
    db = str(tmp_path / "c.sqlite")
    store = open_store(db)
    ledger = Ledger(store, clock=counter_clock())
    ledger.start_run("c1", RunStartedBody(suite="lifecycle", protocols=2, agent="model"))
    for u in range(2):
        w = ledger.new_stream(f"c1/p{u}/1")
        w.append(UnitStartedBody(protocol_id=f"p{u}", attempt=1))
        m = w.append(
            ModelCallBody(
                episode="recall",
                request_hash=f"{u:064x}",  # a digest, never counted as a copy
                response={"content": [{"type": "tool_use", "input": {"intent": QUERY}},
                                      {"type": "text", "text": ANSWER}]},
            )
        )  # fmt: skip
        c = w.append(
            SessionCallBody(
                episode="recall", method="tools/call", tool="search", arguments={"intent": QUERY}
            ),
            refs=[m],
        )
        fin = w.append(EpisodeFinishedBody(episode="recall", final_answer=ANSWER), refs=[m, c])
        w.append(
            GraderDecisionBody(
                stage="recall",
                check="recall_correct",
                verdict=True,
                reason=f"the answer {ANSWER!r} names teal",
                answer=ANSWER,
            ),
            refs=[fin],
        )
        w.append(UnitFinishedBody(outcome={"recall_correct": True}))
        ledger.commit(w)
    ledger.seal("c1")
    store.close()
    return {"db": db, "dir": str(tmp_path)}


def test_export_withholding_model_calls_lists_the_shown_events_that_copy_the_answer(copied, capsys):
    out = str(Path(copied["dir"]) / "red.jsonl")
    code, _, err = cli(capsys, "export", "c1", "-o", out, "--ledger", copied["db"],
                       "--withhold", "model_call")  # fmt: skip
    assert code == 0 and Path(out).exists(), err
    listed = [x.split() for x in err.splitlines() if x.startswith("  c1/")]
    assert sorted((x[0], x[2], x[3]) for x in listed) == sorted(
        (f"c1/p{u}/1", str(seq), kind)
        for u in range(2)
        for seq, kind in ((2, "session_call:"), (3, "episode_finished:"), (4, "grader_decision:"))
    ), err
    assert "6 shown events hold copies of withheld text" in err
    assert "2 of them are session_call/model_call/read_back events: add --withhold-copies" in err
    assert "4 are of kinds never withheld" in err


def test_withhold_copies_withholds_the_session_call_that_copies_the_query_and_still_verifies(
    copied, capsys
):
    out = str(Path(copied["dir"]) / "red.jsonl")
    code, _, err = cli(capsys, "export", "c1", "-o", out, "--ledger", copied["db"],
                       "--withhold", "model_call", "--withhold-copies")  # fmt: skip
    assert code == 0, err
    assert "also withholding the evidence of 2 streams" in err
    assert "4 shown events hold copies" in err and "session_call:" not in err
    lines = Path(out).read_text().splitlines()
    held = [json.loads(x) for x in lines[1:] if read_placeholder(x.encode())]
    assert sorted(o["kind"] for o in held) == ["model_call"] * 2 + ["session_call"] * 2
    assert QUERY not in "\n".join(lines)
    code, got, _ = cli(capsys, "verify", out)
    assert code == 0 and "withheld: 4 events" in got, got


def test_export_of_a_run_without_copies_lists_nothing(signed, capsys):
    out = str(Path(signed["dir"]) / "red.jsonl")
    code, _, err = cli(capsys, "export", "r1", "-o", out, "--ledger", signed["db"],
                       "--withhold", "model_call", "--withhold-copies")  # fmt: skip
    assert code == 0 and err == "", err


@pytest.mark.parametrize(
    ("withheld", "shown", "count"),
    [
        (ANSWER, f'{{"answer":"{ANSWER}"}}', 1),
        (ANSWER, f'{{"reason":"it said {ANSWER[2:65]} and more"}}', 1),  # 2 * 32 - 1 bytes
        (f"{ANSWER} / {QUERY}", f'{{"a":"{ANSWER}","b":"{QUERY}"}}', 2),
        ("short text, under thirty-two", '{"x":"short text, under thirty-two"}', 0),
        ("ab" * 32, '{"hash":"' + "ab" * 32 + '"}', 0),
        ('a "quoted"\nanswer that is long enough to count', "", 0),
    ],
    ids=["whole-string", "a-long-stretch", "two-passages", "too-short", "hex-digest", "nothing"],
)
def test_the_copy_finder_counts_passages_of_withheld_strings(withheld, shown, count):
    finder = CopyFinder()
    finder.add({"response": {"content": [{"text": withheld}]}})
    assert finder.count(shown.encode()) == count


def test_the_copy_finder_matches_a_string_as_a_line_escapes_it():
    text = 'she said "teal"\nthen "blue", which is long enough'
    finder = CopyFinder()
    finder.add({"r": text})
    assert finder.count(canonical_json({"answer": text})) == 1


# -- the library -----------------------------------------------------------------------------


def test_the_door_checks_a_redacted_bundle_through_its_placeholders(signed):
    store = open_store(signed["db"])
    out = str(Path(signed["dir"]) / "lib.jsonl")
    n, withheld = export_redacted(Ledger(store), "r1", out, Selection(frozenset({"read_back"})))
    store.close()
    assert withheld == {"read_back": 8} and n == len(Path(out).read_text().splitlines()) - 1
    run = open_run(out, require_seal=False, allow_partial=False, root=signed["root"])
    assert run.summary is not None and run.summary.sealed_root == signed["root"]
    assert run.bundle is not None and run.bundle.withheld == ["kind:read_back"]
    assert run.verification.source == "redacted bundle" and run.verification.withheld == 8


@pytest.mark.parametrize(
    ("kinds", "streams"),
    [(frozenset(), ()), (frozenset({"run_sealed"}), ()), (frozenset({"run_started"}), ())],
    ids=["nothing", "the-seal", "the-header"],
)
def test_a_selection_refuses_to_withhold_nothing_the_seal_or_the_header(kinds, streams):
    with pytest.raises(ValueError):
        Selection(kinds, streams)


@pytest.mark.parametrize("target", ["run-id", "full-bundle"], ids=["run-id", "full-bundle"])
def test_reveal_needs_a_redacted_bundle(signed, capsys, target):
    argv = ["r1", "--ledger", signed["db"]] if target == "run-id" else [signed["full"]]
    code, _, err = cli(capsys, "verify", *argv, "--reveal", signed["full"])
    one_line_exit_2(code, err, "--reveal checks a redacted bundle")
