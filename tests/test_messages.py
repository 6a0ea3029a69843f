"""What the command line says where a user trips (issue 39): messages that name what was
given and suggest a next step that works, command lines printed to be pasted, and
progress notes before slow steps. Bad inputs with one line and exit 2 are in the corpus
(tests/data/bad/cases.yaml); these are the answers the corpus cannot hold."""

from __future__ import annotations

import asyncio
import os
import re
import shlex
import stat

import pytest

from benchledger.cli import main
from benchledger.harness.errors import PlatformStartFailed
from benchledger.harness.models import preflight
from benchledger.harness.platforms import provision
from benchledger.ledger import Ledger, open_store
from tests.conftest import protocol_subset
from tests.sample import build_run, counter_clock

TWO = ["bl-core-cohort", "bl-margin-region"]


def test_an_unknown_run_names_the_newest_runs_first_and_counts_the_rest(tmp_path, capsys):
    path = str(tmp_path / "l.sqlite")
    led = Ledger(open_store(path), clock=counter_clock())
    # Recorded in this order: "z-old" first, "a-new" last; alphabetical order is the reverse.
    names = ["z-old", *(f"m-{i:02d}" for i in range(10)), "a-new"]
    for name in names:
        build_run(led, name, units=1)
    led.store.close()
    assert main(["report", "nosuch", "--ledger", path]) == 2
    err = capsys.readouterr().err
    assert "newest first: a-new, m-09, m-08" in err
    assert "and 2 more" in err and "z-old" not in err


def test_log_takes_its_stream_after_an_option(tmp_path, capsys):
    path = str(tmp_path / "l.sqlite")
    led = Ledger(open_store(path), clock=counter_clock())
    build_run(led, "r", units=2)
    led.store.close()
    assert main(["log", "r", "--ledger", path, "p01/1"]) == 0
    out = capsys.readouterr().out
    assert "== r/p01/1" in out and "== r/p00/1" not in out


def test_verify_of_a_folder_by_its_bare_name_names_the_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    os.mkdir("bundles")
    assert main(["verify", "bundles"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("benchledger: error: bundles: is a directory"), err
    assert ".benchledger" not in err and "replay check bundles" in err


def test_keys_new_makes_a_missing_out_folder_private(tmp_path, capsys):
    out = tmp_path / "new" / "keys"
    assert main(["keys", "new", "--out", str(out)]) == 0
    assert stat.S_IMODE(os.stat(out).st_mode) & 0o077 == 0
    assert stat.S_IMODE(os.stat(out / "benchledger.key").st_mode) == 0o600
    assert f"created {out}" in capsys.readouterr().out


def test_printed_command_lines_paste_as_one_word_per_argument(tmp_path, capsys):
    out = tmp_path / "my keys"
    assert main(["keys", "new", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    sign = re.search(r"^sign: +(.*?) {3}\(or", printed, re.M)
    assert sign is not None, printed
    assert shlex.split(sign.group(1))[-1] == str(out / "benchledger.key")


def test_a_sealed_run_prints_a_verify_line_whose_ledger_url_is_quoted(tmp_path, capsys):
    folder = protocol_subset(tmp_path, TWO[:1])
    ledger = str(tmp_path / "a ledger.sqlite")  # a space: two words unless quoted
    argv = ["run", "--protocols", folder, "--ledger", ledger, "--run-id", "q"]
    assert main(argv) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("verify with"))
    words = shlex.split(line.removeprefix("verify with: "))
    assert words[:3] == ["benchledger", "verify", "q"] and words[-2:] == ["--ledger", ledger]
    assert main(words[1:]) == 0  # the line as pasted verifies


def test_replay_with_live_tools_refuses_a_run_that_had_units_in_flight_together(tmp_path, capsys):
    folder = protocol_subset(tmp_path, TWO)
    ledger = str(tmp_path / "l.sqlite")
    argv = ["run", "--protocols", folder, "--ledger", ledger, "--run-id", "c2"]
    assert main([*argv, "--concurrency", "2"]) == 0
    capsys.readouterr()
    assert main(["replay", "c2", "--level", "full", "--tools", "live", "--ledger", ledger]) == 2
    err = capsys.readouterr().err.strip()
    assert "--tools live cannot replay this run" in err and "use --tools log" in err
    assert len(err.splitlines()) == 1


def test_a_preflight_still_waiting_says_so_once_on_stderr(monkeypatch, capsys):
    monkeypatch.setattr(preflight, "NOTE_AFTER_S", 0.0, raising=False)  # a slow answer, soon

    async def go() -> None:
        loop = asyncio.get_running_loop()
        answered = loop.create_future()

        async def send():  # a server that answers later than the note is due
            loop.call_later(0.05, answered.set_exception, _unreachable())
            return await answered

        with pytest.raises(preflight.PreflightFailed):
            await preflight.check(send, model="m", where="https://api.example.test",
                                  key_var="K", url_hint="h", sleep=_no_wait)  # fmt: skip

    asyncio.run(go())
    err = capsys.readouterr().err
    assert err.count("model preflight: still waiting for https://api.example.test") == 1


def _unreachable() -> Exception:
    from benchledger.harness.models.retry import AttemptError

    return AttemptError("transport", "cannot connect", retryable=False)


async def _no_wait(seconds: float) -> None:
    return None


def test_the_first_npm_install_says_so_before_it_starts(tmp_path, monkeypatch, capsys):
    npm = tmp_path / "bin" / "npm"
    npm.parent.mkdir()
    npm.write_text("#!/bin/sh\necho 'npm: no network here' >&2\nexit 1\n")
    npm.chmod(0o755)
    monkeypatch.setenv("PATH", f"{npm.parent}{os.pathsep}{os.environ['PATH']}")
    with pytest.raises(PlatformStartFailed):
        provision.install_server_memory("2026.8.31", str(tmp_path / "npm"))
    err = capsys.readouterr().err
    assert err.startswith("installing @modelcontextprotocol/server-memory@2026.8.31 with npm")
