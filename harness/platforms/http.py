"""One MCP session over streamable HTTP: the opener every HTTP platform adapter shares.

``streams`` opens the read/write streams of a streamable-HTTP MCP endpoint (without the
standalone GET stream), ``ListedToolsSession`` is the SDK's client session validating results
only against tools it listed, and ``translate`` says how an httpx2 / MCP / timeout failure
reads as ``InfraError``. The calls themselves, their timing and their events are
``session.ObservedSession``'s, as over stdio (``stdio.py``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.streamable_http import StreamableHTTPTransport
from mcp.shared._context_streams import create_context_streams
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage

from benchledger.harness.errors import InfraError


def _leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


# What a broken connection or a refused request looks like; anything else is the caller's.
TRANSPORT = (httpx2.HTTPError, MCPError, TimeoutError)


# JSON-RPC error codes the MCP client makes up for a broken answer.
_PARSE_ERROR, _INVALID_REQUEST = -32700, -32600


def translate(exc: BaseException, doing: str, statuses: list[int] | None = None) -> InfraError:
    """Map an httpx2 / MCP / timeout failure to an InfraError saying whether to retry.

    The MCP client turns a failed POST into a JSON-RPC error without its HTTP status;
    ``statuses`` (the session's failed POST statuses, newest last) puts it back.
    """
    leaf = _leaf(exc)
    status = statuses.pop() if statuses else 0
    if isinstance(leaf, MCPError) and status:
        if status >= 500:
            return InfraError("http_5xx", f"{doing}: HTTP {status}", retryable=True)
        if status in (401, 403):
            return InfraError("refused", f"{doing}: HTTP {status}: the key was refused",
                              retryable=False)  # fmt: skip
        if status == 404:
            return InfraError("refused", f"{doing}: HTTP 404: no MCP endpoint at this URL",
                              retryable=False)  # fmt: skip
    if isinstance(leaf, MCPError) and leaf.error.code == _PARSE_ERROR:
        said = " ".join(leaf.message.split())  # pydantic's report spans lines: keep one
        return InfraError("bad_answer", f"{doing}: {said[:200]}", retryable=True)
    if isinstance(leaf, MCPError) and "content type" in leaf.message:
        return InfraError("refused", f"{doing}: not an MCP server ({leaf.message})",
                          retryable=False)  # fmt: skip
    if isinstance(leaf, InfraError):
        return leaf
    if isinstance(leaf, httpx2.TimeoutException | TimeoutError):
        return InfraError("timeout", f"{doing} timed out", retryable=True)
    if isinstance(leaf, httpx2.HTTPStatusError):
        code = leaf.response.status_code
        if code >= 500:
            return InfraError("http_5xx", f"{doing}: HTTP {code}", retryable=True)
        return InfraError("refused", f"{doing}: HTTP {code}", retryable=False)
    if isinstance(leaf, httpx2.HTTPError):
        return InfraError("transport", f"{doing}: {type(leaf).__name__}: {leaf}", retryable=True)
    if isinstance(leaf, MCPError):
        return InfraError("refused", f"{doing}: {leaf.message}", retryable=False)
    return InfraError("transport", f"{doing}: {type(leaf).__name__}: {leaf}", retryable=True)


class ListedToolsSession(ClientSession):
    """The SDK's client session, validating results only against the tools it has listed.

    The SDK lists the tools again to learn the output schema of a tool called before any
    listing (``platform_info``, which opens every session, and each admin call): a hidden
    ``tools/list`` round trip per session. Here a result is checked against the schema the
    session's own listing gave, as the SDK does; an unlisted tool's result is not checked.
    """

    _listed = False

    async def list_tools(self, *args: Any, **kwargs: Any) -> types.ListToolsResult:
        listed = await super().list_tools(*args, **kwargs)
        self._listed = True
        return listed

    async def validate_tool_result(self, name: str, result: types.CallToolResult) -> None:
        if self._listed:
            await super().validate_tool_result(name, result)


@asynccontextmanager
async def streams(url: str, http: httpx2.AsyncClient) -> AsyncIterator[Any]:
    """``mcp.client.streamable_http.streamable_http_client`` without the standalone GET stream.

    That stream carries server-initiated messages (notifications, sampling or elicitation
    requests), none of which the harness takes; it cost every session a second connection
    and a held-open SSE response on both sides, about a fifth of a session's CPU. Requests,
    their JSON or SSE answers, and the closing DELETE go through the SDK's own transport.
    ``http`` is the session's own client, closed after the DELETE.
    """
    transport = StreamableHTTPTransport(url)
    read_writer, read = create_context_streams[SessionMessage | Exception](0)
    write, write_reader = create_context_streams[SessionMessage](0)
    async with http, read_writer, read, write, write_reader, anyio.create_task_group() as tg:
        tg.start_soon(transport.post_writer, http, write_reader, read_writer, write, _no_get, tg)
        try:
            yield read, write
        finally:
            if transport.session_id:
                await transport.terminate_session(http)
            tg.cancel_scope.cancel()


def _no_get() -> None:
    """Where the SDK would start its GET stream once the session is initialized."""


async def read_empty(response: httpx2.Response) -> None:
    """Read an empty answer (the 202 to ``notifications/initialized``) to its end.

    The SDK closes it unread, and a connection whose answer was not read to its end
    cannot carry the next request: every session opened a second connection for its
    first call.
    """
    if response.headers.get("content-length") == "0":
        await response.aread()
