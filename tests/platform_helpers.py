"""Helpers for driving a real refplatform over loopback with a real MCP client."""

from __future__ import annotations

from typing import Any

from harness.platforms.mcp_data_platform import McpDataPlatform
from protocols import dataset
from refplatform.server import RunningPlatform

ORDERS = dataset.urn("orders")
INSIGHTS = "/api/v1/admin/knowledge/insights"
CHANGESETS = "/api/v1/admin/knowledge/changesets"


def client_for(running: RunningPlatform) -> McpDataPlatform:
    return McpDataPlatform(
        running.url,
        admin_key=running.admin_key,
        pool_base=running.pool_base,
        pool_size=running.pool_size,
    )


async def call(client: McpDataPlatform, who: int | None, tool: str, **args: Any) -> Any:
    """One tool call in a fresh session as pool identity ``who`` (None = admin)."""
    async with client.session(who) as s:
        res = await s.call_tool(tool, args)
    if res.is_error:
        raise AssertionError(f"{tool} failed: {res.text}")
    return res.data


async def tool_error(client: McpDataPlatform, who: int | None, tool: str, **args: Any) -> str:
    """The error text of a tool call that must fail."""
    async with client.session(who) as s:
        res = await s.call_tool(tool, args)
    assert res.is_error, f"{tool} unexpectedly succeeded: {res.text}"
    return res.text


async def capture(client: McpDataPlatform, who: int, content: str, urn: str = ORDERS) -> Any:
    return await call(
        client, who, "memory_capture", type="business_knowledge", content=content, entity_urns=[urn]
    )


def fact_texts(search_result: dict[str, Any], source: str) -> list[str]:
    group = next(g for g in search_result["groups"] if g["source"] == source)
    return [h["text"] for h in group["hits"]]
