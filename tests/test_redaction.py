"""Redacted bundles: withheld events show as withheld, with their digests, never as absent.

A redacted bundle verifies against the full run's root and signature, its report marks
what is withheld instead of counting it as zero, ``audit`` names the decisions that rest
on withheld evidence, and ``verify --reveal FULL`` proves every placeholder matches.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cli import main
from ledger import Ledger, open_store
from ledger.bundle import export_run, verify_bundle
from ledger.keys import load_private_key, write_key_pair
from ledger.redaction import Selection, export_redacted, read_placeholder, verify_redacted
from ledger.signing import Signer
from tests.sample import PASSING, build_run, counter_clock, lifecycle_run


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def one_line_exit_2(code: int, err: str, needle: str) -> None:
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, err
    assert needle in lines[0], (needle, lines[0])


@pytest.fixture
def signed(tmp_path) -> dict[str, str]:
    """A signed run with model calls (tests.sample.build_run), its full bundle and keys."""
    (tmp_path / "k").mkdir()
    key, pub, _ = write_key_pair(str(tmp_path / "k"))
    db = str(tmp_path / "l.sqlite")
    store = open_store(db)
    signer = Signer(load_private_key(key), "benchledger test")
    ledger = Ledger(store, clock=counter_clock(), signer=signer)
    root = build_run(ledger, "r1", units=4)
    full = str(tmp_path / "full.jsonl")
    export_run(ledger, "r1", full)
    store.close()
    return {"db": db, "root": root, "full": full, "pub": pub, "dir": str(tmp_path)}


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
    assert all('"body"' not in x and '"kind":"model_call"' in x for x in placeholders)
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
    ("options", "which"),
    [(("--withhold", "model_call"), 0), (("--withhold", "unit_finished"), -1)],
    ids=["mid-stream", "stream-head"],
)
def test_a_placeholder_whose_hash_was_edited_fails_verify(signed, capsys, options, which):
    red = redact(signed, "red.jsonl", *options)
    bad = _edit_placeholder(red, which, "hash", "0" * 64)
    code, out, _ = cli(capsys, "verify", bad)
    assert code == 1 and "placeholder mismatch" in out


def test_a_placeholder_that_lies_about_its_kind_is_caught_by_reveal(signed, capsys):
    red = redact(signed, "red.jsonl", "--withhold", "model_call")
    bad = _edit_placeholder(red, 0, "kind", "session_call")
    assert cli(capsys, "verify", bad)[0] == 0  # a kind is a claim the root cannot check...
    code, out, _ = cli(capsys, "verify", bad, "--reveal", signed["full"])
    assert code == 1 and "does not match its placeholder" in out  # ...the full run can


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


@pytest.fixture
def lifecycle(tmp_path) -> dict[str, str]:
    """Three passing units (p2 fails capture) in a sealed run."""
    db = str(tmp_path / "lc.sqlite")
    store = open_store(db)
    ledger = Ledger(store, clock=counter_clock())
    outcomes = {
        ("p1", 1): dict(PASSING),
        ("p2", 1): dict(PASSING, captured=False),
        ("p3", 1): dict(PASSING),
    }
    root = lifecycle_run(ledger, "lc", outcomes)
    store.close()
    return {"db": db, "root": root, "dir": str(tmp_path)}


def _export(lc: dict[str, str], name: str, *options: str) -> str:
    out = str(Path(lc["dir"]) / name)
    assert main(["export", "lc", "-o", out, "--ledger", lc["db"], *options]) == 0
    return out


def test_a_report_marks_withheld_evidence_and_keeps_the_decisions(lifecycle, capsys):
    red = _export(lifecycle, "ev.jsonl", "--withhold", "episode_finished")
    capsys.readouterr()
    code, out, _ = cli(capsys, "report", red)
    assert code == 0
    row = next(x for x in out.splitlines() if x.startswith("withheld"))
    assert "3 events withheld (3 episode_finished)" in row
    assert "evidence of 3 units withheld, decisions shown" in row
    assert re.search(r"^capture_rate\s+2/3 ", out, re.M)  # the decisions still count


def test_withheld_decisions_leave_a_unit_out_of_every_rate_and_say_so(lifecycle, capsys):
    red = _export(lifecycle, "dec.jsonl", "--withhold-stream", "p2/*")
    capsys.readouterr()
    code, out, _ = cli(capsys, "report", red, "--format", "json")
    assert code == 0
    report = json.loads(out)
    assert report["withheld"]["units"] == ["lc/p2/1"]
    cap = report["metrics"]["capture_rate"]
    assert (cap["num"], cap["den"]) == (2, 2)  # p2's failed capture is withheld, not a 0
    assert all(u["stream"] != "lc/p2/1" for us in report["protocols"].values() for u in us)
    text = cli(capsys, "report", red)[1]
    assert "decisions of 1 unit withheld: in no rate, never counted as 0" in text
    assert "excludes 1 unit withheld" in text
    assert "0 incomplete" in text  # withheld is not incomplete


def test_the_full_runs_report_has_no_withheld_row(lifecycle, capsys):
    full = _export(lifecycle, "full.jsonl")
    capsys.readouterr()
    out = cli(capsys, "report", full)[1]
    assert "withheld" not in out
    assert "withheld" not in json.loads(cli(capsys, "report", full, "--format", "json")[1])


def test_audit_lists_the_decisions_that_rest_on_withheld_evidence(lifecycle, capsys):
    red = _export(lifecycle, "ev.jsonl", "--withhold", "episode_finished")
    capsys.readouterr()
    code, out, _ = cli(capsys, "audit", red, "capture_rate")
    assert code == 0
    assert "3 of 3 decisions rest on withheld evidence" in out
    assert out.count("rests on withheld evidence") == 3
    assert re.search(r"evidence seq 1 episode_finished [0-9a-f]{12}  WITHHELD", out)


def test_the_gate_refuses_a_bundle_that_withholds_decisions(lifecycle, capsys):
    red = _export(lifecycle, "dec.jsonl", "--withhold", "grader_decision")
    full = _export(lifecycle, "full.jsonl")
    capsys.readouterr()
    code, _, err = cli(capsys, "gate", red, "--baseline", full)
    one_line_exit_2(code, err, "withholds the decisions of 3 units")


# -- refused exports: one line, exit 2, nothing written -----------------------------------------


@pytest.mark.parametrize(
    ("options", "needle"),
    [
        (("--withhold", "no_such_kind"), "no event kind 'no_such_kind'"),
        (("--withhold", "run_sealed"), "run_sealed is never withheld"),
        (("--withhold-stream", "nowhere/*"), "matches no stream"),
    ],
    ids=["unknown-kind", "the-seal", "glob-matches-nothing"],
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


# -- the library -----------------------------------------------------------------------------


def test_verify_bundle_checks_a_redacted_bundle_through_its_placeholders(signed):
    store = open_store(signed["db"])
    out = str(Path(signed["dir"]) / "lib.jsonl")
    n, withheld = export_redacted(Ledger(store), "r1", out, Selection(frozenset({"read_back"})))
    store.close()
    assert withheld == {"read_back": 8} and n == len(Path(out).read_text().splitlines()) - 1
    failure, summary, header = verify_bundle(out, root=signed["root"])
    assert failure is None and summary.sealed_root == signed["root"]
    assert header.withheld == ["kind:read_back"]
    assert verify_redacted(out)[3] == 8


@pytest.mark.parametrize(
    ("kinds", "streams"),
    [(frozenset(), ()), (frozenset({"run_sealed"}), ())],
    ids=["nothing", "the-seal"],
)
def test_a_selection_refuses_to_withhold_nothing_or_the_seal(kinds, streams):
    with pytest.raises(ValueError):
        Selection(kinds, streams)


@pytest.mark.parametrize("target", ["run-id", "full-bundle"], ids=["run-id", "full-bundle"])
def test_reveal_needs_a_redacted_bundle(signed, capsys, target):
    argv = ["r1", "--ledger", signed["db"]] if target == "run-id" else [signed["full"]]
    code, _, err = cli(capsys, "verify", *argv, "--reveal", signed["full"])
    one_line_exit_2(code, err, "--reveal checks a redacted bundle")
