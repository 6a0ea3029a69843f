"""The mcp-data-platform API client: MCP over streamable HTTP plus the admin REST API.

It serves the embedded refplatform and, unchanged, the real platform. Bearer keys
live only in HTTP headers of this module's clients; observers and results never
see them. Transport failures are translated to ``InfraError`` here, at the boundary.
"""

from __future__ import annotations

import datetime as dt
import json
import time
import urllib.parse
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import httpx2
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from harness.errors import InfraError
from harness.platforms.base import CallResult, Insight, Observer, ReadBack

HANDLE_FIELD = "session_id"
INSIGHTS = "/api/v1/admin/knowledge/insights"
CHANGESETS = "/api/v1/admin/knowledge/changesets"
PAGES = "/api/v1/portal/knowledge-pages"
CLOCK_SLACK_S = 5.0  # "since" filters look this far back, for clock skew with the platform


def rfc3339(epoch_s: float) -> str:
    stamp = dt.datetime.fromtimestamp(epoch_s, dt.UTC)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _insight(row: Any) -> Insight | None:
    if not isinstance(row, dict) or "id" not in row:
        return None
    return Insight(str(row["id"]), str(row.get("status", "")), str(row.get("content", "")))


def _leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in _leaves(sub)]
    return [exc]


def _cause(group: BaseExceptionGroup, doing: str) -> BaseException:
    """What really ended a session, out of the SDK's nested task-group errors."""
    leaves = _leaves(group)
    for leaf in leaves:
        if isinstance(leaf, InfraError):
            return leaf
    for leaf in leaves:  # an exception of the caller's own code passes through as it is
        if not isinstance(leaf, httpx2.HTTPError | MCPError | TimeoutError):
            return leaf
    return translate(leaves[0], doing)


def translate(exc: BaseException, doing: str) -> InfraError:
    """Map an httpx2 / MCP / timeout failure to an InfraError saying whether to retry."""
    leaf = _leaf(exc)
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


def _parse(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def hide_handle(schema: dict[str, Any]) -> dict[str, Any]:
    """A tool input schema without the session handle, which the harness injects."""
    out = dict(schema)
    props = dict(out.get("properties") or {})
    props.pop(HANDLE_FIELD, None)
    out["properties"] = props
    if "required" in out:
        out["required"] = [r for r in out["required"] if r != HANDLE_FIELD]
    return out


class McpSession:
    """One MCP session as one identity, with the platform handle injected into calls."""

    def __init__(self, session: ClientSession, observer: Observer | None) -> None:
        self._session = session
        self._observer = observer
        self.handle = ""
        self.email = ""

    def _observe(
        self, method: str, tool: str, args: dict[str, Any], result: Any, err: bool, ms: float
    ) -> None:
        if self._observer is not None:
            self._observer.session_call(method, tool, args, result, err, ms)

    async def _open(self) -> None:
        start = time.perf_counter()
        init = await self._session.initialize()
        ms = (time.perf_counter() - start) * 1000
        server = {"name": init.server_info.name, "version": init.server_info.version}
        self._observe("initialize", "", {}, {"server": server}, False, ms)
        info = await self._raw_call("platform_info", {})
        if info.is_error or not isinstance(info.data, dict) or HANDLE_FIELD not in info.data:
            raise InfraError("refused", f"platform_info gave no handle: {info.text[:200]}",
                             retryable=False)  # fmt: skip
        self.handle = str(info.data[HANDLE_FIELD])
        self.email = str(info.data.get("identity", ""))

    async def list_tools(self) -> list[dict[str, Any]]:
        """Tools as ``{name, description, input_schema}``, the handle hidden from schemas."""
        start = time.perf_counter()
        listed = await self._session.list_tools()
        ms = (time.perf_counter() - start) * 1000
        tools = [
            {"name": t.name, "description": t.description or "",
             "input_schema": hide_handle(t.input_schema)}
            for t in listed.tools
            if t.name != "platform_info"
        ]  # fmt: skip
        self._observe("tools/list", "", {}, {"tools": [t["name"] for t in tools]}, False, ms)
        return tools

    async def _raw_call(self, name: str, arguments: dict[str, Any]) -> CallResult:
        wire = dict(arguments)
        if self.handle:
            wire[HANDLE_FIELD] = self.handle
        start = time.perf_counter()
        res = await self._session.call_tool(name, wire)
        ms = (time.perf_counter() - start) * 1000
        text = "\n".join(getattr(c, "text", "") for c in res.content)
        data = res.structured_content if res.structured_content is not None else _parse(text)
        result = CallResult(text, bool(res.is_error), data, ms)
        self._observe("tools/call", name, arguments, text, result.is_error, ms)
        return result

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> CallResult:
        """Call a tool; tool errors come back as results, transport failures raise InfraError."""
        try:
            return await self._raw_call(name, arguments)
        except Exception as exc:
            raise translate(exc, f"tools/call {name}") from None


class McpDataPlatform:
    """A platform speaking txn2/mcp-data-platform's API at ``base_url``."""

    def __init__(
        self,
        base_url: str,
        *,
        admin_key: str,
        pool_base: str,
        pool_size: int,
        timeout_s: float = 30.0,
        transport: httpx2.AsyncBaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.pool_size = pool_size
        self._admin_key = admin_key
        self._pool_base = pool_base
        self._timeout = httpx2.Timeout(timeout_s, read=max(timeout_s, 60.0))
        self._transport = transport
        self._admin_http = self._client(admin_key)

    def _client(self, key: str) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {key}"},
            timeout=self._timeout,
            transport=self._transport,
        )

    def email(self, pool_index: int) -> str:
        """mcp-data-platform maps pool key ``<base>-NNN`` to ``bench-agent-NNN@apikey.local``."""
        return f"bench-agent-{pool_index:03d}@apikey.local"

    def key(self, pool_index: int | None) -> str:
        """The bearer key of a pool identity (None = the admin)."""
        if pool_index is None:
            return self._admin_key
        return f"{self._pool_base}-{pool_index:03d}"

    @asynccontextmanager
    async def session(
        self, pool_index: int | None, observer: Observer | None = None
    ) -> AsyncIterator[McpSession]:
        """A fresh MCP session as pool identity ``pool_index`` (None = admin)."""
        try:
            async with AsyncExitStack() as stack:
                try:
                    http = await stack.enter_async_context(self._client(self.key(pool_index)))
                    read, write = await stack.enter_async_context(
                        streamable_http_client(f"{self.base_url}/mcp", http_client=http)
                    )
                    client = await stack.enter_async_context(ClientSession(read, write))
                    session = McpSession(client, observer)
                    await session._open()
                except Exception as exc:
                    raise translate(exc, "opening an MCP session") from None
                yield session
        except BaseExceptionGroup as group:
            # The SDK's task groups wrap whatever ended the session; surface the cause.
            raise _cause(group, "MCP session") from None

    async def rest(
        self, method: str, path: str, *, params: dict[str, Any] | None = None, body: Any = None
    ) -> ReadBack:
        """One admin REST call; 5xx and transport failures raise InfraError."""
        start = time.perf_counter()
        try:
            response = await self._admin_http.request(
                method, f"{self.base_url}{path}", params=params, json=body
            )
        except Exception as exc:
            raise translate(exc, f"{method} {path}") from None
        ms = (time.perf_counter() - start) * 1000
        if params:
            path = f"{path}?{urllib.parse.urlencode(params)}"
        if response.status_code >= 500:
            raise InfraError("http_5xx", f"{method} {path}: HTTP {response.status_code}",
                             retryable=True)  # fmt: skip
        if response.status_code in (401, 403):
            raise InfraError("refused", f"{method} {path}: HTTP {response.status_code} "
                             "(check the admin key)", retryable=False)  # fmt: skip
        return ReadBack(method, path, response.status_code, _parse(response.text), ms)

    # -- the runner's platform operations (PlatformClient) --------------------------------

    async def insights(
        self, *, captured_by: str, entity_urn: str, since: float, status: str = ""
    ) -> tuple[list[Insight], ReadBack]:
        params = {
            "captured_by": captured_by,
            "entity_urn": entity_urn,
            "since": rfc3339(since - CLOCK_SLACK_S),
            "per_page": 100,
        }
        if status:
            params["status"] = status
        got = await self.rest("GET", INSIGHTS, params=params)
        rows = got.body.get("data") if isinstance(got.body, dict) and got.status == 200 else []
        return [i for i in map(_insight, rows or []) if i is not None], got

    async def insight(self, insight_id: str) -> tuple[Insight | None, ReadBack]:
        got = await self.rest("GET", f"{INSIGHTS}/{insight_id}")
        return (_insight(got.body) if got.status == 200 else None), got

    async def approve(self, insight_id: str, notes: str) -> tuple[bool, ReadBack]:
        body = {"status": "approved", "review_notes": notes}
        got = await self.rest("PUT", f"{INSIGHTS}/{insight_id}/status", body=body)
        return got.status == 200, got

    async def apply(
        self,
        insight_id: str,
        *,
        entity_urn: str,
        sink: str,
        fact: str,
        page: dict[str, str] | None,
        observer: Observer | None,
    ) -> tuple[bool, str]:
        args: dict[str, Any] = {
            "action": "apply",
            "entity_urn": entity_urn,
            "insight_ids": [insight_id],
            "confirm": True,
            "sink": sink,
        }
        async with self.session(None, observer) as admin:
            if sink == "datahub":
                # The description is replaced: keep what it says and add the fact.
                entity = await admin.call_tool("datahub_get_entity", {"urn": entity_urn})
                current = (
                    entity.data.get("description", "") if isinstance(entity.data, dict) else ""
                )
                detail = f"{current}\n\n{fact}".strip()
                args["changes"] = [{"change_type": "update_description", "detail": detail}]
            else:
                args["page"] = dict(page or {})
            applied = await admin.call_tool("apply_knowledge", args)
        return not applied.is_error, applied.text

    async def changeset_lists(self, insight_id: str, entity_urn: str) -> tuple[bool, ReadBack]:
        got = await self.rest("GET", CHANGESETS, params={"entity_urn": entity_urn, "per_page": 500})
        rows = got.body.get("data", []) if isinstance(got.body, dict) else []
        listed = any(
            insight_id in c.get("source_insight_ids", []) and not c.get("rolled_back")
            for c in rows
            if isinstance(c, dict)
        )
        return listed, got

    async def read_sink(
        self, sink: str, entity_urn: str, observer: Observer | None
    ) -> tuple[str, ReadBack | None]:
        if sink == "datahub":
            async with self.session(None, observer) as admin:
                entity = await admin.call_tool("datahub_get_entity", {"urn": entity_urn})
            return entity.text, None
        got = await self.rest("GET", PAGES)
        return json.dumps(got.body), got

    async def aclose(self) -> None:
        await self._admin_http.aclose()
