"""The work queue (``run --queue``, ``worker``, ``queue``) on the PostgreSQL ledger: real
PostgreSQL, real worker processes, real SIGKILLs. Each waits on observable state (job
states, ledger streams) with a bounded deadline, never on a sleep."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

from benchledger.harness.plan import INTERRUPTED, RETRIED
from benchledger.harness.queue import queue_states
from benchledger.harness.worker import unit_streams
from benchledger.ledger import Ledger, open_store
from benchledger.ledger.events import UnitAbandonedEvent
from tests.conftest import (
    REPO,
    cli,
    drop_schema,
    one_line_exit_2,
    postgres_url,
    protocol_subset,
    refplatform_server,
)

ADMIN, POOL = "adm-queue-SECRET-4711", "poolq-SECRET-0815"


def _schema(url: str) -> str:
    return dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(url).query))["schema"]


def _sql(url: str, query: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Rows of ``query`` run in the test's database with the queue's schema first."""
    parts = urllib.parse.urlsplit(url)
    with psycopg.connect(host=parts.hostname, port=parts.port or 5432, user=parts.username,
                         dbname=parts.path.lstrip("/"), autocommit=True) as conn:  # fmt: skip
        conn.execute(f'SET search_path = "{_schema(url)}_queue"')
        cur = conn.execute(query, params)
        return list(cur.fetchall()) if cur.description else []


@pytest.fixture
def pg() -> Iterator[str]:
    url = postgres_url()
    yield url
    drop_schema(url)
    drop_schema(url.replace(f"schema={_schema(url)}", f"schema={_schema(url)}_queue"))


def _bl(*argv: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """``benchledger ARGV`` as a process of its own."""
    return subprocess.Popen(
        [sys.executable, "-m", "benchledger", *argv],
        cwd=REPO,
        env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _until(what: str, check: Callable[[], Any], deadline_s: float) -> Any:
    """``check()``'s first truthy value, polled until ``deadline_s`` passes (then fail)."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        got = check()
        if got:
            return got
        time.sleep(0.1)  # polling interval of an observable condition, not a synchronisation
    raise AssertionError(f"not within {deadline_s} s: {what}")


def _sql_ready(url: str) -> bool:
    """Whether the queue's tables exist yet."""
    try:
        return bool(_sql(url, "SELECT to_regclass('procrastinate_jobs')")[0][0])
    except psycopg.Error:
        return False


def _jobs(url: str) -> dict[str, int]:
    rows = _sql(url, "SELECT status::text, count(*) FROM procrastinate_jobs GROUP BY 1")
    return {s: n for s, n in rows}


def _counted(ledger: Ledger, run_id: str) -> dict[str, list[str]]:
    """Per planned unit (``PROTOCOL/ATTEMPT``), its counted streams (finished, not
    abandoned)."""
    from benchledger.harness.record import read_record

    out = {}
    for unit in read_record(ledger, run_id).units:
        base = f"{run_id}/{unit.unit_id}/{unit.attempt}"
        states = unit_streams(ledger, run_id, base)
        out[f"{unit.unit_id}/{unit.attempt}"] = sorted(
            s for s, st in states.items() if st["finished"] and not st["abandoned"]
        )
    return out


def _abandoned(ledger: Ledger, run_id: str) -> dict[str, str]:
    return {
        event.stream: event.body.reason
        for event, _ in ledger.events(run_id)
        if isinstance(event, UnitAbandonedEvent)
    }


def test_queue_needs_a_postgresql_ledger(tmp_path, capsys):
    ledger = tmp_path / "l.sqlite"
    code, _, err = cli(capsys, "run", "--queue", "--limit", "1", "--ledger", str(ledger))
    one_line_exit_2(code, err, "--queue needs a PostgreSQL ledger")
    assert not ledger.exists()
    code, _, err = cli(capsys, "worker", "--once", "--ledger", str(ledger))
    one_line_exit_2(code, err, "worker needs a PostgreSQL ledger")
    code, _, err = cli(capsys, "run", "--wait", "--limit", "1", "--ledger", str(ledger))
    one_line_exit_2(code, err, "--wait", "--queue")


@pytest.mark.postgres
def test_a_worker_whose_agent_protocols_or_platform_differ_leaves_the_jobs_waiting_saying_why(
    pg, tmp_path, capsys
):
    code, out, err = cli(capsys, "run", "--queue", "--agent", "fake:0.01", "--limit", "2",
                         "--run-id", "qr", "--ledger", pg)  # fmt: skip
    assert code == 0, err
    assert "run qr queued: 2 units" in out
    ledger = Ledger(open_store(pg))
    before = ledger.run_info("qr").events
    other = protocol_subset(tmp_path, ["bl-anchor-tier"])  # another set: another hash
    for argv, needle in (
        (("--agent", "scripted"), "its agent fake:0.01 (give --agent fake:0.01)"),
        (("--protocols", other), "protocol set"),
        (("--platform", "embedded:process"), "its platform embedded (give --platform"),
    ):
        code, out, err = cli(capsys, "worker", "--once", *argv, "--ledger", pg)
        assert code == 0 and not err, err
        assert "run qr: not taken by this worker" in out and needle in out, out
        assert ledger.run_info("qr").events == before  # nothing written
        assert _jobs(pg) == {"todo": 2}  # the jobs wait for a worker that may run them
        code, out, _ = cli(capsys, "queue", "qr", "--ledger", pg)
        assert code == 0 and out.count("why: ") == 2 and needle in out, out


@pytest.mark.postgres
def test_queueing_on_a_pool_too_small_for_every_try_says_what_pool_would_hold_them(pg, capsys):
    """6 units of 2 identities on a pool of 16: one try each, not the 1 + 2 retries."""
    with refplatform_server(ADMIN, POOL) as server:
        env = {"BENCHLEDGER_ADMIN_KEY": ADMIN, "BENCHLEDGER_POOL_BASE": POOL}
        os.environ.update(env)
        try:
            code, _, err = cli(capsys, "run", "--queue", "--limit", "6", "--run-id", "qp",
                               "--platform", server.url, "--pool-size", "16",
                               "--ledger", pg)  # fmt: skip
        finally:
            for name in env:
                os.environ.pop(name)
    assert code == 0, err
    assert "note: the pool's 16 identities hold 1 try of every unit" in err
    assert "For 3 tries give --pool-size 36" in err and ADMIN not in err and POOL not in err


@pytest.mark.postgres
def test_queue_cancel_stops_a_runs_waiting_jobs(pg, capsys):
    code, _, err = cli(capsys, "run", "--queue", "--limit", "3", "--run-id", "qc",
                       "--ledger", pg)  # fmt: skip
    assert code == 0, err
    code, out, _ = cli(capsys, "queue", "qc", "--ledger", pg)
    assert code == 0 and out.count(" todo ") == 3 and "3 todo" in out
    code, out, _ = cli(capsys, "runs", "--ledger", pg)
    assert code == 0 and "queue: qc: 3 queued, 0 running, 0 done" in out, out
    code, out, _ = cli(capsys, "runs", "--json", "--ledger", pg)
    assert json.loads(out)[0]["queue"] == {"queued": 3, "running": 0, "done": 0,
                                           "failed_or_cancelled": 0, "workers": []}  # fmt: skip
    # resumed here while its jobs wait, a unit would run twice: refused, nothing written
    ledger = Ledger(open_store(pg))
    before = ledger.run_info("qc").events
    code, _, err = cli(capsys, "run", "--resume", "qc", "--ledger", pg)
    one_line_exit_2(code, err, "run qc is in the queue (3 queued", "benchledger queue cancel qc")
    assert ledger.run_info("qc").events == before and _jobs(pg) == {"todo": 3}
    code, out, _ = cli(capsys, "queue", "cancel", "qc", "--ledger", pg)
    assert code == 0 and "3 waiting jobs cancelled" in out
    assert queue_states(pg)["qc"].line() == "0 queued, 0 running, 0 done, 3 failed or cancelled"
    code, out, _ = cli(capsys, "worker", "--once", "--ledger", pg)
    assert code == 0 and "unit" not in out  # nothing left to run
    assert _jobs(pg) == {"cancelled": 3}


@pytest.mark.postgres
@pytest.mark.slow
def test_two_workers_on_an_external_platform_seal_the_run_and_no_secret_is_queued(pg, capsys):
    with refplatform_server(ADMIN, POOL) as server:
        env = {"BENCHLEDGER_ADMIN_KEY": ADMIN, "BENCHLEDGER_POOL_BASE": POOL}
        os.environ.update(env)
        try:
            code, _, err = cli(capsys, "run", "--queue", "--limit", "6", "--run-id", "qx",
                               "--platform", server.url, "--pool-size", "60",
                               "--ledger", pg)  # fmt: skip
        finally:
            for name in env:
                os.environ.pop(name)
        assert code == 0, err
        workers = [_bl("worker", "--once", "--concurrency", "2", "--platform", server.url,
                       "--ledger", pg, env=env) for _ in range(2)]  # fmt: skip
        ends = [w.communicate(timeout=180) for w in workers]
    assert [w.returncode for w in workers] == [0, 0], ends
    ledger = Ledger(open_store(pg))
    assert ledger.run_info("qx").root
    assert all(len(s) == 1 for s in _counted(ledger, "qx").values())
    assert _jobs(pg) == {"succeeded": 6}
    # Both worked: each names the units it ran.
    assert all(" unit bl-" in out for out, _ in ends), ends
    # Secrets stay off the queue: every row of every queue table, as text.
    tables = [r[0] for r in _sql(pg, "SELECT tablename FROM pg_tables WHERE schemaname = "
                                     "current_schema()")]  # fmt: skip
    assert "procrastinate_jobs" in tables
    dump = "".join(str(_sql(pg, f"SELECT t::text FROM {t} t")) for t in tables)
    assert "qx" in dump  # the dump does hold the jobs
    assert ADMIN not in dump and POOL not in dump
    for out, err in ends:
        assert ADMIN not in out + err and POOL not in out + err


def _doing(url: str) -> list[tuple[str, str]]:
    """(worker name, unit) of every job being worked."""
    return [
        (str(name), str(unit))
        for name, unit in _sql(
            url,
            "SELECT w.name, j.args->>'unit' FROM procrastinate_jobs j JOIN "
            "benchledger_workers w ON w.worker_id = j.worker_id WHERE j.status = 'doing'",
        )
    ]


@pytest.mark.postgres
@pytest.mark.slow
def test_workers_killed_mid_unit_twice_lose_nothing_and_count_nothing_twice(pg, capsys):
    code, _, err = cli(capsys, "run", "--queue", "--agent", "fake:0.3", "--limit", "6",
                       "--run-id", "qk", "--ledger", pg)  # fmt: skip
    assert code == 0, err
    ledger = Ledger(open_store(pg))
    worker = ("worker", "--once", "--concurrency", "1", "--heartbeat", "0.5",
              "--stalled-after", "4", "--ledger", pg)  # fmt: skip
    procs = [_bl(*worker), _bl(*worker)]
    host = socket.gethostname()
    killed: list[str] = []

    def mid_unit() -> tuple[subprocess.Popen[str], str] | None:
        live = {f"{host}:{p.pid}": p for p in procs if p.poll() is None}
        for name, unit in _doing(pg):
            if name not in live:
                continue
            states = unit_streams(ledger, "qk", f"qk/{unit}")
            if any(st["started"] and not st["finished"] and not st["abandoned"]
                   for st in states.values()):  # fmt: skip
                return live[name], unit
        return None

    for n in range(2):
        victim, unit = _until("a worker in the middle of a unit", mid_unit, 120)
        if n == 0:  # what `runs` and `report --watch` show of it: the worker on the unit
            assert f"{host}:{victim.pid}" in queue_states(pg, "qk")["qk"].workers
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=30)
        killed.append(unit)
        procs.append(_bl(*worker))  # its replacement
    ends = {p.pid: p.communicate(timeout=300) for p in procs}
    codes = [p.returncode for p in procs]
    assert codes.count(-signal.SIGKILL) == 2 and codes.count(0) == len(procs) - 2, ends
    # Sealed, every planned unit counted exactly once, nothing left in the queue.
    assert ledger.run_info("qk").root
    counted = _counted(ledger, "qk")
    assert len(counted) == 6 and all(len(s) == 1 for s in counted.values()), counted
    assert _jobs(pg) == {"succeeded": 6}
    # The killed units' attempts are kept, marked abandoned; their units ran again.
    abandoned = _abandoned(ledger, "qk")
    assert sorted(stream.split("/", 1)[1].split("-r")[0] for stream in abandoned) == sorted(killed)
    assert set(abandoned.values()) == {INTERRUPTED}
    for unit in killed:
        assert counted[unit][0].startswith(f"qk/{unit}-r"), counted
    capsys.readouterr()
    code, out, err = cli(capsys, "verify", "qk", "--ledger", pg)
    assert code == 0, err
    code, out, err = cli(capsys, "replay", "qk", "--level", "rederive", "--ledger", pg)
    assert code == 0, out + err
    code, out, err = cli(capsys, "audit", "qk", "capture_rate", "--ledger", pg)
    assert code == 0, err
    assert "2 abandoned attempts (kept in the log, in no rate):" in out, out
    for stream in abandoned:  # resumed as the unit's next attempt, STREAM-rN
        assert f"  {stream}: {INTERRUPTED}; resumed as {stream.split('-r')[0]}-r" in out, out


@pytest.mark.postgres
def test_promotions_into_one_entity_take_turns_across_workers_and_others_do_not_wait(pg):
    """``entity_lock``: a second holder of one entity's key waits (PostgreSQL shows its
    lock request not granted) until the first lets go; another entity's key does not."""
    import asyncio

    from benchledger.harness.queue import entity_key, entity_lock

    one, other = entity_key("r", "urn:entity:a"), entity_key("r", "urn:entity:b")
    assert one != other and one == entity_key("r2", "urn:entity:a")  # per entity, any run

    def waiting() -> int:
        rows = _sql(pg, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND "
                        "NOT granted AND objid = %s", (one & 0xFFFFFFFF,))  # fmt: skip
        return int(rows[0][0])

    async def go() -> list[str]:
        order: list[str] = []
        first_in, release = asyncio.Event(), asyncio.Event()

        async def first() -> None:
            async with entity_lock(pg, one):
                order.append("first in")
                first_in.set()
                await release.wait()
                order.append("first out")  # the last thing before it lets go

        async def second() -> None:
            await first_in.wait()
            async with entity_lock(pg, one):
                order.append("second in")

        tasks = [asyncio.ensure_future(first()), asyncio.ensure_future(second())]
        await first_in.wait()
        async with entity_lock(pg, other):  # another entity: taken at once
            order.append("other in")
        end = time.monotonic() + 10
        while not await asyncio.to_thread(waiting):  # the second is queued behind the first
            assert time.monotonic() < end, "the second holder never waited"
            await asyncio.sleep(0.05)
        assert "second in" not in order
        release.set()
        await asyncio.gather(*tasks)
        return order

    assert asyncio.run(go()) == ["first in", "other in", "first out", "second in"]


@pytest.mark.postgres
@pytest.mark.slow
def test_an_infra_failed_unit_is_retried_a_bounded_number_of_times_then_left_for_retry_infra(
    pg, capsys
):
    """The platform fails every capture read-back (after the unit's own retries): the
    queue re-runs the unit once (``--infra-retries 1``, after its back-off), marking the
    failed attempt as --retry-infra does, then leaves it; ``--resume --retry-infra``
    finishes the run once the platform recovered."""
    insights = "/api/v1/admin/knowledge/insights"
    with refplatform_server(ADMIN, POOL, outage=insights) as server:
        server.outage.down, server.outage.only = True, b"captured_by="
        code, _, err = cli(capsys, "run", "--queue", "--limit", "1", "--run-id", "qi",
                           "--platform", server.url, "--admin-key", ADMIN, "--pool-base",
                           POOL, "--pool-size", "60", "--ledger", pg)  # fmt: skip
        assert code == 0, err
        env = {"BENCHLEDGER_ADMIN_KEY": ADMIN, "BENCHLEDGER_POOL_BASE": POOL}
        worker = _bl("worker", "--once", "--infra-retries", "1", "--platform", server.url,
                     "--ledger", pg, env=env)  # fmt: skip
        out, err = worker.communicate(timeout=180)
        assert worker.returncode == 0, err
        ledger = Ledger(open_store(pg))
        states = unit_streams(ledger, "qi", "qi/bl-anchor-tier/1")
        assert sorted(states) == ["qi/bl-anchor-tier/1", "qi/bl-anchor-tier/1-r1"]  # 2 tries
        assert all(st["finished"] for st in states.values())
        assert _abandoned(ledger, "qi") == {"qi/bl-anchor-tier/1": RETRIED}
        assert ledger.infra_failed("qi") == ["bl-anchor-tier/1"] and not ledger.run_info("qi").root
        assert _jobs(pg) == {"succeeded": 1}  # left, not lost: for --retry-infra
        server.outage.down = False  # the platform recovered
        code, out, err = cli(capsys, "run", "--resume", "qi", "--retry-infra", "--platform",
                             server.url, "--admin-key", ADMIN, "--pool-base", POOL,
                             "--ledger", pg)  # fmt: skip
    assert code == 0, err
    assert "run qi sealed" in out


@pytest.mark.postgres
@pytest.mark.slow
def test_run_queue_wait_reports_progress_until_the_workers_sealed_it(pg):
    waiting = _bl("run", "--queue", "--wait", "--limit", "2", "--run-id", "qw", "--ledger", pg)
    _until("the run's jobs queued", lambda: _sql_ready(pg) and _jobs(pg).get("todo") == 2, 60)
    worker = _bl("worker", "--once", "--ledger", pg)
    out, err = waiting.communicate(timeout=180)
    worker.communicate(timeout=180)
    assert waiting.returncode == 0 and worker.returncode == 0, err
    lines = out.splitlines()
    assert "jobs: 2 queued, 0 running, 0/2 done" in lines
    assert "jobs: 0 queued, 0 running, 2/2 done" in lines
    assert any(line.startswith("run qw sealed, root ") for line in lines), out


@pytest.mark.postgres
@pytest.mark.slow
def test_a_worker_stopped_by_sigterm_finishes_its_unit_and_takes_no_other(pg, capsys):
    code, _, err = cli(capsys, "run", "--queue", "--agent", "fake:0.3", "--limit", "3",
                       "--run-id", "qt", "--ledger", pg)  # fmt: skip
    assert code == 0, err
    worker = _bl("worker", "--concurrency", "1", "--ledger", pg)
    ledger = Ledger(open_store(pg))

    def started() -> bool:
        return any(st["started"] for st in unit_streams(ledger, "qt", "qt/bl-anchor-tier/1")
                   .values())  # fmt: skip

    _until("the worker's first unit started", started, 60)
    worker.send_signal(signal.SIGTERM)
    _, err = worker.communicate(timeout=120)
    assert worker.returncode == 143, err
    assert "stopping: running units finish first" in err
    assert _counted(ledger, "qt")["bl-anchor-tier/1"] == ["qt/bl-anchor-tier/1"]  # finished
    assert _jobs(pg) == {"succeeded": 1, "todo": 2}  # the others wait for another worker
