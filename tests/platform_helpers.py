"""A thin raw driver for refplatform over loopback: the real MCP client and plain HTTP.

Deliberately not the harness's client: these tests check refplatform against the
peer's contract, so they speak MCP and REST as any client would, with no benchledger
adapter in between.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx2
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from benchledger.refplatform.packs import Pack, load_pack
from benchledger.refplatform.server import RunningPlatform
from tests.conftest import peer_dir

ORDERS = "urn:li:dataset:(urn:li:dataPlatform:trino,memory.bench.orders,PROD)"
CUSTOMERS = "urn:li:dataset:(urn:li:dataPlatform:trino,memory.bench.customers,PROD)"
ADMIN = "/api/v1/admin"
INSIGHTS = f"{ADMIN}/knowledge/insights"
CHANGESETS = f"{ADMIN}/knowledge/changesets"
PAGES = "/api/v1/portal/knowledge-pages"
_DECODER = json.JSONDecoder()


@functools.cache
def peer_pack() -> Pack:
    """The peer's seed pack (bench/seed), loaded once."""
    return load_pack(os.path.join(peer_dir(), "bench", "seed"))


def running_peer(**kwargs: Any) -> RunningPlatform:
    """A fresh refplatform over the peer's pack on a loopback port."""
    kwargs.setdefault("pool_size", 8)
    return RunningPlatform(pack=peer_pack(), **kwargs)


def blocks(text: str) -> list[Any]:
    """The blocks of a joined result text: JSON values, or a leading text block.

    The peer's harness joins a result's text blocks with newlines; a markdown result
    (``trino_describe_table``) is followed by its enrichment blocks, one JSON per line.
    """
    out: list[Any] = []
    i = 0
    while i < len(text):
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            break
        try:
            value, i = _DECODER.raw_decode(text, i)
        except json.JSONDecodeError:
            cut = _json_tail(text, i)
            out.append(text[i:cut].rstrip("\n"))
            i = cut
            continue
        out.append(value)
    return out


def _json_tail(text: str, start: int) -> int:
    """Where the JSON lines appended after a text block begin (the end if none)."""
    at = text.find("\n{", start)
    while at >= 0:
        try:
            rest = text[at + 1 :]
            j = 0
            while j < len(rest):
                _, j = _DECODER.raw_decode(rest, j)
                while j < len(rest) and rest[j].isspace():
                    j += 1
            return at + 1
        except json.JSONDecodeError:
            at = text.find("\n{", at + 1)
    return len(text)


@dataclass
class Reply:
    """One tool result: the error flag, every text block, and the structured content."""

    is_error: bool
    texts: list[str]
    structured: Any

    @property
    def text(self) -> str:
        """All text blocks joined by newlines, as the peer's harness records a result."""
        return "\n".join(self.texts)

    @property
    def data(self) -> Any:
        """The tool's own (first) block, parsed from JSON (enrichment blocks follow it)."""
        return json.loads(self.texts[0])

    @property
    def error(self) -> dict[str, Any]:
        """The structured error envelope ``{code, category, message, hint}``."""
        envelope: dict[str, Any] = self.structured["error"]
        return envelope

    def __contains__(self, needle: str) -> bool:
        return needle in self.text


@dataclass
class Rest:
    status: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)


class Session:
    """An MCP session as one identity, with its minted handle threaded into every call."""

    def __init__(self, client: ClientSession) -> None:
        self.client = client
        self.handle = ""

    async def call(
        self, tool: str, args: dict[str, Any] | None = None, *, thread: bool = True
    ) -> Reply:
        """Call ``tool``, threading the session's handle as ``session_id`` unless told not to."""
        sent = dict(args or {})
        if thread and self.handle:
            sent.setdefault("session_id", self.handle)
        res = await self.client.call_tool(tool, sent)
        texts = [c.text for c in res.content if getattr(c, "type", "") == "text"]
        return Reply(bool(res.is_error), texts, res.structured_content)


class Driver:
    """Opens sessions as pool identities (or the admin) and makes REST calls."""

    def __init__(self, running: RunningPlatform) -> None:
        self.url = running.url
        self.admin_key = running.admin_key
        self.running = running

    def key(self, who: int | None) -> str:
        return self.admin_key if who is None else self.running.key(who)

    @asynccontextmanager
    async def session(
        self, who: int | None, *, mint: bool = True, path: str = ""
    ) -> AsyncIterator[Session]:
        """A fresh MCP session as pool identity ``who`` (None: the admin), handle minted."""
        async with AsyncExitStack() as stack:
            http = await stack.enter_async_context(
                httpx2.AsyncClient(headers={"X-API-Key": self.key(who)}, timeout=30)
            )
            read, write = await stack.enter_async_context(
                streamable_http_client(f"{self.url}{path}", http_client=http)
            )
            client = await stack.enter_async_context(ClientSession(read, write))
            await client.initialize()
            session = Session(client)
            if mint:
                info = await session.call("platform_info")
                session.handle = info.data["session_id"]
            yield session

    async def rest(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        body: Any = None,
        who: int | None = None,
        raw: bytes | None = None,
    ) -> Rest:
        """One REST call as ``who`` (None: the admin key)."""
        headers = {"Authorization": f"Bearer {self.key(who)}"}
        if raw is not None:
            headers["Content-Type"] = "application/json"
        # A client per call: tests drive one platform from several event loops.
        async with httpx2.AsyncClient(timeout=30) as http:
            response = await http.request(
                method, f"{self.url}{path}", params=params, json=body, content=raw, headers=headers
            )
        try:
            parsed = response.json() if response.content else None
        except ValueError:
            parsed = response.text
        return Rest(response.status_code, parsed, dict(response.headers))

    async def aclose(self) -> None:
        """Nothing to release (kept so callers need not know)."""


def client_for(running: RunningPlatform) -> Driver:
    """A raw driver for ``running``."""
    return Driver(running)


async def call(driver: Driver, who: int | None, tool: str, **args: Any) -> Any:
    """One successful tool call in a fresh session; its own block, parsed.

    A ``trino_query`` is preceded by a ``search``, which the search-first gate requires.
    """
    async with driver.session(who) as s:
        if tool in ("trino_query",):
            await s.call("search", {"intent": "orders"})
        reply = await s.call(tool, args)
    if reply.is_error:
        raise AssertionError(f"{tool} failed: {reply.text}")
    return reply.data


async def tool_error(driver: Driver, who: int | None, tool: str, **args: Any) -> Reply:
    """A tool call that must fail, in a fresh session."""
    async with driver.session(who) as s:
        reply = await s.call(tool, args)
    assert reply.is_error, f"{tool} unexpectedly succeeded: {reply.text}"
    return reply


async def capture(
    driver: Driver, who: int, content: str, urn: str = ORDERS, *, kind: str = "business_knowledge"
) -> Any:
    """Capture ``content`` as ``who``, linked to ``urn``."""
    return await call(driver, who, "memory_capture", type=kind, content=content, entity_urns=[urn])


def hit_texts(result: dict[str, Any], source: str) -> list[str]:
    """The hit texts of one source's group in a search result (empty if it has none)."""
    for group in result["groups"]:
        if group["source"] == source:
            return [h["text"] for h in group["hits"]]
    return []
