"""A loopback fault proxy: a platform behind it answers some requests badly, on purpose.

It sits between the harness and a platform on 127.0.0.1 and, at a configured rate,
answers an MCP request or an admin REST call with one of four faults:

- ``http_5xx`` — a 503 problem+json answer; the platform never sees the request;
- ``drop`` — the connection is closed before any answer;
- ``timeout`` — no answer at all: the connection is held for ``hold_s``, then closed
  (the client's own timeout, ``$BENCHLEDGER_PLATFORM_TIMEOUT_S``, should fire first);
- ``truncate`` — the platform answers, and only the first half of its answer arrives.

Only requests the client waits on are faulted: MCP JSON-RPC requests (a POST whose body
has an ``id``) and REST calls under ``/api/``. The MCP session's own stream (GET), its
notifications and its closing DELETE pass untouched, because the MCP client ignores
failures there by design; so every injected fault must surface to the harness. Each
connection carries one request (``Connection: close``), so a fault never spills over.

Faults are drawn from a seeded ``random.Random``; the seed is printed when the proxy
starts. ``python -m benchmarks.fault_proxy --upstream URL --rate 0.1`` runs it alone.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import secrets
import sys
import threading
import urllib.parse
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Final

FAULTS: Final = ("http_5xx", "drop", "timeout", "truncate")
_PROBLEM: Final = (
    b'{"type":"about:blank","title":"Service Unavailable","status":503,'
    b'"detail":"injected by the benchledger fault proxy"}'
)


@dataclass(frozen=True)
class Fault:
    """One injected fault: which eligible request it hit, how, and what the request was."""

    n: int  # 1-based number of the request among the eligible ones
    kind: str
    method: str
    path: str
    rpc: str = ""  # the JSON-RPC method of an MCP request ("" for a REST call)


@dataclass
class Tally:
    """What went through the proxy (eligible requests only count toward the rate)."""

    eligible: int = 0
    passed: int = 0  # other requests (session streams, notifications, DELETE)
    faults: list[Fault] = field(default_factory=list)

    def by_kind(self) -> dict[str, int]:
        out = dict.fromkeys(FAULTS, 0)
        for f in self.faults:
            out[f.kind] += 1
        return out


class FaultProxy:
    """The proxy, served from a thread of its own; a context manager that starts and stops it."""

    def __init__(
        self,
        upstream: str,
        *,
        rate: float,
        seed: int | None = None,
        kinds: Sequence[str] = FAULTS,
        hold_s: float = 5.0,
        armed: bool = True,
        port: int = 0,
        log: Callable[[str], None] | None = None,
        canned: Callable[[str, str, bytes], bytes | None] | None = None,
    ) -> None:
        parts = urllib.parse.urlsplit(upstream)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"--upstream {upstream!r}: give an http:// URL")
        if not 0 <= rate <= 1:
            raise ValueError("--rate must be between 0 and 1")
        unknown = sorted(set(kinds) - set(FAULTS))
        if unknown or not kinds:
            raise ValueError(f"fault kinds {unknown or '(none)'}: use {', '.join(FAULTS)}")
        self.upstream = (parts.hostname, parts.port or 80)
        self.rate = rate
        self.seed = secrets.randbits(32) if seed is None else seed
        self.kinds = tuple(kinds)
        self.hold_s = hold_s
        self.armed = armed
        self.port = port
        # canned(method, path, body) -> a whole HTTP answer to send instead of forwarding
        # (how a test plays a platform that breaks the API), or None to go on as usual.
        self.canned = canned
        self.tally = Tally()
        self._rng = random.Random(self.seed)
        self._lock = threading.Lock()
        self._log = log if log is not None else (lambda line: print(line, flush=True))
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None
        self._open: set[asyncio.WriteTransport] = set()
        self.url = ""

    # -- control ---------------------------------------------------------------------------

    def arm(self) -> None:
        """Start injecting (a proxy made with ``armed=False`` passes everything until then)."""
        with self._lock:
            self.armed = True

    def disarm(self) -> None:
        with self._lock:
            self.armed = False

    def start(self) -> str:
        """Serve on a loopback port; return the proxy's base URL (and print the seed)."""
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._thread = threading.Thread(target=loop.run_forever, name="fault-proxy", daemon=True)
        self._thread.start()
        started = asyncio.run_coroutine_threadsafe(self._listen(), loop)
        self.port = started.result(timeout=10)
        self.url = f"http://127.0.0.1:{self.port}"
        host, port = self.upstream
        self._log(
            f"fault proxy {self.url} -> http://{host}:{port}: rate {self.rate:g}, "
            f"kinds {','.join(self.kinds)}, seed {self.seed}"
        )
        return self.url

    def stop(self) -> None:
        loop = self._loop
        if loop is None:
            return
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(self._close(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(timeout=10)
        loop.close()
        self._loop = None

    def __enter__(self) -> FaultProxy:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- serving ---------------------------------------------------------------------------

    async def _listen(self) -> int:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", self.port)
        return int(self._server.sockets[0].getsockname()[1])

    async def _close(self) -> None:
        if self._server is not None:
            self._server.close()
        # Connections still open (session streams, held requests) end with the proxy.
        for transport in list(self._open):
            transport.abort()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        with contextlib.suppress(Exception):
            await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 5)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)

    def _decide(self, method: str, path: str, body: bytes) -> Fault | None:
        rpc, eligible = "", path.startswith("/api/")
        if not eligible and method == "POST" and body:
            with contextlib.suppress(ValueError):
                msg = json.loads(body)
                if isinstance(msg, dict) and "id" in msg and "method" in msg:
                    eligible, rpc = True, str(msg["method"])
        with self._lock:
            if not eligible:
                self.tally.passed += 1
                return None
            self.tally.eligible += 1
            if not self.armed or self._rng.random() >= self.rate:
                return None
            fault = Fault(self.tally.eligible, self._rng.choice(self.kinds), method, path, rpc)
            self.tally.faults.append(fault)
            return fault

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._open.add(writer.transport)
        try:
            await self._serve_one(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        finally:
            self._open.discard(writer.transport)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _serve_one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, target = [*lines[0].split(" "), "", ""][:2]
        headers = [h for h in lines[1:] if h]
        length = 0
        for h in headers:
            name, _, value = h.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value.strip() or 0)
        body = await reader.readexactly(length) if length else b""
        path = urllib.parse.urlsplit(target).path
        answer = self.canned(method, path, body) if self.canned else None
        if answer is not None:
            writer.write(answer)
            await writer.drain()
            return
        fault = self._decide(method, path, body)
        kind = fault.kind if fault else ""
        if kind == "http_5xx":
            writer.write(
                b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/problem+json\r\n"
                + f"content-length: {len(_PROBLEM)}\r\nconnection: close\r\n\r\n".encode()
                + _PROBLEM
            )
            await writer.drain()
            return
        if kind == "drop":
            writer.transport.abort()
            return
        if kind == "timeout":
            with contextlib.suppress(Exception):
                await asyncio.wait_for(
                    reader.read(1), self.hold_s
                )  # returns when the client gives up
            writer.transport.abort()
            return
        hop = ("connection", "keep-alive")
        kept = [h for h in headers if h.split(":")[0].strip().lower() not in hop]
        request = "\r\n".join([lines[0], *kept, "Connection: close", "", ""]).encode("latin-1")
        up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        self._open.add(up_writer.transport)
        try:
            up_writer.write(request + body)
            await up_writer.drain()
            if kind == "truncate":
                answer = await up_reader.read()  # the whole answer (the upstream closes)
                writer.write(answer[: max(1, len(answer) // 2)])
                await writer.drain()
                writer.transport.abort()
                return
            # Pass the answer through (a session stream may last long) until either side
            # hangs up.
            pump = asyncio.ensure_future(_pump(up_reader, writer))
            gone = asyncio.ensure_future(reader.read())  # completes when the client leaves
            _, pending = await asyncio.wait({pump, gone}, return_when=asyncio.FIRST_COMPLETED)
            for task in pending:
                task.cancel()
            await asyncio.gather(pump, gone, return_exceptions=True)  # collects every ending
        finally:
            self._open.discard(up_writer.transport)
            up_writer.close()


async def _pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
    while chunk := await src.read(1 << 16):
        dst.write(chunk)
        await dst.drain()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the proxy in the foreground until Ctrl-C."""
    p = argparse.ArgumentParser(prog="python -m benchmarks.fault_proxy", description=__doc__)
    p.add_argument("--upstream", required=True, metavar="URL", help="the platform's base URL")
    p.add_argument("--rate", type=float, default=0.1, help="share of requests faulted (0.1)")
    p.add_argument("--seed", type=int, help="random seed (printed; default: random)")
    p.add_argument("--kinds", default=",".join(FAULTS), help=f"comma list of {', '.join(FAULTS)}")
    p.add_argument("--hold", type=float, default=5.0, metavar="S", help="timeout: hold for S s")
    p.add_argument("--port", type=int, default=0)
    args = p.parse_args(argv)
    try:
        proxy = FaultProxy(
            args.upstream,
            rate=args.rate,
            seed=args.seed,
            kinds=[k for k in args.kinds.split(",") if k],
            hold_s=args.hold,
            port=args.port,
        )
        proxy.start()
    except (ValueError, OSError) as exc:
        print(f"fault proxy: error: {exc}", file=sys.stderr)
        return 2
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        proxy.stop()
        print(f"fault proxy: {proxy.tally.eligible} requests, faults {proxy.tally.by_kind()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())


def http_answer(status: int, body: bytes, content_type: str = "application/json") -> bytes:
    """A whole HTTP/1.1 answer (for ``canned``), closing the connection."""
    reasons = {
        200: "OK",
        401: "Unauthorized",
        403: "Forbidden",
        404: "Not Found",
        500: "Internal Server Error",
        503: "Service Unavailable",
    }
    reason = reasons.get(status, "Status")
    head = (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: {content_type}\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode() + body
