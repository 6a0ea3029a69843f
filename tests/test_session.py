"""The observed MCP session every transport shares (harness/platforms/session.py), over stdio.

The HTTP transport's sessions are checked in tests/test_platform_client.py; here a tiny
real MCP server (the SDK's own) runs as a child process over stdio.
"""

from __future__ import annotations

import asyncio
import sys

import pytest

from benchledger.harness.errors import InfraError
from benchledger.harness.platforms.stdio import open_session
from benchledger.ledger.events import SessionCallBody

SERVER = """
from mcp.server.mcpserver import MCPServer
app = MCPServer("tiny")

@app.tool()
def echo(text: str) -> str:
    \"\"\"Say the text back.\"\"\"
    return text

@app.tool()
def deep() -> dict:
    \"\"\"An answer nested 70 levels deep.\"\"\"
    value = {"leaf": 1}
    for _ in range(69):
        value = {"in": value}
    return value

@app.tool()
def die() -> str:
    \"\"\"End the server process mid-call.\"\"\"
    import os
    os._exit(3)

app.run()
"""


class Observer:
    episode = "teach"

    def __init__(self) -> None:
        self.bodies: list[SessionCallBody] = []

    def session_call(self, body: SessionCallBody) -> None:
        self.bodies.append(body)


@pytest.fixture
def server(tmp_path):
    path = tmp_path / "server.py"
    path.write_text(SERVER, encoding="utf-8")
    return [sys.executable, str(path)], tmp_path / "server.stderr"


def test_a_stdio_session_hands_its_observer_each_call_as_the_session_call_body_it_becomes(server):
    argv, errlog = server
    seen = Observer()

    async def go():
        with open(errlog, "a", encoding="utf-8") as err:
            async with open_session(argv, env={}, errlog=err, label="tiny", observer=seen) as s:
                tools = await s.list_tools()
                got = await s.call_tool("echo", {"text": "hi"})
        return tools, got

    tools, got = asyncio.run(go())
    assert {t["name"] for t in tools} == {"echo", "deep", "die"}
    assert got.text == "hi" and not got.is_error
    assert all(isinstance(b, SessionCallBody) and b.episode == "teach" for b in seen.bodies)
    assert [(b.method, b.tool) for b in seen.bodies] == [
        ("initialize", ""), ("tools/list", ""), ("tools/call", "echo")
    ]  # fmt: skip
    assert seen.bodies[0].result == {"server": {"name": "tiny", "version": ""}}
    call = seen.bodies[2]
    assert call.arguments == {"text": "hi"}
    assert call.content == [{"type": "text", "text": "hi"}]
    assert call.latency_ms == round(got.latency_ms, 3)


def test_a_stdio_server_that_dies_mid_call_is_an_infra_error_naming_the_server(server):
    argv, errlog = server
    seen = Observer()

    async def go():
        with open(errlog, "a", encoding="utf-8") as err:
            async with open_session(argv, env={}, errlog=err, label="tiny", observer=seen) as s:
                await s.call_tool("die", {})

    with pytest.raises(InfraError) as raised:
        asyncio.run(go())
    assert "tiny" in raised.value.message and raised.value.retryable
    assert [b.method for b in seen.bodies] == ["initialize"]  # the failed call is not an event


def test_a_structured_answer_nested_deeper_than_the_ledger_allows_is_recorded_without_it(server):
    # A hostile server's structured content would make the ledger refuse the event
    # (codec.MAX_DEPTH) mid-unit; the call is recorded with its text only.
    import msgspec

    from benchledger.ledger.codec import MAX_DEPTH, check_depth

    argv, errlog = server
    seen = Observer()

    async def go():
        with open(errlog, "a", encoding="utf-8") as err:
            async with open_session(argv, env={}, errlog=err, label="tiny", observer=seen) as s:
                return await s.call_tool("deep", {})

    got = asyncio.run(go())
    call = seen.bodies[-1]
    assert (call.tool, call.is_error, call.structured) == ("deep", False, None)
    assert '"leaf"' in got.text  # the agent still reads the answer as text
    check_depth(msgspec.json.encode(call))  # the event the body becomes fits the ledger
    assert MAX_DEPTH < 70
