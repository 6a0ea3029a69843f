"""``benchledger bench platform``: refplatform under concurrent MCP sessions, vs raw HTTP.

The platform runs as a ``python -m benchledger.refplatform serve`` child process (``--in-process``
runs it in a thread of this process instead, sharing the GIL with the clients).
Baseline: the same server's ``GET /healthz`` over one httpx2 client, with the same
concurrency and call count, measured in the same run. Ours: ``sessions`` concurrent
MCP sessions (each its own pool identity) making ``calls`` tool calls each: a mix of
``memory_capture`` (1 in 5), ``search`` (2 in 5), ``trino_query`` and
``datahub_get_entity``. Afterwards every capture is read back over the admin API; a
lost capture or any error fails the run (exit 1).
"""

from __future__ import annotations

import asyncio
import json
import re
import secrets
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NamedTuple

import httpx2

from benchledger.harness.platforms.mcp_data_platform import McpDataPlatform
from benchledger.protocols import dataset
from benchledger.refplatform.server import RunningPlatform

ORDERS = dataset.pack_urn("orders")


class LoadResult(NamedTuple):
    calls: int
    errors: list[str]
    captures_written: int
    captures_read_back: int
    seconds: float
    latencies_ms: list[float]

    @property
    def calls_per_s(self) -> float:
        return self.calls / self.seconds if self.seconds else 0.0


def _pct(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _session_load(
    client: McpDataPlatform, index: int, calls: int, latencies: list[float], errors: list[str]
) -> int:
    written = 0
    async with client.session(index) as s:
        for i in range(calls):
            kind = i % 5
            if kind == 0:
                fact = f"Load fact {i} of identity {index}: the 'load marker' is {i}."
                args = {"type": "schema_entity", "entity_urns": [ORDERS], "content": fact}
                res = await s.call_tool("memory_capture", args)
                written += 0 if res.is_error else 1
            elif kind in (1, 2):
                res = await s.call_tool("search", {"intent": f"load marker {i}", "limit": 5})
            elif kind == 3:
                sql = "SELECT COUNT(*) FROM memory.bench.orders"  # after a search: the gate is open
                res = await s.call_tool("trino_query", {"sql": sql})
            else:
                res = await s.call_tool("datahub_get_entity", {"urn": ORDERS})
            latencies.append(res.latency_ms)
            if res.is_error:
                errors.append(f"identity {index} call {i}: {res.text[:120]}")
    return written


async def drive(
    url: str, *, admin_key: str, pool_base: str, sessions: int, calls: int
) -> LoadResult:
    """Run the load against the platform at ``url``; read every capture back afterwards."""
    client = McpDataPlatform(url, admin_key=admin_key, pool_base=pool_base, pool_size=sessions)
    latencies: list[float] = []
    errors: list[str] = []
    start = time.perf_counter()
    written = await asyncio.gather(
        *(_session_load(client, i + 1, calls, latencies, errors) for i in range(sessions))
    )
    seconds = time.perf_counter() - start
    read_back = 0
    for i in range(sessions):
        email = client.email(i + 1)
        got = await client.rest(
            "GET", "/api/v1/admin/knowledge/insights", params={"captured_by": email, "per_page": 1}
        )
        read_back += int(got.body["total"])
    await client.aclose()
    return LoadResult(sessions * calls, errors, sum(written), read_back, seconds, latencies)


@contextmanager
def _served(sessions: int, in_process: bool) -> Iterator[tuple[str, str, str]]:
    """A fresh platform: a ``python -m benchledger.refplatform serve`` child, or in-process."""
    admin, base = f"bench-admin-{secrets.token_hex(6)}", f"bench-{secrets.token_hex(3)}"
    if in_process:
        with RunningPlatform(pool_size=sessions, admin_key=admin, pool_base=base) as running:
            yield running.url, admin, base
        return
    cmd = [sys.executable, "-m", "benchledger.refplatform", "serve", "--port", "0",
           "--pool", str(sessions), "--admin-key", admin, "--pool-base", base]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        match = re.search(r"serving (http://\S+)/mcp", first)
        if match is None:
            raise RuntimeError(f"the platform did not start: {first!r}")
        yield match.group(1), admin, base
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


async def _raw(url: str, sessions: int, calls: int) -> tuple[float, list[float]]:
    latencies: list[float] = []

    async def worker(http: httpx2.AsyncClient) -> None:
        for _ in range(calls):
            t = time.perf_counter()
            (await http.get(f"{url}/healthz")).raise_for_status()
            latencies.append((time.perf_counter() - t) * 1000)

    async with httpx2.AsyncClient(limits=httpx2.Limits(max_connections=sessions)) as http:
        start = time.perf_counter()
        await asyncio.gather(*(worker(http) for _ in range(sessions)))
        return time.perf_counter() - start, latencies


def run_bench(*, sessions: int, calls: int, as_json: bool, in_process: bool = False) -> int:
    """Measure raw HTTP, then the MCP load, on one fresh platform; print the figures."""
    with _served(sessions, in_process) as (url, admin, base):
        raw_s, raw_lat = asyncio.run(_raw(url, sessions, calls))
        result = asyncio.run(
            drive(url, admin_key=admin, pool_base=base, sessions=sessions, calls=calls)
        )
    raw_cps = sessions * calls / raw_s
    report: dict[str, Any] = {
        "server": "in-process" if in_process else "child process",
        "sessions": sessions,
        "calls": result.calls,
        "errors": len(result.errors),
        "captures_written": result.captures_written,
        "captures_read_back": result.captures_read_back,
        "calls_per_s": round(result.calls_per_s, 1),
        "p50_ms": round(_pct(result.latencies_ms, 0.50), 2),
        "p99_ms": round(_pct(result.latencies_ms, 0.99), 2),
        "mean_ms": round(statistics.fmean(result.latencies_ms), 2) if result.latencies_ms else 0,
        "raw_calls_per_s": round(raw_cps, 1),
        "raw_p50_ms": round(_pct(raw_lat, 0.50), 2),
        "ratio_vs_raw": round(result.calls_per_s / raw_cps, 3),
    }
    if as_json:
        print(json.dumps(report))
    else:
        print(f"refplatform: {sessions} sessions x {calls} tool calls")
        raw = report["raw_calls_per_s"]
        print(f"  raw GET /healthz   {raw:>9} calls/s  p50 {report['raw_p50_ms']} ms")
        cps, p50, p99 = report["calls_per_s"], report["p50_ms"], report["p99_ms"]
        print(f"  MCP tool calls     {cps:>9} calls/s  p50 {p50} ms  p99 {p99} ms")
        print(f"  ratio vs raw       {report['ratio_vs_raw']}")
        print(f"  errors {report['errors']}, captures written {result.captures_written}, "
              f"read back {result.captures_read_back}")  # fmt: skip
    ok = not result.errors and result.captures_written == result.captures_read_back
    return 0 if ok else 1
