"""Resource attacks on the reference platform, over loopback, with its peak memory meanwhile.

``python -m benchmarks.bounds [--sessions N]`` starts ``benchledger platform serve --port
0`` in a child process, sends what a model or a platform client could send to exhaust it,
and prints one line per attack: what was sent, what came back, how long it took, and the
server's peak resident memory (``VmHWM`` of /proc/PID/status) with its SQL workers' peak
beside it (docs/refplatform.md, "Bounds"):

- ``body``: a 600 MB request body to a REST route, declared and streamed (chunked);
- ``spaces``: SQL of 20,000 and 200,000 spaces, and of 20,000 open parentheses;
- ``spin``: a 4-way cross join under ``timeout_seconds`` 2, and one 17 s function call;
- ``balloon``: ``generate_series`` of 300M, ``repeat`` of 1 MB per row, a 5 MB result;
- ``sessions``: MCP sessions opened and never closed, past the cap.

``benchledger selftest reliability`` runs the same attacks (its "resource bounds" row).
Every request goes to 127.0.0.1; every loop is bounded in count and time.
"""

from __future__ import annotations

import argparse
import functools
import http.client
import json
import os
import select
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from benchledger.refplatform.server import MAX_SESSIONS

ROOT: Final = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))  # the checkout
ADMIN_KEY: Final = "bl-admin-bounds"
POOL_BASE: Final = "bl-key-bounds"
BODY_BYTES: Final = 600 * 1000 * 1000
PROTOCOL: Final = "2025-11-25"  # a version without the per-request _meta envelope
ORDERS: Final = "memory.bench.orders"
CEILING_KB: Final = 800 * 1024  # generous: at rest the server is ~150 MB, a SQL worker ~100 MB
# ~17 s of CPU in one call and little memory: DuckDB notices an interrupt only after it.
SPIN: Final = "SELECT levenshtein(repeat('a', 80000), repeat('b', 80000)) AS d"


@dataclass
class Outcome:
    """One attack: what was sent, what came back, whether that is the bound holding."""

    attack: str
    answer: str
    ok: bool
    seconds: float
    server_kb: int = 0  # the server's VmHWM after it
    workers_kb: int = 0  # the largest SQL worker's VmHWM after it


class Served:
    """``benchledger platform serve`` of the checkout at ``root``, in a child process (ours).

    A thread samples the peak memory of the server and of each of its children every
    20 ms, so a SQL worker killed at its bound still counts with what it reached.
    """

    def __init__(
        self,
        *extra: str,
        root: str = ROOT,
        startup_s: float = 30.0,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        # ``environ``: the child's environment (the command line's), the checkout first on
        # its path; None: it inherits this process's, and ``cwd=root`` puts the checkout first.
        env = None
        if environ is not None:
            env = dict(environ)
            env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "benchledger", "platform", "serve", "--port", "0",
             "--admin-key", ADMIN_KEY, "--pool-base", POOL_BASE, "--pool", "4", *extra],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
            text=True, env=env, cwd=root,
        )  # fmt: skip
        self._peaks: dict[int, int] = {}
        self._sampling = threading.Event()
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()  # the first line names the URL (or it failed)
        if "serving http://" not in line:
            self.stop()
            raise RuntimeError(f"platform serve did not start: {line.strip()!r}")
        url = line.split("serving ", 1)[1].split()[0]
        self.host, port = url.removeprefix("http://").split("/", 1)[0].rsplit(":", 1)
        self.port = int(port)
        threading.Thread(target=self._sample, name="bounds-sampler", daemon=True).start()
        deadline = time.monotonic() + startup_s
        while time.monotonic() < deadline and not _sql_ready(self):
            time.sleep(0.2)  # a poll of the worker's appearance, bounded by the deadline

    def _sample(self) -> None:
        while not self._sampling.wait(0.02) and self.proc.poll() is None:
            for pid in (self.proc.pid, *_children(self.proc.pid)):
                self._peaks[pid] = max(self._peaks.get(pid, 0), _hwm(pid))

    def peak_kb(self) -> tuple[int, int]:
        """(the server's VmHWM, the largest VmHWM any of its children reached) in kB."""
        server = max(self._peaks.get(self.proc.pid, 0), _hwm(self.proc.pid))
        workers = [kb for pid, kb in self._peaks.items() if pid != self.proc.pid]
        return server, max(workers, default=0)

    def stop(self) -> None:
        """Stop the server (its workers exit when their pipes close)."""
        self._sampling.set()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def _hwm(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children", encoding="ascii") as fh:
            return [int(p) for p in fh.read().split()]
    except OSError:
        return []


def _sql_ready(served: Served) -> bool:
    # The pool starts its first worker with the platform; a worker that has answered
    # "ready" has mapped its tables (the attacks then measure the queries, not the start).
    return any(_hwm(pid) > 50_000 for pid in _children(served.proc.pid))


# ---------------------------------------------------------------------------- MCP, by hand


class Mcp:
    """One MCP session over one HTTP/1.1 connection (no SDK: a flood must not close them)."""

    def __init__(self, host: str, port: int, key: str = ADMIN_KEY, timeout: float = 60) -> None:
        self.conn = http.client.HTTPConnection(host, port, timeout=timeout)
        self.key = key
        self.session: str | None = None
        self.handle: str | None = None
        self._id = 0

    def post(self, message: dict[str, Any]) -> tuple[int, dict[str, Any] | None]:
        """POST one JSON-RPC message; the HTTP status and the JSON answer (None if none)."""
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "X-API-Key": self.key,
        }
        if self.session:
            headers["mcp-session-id"] = self.session
            headers["mcp-protocol-version"] = PROTOCOL
        self.conn.request("POST", "/mcp", json.dumps(message), headers)
        response = self.conn.getresponse()
        raw = response.read()
        self.session = self.session or response.getheader("mcp-session-id")
        try:
            return response.status, json.loads(raw) if raw else None
        except ValueError:
            return response.status, {"text": raw[:200].decode("utf-8", "replace")}

    def request(self, method: str, params: dict[str, Any]) -> tuple[int, dict[str, Any] | None]:
        self._id += 1
        return self.post({"jsonrpc": "2.0", "id": self._id, "method": method, "params": params})

    def open(self) -> int:
        """Initialize the session; the HTTP status of the initialize request."""
        status, _ = self.request(
            "initialize",
            {"protocolVersion": PROTOCOL, "capabilities": {},
             "clientInfo": {"name": "benchmarks.bounds", "version": "1"}},
        )  # fmt: skip
        if status == 200:
            self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return status

    def tool(self, name: str, arguments: dict[str, Any]) -> tuple[bool, str]:
        """Call a tool: (is_error, the first text block), the platform handle passed along."""
        if self.handle:
            arguments = {**arguments, "session_id": self.handle}
        status, answer = self.request("tools/call", {"name": name, "arguments": arguments})
        result = (answer or {}).get("result") or {}
        text = ((result.get("content") or [{}])[0]).get("text", "")
        if status != 200 or not result:
            return True, f"HTTP {status}: {json.dumps(answer)[:200]}"
        return bool(result.get("isError")), text

    def ready_for_sql(self) -> None:
        """platform_info (the handle) and a search (the search-first gate)."""
        _, text = self.tool("platform_info", {})
        self.handle = json.loads(text)["session_id"]
        self.tool("search", {"intent": "orders"})

    def close(self) -> None:
        self.conn.close()


# ---------------------------------------------------------------------------- the attacks


def _timed(fn: Callable[[], tuple[str, bool]]) -> tuple[str, bool, float]:
    started = time.monotonic()
    answer, ok = fn()
    return answer, ok, time.monotonic() - started


def huge_body(host: str, port: int, *, chunked: bool, total: int = BODY_BYTES) -> tuple[str, bool]:
    """POST ``total`` bytes to a REST route; the answer must be a 413 long before the end."""
    path = "/api/v1/portal/knowledge-pages"
    head = [f"POST {path} HTTP/1.1", f"Host: {host}:{port}", f"X-API-Key: {ADMIN_KEY}",
            "Content-Type: application/json"]  # fmt: skip
    head.append("Transfer-Encoding: chunked" if chunked else f"Content-Length: {total}")
    chunk = b'{"body": "' + b"x" * (1 << 20)
    sent = 0
    with socket.create_connection((host, port), timeout=30) as sock:
        sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode())
        # An answer is read before each chunk is sent: once the server has answered and
        # closed, more data would make it reset the connection, losing the answer.
        answer = _answer(sock, 0.5)
        while sent < total and not answer:
            piece = chunk[: total - sent]
            try:
                sock.sendall(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
            except OSError:
                break
            sent += len(piece)
            answer = _answer(sock, 0.02)
        answer = answer or _answer(sock, 30)
    status = answer.split(b"\r\n", 1)[0].decode("latin-1")
    how = "chunked" if chunked else "declared"
    return f"{how}: {status or 'no answer'} after {sent >> 20} MiB sent", " 413 " in f"{status} "


def _answer(sock: socket.socket, wait_s: float) -> bytes:
    """What the server has answered within ``wait_s`` (b"" for nothing, or a reset)."""
    ready, _, _ = select.select([sock], [], [], wait_s)
    if not ready:
        return b""
    try:
        return sock.recv(65536)
    except OSError:
        return b""


def sql_answer(mcp: Mcp, sql: str, **extra: Any) -> tuple[bool, str]:
    """``trino_query``'s (is_error, text) for ``sql``."""
    return mcp.tool("trino_query", {"sql": sql, **extra})


def sessions_flood(host: str, port: int, n: int) -> tuple[int, int, str]:
    """Open ``n`` MCP sessions and leave them open: (opened, refused, the first refusal).

    Each is an ``initialize`` without a session id (the server opens a session for it),
    all over one keep-alive connection: the sessions, not connections, are what is held.
    """
    opened = refused = 0
    first = ""
    mcp = Mcp(host, port)
    try:
        for _ in range(n):
            mcp.session = None
            status, _ = mcp.request(
                "initialize",
                {"protocolVersion": PROTOCOL, "capabilities": {},
                 "clientInfo": {"name": "benchmarks.bounds", "version": "1"}},
            )  # fmt: skip
            if status == 200:
                opened += 1
            else:
                refused += 1
                first = first or f"HTTP {status}"
    finally:
        mcp.close()
    return opened, refused, first


def attacks(served: Served, *, sessions: int) -> list[Outcome]:
    """Every attack against ``served``, in turn; each outcome with the peaks after it."""
    out: list[Outcome] = []

    def record(name: str, fn: Callable[[], tuple[str, bool]]) -> None:
        answer, ok, seconds = _timed(fn)
        server_kb, workers_kb = served.peak_kb()
        out.append(Outcome(name, answer, ok, seconds, server_kb, workers_kb))

    host, port = served.host, served.port
    record("body", functools.partial(huge_body, host, port, chunked=False))
    record("body", functools.partial(huge_body, host, port, chunked=True))
    mcp = Mcp(host, port)
    mcp.open()
    mcp.ready_for_sql()

    def refused(sql: str, expect: str, **extra: Any) -> Callable[[], tuple[str, bool]]:
        def go() -> tuple[str, bool]:
            is_error, text = sql_answer(mcp, sql, **extra)
            return text[:120], is_error and expect in text

        return go

    record("spaces", refused(" " * 20_000, "read-only"))
    record("spaces", refused(" " * 200_000, "exceeds the maximum length"))
    record("spaces", refused("SELECT " + "(" * 20_000, "nested more than"))
    cross = f"SELECT count(*) FROM {ORDERS} a, {ORDERS} b, {ORDERS} c, {ORDERS} d"
    record("spin", refused(cross, "context deadline exceeded", timeout_seconds=2))
    record("spin", refused(SPIN, "context deadline exceeded", timeout_seconds=1))
    record("balloon", refused("SELECT unnest(generate_series(1, 300000000)) AS x", "memory"))
    record("balloon", refused(f"SELECT repeat('x', 1000000) AS x FROM {ORDERS}", "memory"))
    record("balloon", refused(f"SELECT repeat('x', 5000) AS x FROM {ORDERS}", "too large"))
    is_error, text = sql_answer(mcp, f"SELECT count(*) AS n FROM {ORDERS}")
    record("after", lambda: (text[:60].replace("\n", " "), not is_error))
    mcp.close()

    def flood() -> tuple[str, bool]:
        opened, refused_n, first = sessions_flood(host, port, sessions)
        held = opened <= MAX_SESSIONS and (refused_n > 0) == (sessions > MAX_SESSIONS - 1)
        return f"{opened} opened, {refused_n} refused ({first or 'none'})", held

    record("sessions", flood)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Run every attack against a fresh ``platform serve`` and print what held."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bounds")
    parser.add_argument("--sessions", type=int, default=1100, help="MCP sessions to open")
    parser.add_argument("--root", default=ROOT, help="the checkout to serve (default: this)")
    args = parser.parse_args(argv)
    served = Served(root=args.root)
    try:
        base_server, base_workers = served.peak_kb()
        print(f"at rest: server {base_server // 1024} MB, SQL worker {base_workers // 1024} MB")
        results = attacks(served, sessions=args.sessions)
    finally:
        served.stop()
    print("| attack | answer | held | seconds | server VmHWM | worker VmHWM |")
    print("| --- | --- | --- | ---: | ---: | ---: |")
    for r in results:
        print(f"| {r.attack} | {r.answer} | {'yes' if r.ok else 'NO'} | {r.seconds:.1f} | "
              f"{r.server_kb // 1024} MB | {r.workers_kb // 1024} MB |")  # fmt: skip
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
