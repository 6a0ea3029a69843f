"""A platform that answers from the log: the mcp-data-platform adapter over recorded I/O.

The adapter's own lifecycle steps run unchanged (so a changed adapter shows up as a
divergence too); only its I/O is replaced. Sessions serve the recorded session calls in
order and check each tool name and arguments against the recording; admin REST reads
serve the recorded read-backs. Nothing is sent anywhere.
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import msgspec

from benchledger.harness.errors import InfraError
from benchledger.harness.platforms.base import CallResult, Description, Observer, ReadBack
from benchledger.harness.platforms.mcp_data_platform import McpDataPlatform
from benchledger.ledger.codec import canonical_json
from benchledger.ledger.events import InfraErrorBody, ModelCallBody, ReadBackBody, SessionCallBody
from benchledger.projections.trace import VOLATILE_PARAMS
from benchledger.replay.tape import Tape, ToolDivergence, describe


def _without_clock(path: str) -> tuple[str, list[tuple[str, str]]]:
    """A read's path without its clock-derived parameters (``since``): what must match."""
    route, _, query = path.partition("?")
    params = urllib.parse.parse_qsl(query, keep_blank_values=True)
    return route, [(k, v) for k, v in params if k not in VOLATILE_PARAMS]


def _parse(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


class LogSession:
    """A session whose calls are answered by the recorded ones, in order."""

    def __init__(self, tape: Tape, observer: Observer | None) -> None:
        self._tape = tape
        self._observer = observer
        self.email = ""

    def _replay(self, body: SessionCallBody) -> None:
        if self._observer is None:
            return
        if body.episode != self._observer.episode:
            body = msgspec.structs.replace(body, episode=self._observer.episode)
        self._observer.session_call(body)

    def _take(self, method: str, tool: str, arguments: dict[str, Any]) -> SessionCallBody:
        actual = {"kind": "session_call", "method": method, "tool": tool, "arguments": arguments}
        seq, body = self._tape.take(SessionCallBody, actual)
        assert isinstance(body, SessionCallBody)
        if (body.method, body.tool) != (method, tool) or (
            canonical_json(body.arguments) != canonical_json(arguments)
        ):
            raise ToolDivergence(
                self._tape.stream,
                seq,
                describe(body),
                actual,
                "a different call than the recorded one",
            )
        self._replay(body)
        return body

    async def open(self) -> None:
        """The recorded handshake: initialize, then platform_info (the handle's source)."""
        self._take("initialize", "", {})
        info = self._take("tools/call", "platform_info", {})
        data = _parse(info.text())
        self.email = str(data.get("identity", "")) if isinstance(data, dict) else ""

    async def list_tools(self) -> list[dict[str, Any]]:
        """The recorded listing; a model agent's tools exactly as its next request sent them."""
        body = self._take("tools/list", "", {})
        nxt = self._tape.peek()
        request = nxt[1].request if nxt is not None and isinstance(nxt[1], ModelCallBody) else {}
        # A request without tools is not an agent's turn (mem0's fact extraction makes those).
        if isinstance(request, dict) and request.get("tools"):
            return [dict(t) for t in request["tools"]]
        names = body.result.get("tools", []) if isinstance(body.result, dict) else []
        return [{"name": str(n), "description": "", "input_schema": {}} for n in names]

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> CallResult:
        body = self._take("tools/call", name, arguments)
        text = body.text()
        data = body.structured if body.structured is not None else _parse(text)
        return CallResult(text, body.is_error, data, body.latency_ms, tuple(body.content))


class LogPlatform(McpDataPlatform):
    """The mcp-data-platform adapter whose sessions and REST reads come from ``tape``."""

    def __init__(self, tape: Tape, *, pool_size: int) -> None:
        super().__init__("log:", admin_key="", pool_base="", pool_size=pool_size)
        self.tape = tape
        self._last: ReadBackBody | None = None

    @asynccontextmanager
    async def session(  # type: ignore[override]  # a PlatformSession, as the adapter uses it
        self, pool_index: int | None, observer: Observer | None = None
    ) -> AsyncIterator[LogSession]:
        session = LogSession(self.tape, observer)
        await session.open()
        yield session

    async def rest(
        self, method: str, path: str, *, params: dict[str, Any] | None = None, body: Any = None
    ) -> ReadBack:
        """The recorded read-back for this request; a repeated poll sees its last answer."""
        if params:
            path = f"{path}?{urllib.parse.urlencode(params)}"
        want = (method, _without_clock(path))
        nxt = self.tape.peek()
        if nxt is not None and isinstance(nxt[1], ReadBackBody):
            rb = nxt[1]
            if (rb.method, _without_clock(rb.path)) == want:
                self.tape.take(ReadBackBody, None)
                self._last = rb
                return ReadBack(rb.method, rb.path, rb.status, rb.body, rb.latency_ms)
        last = self._last
        repeat = last is not None and (last.method, _without_clock(last.path)) == want
        # A recorded failure is this read's, unless it belongs to a later stage and this read
        # is one more poll of a wait that the recording had already ended.
        if (
            nxt is not None
            and isinstance(nxt[1], InfraErrorBody)
            and (not repeat or (last is not None and nxt[1].stage == last.stage))
        ):
            self.tape.take(ReadBackBody, None)  # raises the recorded InfraError
        if repeat and last is not None:
            return ReadBack(last.method, last.path, last.status, last.body, last.latency_ms)
        actual = {"kind": "read_back", "method": method, "path": path}
        seq = nxt[0] if nxt is not None else -1
        raise ToolDivergence(
            self.tape.stream,
            seq,
            describe(nxt[1] if nxt else None),
            actual,
            "a different platform read than the recorded one",
        )

    async def describe(self) -> Description:
        # The run record already says what the platform was; the tape holds no preflight.
        raise InfraError("refused", "a replayed platform is never described", retryable=False)
