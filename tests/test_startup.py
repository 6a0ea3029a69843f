"""Start-up: the everyday commands load none of the heavy stacks the run and replay paths need.

Each command runs for real in a fresh interpreter (``cli.main`` on a small sealed ledger),
which then reports what ``sys.modules`` holds. Model SDKs, the MCP stack, the HTTP
server, DuckDB and cryptography cost seconds of import between them; they load only in
the commands that use them. Likewise an agent that calls no model provider never loads
a provider SDK.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchledger.cli import main
from benchledger.ledger import Ledger, open_store
from tests.sample import build_run, counter_clock

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUN = "run-startup"

# Third-party packages (by top-level name) and our own modules that pull them in.
HEAVY = (
    "anthropic",
    "httpx2",
    "mcp",
    "mcp_types",
    "pydantic",
    "anyio",
    "uvicorn",
    "starlette",
    "sse_starlette",
    "duckdb",
    "numpy",
    "jsonschema",
    "cryptography",
    "rich",
    "psycopg",
    "benchledger.harness.agents",
    "benchledger.harness.platforms",
    "benchledger.replay.full",
)
# ``platform serve`` takes its options from refplatform's own command line, so the parser
# loads that module (and its error type); the platform itself must stay unloaded.
REFPLATFORM_OPTIONS = frozenset(
    {
        "benchledger.refplatform",
        "benchledger.refplatform.__main__",
        "benchledger.refplatform.errors",
    }
)

# A fresh interpreter per command, without starting one per command: one interpreter
# imports what every command imports first (benchledger.cli), then forks a child per command
# (a JSON line on stdin: report path, stderr path, argv), whose sys.modules is a fresh
# interpreter's at that point. The child runs the command, writes its exit code and loaded
# module names to the report, and the server answers with the child's own exit status.
PROBE = """
import json, os, sys
from benchledger import cli
for line in sys.stdin:
    report, err, argv = json.loads(line)
    pid = os.fork()
    if pid == 0:
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
        os.dup2(os.open(err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), 2)
        status = 1
        try:
            try:
                code = cli.main(argv)
            except SystemExit as exit_:  # --version prints and exits from argparse
                code = exit_.code
            with open(report, "w") as out:
                json.dump({"code": code, "modules": sorted(sys.modules)}, out)
            status = 0
        except BaseException:
            import traceback
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(status)
    print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), flush=True)
"""


@pytest.fixture(scope="module")
def probe() -> Iterator[subprocess.Popen[str]]:
    """The interpreter that forks one child per command (PROBE)."""
    server = subprocess.Popen(
        [sys.executable, "-c", PROBE],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ},
    )
    yield server
    assert server.stdin is not None
    server.stdin.close()
    assert server.wait(timeout=60) == 0


@pytest.fixture
def sealed(tmp_path: Path) -> tuple[str, str]:
    """A small sealed run in an SQLite ledger, and its bundle: (ledger path, bundle path)."""
    path = str(tmp_path / "startup.sqlite")
    led = Ledger(open_store(path), clock=counter_clock())
    build_run(led, RUN, units=2)
    led.store.close()
    bundle = str(tmp_path / "startup.jsonl")
    assert main(["export", RUN, "-o", bundle, "--ledger", path]) == 0
    return path, bundle


def _loaded_by(
    probe: subprocess.Popen[str], argv: list[str], tmp_path: Path
) -> tuple[int, list[str]]:
    """The exit code of ``benchledger ARGV`` run as in a fresh interpreter, and its
    sys.modules."""
    report, err = tmp_path / "modules.json", tmp_path / "stderr.txt"
    assert probe.stdin is not None and probe.stdout is not None
    probe.stdin.write(json.dumps([str(report), str(err), argv]) + "\n")
    probe.stdin.flush()
    status = probe.stdout.readline()
    assert status.strip() == "0", (status, err.read_text() if err.exists() else "")
    found = json.loads(report.read_text())
    return found["code"], found["modules"]


def _heavy(modules: list[str]) -> list[str]:
    """The HEAVY entries loaded (a package counts once), and any refplatform module beyond
    its options."""
    loaded = set(modules)
    found = [h for h in HEAVY if h in loaded]
    return found + [
        m
        for m in modules
        if m.split(".")[:2] == ["benchledger", "refplatform"] and m not in REFPLATFORM_OPTIONS
    ]


@pytest.mark.parametrize(
    "command",
    [
        pytest.param(["--version"], id="version"),
        pytest.param(["runs", "--ledger", "{ledger}"], id="runs"),
        pytest.param(["verify", "--ledger", "{ledger}"], id="verify-every-run"),
        pytest.param(["verify", RUN, "--ledger", "{ledger}"], id="verify-run"),
        pytest.param(["verify", "{bundle}"], id="verify-bundle"),
        pytest.param(["log", RUN, "--ledger", "{ledger}"], id="log"),
        pytest.param(["report", RUN, "--ledger", "{ledger}"], id="report"),
    ],
)
def test_everyday_commands_load_no_model_sdk_mcp_server_or_database_engine(
    command: list[str], sealed: tuple[str, str], tmp_path: Path, probe: subprocess.Popen[str]
) -> None:
    ledger, bundle = sealed
    argv = [a.format(ledger=ledger, bundle=bundle) for a in command]
    code, modules = _loaded_by(probe, argv, tmp_path)
    assert code == 0, argv
    assert _heavy(modules) == [], f"benchledger {' '.join(command)} loaded heavy modules"


def test_a_command_imports_only_its_own_command_group(
    sealed: tuple[str, str], tmp_path: Path, probe: subprocess.Popen[str]
) -> None:
    ledger, _ = sealed
    code, modules = _loaded_by(probe, ["runs", "--ledger", ledger], tmp_path)
    assert code == 0
    groups = {m for m in modules if m.split(".")[:2] == ["benchledger", "cli"]}
    # cli.ledger and what its commands use (the --pubkey options, redacted export).
    assert groups == {
        f"benchledger.{m}"
        for m in ("cli", "cli.common", "cli.ledger", "cli.authenticity", "cli.export")
    }


@pytest.mark.parametrize("spec", ["scripted", "fake:0"], ids=["scripted", "fake"])
def test_an_agent_that_calls_no_provider_loads_no_model_sdk(spec: str) -> None:
    probe = (
        "import json, sys\n"
        "from benchledger.harness import agents\n"
        f"agents.from_spec({spec!r})\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    res = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert "anthropic" not in json.loads(res.stdout)


# What a run's heavy imports bring (seconds of start-up): a bad option is refused before.
RUN_STACKS = ("anthropic", "mcp", "mcp_types", "pydantic", "uvicorn", "starlette", "duckdb")


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param(["--agent", "nonsense"], id="unknown-agent"),
        pytest.param(["--suite", "nosuch"], id="unknown-suite"),
        pytest.param(["--platform", "ftp://x"], id="unknown-platform"),
        pytest.param(["--platform", "server-memory@latest"], id="unpinned-server-memory"),
        pytest.param(["--pack", "{tmp}/nopack"], id="missing-pack"),
        pytest.param(["--protocols", "{tmp}/none"], id="missing-protocols"),
        pytest.param(["--run-id", "a/b"], id="bad-run-id"),
        pytest.param(["--shard", "x"], id="bad-shard"),
        pytest.param(["--time-scale", "2"], id="time-scale-without-recording"),
        pytest.param(["--reset-cmd", "./r.sh"], id="reset-cmd-on-embedded"),
        pytest.param(["--retry-infra"], id="retry-infra-without-resume"),
    ],
)
def test_a_bad_run_option_is_refused_before_the_runs_heavy_imports(
    bad: list[str], tmp_path: Path, probe: subprocess.Popen[str]
) -> None:
    argv = ["run", *(a.format(tmp=tmp_path) for a in bad), "--ledger", str(tmp_path / "l.db")]
    code, modules = _loaded_by(probe, argv, tmp_path)
    assert code == 2
    assert [m for m in RUN_STACKS if m in modules] == []
    assert not (tmp_path / "l.db").exists()
