"""One run, many processes on one ledger and one platform, sealed once, like one.

What the static shards (`--shard i/n`, retired for the queue) left: the ledger's join and
seal-once under several writers, `report --watch`, the flag's retirement, and the queue's
version of the shards' end-to-end test: real worker processes (`python -m benchledger
worker`) against the local PostgreSQL server (a schema per test) and one `python -m
benchledger.refplatform serve` used as an external platform, compared with a
single-process run of the same protocols.
"""

from __future__ import annotations

import collections
import contextlib
import os
import re
import secrets
import signal
import subprocess
import sys
from collections.abc import Iterator
from typing import NamedTuple

import pytest

from benchledger.cli import main
from benchledger.cli.watch import live_frames
from benchledger.harness.record import RunRefused
from benchledger.ledger import Ledger, RunSealed, open_store
from benchledger.ledger.errors import UnitsMissing
from benchledger.ledger.events import (
    PlannedUnit,
    PlatformRecord,
    RunRecord,
    RunStartedBody,
    UnitFinishedBody,
    UnitFinishedEvent,
    UnitStartedBody,
    UnitStartedEvent,
)
from benchledger.projections.fold import LiveView, fold
from benchledger.projections.source import from_ledger
from benchledger.projections.suites import lookup
from benchledger.projections.suites.lifecycle.scorecard import LifecycleFold, scorecard
from benchledger.running import config
from tests.conftest import REPO, cli, drop_schema, one_line_exit_2, postgres_url, protocol_subset

# Seven protocols over four entities, with promote and update stages among them.
IDS = [
    "bl-anchor-tier",
    "bl-benchmark-tier",
    "bl-closing-window",
    "bl-review-window",
    "bl-keystone-region",
    "bl-focus-region",
    "bl-legacy-baseline",
]


def subset(tmp_path, ids=IDS) -> str:
    return protocol_subset(tmp_path, list(ids))


def finished_once(ledger: Ledger, run_id: str) -> collections.Counter:
    """(protocol, attempt) -> how many streams of the run finished it."""
    evs = [e for e, _ in ledger.events(run_id)]
    starts = {e.stream: (e.body.protocol_id, e.body.attempt) for e in evs
              if isinstance(e, UnitStartedEvent)}  # fmt: skip
    return collections.Counter(starts[e.stream] for e in evs if isinstance(e, UnitFinishedEvent))


def metrics(ledger: Ledger, run_id: str) -> dict[str, tuple[float, int]]:
    card = scorecard([fold(LifecycleFold(), from_ledger(ledger, run_id).events)])
    return {name: (m.num, m.den) for name, m in card.metrics.items()}


# -- the partition ------------------------------------------------------------------------


# -- the ledger: join, seal once --------------------------------------------------------------


def _record(*units: str) -> RunStartedBody:
    planned = [PlannedUnit(u, 1) for u in units]
    record = RunRecord(suite="lifecycle", platform=PlatformRecord(kind="embedded"), units=planned)
    return RunStartedBody(suite="lifecycle", record=record, agent="scripted")


def _finish(ledger: Ledger, run_id: str, unit: str) -> None:
    w = ledger.new_stream(f"{run_id}/{unit}/1")
    w.append(UnitStartedBody(protocol_id=unit, attempt=1))
    w.append(UnitFinishedBody(outcome={"captured": True}))
    ledger.commit(w)


def test_the_first_writer_starts_the_run_and_the_others_read_its_header(any_store):
    ledger = Ledger(any_store)
    assert ledger.join_run("r", _record("a", "b")) is None
    other = _record("a", "b", "c")
    assert ledger.join_run("r", other) == _record("a", "b")  # the recorded one, to compare
    assert [e.seq for e, _ in ledger.events("r", "r")] == [0]  # written once


def test_a_run_seals_only_when_every_planned_unit_finished_and_only_once(any_store):
    ledger = Ledger(any_store)
    ledger.join_run("r", _record("a", "b"))
    _finish(ledger, "r", "a")
    with pytest.raises(UnitsMissing) as missing:
        ledger.seal_complete("r")
    assert missing.value.missing == ["b/1"] and "b/1" in str(missing.value)
    _finish(ledger, "r", "b")
    root = ledger.seal_complete("r")
    assert ledger.seal_complete("r") == root  # a second worker sealing gets the same root
    assert ledger.verify("r", require_seal=True)[0] is None
    with pytest.raises(RunSealed):
        ledger.join_run("r", _record("a", "b"))


def test_seal_with_a_missing_unit_exits_1_naming_it(tmp_path, capsys):
    path = str(tmp_path / "l.sqlite")
    ledger = Ledger(open_store(path))
    ledger.join_run("r", _record("a", "b"))
    _finish(ledger, "r", "a")
    assert main(["seal", "r", "--ledger", path]) == 1
    err = capsys.readouterr().err
    assert "b/1" in err and "a/1" not in err
    _finish(ledger, "r", "b")
    assert main(["seal", "r", "--ledger", path]) == 0
    assert "sealed, root" in capsys.readouterr().out
    assert ledger.run_info("r").root


# -- report --watch -------------------------------------------------------------------------


def test_report_watch_re_renders_as_units_land_and_stops_at_the_seal(tmp_path):
    ledger = Ledger(open_store(str(tmp_path / "l.sqlite")))
    ledger.join_run("r", _record("a", "b"))
    landing = iter([lambda: _finish(ledger, "r", "a"),
                    lambda: (_finish(ledger, "r", "b"), ledger.seal_complete("r"))])  # fmt: skip

    def wait() -> None:  # stands for the poll interval: the next units land meanwhile
        next(landing)()

    view = LiveView(ledger.store, LifecycleFold(), run_id="r")
    frames = list(live_frames(view, lookup("lifecycle"), "table", wait))
    labels = [f.splitlines()[0] for f in frames]
    assert labels[0].startswith("LIVE run r: unsealed, 0 of 2 planned units finished")
    assert labels[1].startswith("LIVE run r: unsealed, 1 of 2 planned units finished")
    assert labels[2] == f"run r: sealed, root {ledger.run_info('r').root} (2 units, final)"
    assert len(frames) == 3


# -- --shard, retired ---------------------------------------------------------------------------


def test_shard_is_retired_in_one_line_pointing_to_the_queue(tmp_path, capsys):
    path = str(tmp_path / "l.sqlite")
    for argv in (["--run-id", "s", "--shard", "1/2"], ["--resume", "s", "--shard", "2/2"]):
        code, _, err = cli(capsys, "run", *argv, "--ledger", path)
        one_line_exit_2(code, err, "--shard i/n was retired", "benchledger run --queue",
                        "benchledger worker", "docs/scaling.md")  # fmt: skip
    assert not os.path.exists(path)  # nothing written
    with pytest.raises(RunRefused, match="--shard i/n was retired"):
        config(shard="1/2")


# -- two queue workers, one PostgreSQL ledger, one platform ------------------------------------


class Served(NamedTuple):
    url: str
    admin_key: str
    pool_base: str


@contextlib.contextmanager
def refplatform(log) -> Iterator[Served]:
    """``python -m benchledger.refplatform serve --port 0`` as an external platform."""
    admin, base = f"adm-{secrets.token_hex(4)}", f"key-{secrets.token_hex(4)}"
    cmd = [sys.executable, "-m", "benchledger.refplatform", "serve", "--port", "0", "--pool", "64",
           "--admin-key", admin, "--pool-base", base]  # fmt: skip
    with open(log, "w") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True, cwd=REPO)
    try:
        assert proc.stdout is not None
        m = re.search(r"serving (http://\S+)/mcp", proc.stdout.readline())
        assert m, log.read_text()
        yield Served(m.group(1), admin, base)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _argv(platform: Served, ledger: str, *extra: str) -> list[str]:
    argv = [
        sys.executable,
        "-m",
        "benchledger",
        "run",
        "--ledger",
        ledger,
        "--platform",
        platform.url,
    ]
    return [*argv, "--admin-key", platform.admin_key, "--pool-base", platform.pool_base, *extra]


def _cli(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "benchledger", *argv], capture_output=True,
                          text=True, cwd=REPO, timeout=600)  # fmt: skip


@pytest.fixture
def pg_ledger() -> Iterator[str]:
    url = postgres_url()
    yield url
    drop_schema(url)


@pytest.fixture(scope="module")
def single_process(tmp_path_factory) -> dict[str, tuple[float, int]]:
    """The metrics of one unsharded run of the same protocols on a fresh platform."""
    tmp = tmp_path_factory.mktemp("single")
    ledger = str(tmp / "single.sqlite")
    with refplatform(tmp / "platform.log") as platform:
        argv = _argv(platform, ledger, "--protocols", subset(tmp), "--run-id", "one",
                     "--pool-size", "40")  # fmt: skip
        done = subprocess.run(argv, capture_output=True, text=True, cwd=REPO, timeout=600)
    assert done.returncode == 0, done.stderr
    return metrics(Ledger(open_store(ledger)), "one")


def _check_sealed_like_one(url: str, tmp_path, single: dict) -> None:
    ledger = Ledger(open_store(url))
    assert sorted(finished_once(ledger, "s").items()) == [((p, 1), 1) for p in sorted(IDS)]
    assert ledger.run_info("s").root
    assert metrics(ledger, "s") == single
    bundle = str(tmp_path / "s.jsonl")
    for argv in (
        ["verify", "s", "--ledger", url],
        ["export", "s", "-o", bundle, "--ledger", url],
        ["verify", bundle],
        ["report", "s", "--ledger", url],
        ["replay", "s", "--ledger", url],
    ):
        done = _cli(*argv)
        assert done.returncode == 0, (argv, done.stdout, done.stderr)


@pytest.mark.postgres
@pytest.mark.slow
def test_a_run_queued_and_worked_by_two_workers_equals_a_single_process_run(
    tmp_path, pg_ledger, single_process
):
    """The queue's version of the test above: the same protocols, platform and pool,
    queued once and worked by two worker processes (keys from their environment)."""
    folder = subset(tmp_path)
    queue_schema = pg_ledger.rsplit("schema=", 1)[1] + "_queue"
    try:
        with refplatform(tmp_path / "platform.log") as platform:
            queued = subprocess.run(
                _argv(platform, pg_ledger, "--protocols", folder, "--run-id", "s",
                      "--pool-size", "40", "--queue"),
                capture_output=True, text=True, cwd=REPO, timeout=600,
            )  # fmt: skip
            assert queued.returncode == 0, queued.stderr
            env = {**os.environ, "BENCHLEDGER_ADMIN_KEY": platform.admin_key,
                   "BENCHLEDGER_POOL_BASE": platform.pool_base}  # fmt: skip
            argv = [sys.executable, "-m", "benchledger", "worker", "--once", "--protocols",
                    folder, "--concurrency", "2", "--platform", platform.url,
                    "--ledger", pg_ledger]  # fmt: skip
            procs = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True, cwd=REPO, env=env) for _ in range(2)]  # fmt: skip
            outs = [p.communicate(timeout=600) for p in procs]
        assert [p.returncode for p in procs] == [0, 0], outs
        assert sum("sealed, root" in out for out, _ in outs) >= 1  # the last units' workers
        _check_sealed_like_one(pg_ledger, tmp_path, single_process)
    finally:
        drop_schema(pg_ledger.replace(pg_ledger.rsplit("schema=", 1)[1], queue_schema))
