"""The default run's embedded platform: MCP without a socket, and commits off the event loop."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import threading

from benchledger import protocols
from benchledger.harness.agents import ScriptedAgent
from benchledger.harness.platforms.provision import parse_platform, provisioner
from benchledger.harness.unit import UnitContext, UnitPlan
from benchledger.ledger import Ledger, open_store
from benchledger.ledger.events import RunStartedBody, UnitStartedBody


def _listening() -> set[str]:
    """Socket inodes of this process's listening TCP sockets (its fds in /proc/net/tcp*)."""
    own = set()
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/self/fd/{fd}")
            if target.startswith("socket:["):
                own.add(target[8:-1])
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table, encoding="ascii") as fh:
            for row in list(fh)[1:]:
                cols = row.split()
                if cols[3] == "0A" and cols[9] in own:  # LISTEN
                    found.add(cols[9])
    return found


def test_the_embedded_runtime_speaks_mcp_to_a_fresh_platform_without_a_socket_or_thread():
    prov = provisioner(parse_platform("embedded"), pool_size=4)
    before = _listening()

    async def go():
        async with prov.runtime() as client:
            described = await client.describe()
            threads = {t.name for t in threading.enumerate()}
            listening = _listening() - before
            async with client.session(1) as s:
                tools = [t["name"] for t in await s.list_tools()]
                found = await s.call_tool("search", {"intent": "customer tiers"})
            return described, threads, listening, tools, found

    described, threads, listening, tools, found = asyncio.run(go())
    assert (described.name, described.version) == ("mcp-data-platform", "refplatform-2.0")
    assert "loopback" not in threads  # no server thread, no event loop beside the run's
    assert not listening  # and no port: the client's HTTP requests go straight to the app
    assert "search" in tools and "trino_query" in tools
    assert not found.is_error and isinstance(found.data, dict), found.text


def test_a_commit_waiting_for_the_ledgers_write_lock_leaves_the_event_loop_running(tmp_path):
    path = str(tmp_path / "ledger.sqlite")
    ledger = Ledger(open_store(path))
    ledger.start_run("r", RunStartedBody(suite="lifecycle"))
    item = protocols.load(protocols.LIFECYCLE_DIR).protocols[0]
    ctx = UnitContext(ledger, None, ScriptedAgent(), UnitPlan(item, 1, "r/x/1", (1, 2)))  # type: ignore[arg-type]
    ctx.w.append(UnitStartedBody(protocol_id=item.id, attempt=1))
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another writer holds the lock

    async def go() -> list[str]:
        said: list[str] = []

        async def release() -> None:
            await asyncio.sleep(0)  # runs only if the loop is free while the commit waits
            said.append("loop ran")
            other.execute("ROLLBACK")

        waiter = asyncio.create_task(release())
        await ctx.commit()
        said.append("committed")
        await waiter
        return said

    try:
        said = asyncio.run(asyncio.wait_for(go(), 20))
    finally:
        other.close()
    assert said == ["loop ran", "committed"]
    assert [r.seq for r in ledger.store.read_stream("r/x/1")] == [0]
