"""One run in shards: many processes on one ledger and one platform, sealed once, like one.

The PostgreSQL tests run real shard processes (`python -m benchledger run --shard i/n`) against
the local server (a schema per test) and one `python -m benchledger.refplatform serve` used as an
external platform, and compare with a single-process run of the same protocols.
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

from benchledger import protocols
from benchledger.cli import main
from benchledger.cli.watch import live_frames
from benchledger.harness.sharding import Shard, identity_blocks, parse_shard, partition, shard_ids
from benchledger.harness.suites import suite_for
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
from tests.conftest import REPO, drop_schema, postgres_url, protocol_subset

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


def test_shard_options_are_i_of_n_counted_from_one():
    assert parse_shard("2/3") == Shard(2, 3)
    assert str(parse_shard(" 1/1 ")) == "1/1"
    for bad in ("0/2", "3/2", "1", "a/b", "1/0", "-1/2"):
        with pytest.raises(ValueError, match="i/n"):
            parse_shard(bad)


def test_units_are_partitioned_by_entity_the_same_way_every_time():
    suite = suite_for("lifecycle")
    items = suite.load(protocols.LIFECYCLE_DIR).items
    for n in (2, 3, 5):
        parts = partition(items, suite.entity, n)
        assert parts == partition(items, suite.entity, n)  # deterministic
        ids = [i.id for part in parts for i in part]
        assert sorted(ids) == sorted(i.id for i in items)  # every item exactly once
        for part in parts:  # an entity's items are never split over shards
            others = [i for p in parts if p is not part for i in p]
            assert not {suite.entity(i) for i in part} & {suite.entity(i) for i in others}
        assert [shard_ids(items, suite.entity, Shard(i + 1, n)) for i in range(n)] == [
            {i.id for i in part} for part in parts
        ]


def test_entity_groups_go_to_the_least_loaded_shard():
    class Item(NamedTuple):
        id: str
        entity: str

    items = [Item(f"p{n}", e) for n, e in enumerate("aaabbcd")]
    parts = partition(items, lambda i: i.entity, 2)
    # a (3) to shard 1, b (2) and c (1) to shard 2, d to the lower of two equals: shard 1
    assert [[i.id for i in p] for p in parts] == [["p0", "p1", "p2", "p6"], ["p3", "p4", "p5"]]


def test_shards_resuming_at_once_never_take_the_same_identities():
    taken: list[int] = []
    # Each saw a different "highest identity so far": they still never collide.
    for start, shard in ((41, Shard(1, 3)), (47, Shard(2, 3)), (44, Shard(3, 3))):
        blocks = identity_blocks(start, 2, shard)
        for _ in range(3):
            ids = next(blocks)
            assert min(ids) >= start and len(ids) == 2
            taken += ids
    assert len(taken) == len(set(taken))
    unsharded = identity_blocks(41, 2, None)
    assert [next(unsharded) for _ in range(2)] == [(41, 42), (43, 44)]


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


def test_the_first_shard_starts_the_run_and_the_others_read_its_header(any_store):
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
    assert ledger.seal_complete("r") == root  # a second shard sealing gets the same root
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


# -- shards through the command line ------------------------------------------------------------


def test_a_shard_whose_configuration_differs_from_the_run_is_refused_naming_it(tmp_path, capsys):
    path = str(tmp_path / "l.sqlite")
    folder = subset(tmp_path, ["bl-anchor-tier", "bl-closing-window"])
    common = ["run", "--protocols", folder, "--ledger", path, "--run-id", "s"]
    assert main([*common, "--shard", "1/2"]) == 0
    assert "not sealed yet" in capsys.readouterr().out
    before = Ledger(open_store(path)).run_info("s").events
    assert main([*common, "--shard", "2/2", "--k", "2"]) == 2
    assert "k: 1 != 2" in capsys.readouterr().err
    assert main([*common, "--shard", "2/3"]) == 2
    assert "shards: 2 != 3" in capsys.readouterr().err
    assert main([*common, "--shard", "1/2"]) == 2  # shard 1 again: resume it instead
    assert "--resume s --shard 1/2" in capsys.readouterr().err
    assert Ledger(open_store(path)).run_info("s").events == before  # nothing written
    assert main([*common, "--shard", "2/2", "--concurrency", "2"]) == 0  # per-machine: fine
    assert "sealed, root" in capsys.readouterr().out
    assert main(["run", "--protocols", folder, "--ledger", path, "--shard", "1/2"]) == 2
    assert "--shard needs --run-id" in capsys.readouterr().err


# -- two shard processes, one PostgreSQL ledger, one platform ------------------------------------


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


def _shard(platform: Served, ledger: str, folder: str, shard: str, *extra: str):
    argv = _argv(platform, ledger, "--protocols", folder, "--run-id", "s", "--pool-size", "40",
                 "--shard", shard, "--concurrency", "2", *extra)  # fmt: skip
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=REPO)  # fmt: skip


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
def test_two_shards_on_one_postgres_ledger_equal_a_single_process_run(
    tmp_path, pg_ledger, single_process
):
    folder = subset(tmp_path)
    with refplatform(tmp_path / "platform.log") as platform:
        procs = [_shard(platform, pg_ledger, folder, s) for s in ("1/2", "2/2")]
        outs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert sum("sealed, root" in out for out, _ in outs) >= 1  # the last to finish sealed it
    _check_sealed_like_one(pg_ledger, tmp_path, single_process)


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
                    folder, "--concurrency", "2", "--ledger", pg_ledger]  # fmt: skip
            procs = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True, cwd=REPO, env=env) for _ in range(2)]  # fmt: skip
            outs = [p.communicate(timeout=600) for p in procs]
        assert [p.returncode for p in procs] == [0, 0], outs
        assert sum("sealed, root" in out for out, _ in outs) >= 1  # the last units' workers
        _check_sealed_like_one(pg_ledger, tmp_path, single_process)
    finally:
        drop_schema(pg_ledger.replace(pg_ledger.rsplit("schema=", 1)[1], queue_schema))


@pytest.mark.postgres
@pytest.mark.slow
def test_a_shard_killed_with_sigkill_resumes_to_the_same_run(tmp_path, pg_ledger, single_process):
    folder = subset(tmp_path)
    with refplatform(tmp_path / "platform.log") as platform:
        first = _shard(platform, pg_ledger, folder, "1/2", "--concurrency", "1")
        assert first.stdout is not None
        for line in first.stdout:  # one unit landed, the next is in flight: kill it now
            if line.startswith("unit 1/"):
                break
        first.send_signal(signal.SIGKILL)
        first.wait()
        _, err = first.communicate()
        second = _shard(platform, pg_ledger, folder, "2/2")
        out, err = second.communicate(timeout=600)
        assert second.returncode == 0, err
        assert "not sealed yet" in out
        ledger = Ledger(open_store(pg_ledger))
        missing = ledger.unfinished("s")
        assert missing and all(m.split("/")[0] in shard_ids_of(folder, 1) for m in missing)
        sealing = _cli("seal", "s", "--ledger", pg_ledger)
        assert sealing.returncode == 1
        assert all(m in sealing.stderr for m in missing[:10])
        resumed = subprocess.run(
            _argv(platform, pg_ledger, "--resume", "s", "--shard", "1/2"),
            capture_output=True, text=True, cwd=REPO, timeout=600,
        )  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    assert "sealed, root" in resumed.stdout
    _check_sealed_like_one(pg_ledger, tmp_path, single_process)


def shard_ids_of(folder: str, index: int) -> set[str]:
    suite = suite_for("lifecycle")
    return shard_ids(suite.load(folder).items, suite.entity, Shard(index, 2))
