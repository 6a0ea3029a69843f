"""refplatform through a real MCP client over real HTTP on loopback."""

from __future__ import annotations

import ast
import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator

import httpx2
import pytest

from benchmarks.platform_bench import drive
from refplatform.server import RunningPlatform
from tests.conftest import REPO
from tests.platform_helpers import (
    CHANGESETS,
    INSIGHTS,
    ORDERS,
    call,
    capture,
    client_for,
    fact_texts,
    tool_error,
)

FACT = "The 'keystone region' is the sales region with the highest gross revenue in 2025."
RESTATED = "The 'keystone region' is the sales region with the highest net revenue in 2025."
OTHER = "A 'whale order' is a completed order of at least 1,500 USD before discount."


@pytest.fixture
def running() -> Iterator[RunningPlatform]:
    with RunningPlatform(pool_size=8) as r:
        yield r


def run(coro):
    return asyncio.run(coro)


def test_a_capture_is_a_pending_insight_over_rest_with_owner_and_entity(running):
    async def go():
        client = client_for(running)
        got = await capture(client, 1, FACT)
        listed = await client.rest(
            "GET", INSIGHTS, params={"status": "pending", "entity_urn": ORDERS}
        )
        one = await client.rest("GET", f"{INSIGHTS}/{got['id']}")
        await client.aclose()
        return got, listed, one

    got, listed, one = run(go())
    assert got["status"] == "pending" and not got["superseded"]
    assert listed.status == 200 and listed.body["total"] == 1
    assert set(listed.body) == {"data", "total", "page", "per_page"}
    (row,) = listed.body["data"]
    assert row["id"] == got["id"] and row["content"] == FACT
    assert row["captured_by"] == "bench-agent-001@apikey.local"
    assert row["entity_urns"] == [ORDERS]
    assert one.body == row


@pytest.mark.parametrize("sink", ["datahub", "knowledge_page"])
def test_approve_apply_changeset_then_another_identity_finds_the_fact(running, sink):
    async def go():
        client = client_for(running)
        got = await capture(client, 1, FACT)
        approved = await client.rest(
            "PUT", f"{INSIGHTS}/{got['id']}/status", body={"status": "approved"}
        )
        args = {
            "action": "apply",
            "entity_urn": ORDERS,
            "insight_ids": [got["id"]],
            "confirm": True,
            "sink": sink,
        }
        if sink == "datahub":
            args["changes"] = [{"change_type": "update_description", "detail": f"Orders. {FACT}"}]
        else:
            args["page"] = {
                "slug": "keystone",
                "title": "Keystone",
                "summary": FACT,
                "body": f"# K\n\n{FACT}",
            }
        applied = await call(client, None, "apply_knowledge", **args)
        status = await client.rest("GET", f"{INSIGHTS}/{got['id']}")
        changesets = await client.rest("GET", CHANGESETS, params={"entity_urn": ORDERS})
        found = await call(client, 2, "search", intent="Which region is the keystone region?")
        entity = await call(client, 2, "datahub_get_entity", urn=ORDERS)
        pages = await client.rest("GET", "/api/v1/portal/knowledge-pages")
        await client.aclose()
        return approved, applied, status, changesets, found, entity, pages

    approved, applied, status, changesets, found, entity, pages = run(go())
    assert approved.status == 200 and approved.body["status"] == "approved"
    assert status.body["status"] == "applied"
    (cs,) = changesets.body["data"]
    assert cs["id"] == applied["id"] and cs["source_insight_ids"] == [status.body["id"]]
    assert not cs["rolled_back"] and cs["target_urn"] == ORDERS
    assert FACT in fact_texts(found, "insights")
    if sink == "datahub":
        assert FACT in entity["description"]
    else:
        assert "keystone" in [p["slug"] for p in pages.body["pages"]]
        assert any(FACT in t for t in fact_texts(found, "knowledge_pages"))


def test_a_restated_correction_supersedes_the_pending_original_and_a_different_fact_does_not(
    running,
):
    async def go():
        client = client_for(running)
        first = await capture(client, 1, FACT)
        other = await capture(client, 1, OTHER)
        second = await capture(client, 1, RESTATED)
        original = await client.rest("GET", f"{INSIGHTS}/{first['id']}")
        await client.aclose()
        return first, other, second, original

    first, other, second, original = run(go())
    assert not other["superseded"]
    assert second["superseded"] and second["superseded_ids"] == [first["id"]]
    assert original.body["status"] == "superseded"
    assert original.body["superseded_by"] == second["id"]


def test_a_similar_but_not_restated_fact_is_reported_not_superseded(running):
    async def go():
        client = client_for(running)
        first = await capture(
            client, 1, "The 'keystone region' for this study is North, by gross revenue."
        )
        second = await capture(
            client,
            1,
            "The 'keystone region' list of candidates: North, South and the Central region.",
        )
        await client.aclose()
        return first, second

    first, second = run(go())
    assert not second["superseded"]
    assert [s["id"] for s in second["similar_existing"]] == [first["id"]]
    assert 0.75 <= second["similar_existing"][0]["score"] < 0.90


def test_another_identitys_capture_never_supersedes(running):
    async def go():
        client = client_for(running)
        first = await capture(client, 1, FACT)
        second = await capture(client, 2, RESTATED)
        await client.aclose()
        return first, second

    _, second = run(go())
    assert not second["superseded"] and second["similar_existing"] == []


def test_an_applied_insight_is_never_superseded(running):
    async def go():
        client = client_for(running)
        first = await capture(client, 1, FACT)
        await client.rest("PUT", f"{INSIGHTS}/{first['id']}/status", body={"status": "approved"})
        await call(
            client,
            None,
            "apply_knowledge",
            action="apply",
            entity_urn=ORDERS,
            insight_ids=[first["id"]],
            confirm=True,
            sink="datahub",
            changes=[{"change_type": "update_description", "detail": FACT}],
        )
        second = await capture(client, 1, RESTATED)
        after = await client.rest("GET", f"{INSIGHTS}/{first['id']}")
        await client.aclose()
        return first, second, after

    first, second, after = run(go())
    assert not second["superseded"]
    assert after.body["status"] == "applied"
    assert first["id"] in [s["id"] for s in second["similar_existing"]]


def test_rollback_returns_insights_to_pending_and_restores_the_sink(running):
    async def go():
        client = client_for(running)
        before = await call(client, 1, "datahub_get_entity", urn=ORDERS)
        got = await capture(client, 1, FACT)
        await call(client, None, "apply_knowledge", action="approve", insight_ids=[got["id"]])
        cs = await call(
            client,
            None,
            "apply_knowledge",
            action="apply",
            entity_urn=ORDERS,
            insight_ids=[got["id"]],
            confirm=True,
            sink="datahub",
            changes=[{"change_type": "update_description", "detail": FACT}],
        )
        rolled = await client.rest("POST", f"{CHANGESETS}/{cs['id']}/rollback")
        again = await client.rest("POST", f"{CHANGESETS}/{cs['id']}/rollback")
        status = await client.rest("GET", f"{INSIGHTS}/{got['id']}")
        after = await call(client, 1, "datahub_get_entity", urn=ORDERS)
        found = await call(client, 2, "search", intent="keystone region")
        await client.aclose()
        return before, rolled, again, status, after, found

    before, rolled, again, status, after, found = run(go())
    assert rolled.status == 200 and rolled.body["rolled_back"]
    assert again.status == 409
    assert status.body["status"] == "pending"
    assert after["description"] == before["description"]
    assert FACT not in fact_texts(found, "insights")


def test_identity_scoping_keeps_pending_memory_private(running):
    async def go():
        client = client_for(running)
        await capture(client, 1, FACT)
        mine = await call(client, 1, "search", intent="keystone region")
        theirs = await call(client, 2, "search", intent="keystone region")
        listed = await call(client, 2, "memory_manage", action="list")
        await client.aclose()
        return mine, theirs, listed

    mine, theirs, listed = run(go())
    assert FACT in fact_texts(mine, "memory")
    assert all(FACT not in t for g in theirs["groups"] for t in [h["text"] for h in g["hits"]])
    assert listed["records"] == []


def test_memory_manage_updates_and_forgets_only_own_records(running):
    async def go():
        client = client_for(running)
        got = await capture(client, 1, FACT)
        foreign = await tool_error(client, 2, "memory_manage", action="forget", id=got["id"])
        updated = await call(
            client, 1, "memory_manage", action="update", id=got["id"], content=OTHER
        )
        forgot = await call(client, 1, "memory_manage", action="forget", id=got["id"])
        missing = await client.rest("GET", f"{INSIGHTS}/{got['id']}")
        await client.aclose()
        return foreign, updated, forgot, missing

    foreign, updated, forgot, missing = run(go())
    assert "no record" in foreign
    assert updated["content"] == OTHER and forgot == {"id": updated["id"], "forgotten": True}
    assert missing.status == 404


def test_admin_only_enforcement_over_mcp_and_rest(running):
    async def go():
        client = client_for(running)
        got = await capture(client, 1, FACT)
        refused = await tool_error(
            client, 1, "apply_knowledge", action="approve", insight_ids=[got["id"]]
        )
        async with httpx2.AsyncClient() as http:
            pool = await http.get(
                f"{running.url}{INSIGHTS}", headers={"Authorization": f"Bearer {running.key(1)}"}
            )
            portal = await http.get(
                f"{running.url}/api/v1/portal/knowledge-pages",
                headers={"Authorization": f"Bearer {running.key(1)}"},
            )
            nobody = await http.get(f"{running.url}{INSIGHTS}")
            wrong = await http.get(
                f"{running.url}{INSIGHTS}", headers={"Authorization": "Bearer nope"}
            )
            mcp = await http.post(f"{running.url}/mcp", json={})
        await client.aclose()
        return refused, pool, portal, nobody, wrong, mcp

    refused, pool, portal, nobody, wrong, mcp = run(go())
    assert refused.startswith("Error") or "forbidden" in refused
    assert "forbidden" in refused and "not an admin" in refused
    assert pool.status_code == 403
    assert portal.status_code == 200 and portal.json()["total"] == 3
    assert nobody.status_code == 401 and wrong.status_code == 401 and mcp.status_code == 401


def test_the_handle_gate_refuses_calls_without_a_live_handle_of_the_caller(running):
    async def go():
        client = client_for(running)
        async with client.session(1) as a, client.session(2) as b:
            b_handle = b.handle
            no_handle = await a._session.call_tool("search", {"intent": "x"})
            stolen = await a._session.call_tool("search", {"intent": "x", "session_id": b_handle})
            made_up = await a._session.call_tool(
                "search", {"intent": "x", "session_id": "dps_nope"}
            )
        await client.aclose()
        return no_handle, stolen, made_up

    for res in run(go()):
        assert res.is_error
        assert "session_id" in res.content[0].text and "platform_info" in res.content[0].text


BAD_CALLS = [
    (
        "memory_capture",
        {"type": "business_knowledge", "content": "too short"},
        "content: must be 10 to 4000",
    ),
    (
        "memory_capture",
        {"type": "business_knowledge", "content": "x" * 4001},
        "content: must be 10 to 4000",
    ),
    ("memory_capture", {"type": "gossip", "content": "long enough content"}, "type:"),
    ("memory_capture", {"type": "note", "content": 42}, "content"),
    (
        "memory_capture",
        {"type": "note", "content": "long enough", "entity_urns": "urn"},
        "entity_urns",
    ),
    ("search", {"intent": "x", "sources": ["web"]}, "sources: unknown 'web'"),
    ("datahub_get_entity", {"urn": "urn:nope"}, "no entity"),
    ("query_sql", {"sql": "DELETE FROM orders"}, "only a single SELECT"),
    ("query_sql", {"sql": "SELECT 1; SELECT 2"}, "one SELECT"),
    ("query_sql", {"sql": "SELECT * FROM nope"}, "no such table"),
    ("describe_table", {"table": "nope"}, "known tables"),
]


@pytest.mark.parametrize(
    ("tool", "args", "message"), BAD_CALLS, ids=[f"{b[0]}-{i}" for i, b in enumerate(BAD_CALLS)]
)
def test_bad_tool_input_is_a_tool_error_naming_the_field(running, tool, args, message):
    async def go():
        client = client_for(running)
        text = await tool_error(client, 1, tool, **args)
        total = await client.rest("GET", INSIGHTS)
        await client.aclose()
        return text, total

    text, total = run(go())
    assert message in text
    assert total.body["total"] == 0  # nothing written


def test_rest_bad_input_gets_400_404_and_409(running):
    async def go():
        client = client_for(running)
        got = await capture(client, 1, FACT)
        headers = {
            "Authorization": f"Bearer {running.admin_key}",
            "Content-Type": "application/json",
        }
        async with httpx2.AsyncClient() as http:
            malformed = await http.put(
                f"{running.url}{INSIGHTS}/{got['id']}/status", content=b"{nope", headers=headers
            )
            bad_page = await http.get(f"{running.url}{INSIGHTS}?page=x", headers=headers)
            bad_since = await http.get(f"{running.url}{INSIGHTS}?since=yesterday", headers=headers)
        unknown = await client.rest("GET", f"{INSIGHTS}/deadbeef")
        unknown_put = await client.rest(
            "PUT", f"{INSIGHTS}/deadbeef/status", body={"status": "approved"}
        )
        rejected = await client.rest(
            "PUT", f"{INSIGHTS}/{got['id']}/status", body={"status": "rejected"}
        )
        invalid = await client.rest(
            "PUT", f"{INSIGHTS}/{got['id']}/status", body={"status": "approved"}
        )
        not_a_status = await client.rest(
            "PUT", f"{INSIGHTS}/{got['id']}/status", body={"status": "done"}
        )
        await client.aclose()
        return malformed, bad_page, bad_since, unknown, unknown_put, rejected, invalid, not_a_status

    malformed, bad_page, bad_since, unknown, unknown_put, rejected, invalid, not_a_status = run(
        go()
    )
    assert malformed.status_code == 400 and "not valid JSON" in malformed.json()["error"]
    assert bad_page.status_code == 400 and "page" in bad_page.json()["error"]
    assert bad_since.status_code == 400 and "since" in bad_since.json()["error"]
    assert unknown.status == 404 and unknown_put.status == 404
    assert rejected.status == 200
    assert invalid.status == 409 and "from 'rejected' to 'approved'" in invalid.body["error"]
    assert not_a_status.status == 400


def test_apply_is_all_or_nothing(running):
    async def go():
        client = client_for(running)
        a = await capture(client, 1, FACT)
        b = await capture(client, 1, OTHER)
        await call(client, None, "apply_knowledge", action="approve", insight_ids=[a["id"]])
        refused = await tool_error(
            client,
            None,
            "apply_knowledge",
            action="apply",
            entity_urn=ORDERS,
            insight_ids=[a["id"], b["id"]],
            confirm=True,
            sink="datahub",
            changes=[{"change_type": "update_description", "detail": FACT}],
        )
        status = await client.rest("GET", f"{INSIGHTS}/{a['id']}")
        changesets = await client.rest("GET", CHANGESETS)
        await client.aclose()
        return refused, status, changesets

    refused, status, changesets = run(go())
    assert "only approved insights can be applied" in refused
    assert status.body["status"] == "approved" and changesets.body["total"] == 0


def test_since_and_until_filter_insights_by_capture_time(running):
    async def go():
        client = client_for(running)
        await capture(client, 1, FACT)
        latest = await client.rest("GET", INSIGHTS)
        stamp = latest.body["data"][0]["created_at"]
        await capture(client, 1, OTHER)
        since = await client.rest("GET", INSIGHTS, params={"since": stamp})
        until = await client.rest("GET", INSIGHTS, params={"until": stamp})
        paged = await client.rest("GET", INSIGHTS, params={"per_page": 1, "page": 2})
        await client.aclose()
        return since, until, paged

    since, until, paged = run(go())
    assert since.body["total"] == 2 and until.body["total"] == 1
    assert paged.body["total"] == 2 and len(paged.body["data"]) == 1 and paged.body["page"] == 2


def test_the_sql_tools_answer_read_only_queries_with_a_row_limit(running):
    async def go():
        client = client_for(running)
        tables = await call(client, 1, "list_tables")
        columns = await call(client, 1, "describe_table", table="orders")
        rows = await call(client, 1, "query_sql", sql="SELECT order_id FROM orders", limit=5)
        await client.aclose()
        return tables, columns, rows

    tables, columns, rows = run(go())
    assert {t["table"] for t in tables["tables"]} == {
        "customers",
        "orders",
        "legacy_orders",
        "daily_revenue_index",
    }
    assert "amount_cents" in [c["name"] for c in columns["columns"]]
    assert rows["row_count"] == 5 and rows["truncated"] is True


def test_ids_are_reproducible_across_fresh_platforms():
    async def go(r):
        client = client_for(r)
        got = [(await capture(client, 1, FACT))["id"], (await capture(client, 2, OTHER))["id"]]
        async with client.session(3) as s:
            got.append(s.handle)
        await client.aclose()
        return got

    with RunningPlatform(pool_size=4) as a, RunningPlatform(pool_size=4) as b:
        assert run(go(a)) == run(go(b))


def test_concurrent_sessions_lose_no_captures():
    """32 concurrent sessions x 50 tool calls: no errors, every capture read back."""
    with RunningPlatform(pool_size=32) as r:
        result = run(
            drive(r.url, admin_key=r.admin_key, pool_base=r.pool_base, sessions=32, calls=50)
        )
    assert result.errors == []
    assert result.calls == 1600
    assert result.captures_written == 32 * 10 == result.captures_read_back


def test_a_state_file_keeps_state_across_restarts(tmp_path):
    from refplatform.platform import Platform

    db = str(tmp_path / "state.sqlite")

    async def write(r):
        client = client_for(r)
        got = await capture(client, 1, FACT)
        await client.aclose()
        return got

    async def read(r):
        client = client_for(r)
        got = await client.rest("GET", INSIGHTS)
        pages = await client.rest("GET", "/api/v1/portal/knowledge-pages")
        await client.aclose()
        return got, pages

    with RunningPlatform(Platform(db), pool_size=2, admin_key="a", pool_base="k") as r:
        first = run(write(r))
    with RunningPlatform(Platform(db), pool_size=2, admin_key="a", pool_base="k") as r:
        listed, pages = run(read(r))
    assert [d["id"] for d in listed.body["data"]] == [first["id"]]
    assert pages.body["total"] == 3  # seeded once, not again


def test_refplatform_imports_nothing_of_ours_but_the_dataset():
    ours = {"ledger", "protocols", "harness", "projections", "replay", "benchmarks"}
    folder = os.path.join(REPO, "refplatform")
    for name in os.listdir(folder):
        if not name.endswith(".py"):
            continue
        with open(os.path.join(folder, name)) as fh:
            tree = ast.parse(fh.read())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                root = node.module.split(".")[0]
                if root in ours:
                    assert node.module == "protocols" and [a.name for a in node.names] == [
                        "dataset"
                    ], (name, node.module)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    assert alias.name.split(".")[0] not in ours, (name, alias.name)


def test_platform_serve_prints_its_url_and_keys_and_serves(tmp_path):
    cmd = [
        sys.executable,
        "-m",
        "cli",
        "platform",
        "serve",
        "--port",
        "0",
        "--pool",
        "2",
        "--admin-key",
        "adm-k",
        "--pool-base",
        "pk",
        "--db",
        str(tmp_path / "p.sqlite"),
    ]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO
    )
    try:
        first = proc.stdout.readline()
        assert first.startswith("refplatform serving http://127.0.0.1:")
        url = first.split()[2].removesuffix("/mcp")
        lines = [proc.stdout.readline() for _ in range(5)]
        assert "admin key: adm-k" in lines[0] and "pk-001 .. pk-002" in lines[1]
        got = httpx2.get(
            f"{url}/api/v1/portal/knowledge-pages", headers={"Authorization": "Bearer pk-002"}
        )
        assert got.status_code == 200 and got.json()["total"] == 3
    finally:
        proc.send_signal(2)
        out, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    assert "refplatform stopped" in out and "Traceback" not in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--embedder", "magic"], "--embedder"),
        (["--pool", "0"], "--pool"),
        (["--db", "/proc/nope/state.sqlite"], "state.sqlite"),
    ],
    ids=["embedder", "pool", "db"],
)
def test_platform_serve_refuses_bad_options_with_one_line(argv, message, capsys):
    from cli import main

    assert main(["platform", "serve", "--port", "0", *argv]) == 2
    err = capsys.readouterr().err.strip().split("\n")
    assert len(err) == 1 and message in err[0]
