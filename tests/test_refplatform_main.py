"""`python -m benchledger.refplatform serve` standalone, and `benchledger platform serve`
delegating."""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import socket
import subprocess
import sys

import httpx2
import pytest

import benchledger.refplatform.__main__ as refplatform_main
from benchledger import cli, protocols
from benchledger.cli import platform as cli_platform
from benchledger.harness.driver import pool_needed
from benchledger.harness.record import read_record
from benchledger.harness.suites import suite_for
from benchledger.ledger import Ledger, open_store
from benchledger.refplatform.server import RunningPlatform
from tests.conftest import peer_dir

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIRST_LINE = re.compile(
    r"^refplatform serving (http://127\.0\.0\.1:\d+)/mcp "
    r"\(admin REST under \1/api/v1\)\n$"
)


def test_python_m_refplatform_serve_prints_its_url_first_serves_and_stops_on_ctrl_c():
    cmd = [
        sys.executable,
        "-m",
        "benchledger.refplatform",
        "serve",
        "--port",
        "0",
        "--pool",
        "2",
        "--admin-key",
        "adm-k",
        "--pool-base",
        "pk",
    ]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO
    )
    try:
        first = proc.stdout.readline()
        match = FIRST_LINE.match(first)
        assert match, first
        assert "admin key: adm-k" in proc.stdout.readline()
        got = httpx2.get(
            f"{match.group(1)}/api/v1/portal/knowledge-pages",
            headers={"Authorization": "Bearer pk-002"},
        )
        assert got.status_code == 200
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    assert out.endswith("refplatform stopped\n") and "Traceback" not in err


def test_ctrl_c_after_a_run_stops_the_server_without_a_traceback_or_error_lines(tmp_path):
    """Seen after a recorded re-enactment: uvicorn logged the lifespan task's cancellation."""
    bench = os.path.join(peer_dir(), "bench")
    pack = os.path.join(bench, "seed")
    serve = [sys.executable, "-m", "benchledger.refplatform", "serve", "--port", "0", "--pool", "8",
             "--admin-key", "adm-k", "--pool-base", "pk", "--pack", pack]  # fmt: skip
    proc = subprocess.Popen(
        serve, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO
    )
    try:
        url = FIRST_LINE.match(proc.stdout.readline()).group(1)  # type: ignore[union-attr]
        protocols = tmp_path / "protocols"
        protocols.mkdir()
        for name in ("lc-core-market.yaml", "lc-holiday-total.yaml"):
            with open(os.path.join(bench, "protocols", name), encoding="utf-8") as fh:
                (protocols / name).write_text(fh.read())
        recorded = os.path.join(bench, "results", "s5-anthropic-k5")
        argv = [sys.executable, "-m", "benchledger", "run", "--protocols", str(protocols),
                "--agent", f"recorded:{recorded}", "--time-scale", "0", "--concurrency", "2",
                "--platform", url, "--admin-key", "adm-k", "--pool-base", "pk",
                "--pool-size", "8", "--ledger", str(tmp_path / "l.sqlite")]  # fmt: skip
        run = subprocess.run(argv, capture_output=True, text=True, cwd=REPO, timeout=300)
        assert run.returncode == 0, run.stderr
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0
    assert out.endswith("refplatform stopped\n")
    assert "Traceback" not in err and "ERROR" not in err, err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--port", "-1"], "--port must be 0..65535"),
        (["--port", "70000"], "--port must be 0..65535"),
        (["--pool", "0"], "--pool must be 1..9999"),
        (["--pool", "10000"], "--pool must be 1..9999"),
        (["--embedder", "magic"], "--embedder"),
        (["--db", "/proc/nope/state.sqlite"], "state.sqlite"),
        (
            ["--pack", "/nonexistent/pack"],
            "--pack /nonexistent/pack: /nonexistent/pack: not a folder",
        ),
    ],
    ids=["negative-port", "port-too-high", "empty-pool", "pool-too-big", "embedder", "db", "pack"],
)
def test_unusable_options_print_one_line_and_exit_2(argv, message, capsys):
    assert refplatform_main.main(["serve", *argv]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("refplatform: error: ") and err.count("\n") == 1, err
    assert message in err and "Traceback" not in err


def _serve_kwargs(monkeypatch, module, entry, argv) -> dict:
    seen: dict = {}

    def fake_serve(**kwargs):
        seen.update(kwargs)
        return 0

    monkeypatch.setattr(module, "serve", fake_serve)
    assert entry(argv) == 0
    return seen


def test_benchledger_platform_serve_takes_the_admin_key_from_the_settings(monkeypatch):
    monkeypatch.setenv("BENCHLEDGER_ADMIN_KEY", "from-env")
    serve = ["platform", "serve", "--port", "0"]
    got = _serve_kwargs(monkeypatch, cli_platform, cli.main, serve)
    assert got["admin_key"] == "from-env" and got["port"] == 0
    got = _serve_kwargs(monkeypatch, cli_platform, cli.main, [*serve, "--admin-key", "flag"])
    assert got["admin_key"] == "flag"


def test_standalone_refplatform_ignores_benchledger_settings(monkeypatch):
    monkeypatch.setenv("BENCHLEDGER_ADMIN_KEY", "from-env")
    got = _serve_kwargs(monkeypatch, refplatform_main, refplatform_main.main, ["serve"])
    assert got["admin_key"] is None  # serve() then makes a random one


def _serve(argv: list[str], tmp_path) -> tuple[str, list[str], subprocess.Popen[str]]:
    proc = subprocess.Popen(
        [sys.executable, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO
    )
    first = proc.stdout.readline()
    match = FIRST_LINE.match(first)
    assert match, first + proc.stderr.read()
    return match.group(1), [proc.stdout.readline() for _ in range(5)], proc


def _stop(proc: subprocess.Popen[str]) -> str:
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    assert out.endswith("refplatform stopped\n") and "Traceback" not in err
    return out


def test_serve_with_pack_serves_the_peers_seed(tmp_path):
    seed = os.path.join(peer_dir(), "bench", "seed")
    url, lines, proc = _serve(
        [
            "-m",
            "benchledger.refplatform",
            "serve",
            "--port",
            "0",
            "--pool",
            "2",
            "--admin-key",
            "adm-k",
            "--pool-base",
            "pk",
            "--pack",
            seed,
        ],
        tmp_path,
    )
    try:
        assert any(line.strip().startswith(f"pack:      {seed}") for line in lines), lines
        got = httpx2.get(f"{url}/api/v1/portal/knowledge-pages", headers={"X-API-Key": "pk-001"})
        assert got.status_code == 200 and got.json()["total"] == 4
    finally:
        _stop(proc)


def test_benchledger_platform_serve_prints_its_url_and_keys_and_serves(tmp_path):
    url, lines, proc = _serve(
        [
            "-m",
            "benchledger",
            "platform",
            "serve",
            "--port",
            "0",
            "--pool",
            "2",
            "--admin-key",
            "adm-k",
            "--pool-base",
            "pk",
            "--db",
            str(tmp_path / "p.sqlite"),
        ],
        tmp_path,
    )
    try:
        assert "admin key: adm-k" in lines[0] and "pk-001 .. pk-002" in lines[1]
        got = httpx2.get(
            f"{url}/api/v1/portal/knowledge-pages", headers={"Authorization": "Bearer pk-002"}
        )
        assert got.status_code == 200
    finally:
        _stop(proc)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--embedder", "magic"], "--embedder"),
        (["--pool", "0"], "--pool"),
        (["--db", "/proc/nope/state.sqlite"], "state.sqlite"),
    ],
    ids=["embedder", "pool", "db"],
)
def test_benchledger_platform_serve_refuses_bad_options_with_one_line(argv, message, capsys):
    assert cli.main(["platform", "serve", "--port", "0", *argv]) == 2
    err = capsys.readouterr().err.strip().split("\n")
    assert len(err) == 1 and message in err[0]


# -- serve and run fit ---------------------------------------------------------------------


def _banner(proc: subprocess.Popen[str]) -> list[str]:
    """The lines serve prints before it serves, up to its last, ``Ctrl-C stops it.``."""
    lines: list[str] = []
    while not lines or lines[-1] != "Ctrl-C stops it.":
        line = proc.stdout.readline()  # type: ignore[union-attr]
        assert line, f"serve ended: {lines} {proc.stderr.read()}"  # type: ignore[union-attr]
        lines.append(line.rstrip("\n"))
    return lines


def _committed_subset(tmp_path, n: int = 2) -> str:
    folder = tmp_path / "protocols"
    folder.mkdir()
    for name in sorted(os.listdir(protocols.LIFECYCLE_DIR))[:n]:
        with open(os.path.join(protocols.LIFECYCLE_DIR, name), encoding="utf-8") as fh:
            (folder / name).write_text(fh.read())
    return str(folder)


def test_the_run_line_serve_prints_runs_against_it_and_the_run_verifies(tmp_path):
    serve = [sys.executable, "-m", "benchledger", "platform", "serve", "--port", "0"]
    proc = subprocess.Popen(
        serve, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO
    )
    try:
        lines = _banner(proc)
        runs = [ln.strip() for ln in lines if ln.strip().startswith("benchledger run ")]
        assert len(runs) == 1, lines
        words = shlex.split(runs[0])
        ledger = str(tmp_path / "l.sqlite")
        argv = [sys.executable, "-m", "benchledger", *words[1:],
                "--protocols", _committed_subset(tmp_path), "--ledger", ledger]  # fmt: skip
        run = subprocess.run(argv, capture_output=True, text=True, cwd=REPO, timeout=600)
        assert run.returncode == 0, run.stdout + run.stderr
    finally:
        _stop(proc)
    sealed = re.search(r"^run (\S+) sealed, root ([0-9a-f]{64})", run.stdout, re.M)
    assert sealed, run.stdout
    assert cli.main(["verify", sealed.group(1), "--root", sealed.group(2), "--ledger", ledger]) == 0


def test_serve_by_default_holds_the_identities_a_run_of_the_committed_suite_needs():
    suite = suite_for("lifecycle")
    items = suite.load(suite.default_path()).items
    needed, margin = pool_needed(len(items), suite.identities_per_unit)
    assert cli.build_parser().parse_args(["platform", "serve"]).pool >= needed + margin
    assert refplatform_main.build_parser().parse_args(["serve"]).pool >= needed + margin


def test_a_run_given_the_mcp_endpoint_reaches_the_platform_and_records_its_base_url(tmp_path):
    ledger = str(tmp_path / "l.sqlite")
    with RunningPlatform(pool_size=8) as running:
        argv = ["run", "--run-id", "mcp", "--platform", running.mcp_url, "--admin-key",
                running.admin_key, "--pool-base", running.pool_base, "--pool-size", "8",
                "--protocols", _committed_subset(tmp_path, 1), "--ledger", ledger]  # fmt: skip
        assert cli.main(argv) == 0
        with contextlib.closing(open_store(ledger)) as store:
            assert read_record(Ledger(store), "mcp").platform.url == running.url


def test_serve_on_a_busy_port_exits_2_with_one_line_and_prints_no_url(forks):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = forks.run(["platform", "serve", "--port", str(port)])  # tests/forked.py
    assert done.returncode == 2 and done.stdout == ""
    err = done.stderr.strip().splitlines()
    assert len(err) == 1 and f"{port}: Address already in use" in err[0], done.stderr


@pytest.fixture
def numpy_missing(tmp_path) -> tuple[str, dict[str, str]]:
    """A folder holding a ``numpy`` that fails to import (as if absent), and an environment
    whose Python finds it first: (the folder, the environment's additions)."""
    fake = tmp_path / "site" / "numpy"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('No module named numpy (test)')\n")
    path = os.pathsep.join(p for p in (str(tmp_path / "site"), os.environ.get("PYTHONPATH")) if p)
    return str(tmp_path / "site"), {"PYTHONPATH": path}


@pytest.mark.parametrize(
    "argv",
    [["run", "--ledger", "LEDGER"], ["platform", "serve", "--port", "0"]],
    ids=["run", "platform-serve"],
)
def test_a_platform_whose_sql_engine_cannot_start_fails_at_once_in_one_line(
    tmp_path, numpy_missing, argv, forks
):
    # DuckDB's Python functions need numpy: without it the SQL workers cannot start, and a
    # run used to seal 0/30 after minutes of failing queries. Forked (tests/forked.py): the
    # command and the SQL workers it starts find the failing numpy first.
    ledger = tmp_path / "l.sqlite"
    site, env = numpy_missing
    res = forks.run([str(ledger) if a == "LEDGER" else a for a in argv], path=[site], env=env)
    assert res.returncode == 2, res.stdout + res.stderr
    assert res.stderr.count("\n") == 1 and "Traceback" not in res.stderr, res.stderr
    assert "SQL engine cannot run queries" in res.stderr and "numpy" in res.stderr
    assert "serving" not in res.stdout  # never a URL that serves nothing
    assert not ledger.exists()
