"""Suites, model providers and ledger backends plug in through entry points: a distribution
that names them in ``benchledger.suites``, ``benchledger.models`` and ``benchledger.ledgers``
is listed with its name and version, its suite runs with its own item option, its provider
makes the run's agent, its backend opens its scheme's URLs, and an entry point that cannot
be loaded is one line and exit 2 where it is used.

The distribution is a ``.dist-info`` folder written on a fresh interpreter's path (what
``pip install`` leaves in site-packages), naming objects in this test package.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from benchledger.harness.agents import AgentRequest, ModelProvider, ScriptedAgent
from benchledger.harness.agents.base import Agent
from benchledger.ledger import Ledger, open_store
from benchledger.ledger.backend import Store
from benchledger.ledger.events import RunStartedEvent
from benchledger.ledger.sqlite import SqliteStore
from tests.forked import Forked, Forks

REPO = Path(__file__).resolve().parent.parent
DIST = "riddle-kit"
VERSION = "1.2.3"


def _echo(request: AgentRequest) -> Agent:
    """The toy provider: the scripted agent, under whatever model the spec names."""
    if request.model != "hello":
        raise ValueError(f"--agent {request.spec}: echo knows only the model hello")
    return ScriptedAgent()


ECHO = ModelProvider(_echo, "echo:hello", "a toy provider (a test's)")


def open_scratch(location: str, *, create: bool, read_only: bool) -> Store:
    """A toy backend: ``scratch://NAME`` is an empty ledger in memory."""
    return SqliteStore(":memory:")


def _install(site: Path, entry_points: str) -> None:
    """A distribution ``riddle-kit 1.2.3`` holding only entry points, found on ``site``."""
    info = site / f"riddle_kit-{VERSION}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {DIST}\nVersion: {VERSION}\n")
    (info / "entry_points.txt").write_text(entry_points)


GOOD = """\
[benchledger.suites]
riddles = tests.test_toy_suite:PLUGIN

[benchledger.models]
echo = tests.test_extensions:ECHO

[benchledger.ledgers]
scratch = tests.test_extensions:open_scratch
"""
BROKEN = """\
[benchledger.suites]
broken = tests.no_such_module:PLUGIN

[benchledger.models]
broken = tests.test_extensions:_install
"""


EVERY_KIND_BROKEN = """
[benchledger.platforms]
broken = tests.no_such_module:PLATFORM

[benchledger.ledgers]
broken = tests.no_such_module:open_broken
"""


# A refused run: on a platform in a child process, so no SQL warm-up thread is loading in
# this one when it exits (a refusal that lands mid-load can abort the interpreter at exit:
# ``cli.run._warm_embedded``, a race of its own).
REFUSED = ("--platform", "embedded:process")


def _benchledger(forks: Forks, site: Path, *argv: str) -> Forked:
    """``benchledger ARGV`` as in a fresh interpreter that has ``site`` on its path (forked:
    tests/forked.py; entry points are read from the path when first looked up)."""
    env = {"PYTHONPATH": os.pathsep.join([str(REPO), str(site)])}  # for its own children
    return forks.run(argv, path=[str(site)], env=env, cwd=str(REPO))


@pytest.fixture
def site(tmp_path: Path) -> Path:
    found = tmp_path / "site"
    _install(found, GOOD)
    return found


@pytest.mark.parametrize(
    ("command", "name", "where"),
    [
        ("suites", "riddles", "tests.test_toy_suite:PLUGIN"),
        ("models", "echo", "tests.test_extensions:ECHO"),
        ("ledgers", "scratch", "tests.test_extensions:open_scratch"),
    ],
    ids=["suite", "model-provider", "ledger-backend"],
)
def test_an_installed_entry_point_is_listed_with_its_distribution_and_version(
    forks, site, command, name, where
):
    res = _benchledger(forks, site, command, "--json")
    assert res.returncode == 0, res.stderr
    rows = {r["name"]: r for r in json.loads(res.stdout)}
    assert rows[name]["origin"] == f"{DIST} {VERSION}" and rows[name]["where"] == where
    assert all(r["origin"] == "benchledger" for n, r in rows.items() if n != name)
    table = _benchledger(forks, site, command).stdout
    assert any(line.split()[:4] == [name, DIST, VERSION, where] for line in table.splitlines())


def test_an_installed_suite_runs_with_its_own_item_option_and_an_installed_provider(
    forks, site, tmp_path
):
    ledger = str(tmp_path / "l.sqlite")
    res = _benchledger(forks, site, "run", "--suite", "riddles", "--riddles", "any", "--agent",
                       "echo:hello", "--run-id", "rd", "--ledger", ledger)  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert "riddles of rd: solved 2/3" in res.stdout and "run rd sealed" in res.stdout
    led = Ledger(open_store(ledger, create=False))
    header = next(led.events("rd", stream="rd"))[0]
    led.store.close()
    assert isinstance(header, RunStartedEvent) and header.body.record is not None
    assert (header.body.suite, header.body.record.agent) == ("riddles", "echo:hello")


def test_an_installed_ledger_backend_opens_the_urls_of_its_scheme(forks, site):
    res = _benchledger(forks, site, "runs", "--ledger", "scratch://x")
    assert res.returncode == 0 and res.stderr == "", res.stderr
    res = _benchledger(forks, site, "runs", "--ledger", "nosuch://u:secret@h/db")
    assert res.returncode == 2 and "secret" not in res.stderr
    assert res.stderr.strip() == (
        "benchledger: error: ledger nosuch://...: unknown ledger URL scheme (use a file path "
        "or one of: postgres://, postgresql://, scratch://)"
    )


def test_another_suites_item_option_is_refused_naming_the_suite_it_belongs_to(
    forks, site, tmp_path
):
    res = _benchledger(forks, site, "run", "--suite", "riddles", "--cases", "x", *REFUSED,
                       "--ledger", str(tmp_path / "l.sqlite"))  # fmt: skip
    assert res.returncode == 2
    assert res.stderr.strip().splitlines() == [
        "benchledger: error: --cases belongs to suite provenance; suite riddles reads its "
        "items with --riddles"
    ]


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["run", "--suite", "broken"], "suite plugin broken = tests.no_such_module:PLUGIN: "
                                       "cannot be loaded (ModuleNotFoundError"),
        (["run", "--agent", "broken:m"], "--agent 'broken:m': model provider plugin broken = "
                                         "tests.test_extensions:_install: is a function, not a "
                                         "ModelProvider"),
        (["run", "--agent", "nosuch:m"], "--agent 'nosuch:m': no such model provider (known: "
                                         "anthropic, broken, calibration, fake, full-context, "
                                         "no-memory, openai, recorded, retrieval, scripted)"),
    ],
    ids=["suite", "model-provider", "unknown-provider"],
)  # fmt: skip
def test_a_broken_or_unknown_entry_point_is_one_line_and_exit_2(forks, tmp_path, argv, says):
    site = tmp_path / "site"
    _install(site, BROKEN)
    ledger = tmp_path / "l.sqlite"
    res = _benchledger(forks, site, *argv, *REFUSED, "--ledger", str(ledger))
    assert res.returncode == 2, res.stdout
    [line] = res.stderr.strip().splitlines()
    assert line.startswith("benchledger: error: ") and says in line, line
    assert not ledger.exists()  # refused before anything was written


def test_a_broken_entry_point_is_listed_saying_why(forks, tmp_path):
    site = tmp_path / "site"
    _install(site, BROKEN)
    res = _benchledger(forks, site, "suites", "--json")
    assert res.returncode == 0, res.stderr
    [broken] = [r for r in json.loads(res.stdout) if r["name"] == "broken"]
    assert broken["origin"] == f"{DIST} {VERSION}"
    assert broken["error"].startswith("cannot be loaded (ModuleNotFoundError")


@pytest.mark.parametrize(
    "argv",
    [
        ["report", "a"],
        ["audit", "a", "capture_rate"],
        ["compare", "a", "b"],
        ["gate", "b", "--baseline", "a"],
        ["runs"],
        ["run", "--limit", "1", "--run-id", "c"],
    ],
    ids=["report", "audit", "compare", "gate", "runs", "run"],
)
def test_broken_plugins_of_every_kind_are_refused_only_where_they_are_named(forks, tmp_path, argv):
    """Issue 50: one installed suite that cannot load made report, audit, compare and gate
    exit 2 for every run (building ``--suite``'s choices looked every suite up); a broken
    platform, model provider or ledger backend must not either."""
    from tests.sample import PASSING, lifecycle_run

    site = tmp_path / "site"
    _install(site, BROKEN + EVERY_KIND_BROKEN)
    ledger = str(tmp_path / "l.sqlite")
    with open_store(ledger) as store:
        for run in ("a", "b"):
            lifecycle_run(Ledger(store), run, {("p1", 1): PASSING, ("p2", 1): PASSING})
    res = _benchledger(forks, site, *argv, "--ledger", ledger)
    assert res.returncode in (0, 3), res.stderr  # gate: 3, undecided at 2 units
    assert "plugin" not in res.stderr and res.stdout


SHADOWING = """\
[benchledger.platforms]
embedded = tests.no_such_module:EMBEDDED

[benchledger.suites]
lifecycle = tests.no_such_module:LIFECYCLE

[benchledger.models]
scripted = tests.no_such_module:SCRIPTED

[benchledger.ledgers]
sqlite = tests.no_such_module:open_sqlite
"""
SHADOWED = [("platforms", "embedded"), ("suites", "lifecycle"), ("models", "scripted"),
            ("ledgers", "sqlite")]  # fmt: skip


@pytest.mark.parametrize(("command", "name"), SHADOWED, ids=[c for c, _ in SHADOWED])
def test_a_plugin_named_like_a_built_in_is_listed_as_shadowed(forks, tmp_path, command, name):
    """Issue 50: an installed plugin named like one of benchledger's own was dropped
    without a word; it is listed, as shadowed, beside the built-in that wins."""
    site = tmp_path / "site"
    _install(site, SHADOWING)
    res = _benchledger(forks, site, command, "--json")
    assert res.returncode == 0 and res.stderr == "", res.stderr
    rows = [r for r in json.loads(res.stdout) if r["name"] == name]
    assert [r["origin"] for r in rows] == ["benchledger", f"{DIST} {VERSION}"], rows
    assert rows[1]["shadowed"] == f"by benchledger's own {name}" and "error" not in rows[1]
    table = _benchledger(forks, site, command).stdout.splitlines()
    [line] = [x for x in table if x.split()[:2] == [name, DIST]]
    assert f"SHADOWED by benchledger's own {name}: not used" in line


def test_a_run_that_chooses_a_shadowed_name_warns_once_for_each_and_uses_the_built_in(
    forks, tmp_path
):
    site = tmp_path / "site"
    _install(site, SHADOWING)
    res = _benchledger(forks, site, "run", "--limit", "1", "--ledger", str(tmp_path / "l.sqlite"))
    assert res.returncode == 0, res.stderr
    warned = [x for x in res.stderr.splitlines() if x.startswith("benchledger: warning:")]
    kinds = sorted(x.split()[2] for x in warned)
    assert kinds == ["ledger", "model", "platform", "suite"], warned
    assert all(f"{DIST} {VERSION}" in x and "is shadowed and not used" in x for x in warned)
