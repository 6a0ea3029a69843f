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
from pathlib import Path

import pytest

from benchledger.cli import main
from benchledger.ledger import Ledger, open_store
from tests.forked import Forks
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


def _loaded_by(forks: Forks, argv: list[str]) -> tuple[int, list[str]]:
    """The exit code of ``benchledger ARGV`` run as in a fresh interpreter (forked from one
    that imported only ``benchledger.cli``: tests/forked.py), and its sys.modules."""
    got = forks.run(argv)
    return got.returncode, got.modules


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
    command: list[str], sealed: tuple[str, str], tmp_path: Path, forks: Forks
) -> None:
    ledger, bundle = sealed
    argv = [a.format(ledger=ledger, bundle=bundle) for a in command]
    code, modules = _loaded_by(forks, argv)
    assert code == 0, argv
    assert _heavy(modules) == [], f"benchledger {' '.join(command)} loaded heavy modules"


def test_a_command_imports_only_its_own_command_group(
    sealed: tuple[str, str], tmp_path: Path, forks: Forks
) -> None:
    ledger, _ = sealed
    code, modules = _loaded_by(forks, ["runs", "--ledger", ledger])
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
    bad: list[str], tmp_path: Path, forks: Forks
) -> None:
    argv = ["run", *(a.format(tmp=tmp_path) for a in bad), "--ledger", str(tmp_path / "l.db")]
    code, modules = _loaded_by(forks, argv)
    assert code == 2
    assert [m for m in RUN_STACKS if m in modules] == []
    assert not (tmp_path / "l.db").exists()
