"""The mcp-data-platform client: handle injection, observation, and error translation."""

from __future__ import annotations

import asyncio
import json

import httpx2
import pytest
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from benchledger.cli import main
from benchledger.harness.errors import InfraError
from benchledger.harness.platforms.mcp_data_platform import McpDataPlatform, translate
from benchledger.refplatform.auth import Keyring
from benchledger.refplatform.platform import VERSION, Platform
from benchledger.refplatform.server import LoopbackServer, RunningPlatform, build_app
from tests.platform_helpers import ORDERS


def client_for(running: RunningPlatform) -> McpDataPlatform:
    """The harness's client for an embedded refplatform."""
    return McpDataPlatform(running.url, admin_key=running.admin_key,
                           pool_base=running.pool_base, pool_size=running.pool_size)  # fmt: skip


class Recorder:
    episode = "teach"

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def session_call(self, body):
        self.calls.append(
            (body.method, body.tool, body.arguments, body.result, body.is_error, body.content)
        )


def test_sessions_inject_the_handle_hide_it_and_report_every_call():
    rec = Recorder()

    async def go(r):
        client = client_for(r)
        async with client.session(1, rec) as s:
            tools = await s.list_tools()
            res = await s.call_tool("search", {"intent": "revenue", "entity_urns": [ORDERS]})
        await client.aclose()
        return s, tools, res

    with RunningPlatform(pool_size=2) as r:
        s, tools, res = asyncio.run(go(r))
        key = r.key(1)
    names = [t["name"] for t in tools]
    assert "platform_info" not in names and "search" in names
    for t in tools:
        assert "session_id" not in t["input_schema"]["properties"]
        assert "session_id" not in t["input_schema"].get("required", [])
    assert not res.is_error and res.data["groups"]
    assert [c[0] for c in rec.calls] == ["initialize", "tools/call", "tools/list", "tools/call"]
    assert rec.calls[0][3] == {"server": {"name": "mcp-data-platform", "version": VERSION}}
    assert rec.calls[1][1] == "platform_info" and rec.calls[3][2] == {
        "intent": "revenue",
        "entity_urns": [ORDERS],
    }
    assert s.handle.startswith("dps_") and s.email == "bench-agent-001@apikey.local"
    assert key not in json.dumps([c[:4] for c in rec.calls])
    blocks = rec.calls[3][5]  # a tool result is observed as its content blocks
    assert blocks and blocks[0]["type"] == "text" and json.loads(blocks[0]["text"]) == res.data


class McpRequests:
    """ASGI middleware: each request to ``/mcp`` as [HTTP method, JSON-RPC method], and the
    client port (the connection) it came over."""

    def __init__(self, app) -> None:
        self.app = app
        self.seen: list[list] = []
        self.ports: list[int] = []

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["path"] != "/mcp":
            return await self.app(scope, receive, send)
        entry = [scope["method"], None]
        self.seen.append(entry)
        self.ports.append(scope["client"][1])
        body = b""

        async def tap():
            nonlocal body
            message = await receive()
            body += message.get("body", b"")
            if body and not message.get("more_body"):
                entry[1] = json.loads(body).get("method")
            return message

        return await self.app(scope, tap, send)


def test_a_session_makes_only_the_requests_its_calls_need_over_one_connection():
    # No standalone GET stream (the harness takes no server-initiated messages), no
    # tools/list the SDK would send to learn platform_info's output schema, and no second
    # connection because the 202 to notifications/initialized was left unread.
    platform = Platform()
    keyring = Keyring("admin-key", "pool", 2)
    counted = McpRequests(build_app(platform, keyring))
    server = LoopbackServer(counted)
    server.start()
    try:
        client = McpDataPlatform(server.url, admin_key="admin-key", pool_base="pool", pool_size=2)

        async def go():
            async with client.session(1) as s:
                await s.list_tools()
                await s.call_tool("search", {"intent": "revenue"})
            async with client.session(None) as admin:
                await admin.call_tool("datahub_get_entity", {"urn": ORDERS})
            await client.aclose()

        asyncio.run(go())
    finally:
        server.stop()
        platform.close()
    opening = [["POST", "initialize"], ["POST", "notifications/initialized"],
               ["POST", "tools/call"]]  # fmt: skip
    assert counted.seen == [
        *opening, ["POST", "tools/list"], ["POST", "tools/call"], ["DELETE", None],
        *opening, ["POST", "tools/call"], ["DELETE", None],
    ]  # fmt: skip
    assert len(set(counted.ports[:6])) == len(set(counted.ports[6:])) == 1


def test_an_unknown_key_is_refused_and_not_retryable():
    async def go(r):
        client = McpDataPlatform(r.url, admin_key="wrong", pool_base="wrong", pool_size=1)
        with pytest.raises(InfraError) as info:
            async with client.session(1):
                pass
        with pytest.raises(InfraError) as rest:
            await client.rest("GET", "/api/v1/admin/knowledge/insights")
        await client.aclose()
        return info.value, rest.value

    with RunningPlatform(pool_size=1) as r:
        opened, rest = asyncio.run(go(r))
    assert opened.kind == "refused" and not opened.retryable
    assert rest.kind == "refused" and "HTTP 401" in rest.message


def test_a_closed_port_is_a_retryable_transport_error():
    async def go():
        client = McpDataPlatform(
            "http://127.0.0.1:9", admin_key="a", pool_base="b", pool_size=1, timeout_s=2
        )
        with pytest.raises(InfraError) as info:
            async with client.session(1):
                pass
        with pytest.raises(InfraError) as rest:
            await client.rest("GET", "/x")
        await client.aclose()
        return info.value, rest.value

    opened, rest = asyncio.run(go())
    assert opened.kind == rest.kind == "transport" and opened.retryable and rest.retryable


def test_a_5xx_read_back_is_a_retryable_infra_error():
    async def boom(request):
        return JSONResponse({"error": "down"}, status_code=503)

    server = LoopbackServer(Starlette(routes=[Route("/api/v1/x", boom)]))
    server.start()
    try:
        client = McpDataPlatform(server.url, admin_key="a", pool_base="b", pool_size=1)

        async def go():
            with pytest.raises(InfraError) as info:
                await client.rest("GET", "/api/v1/x")
            await client.aclose()
            return info.value

        err = asyncio.run(go())
    finally:
        server.stop()
    assert err.kind == "http_5xx" and err.retryable and "503" in err.message


@pytest.mark.parametrize(
    ("exc", "kind", "retryable"),
    [
        (httpx2.ReadTimeout("slow"), "timeout", True),
        (TimeoutError(), "timeout", True),
        (ExceptionGroup("g", [httpx2.ConnectError("no")]), "transport", True),
        (RuntimeError("odd"), "transport", True),
    ],
    ids=["read-timeout", "timeout", "grouped-connect", "other"],
)
def test_translate_maps_failures_to_infra_errors(exc, kind, retryable):
    got = translate(exc, "doing x")
    assert (got.kind, got.retryable) == (kind, retryable) and "doing x" in got.message


def test_bench_platform_prints_the_documented_json_keys(capsys):
    assert (
        main(["bench", "platform", "--sessions", "2", "--calls", "5", "--json", "--in-process"])
        == 0
    )
    report = json.loads(capsys.readouterr().out.strip().split("\n")[-1])
    assert report["errors"] == 0 and report["captures_written"] == report["captures_read_back"] == 2
    for key in ("calls_per_s", "p50_ms", "p99_ms", "raw_calls_per_s", "ratio_vs_raw"):
        assert report[key] > 0


def test_an_entity_is_parsed_from_its_own_block_when_enrichment_appends_text():
    from benchledger.harness.platforms.mcp_data_platform import entity_block

    entity = {"urn": ORDERS, "description": "Orders."}
    blocks = (
        {"type": "text", "text": json.dumps(entity)},
        {"type": "text", "text": "Related knowledge: net revenue excludes refunds."},
    )
    assert entity_block(blocks, None) == entity
    assert entity_block(blocks[1:], None) is None


def test_the_newest_insight_is_found_whatever_order_the_platform_lists_in():
    from benchledger.harness.platforms.mcp_data_platform import newest_first

    old = {"id": "a", "created_at": "2026-08-01T10:00:00Z"}
    new = {"id": "b", "created_at": "2026-08-01T10:00:05.5Z"}
    assert newest_first([old, new]) == newest_first([new, old]) == ["b", "a"]
