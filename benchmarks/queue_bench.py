"""``benchledger bench queue``: one queued run worked by 1 worker process vs by N.

The same run (a fake model taking ``delay`` seconds per call) is queued twice, each time
in a fresh schema of the PostgreSQL ledger (``run --queue``, not timed), and worked to its
seal by ``worker --once`` processes: first 1, then N, each at ``--concurrency C``. The
wall time is from starting the workers to the last one's exit (every unit run, the run
sealed); the speed-up is the ratio, measured in the same invocation. Also measured: the
events a unit writes (the sealed run's events / its units) and the queue's claim rate
(``--claims`` no-op jobs claimed, run and finished by one worker, one at a time).
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.parse
import uuid
from typing import Any

import psycopg

from benchledger.ledger import Ledger, open_store
from benchledger.ledger.postgres import postgres_params


def _with_schema(url: str, schema: str) -> str:
    parts = urllib.parse.urlsplit(url)
    query = dict(urllib.parse.parse_qsl(parts.query))
    query["schema"] = schema
    return urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(query)))


def _drop(url: str, *schemas: str) -> None:
    params = postgres_params(url)
    params.pop("schema")
    if not params.get("password"):
        params.pop("password")
    with psycopg.connect(**params, autocommit=True) as conn:
        for schema in schemas:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _bl(*argv: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "benchledger", *argv],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def worked(
    url: str, *, workers: int, concurrency: int, run_args: list[str]
) -> tuple[float, int, int]:
    """Queue the run in a fresh schema and work it with ``workers`` processes: (wall s,
    units, events) of the sealed run. RuntimeError if it did not seal."""
    schema = f"bq_{uuid.uuid4().hex[:10]}"
    ledger_url = _with_schema(url, schema)
    try:
        queued = subprocess.run(
            [sys.executable, "-m", "benchledger", "run", "--queue", *run_args,
             "--run-id", "bench", "--ledger", ledger_url],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if queued.returncode != 0:
            raise RuntimeError(f"run --queue failed: {queued.stderr.strip()}")
        start = time.perf_counter()
        # A worker runs only what its operator names: the run's own agent and platform.
        names = ("--agent", "--platform")
        named = [w for i, w in enumerate(run_args)
                 if w in names or (i and run_args[i - 1] in names)]  # fmt: skip
        procs = [_bl("worker", "--once", "--concurrency", str(concurrency), *named,
                     "--ledger", ledger_url) for _ in range(workers)]  # fmt: skip
        errs = [p.communicate()[1] for p in procs]
        wall = time.perf_counter() - start
        if any(p.returncode for p in procs):
            raise RuntimeError(f"a worker failed: {errs[0].decode()[-400:]}")
        ledger = Ledger(open_store(ledger_url, create=False))
        info = ledger.run_info("bench")
        if not info.root:
            raise RuntimeError("the run did not seal")
        units = sum(1 for h in ledger.store.heads("bench") if h.kind == "unit_finished")
        ledger.store.close()
        return wall, units, info.events
    finally:
        _drop(url, schema, f"{schema}_queue")


async def _claims(url: str, jobs: int) -> tuple[float, float]:
    """(jobs deferred per s, jobs claimed + run + finished per s) by one worker."""
    from benchledger.harness.queue import Queue

    schema = f"bq_{uuid.uuid4().hex[:10]}"
    ledger_url = _with_schema(url, schema)
    try:
        async with Queue(ledger_url) as queue:
            start = time.perf_counter()
            await queue.enqueue("claims", [f"u/{n}" for n in range(jobs)])
            deferred = time.perf_counter() - start

            async def nothing(run: str, unit: str, job: Any) -> None:
                return None

            start = time.perf_counter()
            await queue.work(nothing, concurrency=1, wait=False, heartbeat=5.0,
                             stalled_after=30.0, retry_wait=1)  # fmt: skip
            claimed = time.perf_counter() - start
            counts = {j.status for j in await queue.jobs("claims")}
            if counts != {"succeeded"}:
                raise RuntimeError(f"claim bench: jobs left {counts}")
        return jobs / deferred, jobs / claimed
    finally:
        _drop(url, schema, f"{schema}_queue")


def run_bench(
    *,
    url: str,
    workers: int,
    concurrency: int,
    run_args: list[str],
    repeat: int,
    claims: int,
    as_json: bool,
) -> int:
    ones, manys = [], []
    units = events = 0
    for n in range(repeat):
        one, units, events = worked(url, workers=1, concurrency=concurrency, run_args=run_args)
        many, _, _ = worked(url, workers=workers, concurrency=concurrency, run_args=run_args)
        ones.append(one)
        manys.append(many)
        if not as_json:
            print(f"repeat {n + 1}: 1 worker {one:.1f} s, {workers} workers {many:.1f} s, "
                  f"speed-up {one / many:.2f}x", flush=True)  # fmt: skip
    defer_rate, claim_rate = asyncio.run(_claims(url, claims)) if claims else (0.0, 0.0)
    speedups = [a / b for a, b in zip(ones, manys, strict=True)]
    result = {
        "run": " ".join(run_args),
        "workers": workers,
        "concurrency": concurrency,
        "units": units,
        "events_per_unit": round(events / units, 1) if units else 0,
        "wall_1_s": [round(x, 2) for x in ones],
        f"wall_{workers}_s": [round(x, 2) for x in manys],
        "speedup": [round(x, 2) for x in speedups],
        "speedup_median": round(statistics.median(speedups), 2),
        "claims": claims,
        "defer_per_s": round(defer_rate, 1),
        "claims_per_s": round(claim_rate, 1),
        "cpus": os.cpu_count(),
    }
    if as_json:
        print(json.dumps(result))
        return 0
    print(f"run: {result['run']} ({units} units, {result['events_per_unit']} events per unit)")
    print(f"1 worker: median {statistics.median(ones):.1f} s; {workers} workers: median "
          f"{statistics.median(manys):.1f} s (each --concurrency {concurrency})")  # fmt: skip
    print(f"speed-up: {result['speedup_median']}x (median of {repeat})")
    if claims:
        print(f"queue: {defer_rate:.0f} jobs deferred/s (one at a time), {claim_rate:.0f} jobs "
              f"claimed, run and finished/s by one worker ({claims} no-op jobs)")  # fmt: skip
    return 0
