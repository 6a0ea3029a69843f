"""refplatform's behaviour through a real MCP client over real HTTP on loopback.

Most tests run over the peer's pack (``bench/seed``), the data the peer's protocols
were written for; the default-pack tests run over benchledger's own.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest

from benchledger.refplatform.platform import Platform
from benchledger.refplatform.server import RunningPlatform
from tests.platform_helpers import (
    CUSTOMERS,
    INSIGHTS,
    ORDERS,
    PAGES,
    Driver,
    call,
    capture,
    client_for,
    hit_texts,
    peer_pack,
    running_peer,
    tool_error,
)

FACT = "The 'keystone region' is the sales region with the highest gross revenue in 2025."
RESTATED = "The 'keystone region' is the sales region with the highest net revenue in 2025."
OTHER = "A 'whale order' is a completed order of at least 1,500 USD before discount."
NORTH = "The 'keystone region' for this study is North, by gross revenue."
CANDIDATES = (
    "The 'keystone region' candidates were ranked by margin, order count and customer growth."
)
PEER_TOOLS = {
    "platform_info",
    "search",
    "fetch",
    "memory_capture",
    "memory_manage",
    "apply_knowledge",
    "datahub_get_entity",
    "datahub_get_schema",
    "datahub_browse",
    "datahub_get_queries",
    "datahub_get_glossary_term",
    "trino_query",
    "trino_describe_table",
    "trino_browse",
}


@pytest.fixture
def driver() -> Iterator[Driver]:
    with running_peer() as running:
        yield client_for(running)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


async def _promote(d: Driver, insight_id: str, **apply: Any) -> Any:
    await d.rest("PUT", f"{INSIGHTS}/{insight_id}/status", body={"status": "approved"})
    args = {"action": "apply", "insight_ids": [insight_id], "entity_urn": ORDERS, **apply}
    return await call(d, None, "apply_knowledge", **args)


DESCRIPTION = {
    "sink": "datahub",
    "changes": [{"change_type": "update_description", "target": "", "detail": f"Orders. {FACT}"}],
}
PAGE = {
    "sink": "knowledge_page",
    "page": {"slug": "keystone", "title": "Keystone", "summary": FACT, "body": f"# K\n\n{FACT}"},
}


# ---------------------------------------------------------------------------- the tool surface


def test_the_tool_list_is_the_peers_s5_surface_with_closed_schemas_and_a_session_id(driver):
    async def go():
        async with driver.session(1, mint=False) as s:
            return (await s.client.list_tools()).tools

    tools = {t.name: t for t in run(go())}
    assert set(tools) == PEER_TOOLS
    for name, tool in tools.items():
        schema = tool.input_schema
        assert schema["additionalProperties"] is False, name
        assert ("session_id" in schema["properties"]) is (name != "platform_info"), name
    assert tools["memory_capture"].input_schema["required"] == ["type", "content"]


@pytest.mark.parametrize("path", ["", "/mcp"], ids=["base-url", "mcp-path"])
def test_mcp_is_served_at_the_base_url_and_at_mcp(driver, path):
    async def go():
        async with driver.session(1, path=path) as s:
            return s.handle

    assert run(go()).startswith("dps_")


def test_without_the_admin_role_apply_knowledge_is_neither_listed_nor_callable():
    with running_peer(pool_admin=False) as running:
        d = client_for(running)

        async def go():
            async with d.session(1) as s:
                names = {t.name for t in (await s.client.list_tools()).tools}
                refused = await s.call("apply_knowledge", {"action": "bulk_review"})
            return names, refused

        names, refused = run(go())
    assert "apply_knowledge" not in names
    assert refused.error["code"] == "unauthorized"
    assert refused.error["category"] == "authorization_denied"


# ---------------------------------------------------------------------------- sessions and gates


def test_a_call_before_platform_info_is_refused_with_session_required(driver):
    reply = run(tool_error_unminted(driver, 1, "search", intent="orders"))
    assert reply.error["code"] == "session_required"
    assert reply.error["category"] == "session_required" and "platform_info" in reply.error["hint"]
    assert reply.text.startswith("SESSION_REQUIRED: Call platform_info first.")


async def tool_error_unminted(d: Driver, who: int, tool: str, **args: Any) -> Any:
    async with d.session(who, mint=False) as s:
        return await s.call(tool, args)


def test_another_identitys_or_a_made_up_handle_is_session_expired(driver):
    async def go():
        async with driver.session(1) as a, driver.session(2) as b:
            stolen = await a.call("search", {"intent": "x", "session_id": b.handle}, thread=False)
            made_up = await a.call(
                "search", {"intent": "x", "session_id": "dps_nope"}, thread=False
            )
        return stolen, made_up

    for reply in run(go()):
        assert reply.is_error and reply.error["code"] == "session_expired"


def test_a_call_without_a_handle_adopts_the_identitys_latest_session(driver):
    async def go():
        async with driver.session(1) as s:
            handle = s.handle
            reply = await s.call("search", {"intent": "orders"}, thread=False)
        audit = await driver.rest(
            "GET", "/api/v1/admin/audit/events", params={"session_id": handle}
        )
        return reply, audit

    reply, audit = run(go())
    assert not reply.is_error
    assert [e["tool_name"] for e in audit.body["data"]] == ["search", "platform_info"]


def test_the_search_first_gate_refuses_trino_query_until_the_user_has_searched(driver):
    async def go():
        sql = {"sql": "SELECT count(*) FROM memory.bench.orders"}
        async with driver.session(1) as s:
            refused = await s.call("trino_query", sql)
            described = await s.call(
                "trino_describe_table", {"catalog": "memory", "schema": "bench", "table": "orders"}
            )
            await s.call("search", {"intent": "orders"})
        async with driver.session(1) as later:  # the gate keys on the user, not the session
            allowed = await later.call("trino_query", sql)
        return refused, described, allowed

    refused, described, allowed = run(go())
    assert refused.error["code"] == "search_required"
    assert refused.text.startswith(
        "SEARCH_REQUIRED: You must call search before using trino_query."
    )
    assert not described.is_error and not allowed.is_error
    assert allowed.data["rows"] == [{"_col0": 1200}]


# ---------------------------------------------------------------------------- errors


BAD_CALLS = [
    (
        "memory_capture",
        {"type": "business_knowledge", "content": "too short"},
        "tool_error",
        "content must be at least 10 characters (got 9)",
    ),
    (
        "memory_capture",
        {"type": "business_knowledge", "content": "x" * 4001},
        "tool_error",
        "content must be at most 4000 characters (got 4001)",
    ),
    (
        "memory_capture",
        {"type": "note", "content": "long enough content"},
        "tool_error",
        'invalid type "note"',
    ),
    (
        "memory_capture",
        {"type": "episodic_event", "content": "long enough", "category": "definition"},
        "tool_error",
        'invalid category "definition"',
    ),
    (
        "memory_capture",
        {"type": "episodic_event", "content": 42},
        "invalid_arguments",
        'validating /properties/content: type: 42 has type "integer", want "string"',
    ),
    (
        "memory_capture",
        {"type": "episodic_event", "content": "long enough", "entity_urn": ORDERS},
        "invalid_arguments",
        'unexpected additional properties ["entity_urn"]',
    ),
    (
        "memory_capture",
        {"content": "long enough text"},
        "invalid_arguments",
        'required: missing properties: ["type"]',
    ),
    (
        "search",
        {"intent": "x", "sources": "catalog"},
        "invalid_arguments",
        'type: catalog has type "string", want "array"',
    ),
    ("search", {}, "tool_error", "provide intent or entity_urns to search"),
    ("memory_manage", {"command": "remember"}, "tool_error", 'unknown command "remember"'),
    (
        "apply_knowledge",
        {
            "action": "apply",
            "entity_urn": ORDERS,
            "changes": [{"change_type": "update_description", "detail": "x"}],
        },
        "invalid_arguments",
        'required: missing properties: ["target"]',
    ),
    (
        "apply_knowledge",
        {
            "action": "apply",
            "entity_urn": ORDERS,
            "changes": [{"change_type": "add_curated_query", "target": "", "detail": "x"}],
        },
        "tool_error",
        "not supported by refplatform",
    ),
    ("apply_knowledge", {"action": "apply", "sink": "wiki"}, "tool_error", "unknown sink: wiki"),
    ("apply_knowledge", {"action": "promote"}, "tool_error", 'invalid action "promote"'),
    (
        "datahub_get_entity",
        {"urn": "urn:li:dataset:nope"},
        "tool_error",
        "GetEntity failed for urn:li:dataset:nope",
    ),
    (
        "trino_describe_table",
        {"catalog": "memory", "schema": "bench"},
        "invalid_arguments",
        'required: missing properties: ["table"]',
    ),
]


@pytest.mark.parametrize(
    ("tool", "args", "code", "message"),
    BAD_CALLS,
    ids=[f"{b[0]}-{b[2]}-{i}" for i, b in enumerate(BAD_CALLS)],
)
def test_a_bad_call_is_a_structured_tool_error_and_writes_nothing(
    driver, tool, args, code, message
):
    async def go():
        reply = await tool_error(driver, 1, tool, **args)
        return reply, await driver.rest("GET", INSIGHTS)

    reply, listed = run(go())
    assert reply.error["code"] == code
    assert message in reply.error["message"]
    assert reply.text == f"{reply.error['message']} (code: {code})" + (
        f" Hint: {reply.error['hint']}" if reply.error.get("hint") else ""
    )
    assert listed.body["total"] == 0


# ---------------------------------------------------------------------------- memory


def test_a_reviewed_capture_is_an_active_record_carrying_a_pending_insight(driver):
    async def go():
        got = await call(
            driver,
            1,
            "memory_capture",
            type="schema_entity",
            content=FACT,
            entity_urns=[ORDERS],
            category="business_context",
            confidence="high",
        )
        insight = await driver.rest("GET", f"{INSIGHTS}/{got['id']}")
        return got, insight.body

    got, insight = run(go())
    assert got == {
        "id": got["id"],
        "sink_class": "schema_entity",
        "status": "active",
        "message": "Captured. It will be reviewed before promotion to a shared catalog.",
    }
    assert insight["status"] == "pending" and insight["confidence"] == "high"


def test_a_live_capture_is_no_insight_and_searchable_as_the_callers_memory(driver):
    async def go():
        got = await call(
            driver,
            1,
            "memory_capture",
            type="personal_preference",
            content="I prefer revenue figures in USD, rounded to cents.",
        )
        insight = await driver.rest("GET", f"{INSIGHTS}/{got['id']}")
        found = await call(
            driver, 1, "search", intent="revenue in USD preference", sources=["memory"]
        )
        return got, insight, found

    got, insight, found = run(go())
    assert got["message"] == "Captured. Available to you immediately."
    assert insight.status == 404
    (hit,) = found["groups"][0]["hits"]
    assert hit["ref"] == got["id"] and hit["dimension"] == "preference"
    assert hit["reference"] == f"mcp:memory:{got['id']}"


def test_a_restated_correction_supersedes_the_pending_original_and_a_different_fact_does_not(
    driver,
):
    async def go():
        first = await capture(driver, 1, FACT)
        other = await capture(driver, 1, OTHER)
        second = await capture(driver, 1, RESTATED)
        original = await driver.rest("GET", f"{INSIGHTS}/{first['id']}")
        return first, other, second, original.body

    first, other, second, original = run(go())
    assert "superseded" not in other
    assert second["superseded"] == first["id"] and second["superseded_ids"] == [first["id"]]
    assert second["message"].endswith("1 prior record(s) superseded.")
    assert original["status"] == "superseded"


def test_a_similar_but_not_restated_fact_is_reported_not_superseded(driver):
    async def go():
        first = await capture(driver, 1, NORTH)
        second = await capture(driver, 1, CANDIDATES)
        return first, second

    first, second = run(go())
    assert "superseded" not in second
    assert [s["id"] for s in second["similar_existing"]] == [first["id"]]
    assert 0.75 <= second["similar_existing"][0]["score"] < 0.90


def test_another_identitys_capture_never_supersedes(driver):
    async def go():
        await capture(driver, 1, FACT)
        return await capture(driver, 2, RESTATED)

    second = run(go())
    assert "superseded" not in second and "similar_existing" not in second


def test_an_applied_insight_is_never_superseded_only_reported_similar(driver):
    async def go():
        first = await capture(driver, 1, FACT)
        await _promote(driver, first["id"], **DESCRIPTION)
        second = await capture(driver, 1, RESTATED)
        after = await driver.rest("GET", f"{INSIGHTS}/{first['id']}")
        return first, second, after.body

    first, second, after = run(go())
    assert "superseded" not in second and after["status"] == "applied"
    assert [s["id"] for s in second["similar_existing"]] == [first["id"]]


def test_memory_manage_changes_and_lists_only_the_callers_records_and_the_admin_the_persona(
    driver,
):
    async def go():
        got = await capture(driver, 1, FACT)
        foreign = await tool_error(driver, 2, "memory_manage", command="forget", id=got["id"])
        theirs = await call(driver, 2, "memory_manage", command="list", filter_entity_urn=ORDERS)
        listed = await call(driver, None, "memory_manage", command="list", filter_entity_urn=ORDERS)
        updated = await call(
            driver, 1, "memory_manage", command="update", id=got["id"], content=OTHER
        )
        insight = await driver.rest("GET", f"{INSIGHTS}/{got['id']}")
        forgot = await call(driver, 1, "memory_manage", command="forget", id=got["id"])
        gone = await driver.rest("GET", f"{INSIGHTS}/{got['id']}")
        helped = await call(driver, 1, "memory_manage")
        return got, foreign, theirs, listed, updated, insight.body, forgot, gone, helped

    got, foreign, theirs, listed, updated, insight, forgot, gone, helped = run(go())
    assert foreign.error["message"] == "you can only archive your own memories"
    assert theirs["total"] == 0 and theirs["records"] == []
    assert (
        listed["total"] == 1
        and listed["records"][0]["created_by"] == "bench-agent-001@apikey.local"
    )
    assert listed["records"][0]["metadata"]["insight_status"] == "pending"
    assert updated == {"id": got["id"], "message": "Memory updated successfully."}
    assert insight["insight_text"] == OTHER
    assert forgot == {"id": got["id"], "message": "Memory archived successfully."}
    assert gone.status == 404
    assert set(helped["commands"]) == {
        "update",
        "forget",
        "list",
        "review_stale",
        "review_duplicates",
        "consolidate",
    }


VAULT = "The 'vault code' of the orders team is 4417."
VAULT_PREF = "I keep the orders team's vault code 4417 to myself."
PUBLIC = "The 'anchor tier' is the top 5% of customers by lifetime revenue."


def _attempts(mine: str, live: str, changeset: str) -> dict[str, list[dict[str, Any]]]:
    """What identity 2 tries on identity 1's memories with each tool it is shown: reads
    naming them, by search, reference, listing, review and enrichment of their entity;
    changes and deletes by their ids; and a capture of its own on the same entity."""
    ids = [mine, live]
    return {
        "platform_info": [{}],
        "search": [{"intent": "vault code"}, {"entity_urns": [ORDERS]},
                   {"intent": "vault code", "sources": ["memory", "insights"],
                    "status": "pending"}],
        "fetch": [{"reference": f"mcp:{kind}:{i}"} for kind in ("memory", "insight") for i in ids],
        "memory_manage": [{"command": "list"}, {"command": "list", "filter_entity_urn": ORDERS},
                          {"command": "list", "filter_status": "active", "filter_dimension":
                           "preference"},
                          {"command": "review_stale"}, {"command": "review_duplicates"},
                          *({"command": "update", "id": i, "content": "changed"} for i in ids),
                          *({"command": "forget", "id": i} for i in ids),
                          {"command": "consolidate", "id": live, "duplicate_id": mine}],
        "apply_knowledge": [{"action": "bulk_review", "itemize": True},
                            {"action": "review", "entity_urn": ORDERS},
                            {"action": "synthesize", "entity_urn": ORDERS},
                            {"action": "list_changesets", "entity_urn": ORDERS},
                            {"action": "approve", "insight_ids": [mine]},
                            {"action": "reject", "insight_ids": [mine]},
                            {"action": "apply", "insight_ids": [mine], **DESCRIPTION},
                            {"action": "rollback", "changeset_id": changeset, "confirm": True}],
        "memory_capture": [{"type": "business_knowledge", "entity_urns": [ORDERS],
                            "content": "The 'vault code' of the orders team is secret."}],
        "datahub_get_entity": [{"urn": ORDERS}],
        "datahub_get_schema": [{"urn": ORDERS}],
        "datahub_get_queries": [{"urn": ORDERS}],
        "datahub_get_glossary_term": [{"urn": "urn:li:glossaryTerm:vault"}],
        "datahub_browse": [{"what": "tags"}],
        "trino_query": [{"sql": "SELECT count(*) FROM memory.bench.orders"}],
        "trino_describe_table": [{"catalog": "memory", "schema": "bench", "table": "orders"}],
        "trino_browse": [{"catalog": "memory", "schema": "bench"}],
    }  # fmt: skip


def test_a_second_identity_cannot_read_change_or_delete_the_firsts_memory_with_any_tool_it_sees(
    driver,
):
    """Identity 1 keeps a pending insight and a live preference (and has a promoted fact's
    changeset); identity 2 calls every tool it is shown on them. Before, the listing and
    every enrichment of the entity showed identity 1's pending records (listed by persona),
    and apply_knowledge reviewed, rejected and rolled back identity 1's knowledge."""
    from benchledger.harness.platforms.vocabulary import REFPLATFORM

    async def go():
        mine = (await capture(driver, 1, VAULT))["id"]
        live = (await call(driver, 1, "memory_capture", type="personal_preference",
                           content=VAULT_PREF, entity_urns=[ORDERS]))["id"]  # fmt: skip
        public = (await capture(driver, 1, PUBLIC, CUSTOMERS))["id"]
        change = {"changes": [{"change_type": "add_tag", "target": "", "detail": "anchor"}]}
        applied = await _promote(driver, public, entity_urn=CUSTOMERS, **change)
        tries = _attempts(mine, live, applied["changeset_id"])
        said = []
        async with driver.session(2) as s:
            listed = (await s.client.list_tools()).tools
            shown = {t["name"] for t in REFPLATFORM.shown([{"name": t.name} for t in listed])}
            await s.call("search", {"intent": "orders"})  # trino_query's search-first gate
            for tool, attempts in tries.items():
                for args in attempts:
                    said.append((tool, args, await s.call(tool, args)))
        insight = (await driver.rest("GET", f"{INSIGHTS}/{mine}")).body
        promoted = (await driver.rest("GET", f"{INSIGHTS}/{public}")).body
        own = await call(driver, 1, "memory_manage", command="list", filter_dimension="preference")
        return shown, set(tries), said, insight, promoted, own, live

    shown, tried, said, insight, promoted, own, live = run(go())
    assert shown == tried, "a tool an agent sees is not tried here"
    for tool, args, reply in said:
        assert "4417" not in reply.text, (tool, args, reply.text)
    assert insight["status"] == "pending" and insight["insight_text"] == VAULT
    assert promoted["status"] == "applied"  # not rolled back
    assert [(r["id"], r["content"]) for r in own["records"]] == [(live, VAULT_PREF)]


def test_review_duplicates_and_consolidate_retire_a_near_duplicate(driver):
    async def go():
        async with driver.session(1) as s:
            a = (
                await s.call(
                    "memory_capture",
                    {
                        "type": "episodic_event",
                        "content": NORTH,
                    },
                )
            ).data
            b = (
                await s.call(
                    "memory_capture",
                    {
                        "type": "episodic_event",
                        "content": CANDIDATES,
                    },
                )
            ).data
            pairs = (await s.call("memory_manage", {"command": "review_duplicates"})).data
            merged = (
                await s.call(
                    "memory_manage",
                    {"command": "consolidate", "id": b["id"], "duplicate_id": a["id"]},
                )
            ).data
            after = (await s.call("memory_manage", {"command": "review_duplicates"})).data
        return a, b, pairs, merged, after

    a, b, pairs, merged, after = run(go())
    assert pairs["total"] == 1 and {
        pairs["pairs"][0]["older"]["id"],
        pairs["pairs"][0]["newer"]["id"],
    } == {a["id"], b["id"]}
    assert merged["superseded"] == a["id"] and after["total"] == 0


# ---------------------------------------------------------------------------- search and fetch


def test_pending_memory_stays_private_while_applied_knowledge_reaches_everyone(driver):
    async def go():
        got = await capture(driver, 1, FACT)
        mine = await call(driver, 1, "search", intent="keystone region")
        theirs = await call(driver, 2, "search", intent="keystone region")
        await _promote(driver, got["id"], **DESCRIPTION)
        theirs_after = await call(driver, 2, "search", intent="keystone region")
        return mine, theirs, theirs_after

    mine, theirs, theirs_after = run(go())
    assert FACT in hit_texts(mine, "insights")
    assert FACT not in hit_texts(theirs, "insights")
    (hit,) = [h for g in theirs_after["groups"] if g["source"] == "insights" for h in g["hits"]]
    assert hit["text"] == FACT and hit["status"] == "applied"
    assert hit["captured_by"] == "bench-agent-001@apikey.local"


@pytest.mark.parametrize("limit", [1, 3, 10, 50], ids=lambda n: f"limit-{n}")
def test_search_limit_is_a_total_budget_shared_across_sources(driver, limit):
    async def go():
        for i in range(6):
            await capture(
                driver, 1, f"Orders fact {i}: the orders table holds {i}00 test rows today."
            )
        return await call(driver, 1, "search", intent="orders table revenue", limit=limit)

    found = run(go())
    shown = sum(len(g["hits"]) for g in found["groups"])
    assert found["count"] == shown == min(limit, sum(c["matched"] for c in found["coverage"]))
    if limit >= 3:
        assert len(found["groups"]) >= 2  # balanced: no one source takes the whole budget


def test_search_by_entity_urns_alone_and_unknown_sources_are_reported(driver):
    async def go():
        by_urn = await call(driver, 1, "search", entity_urns=[CUSTOMERS], sources=["catalog"])
        unknown = await call(driver, 1, "search", intent="orders", sources=["catalog", "documnets"])
        browse = await call(driver, 1, "search", sources=["knowledge_pages"], offset=2, limit=1)
        return by_urn, unknown, browse

    by_urn, unknown, browse = run(go())
    assert by_urn["groups"][0]["hits"][0]["ref"] == CUSTOMERS
    assert unknown["unknown_sources"] == ["documnets"]
    assert {g["source"] for g in unknown["groups"]} == {"catalog"}
    assert (browse["total"], browse["offset"], browse["count"]) == (4, 2, 1)
    assert browse["items"][0]["ref"] == "kp-bench-3"


def test_fetch_reads_a_reference_in_full_or_answers_found_false(driver):
    async def go():
        page = await call(driver, 1, "fetch", reference="mcp:knowledge_page:kp-bench-1")
        dataset = await call(driver, 1, "fetch", reference=ORDERS)
        missing = await call(driver, 1, "fetch", reference="mcp:knowledge_page:nope")
        return page, dataset, missing

    page, dataset, missing = run(go())
    assert page["found"] and "Revenue = amount - discount" in page["document"]["content"]
    assert dataset["document"]["query_table"] == "memory.bench.orders"
    assert missing["found"] is False and "no content found" in missing["message"]


# ---------------------------------------------------------------------------- promotion


@pytest.mark.parametrize("sink", ["datahub", "knowledge_page"])
def test_a_promoted_fact_reaches_another_identity(driver, sink):
    async def go():
        got = await capture(driver, 1, FACT)
        applied = await _promote(driver, got["id"], **(DESCRIPTION if sink == "datahub" else PAGE))
        async with driver.session(2) as s:
            entity = await s.call("datahub_get_entity", {"urn": ORDERS})
            found = (
                await s.call("search", {"intent": "Which region is the keystone region?"})
            ).data
        pages = await driver.rest("GET", PAGES, who=2)
        return applied, entity, found, pages.body

    applied, entity, found, pages = run(go())
    assert applied["insights_marked_applied"] == 1 and applied["revertible"] is True
    if sink == "datahub":
        assert entity.data["description"] == f"Orders. {FACT}"  # the entity's own block
        assert applied["resulting_state"]["description"] == f"Orders. {FACT}"
    else:
        assert applied["action"] == "created" and applied["slug"] == "keystone"
        assert "keystone" in [p["slug"] for p in pages["pages"]]
        assert f"Keystone\n{FACT}" in hit_texts(found, "knowledge_pages")
    assert FACT in hit_texts(found, "insights")


def test_approve_and_reject_report_invalid_transitions_per_insight(driver):
    async def go():
        got = await capture(driver, 1, FACT)
        first = await call(
            driver, None, "apply_knowledge", action="reject", insight_ids=[got["id"], "nope"]
        )
        again = await call(
            driver, None, "apply_knowledge", action="approve", insight_ids=[got["id"]]
        )
        return got, first, again

    got, first, again = run(go())
    assert first == {"action": "reject", "updated": 1, "total": 2, "errors": ["nope: not found"]}
    assert again["errors"] == [
        f'{got["id"]}: invalid status transition from "rejected" to "approved"'
    ]


def test_a_rollback_over_mcp_returns_the_insight_to_review_and_restores_the_entity(driver):
    async def go():
        before = (await call(driver, 1, "datahub_get_entity", urn=ORDERS))["description"]
        got = await capture(driver, 1, FACT)
        applied = await _promote(driver, got["id"], **DESCRIPTION)
        listed = await call(
            driver, None, "apply_knowledge", action="list_changesets", entity_urn=ORDERS
        )
        rolled = await call(
            driver,
            None,
            "apply_knowledge",
            action="rollback",
            changeset_id=applied["changeset_id"],
            confirm=True,
        )
        again = await tool_error(
            driver, None, "apply_knowledge", action="rollback", changeset_id=applied["changeset_id"]
        )
        after = (await call(driver, 1, "datahub_get_entity", urn=ORDERS))["description"]
        status = (await driver.rest("GET", f"{INSIGHTS}/{got['id']}")).body["status"]
        return before, got, listed, rolled, again, after, status

    before, got, listed, rolled, again, after, status = run(go())
    assert listed["total"] == 1 and listed["changesets"][0]["revertible"] is True
    assert rolled["insights_returned_to_review"] == [got["id"]]
    assert again.error["message"] == "changeset has already been rolled back"
    assert after == before and status == "pending"


def test_bulk_review_itemizes_the_pending_queue(driver):
    async def go():
        for i, who in enumerate((1, 2, 3)):
            await capture(
                driver, who, f"Queue fact {i}: the orders table has {i} archived partitions."
            )
        return await call(
            driver, None, "apply_knowledge", action="bulk_review", itemize=True, limit=2
        )

    queue = run(go())
    assert queue["total_pending"] == 3 and queue["returned"] == 2 and queue["next_offset"] == 2
    assert queue["by_entity"] == [
        {
            "entity_urn": ORDERS,
            "count": 3,
            "categories": ["business_context"],
            "latest_at": queue["by_entity"][0]["latest_at"],
        }
    ]
    assert all(
        "suggested_actions" not in i and i["suggested_actions_count"] == 0
        for i in queue["insights"]
    )


# ---------------------------------------------------------------------------- enrichment


def test_entity_results_carry_enrichment_blocks_after_the_entitys_own_block(driver):
    async def go():
        await capture(driver, 2, FACT)  # the caller's own record: its memory_context
        async with driver.session(2) as s:
            before_search = await s.call("datahub_get_entity", {"urn": ORDERS})
            await s.call("search", {"intent": "orders"})
            after_search = await s.call("datahub_get_entity", {"urn": ORDERS})
        return before_search, after_search

    before_search, after_search = run(go())
    kinds = [next(iter(b)) for b in map(_json, after_search.texts[1:])]
    assert kinds == ["query_context", "memory_context", "knowledge_pages"]
    assert after_search.data["name"] == "orders"
    assert next(iter(_json(before_search.texts[-1]))) == "discovery_note"


def _json(text: str) -> Any:
    import json

    return json.loads(text)


def test_a_query_gets_semantic_context_once_per_session_then_a_metadata_reference(driver):
    async def go():
        sql = (
            "SELECT count(*) FROM memory.bench.orders o "
            "JOIN memory.bench.customers c ON o.customer_id = c.customer_id"
        )
        async with driver.session(1) as s:
            await s.call("search", {"intent": "orders"})
            first = await s.call("trino_query", {"sql": sql})
            second = await s.call("trino_query", {"sql": sql})
        return first, second

    first, second = run(go())
    semantic = _json(first.texts[1])
    assert semantic["semantic_context"]["urn"] == ORDERS
    assert [t["table"] for t in semantic["additional_tables"]] == ["memory.bench.customers"]
    assert _json(second.texts[1])["metadata_reference"]["tables"] == [
        "memory.bench.orders",
        "memory.bench.customers",
    ]


# ---------------------------------------------------------------------------- SQL attack surface


ATTACKS = [
    ("read-file", "SELECT * FROM read_csv('/etc/passwd')"),
    ("copy-to", "COPY (SELECT 1) TO '/tmp/refplatform-leak.csv'"),
    ("attach", "ATTACH '/tmp/refplatform-other.db' AS other"),
    ("install", "INSTALL httpfs"),
    ("set", "SET enable_external_access = true"),
    ("drop", "DROP TABLE memory.bench.orders"),
    ("create", "CREATE TABLE memory.bench.x AS SELECT 1 AS a"),
    ("delete", "DELETE FROM memory.bench.orders"),
    ("two-statements", "SELECT 1; DROP TABLE memory.bench.orders"),
    ("unqualified", "SELECT count(*) FROM orders"),
]


@pytest.mark.parametrize(("name", "sql"), ATTACKS, ids=[a[0] for a in ATTACKS])
def test_the_sql_tool_refuses_what_is_not_a_read_of_the_pack(driver, name, sql):
    async def go():
        async with driver.session(1) as s:
            await s.call("search", {"intent": "orders"})
            refused = await s.call("trino_query", {"sql": sql})
            count = await s.call(
                "trino_query", {"sql": "SELECT count(*) AS n FROM memory.bench.orders"}
            )
        return refused, count

    refused, count = run(go())
    assert refused.is_error and refused.error["category"] == "tool_error", refused.text
    assert count.data["rows"] == [{"n": 1200}]


# ---------------------------------------------------------------------------- ids, load, state


def test_ids_are_reproducible_across_fresh_platforms():
    async def go(running: RunningPlatform) -> list[str]:
        d = client_for(running)
        got = [(await capture(d, 1, FACT))["id"], (await capture(d, 2, OTHER))["id"]]
        async with d.session(3) as s:
            got.append(s.handle)
        return got

    with running_peer() as a, running_peer() as b:
        assert run(go(a)) == run(go(b))


async def _load(d: Driver, index: int, calls: int, errors: list[str]) -> list[str]:
    """One identity's session: 1 in 5 calls captures, the rest search, query or read."""
    rng = random.Random(index)
    written = []
    async with d.session(index) as s:
        await s.call("search", {"intent": "orders"})
        for i in range(calls - 1):
            kind = i % 5
            if kind == 0:
                reply = await s.call(
                    "memory_capture",
                    {
                        "type": "business_knowledge",
                        "entity_urns": [ORDERS],
                        "content": f"Load fact {index}-{i}: code {rng.randrange(10**9)}.",
                    },
                )
                if not reply.is_error:
                    written.append(reply.data["id"])
            elif kind in (1, 2):
                reply = await s.call("search", {"intent": f"orders load {i}"})
            elif kind == 3:
                reply = await s.call(
                    "trino_query", {"sql": "SELECT count(*) FROM memory.bench.customers"}
                )
            else:
                reply = await s.call("datahub_get_entity", {"urn": ORDERS})
            if reply.is_error:
                errors.append(reply.text)
    return written


@pytest.mark.slow  # load: 32 sessions of 50 calls
def test_32_concurrent_sessions_of_50_calls_lose_no_capture():
    with running_peer(pool_size=32) as running:
        d = client_for(running)

        async def go():
            errors: list[str] = []
            written = await asyncio.gather(*(_load(d, i, 50, errors) for i in range(1, 33)))
            listed = await d.rest("GET", INSIGHTS, params={"per_page": 100, "page": 1})
            ids: set[str] = set()
            page = 1
            while True:
                body = (await d.rest("GET", INSIGHTS, params={"per_page": 100, "page": page})).body
                ids |= {i["id"] for i in body["data"]}
                if not body["data"]:
                    break
                page += 1
            return errors, [w for ws in written for w in ws], listed.body["total"], ids

        errors, written, total, ids = run(go())
    assert errors == []
    assert len(written) == 32 * 10 == total and set(written) == ids


def test_a_state_file_keeps_state_across_restarts_and_refuses_another_pack(tmp_path):
    db = str(tmp_path / "state.sqlite")

    async def write(running: RunningPlatform) -> Any:
        return await capture(client_for(running), 1, FACT)

    async def read(running: RunningPlatform) -> Any:
        d = client_for(running)
        return (await d.rest("GET", INSIGHTS)).body, (await d.rest("GET", PAGES)).body

    with RunningPlatform(Platform(db, pack=peer_pack()), pool_size=2) as r:
        first = run(write(r))
    with RunningPlatform(Platform(db, pack=peer_pack()), pool_size=2) as r:
        listed, pages = run(read(r))
    assert [d["id"] for d in listed["data"]] == [first["id"]]
    assert pages["total"] == 4  # seeded once, not again
    with pytest.raises(Exception, match="seeded from another pack"):
        Platform(db)


def test_the_default_platform_serves_benchledgers_own_pack():
    with RunningPlatform(pool_size=2) as running:
        d = client_for(running)

        async def go():
            async with d.session(1) as s:
                browse = await s.call("trino_browse", {})
                found = await s.call("search", {"intent": "orders", "sources": ["catalog"]})
            return browse, found

        browse, found = run(go())
        pack = running.platform.pack
    assert pack.path.endswith("pack") and not browse.is_error
    assert {h["ref"] for g in found.data["groups"] for h in g["hits"]} <= {
        e.urn for e in pack.entities
    }


def test_healthz_needs_no_key_and_everything_else_does(driver):
    async def go():
        async with httpx2.AsyncClient() as http:
            health = await http.get(f"{driver.url}/healthz")
            mcp = await http.post(f"{driver.url}/", json={})
        return health, mcp

    health, mcp = run(go())
    assert health.status_code == 200 and mcp.status_code == 401


def test_the_lexical_embedder_separates_the_peers_restatements_from_its_other_facts():
    """The peer's protocols run on refplatform too: its updates supersede, its facts do not."""
    import glob
    import itertools
    import os

    import yaml

    from benchledger.refplatform.embedder import LexicalEmbedder, cosine
    from benchledger.refplatform.toolkits.memory import SIMILAR_AT, SUPERSEDE_AT
    from tests.conftest import peer_dir

    lex = LexicalEmbedder()
    protocols = []
    for path in sorted(glob.glob(os.path.join(peer_dir(), "bench", "protocols", "*.yaml"))):
        with open(path, encoding="utf-8") as fh:
            protocols.append(yaml.safe_load(fh))

    def sim(a: str, b: str) -> float:
        return cosine(lex.embed(a), lex.embed(b))

    def facts(p: dict[str, Any]) -> list[str]:
        return [p["fact"]] + ([p["update"]["fact"]] if p.get("update") else [])

    updates = {p["id"]: sim(p["fact"], p["update"]["fact"]) for p in protocols if p.get("update")}
    assert len(updates) == 10 and min(updates.values()) >= SUPERSEDE_AT, updates
    worst = max(
        sim(x, y)
        for a, b in itertools.combinations(protocols, 2)
        if a["entity_urn"] == b["entity_urn"]
        for x in facts(a)
        for y in facts(b)
    )
    assert worst < SIMILAR_AT, worst
