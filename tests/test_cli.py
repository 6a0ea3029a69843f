"""The command line, end to end through main() and through the installed script."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from benchledger.cli import main
from benchledger.ledger import Ledger, open_store
from tests.sample import build_run, counter_clock


@pytest.fixture
def ledger_path(tmp_path) -> str:
    path = str(tmp_path / "cli.sqlite")
    led = Ledger(open_store(path), clock=counter_clock())
    build_run(led, "run-cli", units=3)
    led.store.close()
    return path


def test_runs_lists_run_streams_events_and_root(ledger_path, capsys):
    assert main(["runs", "--ledger", ledger_path]) == 0
    out = capsys.readouterr().out
    root = Ledger(open_store(ledger_path)).run_info("run-cli").root
    assert "run-cli" in out and root in out and " 4 " in out


def test_log_prints_seq_kind_short_hash_refs_and_body(ledger_path, capsys):
    assert main(["log", "run-cli", "p01/1", "--ledger", ledger_path]) == 0
    out = capsys.readouterr().out
    assert "== run-cli/p01/1" in out
    assert "grader_decision" in out and "refs=2,3,4" in out
    assert main(["log", "run-cli", "--ledger", ledger_path]) == 0
    assert "run_sealed" in capsys.readouterr().out


def test_verify_exits_0_for_an_intact_ledger_and_1_naming_the_tampered_event(ledger_path, capsys):
    assert main(["verify", "--ledger", ledger_path]) == 0
    assert "ok run run-cli" in capsys.readouterr().out
    import sqlite3

    conn = sqlite3.connect(ledger_path)
    cur = conn.execute(
        "UPDATE benchledger_events SET state = replace(state, '\"tool_calls\":1', "
        "'\"tool_calls\":7') WHERE originator_id='run-cli/p00/0' AND originator_version=6"
    )
    assert cur.rowcount == 1
    conn.commit()
    conn.close()
    assert main(["verify", "run-cli", "--ledger", ledger_path]) == 1
    out = capsys.readouterr().out
    assert "stream 'run-cli/p00/0' seq 6" in out


def test_export_import_and_verify_a_bundle_with_root(ledger_path, tmp_path, capsys):
    bundle = str(tmp_path / "run.jsonl.gz")
    assert main(["export", "run-cli", "-o", bundle, "--ledger", ledger_path]) == 0
    root = Ledger(open_store(ledger_path)).run_info("run-cli").root
    assert main(["verify", bundle, "--root", root]) == 0
    assert main(["verify", bundle, "--root", "ab" * 32]) == 1
    other = str(tmp_path / "other.sqlite")
    assert main(["import", bundle, "--ledger", other]) == 0
    assert main(["import", bundle, "--ledger", other]) == 0
    out = capsys.readouterr().out
    assert "0 new events" in out
    assert main(["verify", "run-cli", "--ledger", other, "--root", root]) == 0


@pytest.mark.parametrize(
    "argv",
    [
        ["verify", "--ledger", "{tmp}/missing.sqlite"],
        ["verify", "{tmp}/missing.jsonl"],
        ["runs", "--ledger", "{tmp}/notadb.sqlite"],
        ["log", "no-such-run", "--ledger", "{ledger}"],
        ["export", "run-cli", "-o", "{tmp}/nodir/x.jsonl", "--ledger", "{ledger}"],
        ["runs", "--ledger", "mysql://x"],
    ],
    ids=[
        "missing-ledger",
        "missing-bundle",
        "not-a-ledger",
        "unknown-run",
        "bad-output-dir",
        "bad-scheme",
    ],
)
def test_unusable_input_exits_2_with_one_line(argv, tmp_path, ledger_path, capsys):
    (tmp_path / "notadb.sqlite").write_text("not sqlite " * 100)
    argv = [a.format(tmp=tmp_path, ledger=ledger_path) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert err.startswith("benchledger: error: ")
    assert "Traceback" not in err


def test_the_installed_script_reports_bad_input_without_a_traceback(tmp_path):
    exe = shutil.which("benchledger")
    cmd = [exe] if exe else [sys.executable, "-m", "benchledger"]
    res = subprocess.run(
        [*cmd, "verify", str(tmp_path / "absent.jsonl")],
        capture_output=True,
        text=True,
        env={**os.environ},
    )
    assert res.returncode == 2
    assert res.stderr.count("\n") == 1 and "Traceback" not in res.stderr
    assert "absent.jsonl" in res.stderr


def test_bench_ledger_prints_the_documented_json_keys(tmp_path, capsys):
    assert (
        main(
            ["bench", "ledger", "--events", "600", "--json", "--ledger", str(tmp_path / "b.sqlite")]
        )
        == 0
    )
    import json

    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert set(result) == {
        "run_id",
        "events",
        "baseline_append_eps",
        "baseline_verify_eps",
        "append_eps",
        "verify_eps",
        "append_ratio",
        "verify_ratio",
        "verify_cpu_ratio",
        "verify_peak_rss_mb",
        "event_format",
        "baseline_format",
    }
    assert result["event_format"] == 2 and result["baseline_format"] == 2
    assert result["events"] >= 550 and result["append_ratio"] > 0
    assert main(["verify", result["run_id"], "--ledger", str(tmp_path / "b.sqlite")]) == 0


def test_bench_ledger_measures_format_1_against_a_single_hash_baseline_when_asked(tmp_path, capsys):
    args = ["bench", "ledger", "--events", "600", "--json", "--event-format", "1"]
    assert main([*args, "--ledger", str(tmp_path / "b.sqlite")]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (result["event_format"], result["baseline_format"]) == (1, 1)


def test_bench_ledger_refuses_a_tiny_event_count(capsys):
    assert main(["bench", "ledger", "--events", "5"]) == 2


def test_version_prints_the_package_version_and_the_ledger_format(capsys):
    from importlib.metadata import version

    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    out = capsys.readouterr().out
    assert exit_.value.code == 0
    assert out.startswith(f"benchledger {version('benchledger')} ")
    assert "ledger format v2" in out and "benchledger-bundle/1" in out


def test_help_lists_every_command_with_the_line_its_group_registers(capsys):
    from benchledger.cli import build_parser, parser_for

    def listed(parser) -> dict[str, str]:
        action = parser._subparsers._group_actions[0]
        return {c.dest: c.help for c in action._choices_actions}

    # ``benchledger --help`` imports no command group; what it lists is what they register.
    assert listed(parser_for(None)) == listed(build_parser())
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "selftest" in out and "prove what benchledger survives" in out


def test_an_unknown_command_is_a_usage_error_naming_the_commands(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["nonsense"])
    assert exit_.value.code == 2
    assert "invalid choice: 'nonsense'" in capsys.readouterr().err
