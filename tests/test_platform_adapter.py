"""The mcp-data-platform adapter's lifecycle steps, against a real refplatform over loopback."""

from __future__ import annotations

import asyncio

from benchledger import protocols
from benchledger.harness.agents import ScriptedAgent
from benchledger.harness.platforms.base import KnowledgePageTarget, PollPolicy
from benchledger.harness.platforms.mcp_data_platform import McpDataPlatform
from benchledger.harness.suites.lifecycle import target
from benchledger.harness.unit import UnitContext, UnitPlan
from benchledger.ledger import Ledger, open_store
from benchledger.ledger.events import ReadBackEvent, RunStartedBody
from benchledger.refplatform.server import RunningPlatform

PAGE_PROTOCOL = "bl-core-cohort"  # a knowledge_page protocol of the committed set


def client_for(running: RunningPlatform) -> McpDataPlatform:
    """The harness's client for an embedded refplatform."""
    return McpDataPlatform(running.url, admin_key=running.admin_key,
                           pool_base=running.pool_base, pool_size=running.pool_size)  # fmt: skip


async def call(client: McpDataPlatform, who: int, tool: str, **args):
    """One tool call in a fresh session as pool identity ``who``; it must succeed."""
    async with client.session(who) as s:
        res = await s.call_tool(tool, args)
    assert not res.is_error, res.text
    return res.data


def _ctx(client, ledger: Ledger, stream: str) -> UnitContext:
    if not ledger.store.run_ids():
        ledger.start_run("t", RunStartedBody(suite="lifecycle"))
    p = protocols.load(protocols.LIFECYCLE_DIR).by_id()[PAGE_PROTOCOL]
    return UnitContext(ledger, client, ScriptedAgent(), UnitPlan(p, 1, stream, (1, 2)))


async def _captured(client, ctx: UnitContext, fact: str) -> str:
    p = ctx.plan.item
    since = ctx.clock.time()
    await call(client, 1, "memory_capture", type="schema_entity", content=fact,
               entity_urns=[p.entity_urn], category="business_context")  # fmt: skip
    check = await client.check_capture(
        ctx, identity=1, target=target(p), since=since, poll=PollPolicy(5.0, 0.05)
    )
    assert check.found, check.reason
    return check.found


def test_a_page_promotion_is_verified_on_the_protocols_own_page_not_on_any_page():
    ledger = Ledger(open_store(":memory:"))

    async def go(running):
        client = client_for(running)
        try:
            ctx = _ctx(client, ledger, "t/a/1")
            p = ctx.plan.item
            first = await _captured(client, ctx, p.fact)
            ctx.stage = "promote"
            landed = await client.promote(ctx, capture=first, target=target(p))
            # The same fact promoted to another page slug: the apply goes to that slug,
            # so that page is what must show it; a page that does not exist shows nothing.
            other = target(p)._replace(page=KnowledgePageTarget("no-such-page", "x", "y", "z"))
            shown = await client._sink_shows(ctx, other, [])
            await ctx.commit()
            return landed, shown
        finally:
            await client.aclose()

    with RunningPlatform(pool_size=4) as running:
        landed, shown_elsewhere = asyncio.run(go(running))
    assert landed.ok, landed.reason
    assert shown_elsewhere is False
    reads = [e.body for e, _ in ledger.events("t") if isinstance(e, ReadBackEvent)]
    sink = [b for b in reads if b.purpose == "sink"]
    assert sink and all(b.path.startswith("/api/v1/portal/knowledge-pages") for b in sink)
    assert sink[0].observed == {"slug": "core-cohort-definition", "shows": True}
    ledger.store.close()


def test_the_newest_of_two_captures_is_the_one_promoted():
    ledger = Ledger(open_store(":memory:"))

    async def go(running):
        client = client_for(running)
        try:
            ctx = _ctx(client, ledger, "t/b/1")
            p = ctx.plan.item
            await _captured(client, ctx, p.fact + " (first wording)")
            second = await _captured(client, ctx, p.fact)
            return second, await client.check_capture(
                ctx, identity=1, target=target(p), since=0.0, poll=PollPolicy(0.0)
            )
        finally:
            await client.aclose()

    with RunningPlatform(pool_size=4) as running:
        second, check = asyncio.run(go(running))
    assert check.found == second
    ledger.store.close()
