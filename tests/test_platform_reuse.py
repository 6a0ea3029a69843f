"""A served refplatform reused for another run: the run warns that it holds earlier runs'
memories (naming the reset), `benchledger platform reset URL` empties it back to a fresh
server's state, and a `--reset-cmd` resets it before the first pass too."""

from __future__ import annotations

import re
import shlex
import sys

import httpx2
import pytest

from benchledger import cli
from benchledger.refplatform.server import RunningPlatform

LIMIT = ["--limit", "3"]  # a few units: enough to leave memories behind


@pytest.fixture
def served():
    with RunningPlatform(pool_size=40) as platform:
        yield platform


def run(platform: RunningPlatform, ledger: str, *extra: str) -> list[str]:
    argv = ["run", "--platform", platform.url, "--admin-key", platform.admin_key,
            "--pool-base", platform.pool_base, "--pool-size", "40", *LIMIT, *extra,
            "--ledger", ledger]  # fmt: skip
    assert cli.main(argv) == 0
    return argv


def held(platform: RunningPlatform) -> int:
    """Insights plus changesets, as the admin REST API counts them."""
    total = 0
    for what in ("insights", "changesets"):
        got = httpx2.get(f"{platform.url}/api/v1/admin/knowledge/{what}",
                         headers={"X-API-Key": platform.admin_key})  # fmt: skip
        total += got.json()["total"]
    return total


def warnings(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("benchledger: warning:")]


def test_a_second_run_on_a_served_platform_warns_in_one_line_naming_the_reset(
    served, tmp_path, capsys
):
    ledger = str(tmp_path / "l.sqlite")
    run(served, ledger)
    assert warnings(capsys.readouterr().err) == []
    assert held(served) > 0
    run(served, ledger)
    said = warnings(capsys.readouterr().err)
    assert len(said) == 1
    assert re.search(r"already holds \d+ memories and changesets", said[0])
    assert f"benchledger platform reset {served.url}" in said[0]


def test_platform_reset_empties_the_platform_and_the_next_run_does_not_warn(
    served, tmp_path, capsys
):
    ledger = str(tmp_path / "l.sqlite")
    run(served, ledger)
    capsys.readouterr()
    assert cli.main(["platform", "reset", served.url, "--admin-key", served.admin_key]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and "memory records removed" in out[0]
    assert held(served) == 0
    run(served, ledger)
    assert warnings(capsys.readouterr().err) == []


def test_a_reset_cmd_resets_a_platform_holding_memories_before_the_first_pass(
    served, tmp_path, capsys
):
    ledger = str(tmp_path / "l.sqlite")
    run(served, ledger)
    capsys.readouterr()
    reset = shlex.join([sys.executable, "-m", "benchledger", "platform", "reset", served.url,
                        "--admin-key", served.admin_key])  # fmt: skip
    run(served, ledger, "--reset-cmd", reset)
    assert warnings(capsys.readouterr().err) == []
    # Only the second run's own memories are left: as many as the first run left alone.
    first = held(served)
    assert cli.main(["platform", "reset", served.url, "--admin-key", served.admin_key]) == 0
    run(served, ledger)
    assert held(served) == first


def test_only_the_admin_key_may_reset_the_platform(served, capsys):
    assert cli.main(["platform", "reset", served.url, "--admin-key", served.key(1)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "HTTP 403" in err[0]
