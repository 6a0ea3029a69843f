"""One MCP session over stdio: a server process spoken to through the mcp SDK's stdio client.

The SDK spawns the server and exchanges JSON-RPC over its pipes; this module opens
such a session, times ``initialize``, ``tools/list`` and ``tools/call`` and reports
each to an observer exactly as the HTTP client does, and turns a failed spawn or a
server that died into ``InfraError``, the runner's one failure type. A session is
one process: ``initialize`` happens once per process (the SDK caches it), so a fresh
session means a fresh process.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any, TextIO

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

from harness.errors import InfraError
from harness.platforms.base import CallResult, Observer

READ_TIMEOUT_S = 30.0
STDERR_TAIL = 300  # characters of the server's stderr quoted when it fails
# What a dead or silent server looks like from the client; anything else is the caller's.
TRANSPORT = (MCPError, OSError, TimeoutError, anyio.ClosedResourceError,
             anyio.BrokenResourceError, anyio.EndOfStream)  # fmt: skip


def _parse(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in _leaves(sub)]
    return [exc]


def tail(path: str) -> str:
    """The end of a server's stderr log, as evidence for a failure message ("" if none)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            f.seek(max(0, os.path.getsize(path) - STDERR_TAIL))
            return f.read().strip()
    except OSError:
        return ""


def failure(exc: BaseException, doing: str, errlog: str = "") -> InfraError:
    """What ended a stdio call or session, as an InfraError saying whether to retry.

    A spawn that failed (no such command) is not retried; a server that died or stopped
    answering is (a fresh process may do better). The end of the runtime's server stderr
    log, when there is any, is quoted as evidence.
    """
    leaves = _leaves(exc)
    for leaf in leaves:
        if isinstance(leaf, InfraError):
            return leaf
    leaf = leaves[0]
    said = tail(errlog) if errlog else ""
    evidence = f"; the servers' stderr log ends: {said!r}" if said else ""
    if isinstance(leaf, FileNotFoundError | PermissionError):
        return InfraError("refused", f"{doing}: cannot run the server command: {leaf}",
                          retryable=False)  # fmt: skip
    if isinstance(leaf, TimeoutError):
        return InfraError("timeout", f"{doing} timed out{evidence}", retryable=True)
    return InfraError(
        "transport", f"{doing}: {type(leaf).__name__}: {leaf}{evidence}", retryable=True
    )


def result_of(res: Any, ms: float) -> CallResult:
    """A ``CallToolResult`` as the harness sees it: content blocks, joined text, parsed data."""
    content = tuple(c.model_dump(mode="json", exclude_none=True) for c in res.content)
    text = "\n".join(str(b["text"]) for b in content if "text" in b)
    data = res.structured_content if res.structured_content is not None else _parse(text)
    return CallResult(text, bool(res.is_error), data, ms, content)


class StdioSession:
    """An initialized MCP session with one server process; calls are reported to ``observer``."""

    def __init__(self, session: ClientSession, observer: Observer | None, label: str) -> None:
        self._session = session
        self._observer = observer
        self.label = label  # which server this is (its memory file), for messages
        self.email = ""
        self.server: dict[str, str] = {}

    def observe(
        self,
        method: str,
        tool: str,
        args: dict[str, Any],
        result: Any,
        err: bool,
        ms: float,
        content: tuple[dict[str, Any], ...] = (),
        structured: Any = None,
    ) -> None:
        """Report one call to the observer, if there is one."""
        if self._observer is not None:
            self._observer.session_call(method, tool, args, result, err, ms, content, structured)

    async def initialize(self) -> None:
        """The MCP handshake; remembers the server's self-reported name and version."""
        start = time.perf_counter()
        init = await self._session.initialize()
        ms = (time.perf_counter() - start) * 1000
        self.server = {"name": init.server_info.name, "version": init.server_info.version}
        self.observe("initialize", "", {}, {"server": self.server}, False, ms)

    async def list_tools(self) -> list[dict[str, Any]]:
        """Tools as ``{name, description, input_schema}``, recorded as ``tools/list``."""
        start = time.perf_counter()
        listed = await self._session.list_tools()
        ms = (time.perf_counter() - start) * 1000
        tools = [{"name": t.name, "description": t.description or "",
                  "input_schema": dict(t.input_schema)} for t in listed.tools]  # fmt: skip
        self.observe("tools/list", "", {}, {"tools": [t["name"] for t in tools]}, False, ms)
        return tools

    async def call(self, name: str, arguments: dict[str, Any]) -> CallResult:
        """One ``tools/call``, not recorded (the caller records what it makes of it)."""
        start = time.perf_counter()
        res = await self._session.call_tool(name, arguments)
        return result_of(res, (time.perf_counter() - start) * 1000)

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> CallResult:
        """Call a tool and record it; tool errors come back as results (``is_error``)."""
        try:
            got = await self.call(name, arguments)
        except Exception as exc:
            raise failure(exc, f"tools/call {name} on {self.label}") from None
        structured = got.data if isinstance(got.data, dict) else None
        self.observe("tools/call", name, arguments, None, got.is_error, got.latency_ms,
                     got.content, structured)  # fmt: skip
        return got


@asynccontextmanager
async def open_session(
    argv: Sequence[str],
    *,
    env: dict[str, str],
    errlog: TextIO,
    label: str,
    observer: Observer | None = None,
) -> AsyncIterator[StdioSession]:
    """Start ``argv`` as a stdio MCP server (``env`` over the SDK's safe defaults), initialize.

    The process lives as long as the context; its stderr goes to ``errlog``. Failures to
    start, and a server that dies mid-session, raise InfraError quoting its stderr.
    """
    params = StdioServerParameters(command=argv[0], args=list(argv[1:]), env=env)
    errlog_path = getattr(errlog, "name", "")
    try:
        async with AsyncExitStack() as stack:
            try:
                read, write = await stack.enter_async_context(stdio_client(params, errlog=errlog))
                client = await stack.enter_async_context(
                    ClientSession(read, write, read_timeout_seconds=READ_TIMEOUT_S)
                )
                session = StdioSession(client, observer, label)
                await session.initialize()
            except Exception as exc:
                raise failure(exc, f"starting the MCP server for {label}", errlog_path) from None
            yield session
    except BaseExceptionGroup as group:
        # The SDK's task groups wrap whatever ended the session; surface the cause.
        raise _cause(group, f"the MCP session with {label}", errlog_path) from None


def _cause(group: BaseExceptionGroup, doing: str, errlog: str) -> BaseException:
    """The caller's own exception (or a cancellation) as it is; else the transport failure."""
    leaves = _leaves(group)
    for leaf in leaves:
        if isinstance(leaf, InfraError) or not isinstance(leaf, Exception):
            return leaf
    for leaf in leaves:
        if not isinstance(leaf, TRANSPORT):
            return leaf
    return failure(group, doing, errlog)
