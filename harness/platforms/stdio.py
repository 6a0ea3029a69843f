"""One MCP session over stdio: a server process spoken to through the mcp SDK's stdio client.

The SDK spawns the server and exchanges JSON-RPC over its pipes; this module opens
such a session (the calls, their timing and their events are ``session.ObservedSession``'s,
as over HTTP) and turns a failed spawn or a server that died into ``InfraError``, the
runner's one failure type. A session is one process: ``initialize`` happens once per
process (the SDK caches it), so a fresh session means a fresh process.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any, TextIO

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

from benchledger.harness.errors import InfraError
from benchledger.harness.platforms.base import CallResult, Observer
from benchledger.harness.platforms.session import ObservedSession, leaves, observed, scrubbed
from benchledger.harness.scrub import Scrubber

READ_TIMEOUT_S = 30.0
STDERR_TAIL = 300  # characters of the server's stderr quoted when it fails
STDERR_WINDOW = 8192  # bytes of its end read, scrubbed, then cut to the tail
# What a dead or silent server looks like from the client; anything else is the caller's.
TRANSPORT = (MCPError, OSError, TimeoutError, anyio.ClosedResourceError,
             anyio.BrokenResourceError, anyio.EndOfStream)  # fmt: skip


def tail(path: str, scrub: Scrubber | None = None) -> str:
    """The end of a server's stderr log, as evidence for a failure message ("" if none),
    scrubbed by ``scrub`` before it is cut: a cut through a secret would leave a part of it
    that no scrubber recognises."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            start = max(0, os.path.getsize(path) - STDERR_WINDOW)
            f.seek(start)
            text = f.read()
    except OSError:
        return ""
    if start:  # the window's first line may begin inside a secret: drop it
        text = text.partition("\n")[2]
    if scrub is not None:
        text = scrub.text(text)
    return text[-STDERR_TAIL:].strip()


def failure(
    exc: BaseException, doing: str, errlog: str = "", scrub: Scrubber | None = None
) -> InfraError:
    """What ended a stdio call or session, as an InfraError saying whether to retry.

    A spawn that failed (no such command) is not retried; a server that died or stopped
    answering is (a fresh process may do better). The end of the runtime's server stderr
    log, when there is any, is quoted as evidence (scrubbed by ``scrub`` before it is cut).
    """
    found = leaves(exc)
    for leaf in found:
        if isinstance(leaf, InfraError):
            return leaf
    leaf = found[0]
    said = tail(errlog, scrub) if errlog else ""
    evidence = f"; the servers' stderr log ends: {said!r}" if said else ""
    if isinstance(leaf, FileNotFoundError | PermissionError):
        return InfraError("refused", f"{doing}: cannot run the server command: {leaf}",
                          retryable=False)  # fmt: skip
    if isinstance(leaf, TimeoutError):
        return InfraError("timeout", f"{doing} timed out{evidence}", retryable=True)
    return InfraError(
        "transport", f"{doing}: {type(leaf).__name__}: {leaf}{evidence}", retryable=True
    )


class StdioSession(ObservedSession):
    """An initialized MCP session with one server process; calls are reported to ``observer``.

    A call's event records its parsed answer as ``structured`` when that is an object
    (the server's structured content, or its text parsed as JSON).
    """

    def __init__(self, session: ClientSession, observer: Observer | None, label: str) -> None:
        super().__init__(
            session, observer, fail=lambda exc, doing: failure(exc, f"{doing} on {label}")
        )
        self.label = label  # which server this is (its memory file), for messages

    def recorded_structured(self, got: CallResult, structured: Any) -> Any:
        return got.data if isinstance(got.data, dict) else None


@asynccontextmanager
async def open_session(
    argv: Sequence[str],
    *,
    env: dict[str, str],
    errlog: TextIO,
    label: str,
    observer: Observer | None = None,
    scrub: Scrubber | None = None,
) -> AsyncIterator[StdioSession]:
    """Start ``argv`` as a stdio MCP server (``env`` over the SDK's safe defaults), initialize.

    The process lives as long as the context; its stderr goes to ``errlog``. Failures to
    start, and a server that dies mid-session, raise InfraError quoting its stderr; with
    ``scrub`` (the secrets the server was given), everything it sends and every failure
    quoting it is scrubbed of them (``session.observed``).
    """
    params = StdioServerParameters(command=argv[0], args=list(argv[1:]), env=env)
    errlog_path = getattr(errlog, "name", "")
    async with observed(
        stdio_client(params, errlog=errlog),
        lambda read, write: ClientSession(read, write, read_timeout_seconds=READ_TIMEOUT_S),
        lambda client: StdioSession(client, observer, label),
        transport=TRANSPORT,
        fail=lambda exc, doing: failure(exc, doing, errlog_path, scrub),
        opening=f"starting the MCP server for {label}",
        during=f"the MCP session with {label}",
        scrub=scrub,
    ) as session:
        yield session


class SerialServer:
    """One long-lived server session the harness calls itself, unrecorded and one call at a
    time (servers that rewrite a file or a store per write lose writes to interleaving);
    failures name ``label``. Answers and the tool list come scrubbed by the session (its
    platform's secrets, given where it was opened: ``session.observed``); failures are
    scrubbed here with the same scrubber."""

    def __init__(self, session: ObservedSession, label: str) -> None:
        self.session = session
        self.label = label
        self.lock = asyncio.Lock()

    async def call(self, name: str, arguments: dict[str, Any]) -> CallResult:
        """One unrecorded ``tools/call``; InfraError when the server fails."""
        async with self.lock:
            try:
                got = await self.session.call(name, arguments)
            except Exception as exc:
                raise self._scrubbed(failure(exc, f"tools/call {name} on {self.label}")) from None
        return got

    async def list_tools(self) -> list[dict[str, Any]]:
        """The server's tools, unrecorded."""
        async with self.lock:
            try:
                return await self.session.list_tools()
            except Exception as exc:
                raise self._scrubbed(failure(exc, f"tools/list on {self.label}")) from None

    def _scrubbed(self, exc: InfraError) -> BaseException:
        return scrubbed(exc, self.session.scrub)
