"""refplatform's admin and portal REST answer as the peer's swagger subset says.

Every response a test here provokes, error bodies included, is validated against the
swagger's ``definitions`` with the ``jsonschema`` package (Swagger 2.0 schemas are
draft-4; ``#/definitions/...`` resolves through a ``referencing`` registry). The check is
stricter than the swagger in one way: an object may carry only the properties its
definition declares, so a misnamed field fails.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import json
import os
from collections.abc import Iterator
from typing import Any

import jsonschema
import pytest
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT4

from tests.conftest import peer_dir
from tests.platform_helpers import (
    CHANGESETS,
    CUSTOMERS,
    INSIGHTS,
    ORDERS,
    PAGES,
    Driver,
    Rest,
    capture,
    client_for,
    running_peer,
)

FACT = "The 'keystone region' is the sales region with the highest gross revenue in 2025."
OTHER = "A 'whale order' is a completed order of at least 1,500 USD before discount."
AUDIT = "/api/v1/admin/audit/events"
SWAGGER_URI = "urn:peer:swagger-knowledge"


def _closed(schema: Any) -> Any:
    """Every object schema with declared properties, closed to undeclared ones."""
    if isinstance(schema, dict):
        out = {k: _closed(v) for k, v in schema.items()}
        if out.get("type") == "object" and "properties" in out:
            out.setdefault("additionalProperties", False)
        return out
    if isinstance(schema, list):
        return [_closed(v) for v in schema]
    return schema


@functools.cache
def _registry() -> Registry:
    with open(os.path.join(peer_dir(), "contract", "swagger-knowledge.json")) as fh:
        swagger = json.load(fh)
    doc = {"definitions": _closed(copy.deepcopy(swagger["definitions"]))}
    return Registry().with_resource(SWAGGER_URI, Resource.from_contents(doc, DRAFT4))


def check(reply: Rest, definition: str, status: int = 200) -> Any:
    """Assert the status and that the body validates against ``#/definitions/<definition>``."""
    assert reply.status == status, (reply.status, reply.body)
    schema = {"$ref": f"{SWAGGER_URI}#/definitions/{definition}"}
    jsonschema.Draft4Validator(schema, registry=_registry()).validate(reply.body)
    if status >= 400:
        assert reply.headers["content-type"].startswith("application/problem+json")
        assert reply.body["status"] == status and reply.body["type"] == "about:blank"
    return reply.body


def check_list(reply: Rest, definition: str) -> Any:
    """A JSON array response whose items validate against ``definition``."""
    assert reply.status == 200, reply.body
    schema = {"type": "array", "items": {"$ref": f"{SWAGGER_URI}#/definitions/{definition}"}}
    jsonschema.Draft4Validator(schema, registry=_registry()).validate(reply.body)
    return reply.body


@pytest.fixture
def driver() -> Iterator[Driver]:
    with running_peer() as running:
        d = client_for(running)
        yield d
        asyncio.run(d.aclose())


def run(coro):
    return asyncio.run(coro)


async def _approve(d: Driver, insight_id: str) -> None:
    check(
        await d.rest("PUT", f"{INSIGHTS}/{insight_id}/status", body={"status": "approved"}),
        "admin.statusResponse",
    )


async def _apply_description(d: Driver, insight_id: str, detail: str, urn: str = ORDERS) -> dict:
    async with d.session(None) as admin:
        reply = await admin.call(
            "apply_knowledge",
            {
                "action": "apply",
                "entity_urn": urn,
                "insight_ids": [insight_id],
                "confirm": True,
                "sink": "datahub",
                "changes": [{"change_type": "update_description", "target": "", "detail": detail}],
            },
        )
    assert not reply.is_error, reply.text
    data: dict = reply.data
    return data


async def _apply_page(d: Driver, insight_id: str, slug: str, summary: str) -> dict:
    async with d.session(None) as admin:
        reply = await admin.call(
            "apply_knowledge",
            {
                "action": "apply",
                "entity_urn": ORDERS,
                "insight_ids": [insight_id],
                "sink": "knowledge_page",
                "page": {"slug": slug, "title": slug.title(), "summary": summary, "body": summary},
            },
        )
    assert not reply.is_error, reply.text
    data: dict = reply.data
    return data


async def _description(d: Driver) -> str:
    async with d.session(1) as s:
        return str((await s.call("datahub_get_entity", {"urn": ORDERS})).data["description"])


# ---------------------------------------------------------------------------- insights


def test_insights_list_newest_first_in_the_swagger_envelope_and_order_oldest_flips_it(driver):
    async def go():
        a = await capture(driver, 1, FACT)
        b = await capture(driver, 1, OTHER)
        newest = check(await driver.rest("GET", INSIGHTS), "admin.insightListResponse")
        oldest = check(
            await driver.rest("GET", INSIGHTS, params={"order": "oldest"}),
            "admin.insightListResponse",
        )
        return a, b, newest, oldest

    a, b, newest, oldest = run(go())
    assert [i["id"] for i in newest["data"]] == [b["id"], a["id"]]
    assert [i["id"] for i in oldest["data"]] == [a["id"], b["id"]]
    assert (newest["page"], newest["per_page"], newest["total"]) == (1, 20, 2)
    row = newest["data"][1]
    assert row["insight_text"] == FACT and row["status"] == "pending"
    assert row["captured_by"] == "bench-agent-001@apikey.local"
    assert row["sink_class"] == "business_knowledge" and row["entity_urns"] == [ORDERS]


@pytest.mark.parametrize(
    ("params", "per_page", "page", "shown"),
    [
        ({}, 20, 1, 20),
        ({"per_page": 500}, 100, 1, 25),
        ({"per_page": 10, "page": 3}, 10, 3, 5),
        ({"per_page": 0}, 20, 1, 20),
        ({"per_page": "x", "page": "y"}, 20, 1, 20),
    ],
    ids=["default-20", "capped-at-100", "third-page", "zero-means-default", "unparsable-ignored"],
)
def test_insight_paging_defaults_to_20_caps_at_100_and_ignores_bad_numbers(
    driver, params, per_page, page, shown
):
    async def go():
        async with driver.session(1) as s:
            for i in range(25):
                await s.call(
                    "memory_capture",
                    {
                        "type": "business_knowledge",
                        "entity_urns": [ORDERS],
                        "content": f"Fact number {i}: the {i}th region code is R{i * 7}.",
                    },
                )
        return check(await driver.rest("GET", INSIGHTS, params=params), "admin.insightListResponse")

    body = run(go())
    assert (body["per_page"], body["page"], len(body["data"]), body["total"]) == (
        per_page,
        page,
        shown,
        25,
    )


def test_insight_filters_narrow_the_list(driver):
    async def go():
        a = await capture(driver, 1, FACT)
        await capture(driver, 2, OTHER, CUSTOMERS)
        async with driver.session(3) as s:
            await s.call(
                "memory_capture",
                {
                    "type": "business_knowledge",
                    "content": OTHER + " v3",
                    "category": "correction",
                    "confidence": "low",
                },
            )
        stamp = (await driver.rest("GET", f"{INSIGHTS}/{a['id']}")).body["created_at"]
        out = {}
        for name, params in {
            "entity": {"entity_urn": CUSTOMERS},
            "captured_by": {"captured_by": "bench-agent-001@apikey.local"},
            "category": {"category": "correction"},
            "confidence": {"confidence": "low"},
            "status": {"status": "approved"},
            "until": {"until": stamp},
            "since": {"since": stamp},
        }.items():
            out[name] = check(
                await driver.rest("GET", INSIGHTS, params=params), "admin.insightListResponse"
            )["total"]
        return out

    totals = run(go())
    assert totals == {
        "entity": 1,
        "captured_by": 1,
        "category": 1,
        "confidence": 1,
        "status": 0,
        "until": 1,
        "since": 3,
    }


def test_an_insight_reads_back_by_id_and_an_unknown_one_is_a_404_problem(driver):
    async def go():
        got = await capture(driver, 1, FACT)
        return (
            got,
            await driver.rest("GET", f"{INSIGHTS}/{got['id']}"),
            await driver.rest("GET", f"{INSIGHTS}/deadbeef"),
        )

    got, one, missing = run(go())
    assert check(one, "admin.insightView")["id"] == got["id"]
    assert check(missing, "admin.problemDetail", 404)["detail"] == "insight not found"


@pytest.mark.parametrize(
    ("body", "status", "detail"),
    [
        ({"status": "approved"}, 200, None),
        ({"status": "applied"}, 400, "status must be 'approved' or 'rejected'"),
        ({"status": "approved", "note": "x"}, 400, 'json: unknown field "note"'),
        ({"status": 3}, 400, "status must be str"),
    ],
    ids=["approve", "not-a-review-status", "unknown-field", "wrong-type"],
)
def test_a_status_change_answers_status_updated_or_a_400_problem(driver, body, status, detail):
    async def go():
        got = await capture(driver, 1, FACT)
        return await driver.rest("PUT", f"{INSIGHTS}/{got['id']}/status", body=body)

    reply = run(go())
    if status == 200:
        assert check(reply, "admin.statusResponse") == {"status": "updated"}
    else:
        assert detail in check(reply, "admin.problemDetail", status)["detail"]


def test_an_invalid_transition_is_a_409_and_an_unknown_insight_a_404(driver):
    async def go():
        got = await capture(driver, 1, FACT)
        path = f"{INSIGHTS}/{got['id']}/status"
        await driver.rest("PUT", path, body={"status": "rejected"})
        again = await driver.rest("PUT", path, body={"status": "approved"})
        unknown = await driver.rest("PUT", f"{INSIGHTS}/nope/status", body={"status": "approved"})
        return again, unknown

    again, unknown = run(go())
    assert check(again, "admin.problemDetail", 409)["detail"] == (
        'invalid status transition from "rejected" to "approved"'
    )
    check(unknown, "admin.problemDetail", 404)


def test_an_insight_edit_changes_its_text_until_it_is_applied(driver):
    async def go():
        got = await capture(driver, 1, FACT)
        path = f"{INSIGHTS}/{got['id']}"
        edited = await driver.rest("PUT", path, body={"insight_text": OTHER, "confidence": "low"})
        after = await driver.rest("GET", path)
        await _approve(driver, got["id"])
        await _apply_description(driver, got["id"], FACT)
        refused = await driver.rest("PUT", path, body={"confidence": "high"})
        return edited, after, refused

    edited, after, refused = run(go())
    check(edited, "admin.statusResponse")
    body = check(after, "admin.insightView")
    assert (body["insight_text"], body["confidence"]) == (OTHER, "low")
    assert check(refused, "admin.problemDetail", 409)["detail"] == "cannot edit an applied insight"


def test_stats_count_the_queue(driver):
    async def go():
        a = await capture(driver, 1, FACT)
        await capture(driver, 2, OTHER, CUSTOMERS)
        await _approve(driver, a["id"])
        return check(await driver.rest("GET", f"{INSIGHTS}/stats"), "knowledge.InsightStats")

    stats = run(go())
    assert stats["total_pending"] == 1 and stats["by_status"] == {"approved": 1, "pending": 1}
    assert [e["entity_urn"] for e in stats["by_entity"]] == [CUSTOMERS]
    assert stats["pending_over_30d"] == 0 and "oldest_pending_at" in stats


# ---------------------------------------------------------------------------- changesets


def test_an_applied_insight_carries_changeset_ref_and_get_changeset_reads_it(driver):
    async def go():
        got = await capture(driver, 1, FACT)
        await _approve(driver, got["id"])
        applied = await _apply_description(driver, got["id"], f"Orders. {FACT}")
        insight = check(await driver.rest("GET", f"{INSIGHTS}/{got['id']}"), "admin.insightView")
        changeset = check(
            await driver.rest("GET", f"{CHANGESETS}/{insight['changeset_ref']}"),
            "knowledge.Changeset",
        )
        listed = check(
            await driver.rest("GET", CHANGESETS, params={"entity_urn": ORDERS}),
            "admin.changesetListResponse",
        )
        missing = await driver.rest("GET", f"{CHANGESETS}/nope")
        return got, applied, insight, changeset, listed, missing

    got, applied, insight, changeset, listed, missing = run(go())
    assert insight["status"] == "applied" and insight["changeset_ref"] == applied["changeset_id"]
    assert insight["applied_by"] == "bench-admin@apikey.local" and insight["applied_at"]
    assert changeset["source_insight_ids"] == [got["id"]] and not changeset["rolled_back"]
    assert changeset["target_urn"] == ORDERS and changeset["change_type"] == "update_description"
    assert changeset["new_value"]["change_0"]["detail"] == f"Orders. {FACT}"
    assert listed["total"] == 1 and listed["per_page"] == 20
    check(missing, "admin.problemDetail", 404)


def test_a_page_promotion_targets_kp_slug_and_keeps_the_page_id_on_a_second_promotion(driver):
    async def go():
        a = await capture(driver, 1, FACT)
        b = await capture(driver, 1, OTHER)
        for got in (a, b):
            await _approve(driver, got["id"])
        first = await _apply_page(driver, a["id"], "keystone", FACT)
        second = await _apply_page(driver, b["id"], "keystone", OTHER)
        listed = check(
            await driver.rest("GET", CHANGESETS, params={"entity_urn": "kp:keystone"}),
            "admin.changesetListResponse",
        )
        page = check(await driver.rest("GET", f"{PAGES}/{first['page_id']}"), "knowledgepage.Page")
        return first, second, listed, page

    first, second, listed, page = run(go())
    assert (first["action"], second["action"]) == ("created", "updated")
    assert first["page_id"] == second["page_id"] and first["page_id"].startswith("kp_")
    assert [c["change_type"] for c in listed["data"]] == ["update_page", "create_page"]
    assert {c["target_urn"] for c in listed["data"]} == {"kp:keystone"}
    assert page["current_version"] == 2 and page["summary"] == OTHER


def test_changesets_filter_by_applier_and_rollback_state(driver):
    async def go():
        got = await capture(driver, 1, FACT)
        await _approve(driver, got["id"])
        applied = await _apply_description(driver, got["id"], FACT)
        await driver.rest("POST", f"{CHANGESETS}/{applied['changeset_id']}/rollback")
        out = {}
        for name, params in {
            "mine": {"applied_by": "bench-admin@apikey.local"},
            "theirs": {"applied_by": "bench-agent-001@apikey.local"},
            "rolled": {"rolled_back": "true"},
            "live": {"rolled_back": "false"},
        }.items():
            out[name] = check(
                await driver.rest("GET", CHANGESETS, params=params), "admin.changesetListResponse"
            )["total"]
        return out

    assert run(go()) == {"mine": 1, "theirs": 0, "rolled": 1, "live": 0}


# ---------------------------------------------------------------------------- rollback


def test_a_rollback_restores_the_sink_and_returns_the_insight_to_review_once(driver):
    async def go():
        before = await _description(driver)
        got = await capture(driver, 1, FACT)
        await _approve(driver, got["id"])
        applied = await _apply_description(driver, got["id"], FACT)
        path = f"{CHANGESETS}/{applied['changeset_id']}/rollback"
        rolled = await driver.rest("POST", path)
        again = await driver.rest("POST", path)
        unknown = await driver.rest("POST", f"{CHANGESETS}/nope/rollback")
        insight = check(await driver.rest("GET", f"{INSIGHTS}/{got['id']}"), "admin.insightView")
        return before, got, rolled, again, unknown, insight, await _description(driver)

    before, got, rolled, again, unknown, insight, after = run(go())
    result = check(rolled, "knowledge.RollbackResult")
    assert result["insights_returned_to_review"] == [got["id"]]
    assert result["reverted_changes"] == ["restored description"]
    assert after == before
    assert insight["status"] == "pending" and insight["changeset_ref"]  # application kept
    assert check(again, "admin.problemDetail", 409)["detail"] == "changeset already rolled back"
    check(unknown, "admin.problemDetail", 404)


def test_an_out_of_order_rollback_is_a_409_that_changes_nothing(driver):
    async def go():
        a = await capture(driver, 1, FACT)
        b = await capture(driver, 2, OTHER)
        for got in (a, b):
            await _approve(driver, got["id"])
        older = await _apply_description(driver, a["id"], FACT)
        newer = await _apply_description(driver, b["id"], OTHER)
        before = (
            await _description(driver),
            [(await driver.rest("GET", f"{INSIGHTS}/{g['id']}")).body["status"] for g in (a, b)],
            (await driver.rest("GET", CHANGESETS)).body,
        )
        refused = await driver.rest("POST", f"{CHANGESETS}/{older['changeset_id']}/rollback")
        after = (
            await _description(driver),
            [(await driver.rest("GET", f"{INSIGHTS}/{g['id']}")).body["status"] for g in (a, b)],
            (await driver.rest("GET", CHANGESETS)).body,
        )
        # In order it works: newest first, then the older one.
        newest = await driver.rest("POST", f"{CHANGESETS}/{newer['changeset_id']}/rollback")
        oldest = await driver.rest("POST", f"{CHANGESETS}/{older['changeset_id']}/rollback")
        return newer, before, refused, after, newest, oldest

    newer, before, refused, after, newest, oldest = run(go())
    detail = check(refused, "admin.problemDetail", 409)["detail"]
    assert newer["changeset_id"] in detail and "description" in detail
    assert after == before and before[0] == OTHER and before[1] == ["applied", "applied"]
    check(newest, "knowledge.RollbackResult")
    check(oldest, "knowledge.RollbackResult")


def test_a_page_rollback_a_later_edit_would_clobber_is_a_409_that_changes_nothing(driver):
    async def go():
        got = await capture(driver, 1, FACT)
        await _approve(driver, got["id"])
        applied = await _apply_page(driver, got["id"], "keystone", FACT)
        edit = {"title": "Keystone", "summary": "Edited by a human.", "body": "Edited."}
        edited = check(
            await driver.rest("PUT", f"{PAGES}/{applied['page_id']}", body=edit),
            "knowledgepage.Page",
        )
        refused = await driver.rest("POST", f"{CHANGESETS}/{applied['changeset_id']}/rollback")
        page = check(
            await driver.rest("GET", f"{PAGES}/{applied['page_id']}"), "knowledgepage.Page"
        )
        insight = (await driver.rest("GET", f"{INSIGHTS}/{got['id']}")).body
        changeset = (await driver.rest("GET", f"{CHANGESETS}/{applied['changeset_id']}")).body
        return edited, refused, page, insight, changeset

    edited, refused, page, insight, changeset = run(go())
    detail = check(refused, "admin.problemDetail", 409)["detail"]
    assert "was edited after this changeset" in detail and "v2" in detail
    assert page == edited and insight["status"] == "applied" and not changeset["rolled_back"]


def test_rolling_back_a_page_update_restores_the_prior_content_as_a_new_version(driver):
    async def go():
        a = await capture(driver, 1, FACT)
        b = await capture(driver, 1, OTHER)
        for got in (a, b):
            await _approve(driver, got["id"])
        first = await _apply_page(driver, a["id"], "keystone", FACT)
        second = await _apply_page(driver, b["id"], "keystone", OTHER)
        undo = await driver.rest("POST", f"{CHANGESETS}/{second['changeset_id']}/rollback")
        restored = check(
            await driver.rest("GET", f"{PAGES}/{first['page_id']}"), "knowledgepage.Page"
        )
        # The restore is itself a new version, so the create's rollback would clobber it.
        create = await driver.rest("POST", f"{CHANGESETS}/{first['changeset_id']}/rollback")
        return check(undo, "knowledge.RollbackResult"), restored, create

    undo, restored, create = run(go())
    assert undo["reverted_changes"] == ["restored page keystone"]
    assert restored["summary"] == FACT and restored["current_version"] == 3
    assert (
        "page is at v3, changeset produced v1"
        in check(create, "admin.problemDetail", 409)["detail"]
    )


def test_rolling_back_a_page_creation_deletes_the_page(driver):
    async def go():
        got = await capture(driver, 1, FACT)
        await _approve(driver, got["id"])
        created = await _apply_page(driver, got["id"], "keystone", FACT)
        undo = await driver.rest("POST", f"{CHANGESETS}/{created['changeset_id']}/rollback")
        gone = await driver.rest("GET", f"{PAGES}/{created['page_id']}")
        return check(undo, "knowledge.RollbackResult"), gone

    undo, gone = run(go())
    assert undo["reverted_changes"] == ["deleted page keystone"]
    check(gone, "portal.problemDetail", 404)


# ---------------------------------------------------------------------------- portal pages


def test_page_crud_by_id_with_versions(driver):
    async def go():
        new = {
            "slug": "fiscal-notes",
            "title": "Fiscal notes",
            "summary": "S",
            "body": "B",
            "tags": ["finance", "finance", " "],
        }
        created = check(await driver.rest("POST", PAGES, body=new), "knowledgepage.Page", 201)
        dup = await driver.rest("POST", PAGES, body=new)
        path = f"{PAGES}/{created['id']}"
        updated = check(
            await driver.rest(
                "PUT", path, body={"title": "Fiscal", "body": "B2", "change_summary": "clearer"}
            ),
            "knowledgepage.Page",
        )
        versions = check(
            await driver.rest("GET", f"{path}/versions"), "portal.knowledgePageVersionsResponse"
        )
        deleted = await driver.rest("DELETE", path)
        gone = await driver.rest("GET", path)
        missing_update = await driver.rest("PUT", path, body={"title": "x"})
        return created, dup, updated, versions, deleted, gone, missing_update

    created, dup, updated, versions, deleted, gone, missing_update = run(go())
    assert created["tags"] == ["finance"] and created["current_version"] == 1
    assert created["created_by"] == "bench-admin@apikey.local"
    assert "already exists" in check(dup, "portal.problemDetail", 409)["detail"]
    assert updated["id"] == created["id"] and updated["current_version"] == 2
    assert [v["version"] for v in versions["versions"]] == [2, 1]
    assert versions["versions"][0]["change_summary"] == "clearer"
    assert deleted.status == 204 and deleted.body is None
    check(gone, "portal.problemDetail", 404)
    check(missing_update, "portal.problemDetail", 404)


def test_the_page_list_pages_with_limit_and_offset_and_filters_by_tag(driver):
    async def go():
        full = check(await driver.rest("GET", PAGES), "portal.knowledgePageListResponse")
        window = check(
            await driver.rest("GET", PAGES, params={"limit": 2, "offset": 1}),
            "portal.knowledgePageListResponse",
        )
        tagged = check(
            await driver.rest("GET", PAGES, params={"tag": "warehouse"}),
            "portal.knowledgePageListResponse",
        )
        one = check(await driver.rest("GET", f"{PAGES}/kp-bench-2", who=3), "knowledgepage.Page")
        return full, window, tagged, one

    full, window, tagged, one = run(go())
    assert full["total"] == 4 and [p["id"] for p in full["pages"]][:2] == [
        "kp-bench-1",
        "kp-bench-2",
    ]
    assert window["total"] == 4 and [p["id"] for p in window["pages"]] == [
        "kp-bench-2",
        "kp-bench-3",
    ]
    assert [p["slug"] for p in tagged["pages"]] == ["bench-warehouse-guide"]
    assert one["created_by"] == "bench-seed@example.com" and one["created_at"].startswith(
        "2026-01-01"
    )


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        ({"summary": "no title"}, "title is required"),
        ({"title": "t" * 201}, "title exceeds 200 characters"),
        ({"title": "ok", "tags": ["x"] * 21}, "too many tags (max 20)"),
    ],
    ids=["no-title", "long-title", "many-tags"],
)
def test_a_bad_page_is_a_400_problem(driver, body, detail):
    reply = run(driver.rest("POST", PAGES, body=body))
    assert check(reply, "portal.problemDetail", 400)["detail"] == detail


def test_page_search_backlinks_refs_and_lineage_answer_in_the_swagger_shapes(driver):
    async def go():
        got = await capture(driver, 1, FACT)
        await _approve(driver, got["id"])
        applied = await _apply_page(driver, got["id"], "keystone", FACT)
        path = f"{PAGES}/{applied['page_id']}"
        found = check_list(
            await driver.rest("GET", f"{PAGES}/search", params={"q": "fiscal year"}),
            "knowledgepage.ScoredPage",
        )
        backlinks = check(
            await driver.rest("GET", f"{PAGES}/backlinks", params={"urn": ORDERS}),
            "portal.backlinksResponse",
        )
        refs = check(await driver.rest("GET", f"{path}/refs"), "portal.knowledgePageRefsResponse")
        lineage = check(
            await driver.rest("GET", f"{path}/lineage"), "portal.knowledgePageLineageResponse"
        )
        no_query = await driver.rest("GET", f"{PAGES}/search")
        return got, applied, found, backlinks, refs, lineage, no_query

    got, applied, found, backlinks, refs, lineage, no_query = run(go())
    assert found[0]["page"]["id"] == "kp-bench-3"
    assert {p["id"] for p in backlinks["pages"]} == {"kp-bench-1", applied["page_id"]}
    assert refs["refs"] == [
        {"urn": ORDERS, "source": "promoted", "type": "dataset", "exists": True, "label": ORDERS}
    ]
    assert [i["id"] for i in lineage["insights"]] == [got["id"]]
    assert [c["id"] for c in lineage["changesets"]] == [applied["changeset_id"]]
    check(no_query, "portal.problemDetail", 400)


# ---------------------------------------------------------------------------- audit


def test_every_audited_tool_call_reads_back_by_session_in_timestamp_order(driver):
    async def go():
        async with driver.session(1) as s:
            await s.call("search", {"intent": "orders"})
            await s.call("trino_query", {"sql": "SELECT count(*) FROM memory.bench.orders"})
            await s.call("trino_query", {"sql": "SELECT nope FROM memory.bench.orders"})
            await s.call("search", {"intent": "x", "bogus": 1})
            handle = s.handle
        params = {
            "session_id": handle,
            "sort_by": "timestamp",
            "sort_order": "asc",
            "per_page": 200,
        }
        events = check(
            await driver.rest("GET", AUDIT, params=params), "auditapi.auditEventResponse"
        )
        one = check(await driver.rest("GET", f"{AUDIT}/{events['data'][1]['id']}"), "audit.Event")
        filters = check(
            await driver.rest("GET", f"{AUDIT}/filters"), "auditapi.auditFiltersResponse"
        )
        missing = await driver.rest("GET", f"{AUDIT}/nope")
        return handle, events, one, filters, missing

    handle, events, one, filters, missing = run(go())
    data = events["data"]
    assert [e["tool_name"] for e in data] == [
        "platform_info",
        "search",
        "trino_query",
        "trino_query",
        "search",
    ]
    assert [e["success"] for e in data] == [True, True, True, False, False]
    assert {e["session_id"] for e in data} == {handle} and events["per_page"] == 200
    assert data[2]["enrichment_applied"] and data[2]["event_kind"] == "mcp_tool_call"
    assert "error_message" in data[3] and one == data[1]
    assert "trino_query" in filters["tools"]
    check(missing, "httpjson.ProblemDetail", 404)


def test_refusals_before_the_audit_layer_leave_no_audit_event(driver):
    async def go():
        async with driver.session(1, mint=False) as s:
            await s.call("search", {"intent": "x"})  # no handle yet: SESSION_REQUIRED
        async with driver.session(2) as s:
            await s.call("trino_query", {"sql": "SELECT 1"})  # SEARCH_REQUIRED
        return check(await driver.rest("GET", AUDIT), "auditapi.auditEventResponse")

    events = run(go())
    assert [e["tool_name"] for e in events["data"]] == ["platform_info"]


# ---------------------------------------------------------------------------- authentication


def test_a_missing_or_unknown_key_is_a_401_problem_and_x_api_key_works(driver):
    async def go():
        import httpx2

        async with httpx2.AsyncClient() as http:
            nobody = await http.get(f"{driver.url}{INSIGHTS}")
            wrong = await http.get(f"{driver.url}{PAGES}", headers={"X-API-Key": "nope"})
            ok = await http.get(f"{driver.url}{INSIGHTS}", headers={"X-API-Key": driver.admin_key})
        return nobody, wrong, ok

    nobody, wrong, ok = run(go())
    for reply in (nobody, wrong):
        rest = Rest(reply.status_code, reply.json(), dict(reply.headers))
        check(rest, "admin.problemDetail", 401)
        assert reply.headers["www-authenticate"] == "Bearer"
    assert ok.status_code == 200


def test_without_the_admin_role_admin_routes_are_403_and_page_writes_too():
    with running_peer(pool_admin=False) as running:
        d = client_for(running)

        async def go():
            insights = await d.rest("GET", INSIGHTS, who=1)
            write = await d.rest("POST", PAGES, body={"title": "t"}, who=1)
            read = await d.rest("GET", PAGES, who=1)
            await d.aclose()
            return insights, write, read

        insights, write, read = run(go())
    assert check(insights, "admin.problemDetail", 403)["detail"] == "admin role required"
    assert check(write, "portal.problemDetail", 403)["detail"] == (
        "editing knowledge requires apply_knowledge access"
    )
    check(read, "portal.knowledgePageListResponse")
