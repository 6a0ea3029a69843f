"""The admin REST routes under ``/api/v1/admin`` (knowledge and audit), as the swagger says.

Every route needs the admin role (403 ``admin role required`` otherwise). Lists are
``{data, total, page, per_page}`` envelopes, newest first, 20 per page by default and
100 at most (audit: 50 and 1000); ``order=oldest`` flips the insights list. An
insight status change answers ``{"status": "updated"}``; a rollback answers the
``RollbackResult`` or 404/409/422 with nothing changed.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.routing import Route

from benchledger.refplatform import rest
from benchledger.refplatform.audit import DEFAULT_PER_PAGE, MAX_PER_PAGE
from benchledger.refplatform.auth import ADMIN_NAME
from benchledger.refplatform.platform import Platform

BASE = "/api/v1/admin"
STATUS_UPDATED = {"status": "updated"}


def _insight_filters(request: Request) -> dict[str, Any]:
    q = request.query_params
    return {
        "status": q.get("status", ""),
        "category": q.get("category", ""),
        "entity_urn": q.get("entity_urn", ""),
        "captured_by": q.get("captured_by", ""),
        "confidence": q.get("confidence", ""),
        "source": q.get("source", ""),
        "since": rest.time_param(request, "since"),
        "until": rest.time_param(request, "until"),
    }


def routes(platform: Platform) -> list[Route]:
    """The admin routes over ``platform``."""
    knowledge = platform.knowledge

    @rest.route(admin=True)
    async def list_insights(request: Request) -> Any:
        page, per_page, offset = rest.paging(request)
        data, total = knowledge.insights(
            _insight_filters(request),
            limit=per_page,
            offset=offset,
            oldest=request.query_params.get("order") == "oldest",
        )
        return {"data": data, "total": total, "page": page, "per_page": per_page}

    @rest.route(admin=True)
    async def insight_stats(request: Request) -> Any:
        return knowledge.stats(_insight_filters(request))

    @rest.route(admin=True)
    async def get_insight(request: Request) -> Any:
        return knowledge.insight(request.path_params["id"])

    @rest.route(admin=True)
    async def update_status(request: Request) -> Any:
        body = await rest.body(request, {"status": str, "review_notes": str})
        knowledge.set_status(
            request.path_params["id"],
            str(body.get("status") or ""),
            rest.identity(request).user_id,
            str(body.get("review_notes") or ""),
        )
        return STATUS_UPDATED

    @rest.route(admin=True)
    async def update_insight(request: Request) -> Any:
        body = await rest.body(request, {"insight_text": str, "category": str, "confidence": str})
        knowledge.edit(
            request.path_params["id"],
            str(body.get("insight_text") or "").strip(),
            str(body.get("category") or ""),
            str(body.get("confidence") or ""),
        )
        return STATUS_UPDATED

    @rest.route(admin=True)
    async def list_changesets(request: Request) -> Any:
        page, per_page, offset = rest.paging(request)
        q = request.query_params
        data, total = knowledge.changesets(
            {
                "entity_urn": q.get("entity_urn", ""),
                "applied_by": q.get("applied_by", ""),
                "rolled_back": rest.bool_param(request, "rolled_back"),
                "since": rest.time_param(request, "since"),
                "until": rest.time_param(request, "until"),
            },
            limit=per_page,
            offset=offset,
        )
        return {"data": data, "total": total, "page": page, "per_page": per_page}

    @rest.route(admin=True)
    async def get_changeset(request: Request) -> Any:
        return knowledge.changeset(request.path_params["id"])

    @rest.route(admin=True)
    async def rollback(request: Request) -> Any:
        changeset_id = request.path_params["id"]
        knowledge.changeset(changeset_id)  # 404 before anything else
        return knowledge.rollback(changeset_id, rest.identity(request).user_id)

    @rest.route(admin=True)
    async def audit_events(request: Request) -> Any:
        page, per_page, offset = rest.paging(request, default=DEFAULT_PER_PAGE, most=MAX_PER_PAGE)
        q = request.query_params
        data, total = platform.audit.events(
            {
                "user_id": q.get("user_id", ""),
                "tool_name": q.get("tool_name", ""),
                "toolkit_kind": q.get("toolkit_kind", ""),
                "source": q.get("source", ""),
                "event_kind": q.get("event_kind", ""),
                "session_id": q.get("session_id", ""),
                "success": rest.bool_param(request, "success"),
                "start_time": rest.time_param(request, "start_time"),
                "end_time": rest.time_param(request, "end_time"),
            },
            sort_by=q.get("sort_by", "timestamp"),
            ascending=q.get("sort_order", "desc").lower() == "asc",
            limit=per_page,
            offset=offset,
        )
        return {"data": data, "total": total, "page": page, "per_page": per_page}

    @rest.route(admin=True)
    async def audit_filters(request: Request) -> Any:
        return platform.audit.filters(
            rest.time_param(request, "start_time"), rest.time_param(request, "end_time")
        )

    @rest.route(admin=True)
    async def audit_event(request: Request) -> Any:
        return platform.audit.event(request.path_params["id"])

    @rest.route(admin=True)
    async def reset(request: Request) -> Any:
        # refplatform's own route (not the peer's): `benchledger platform reset URL` calls it
        # so a served platform can be reused for another run; only the admin key may.
        if rest.identity(request).name != ADMIN_NAME:
            return rest.problem(403, "only the admin key may reset the platform")
        return {"status": "reset", "records_removed": platform.reset()}

    k = f"{BASE}/knowledge"
    return [
        Route(f"{k}/insights", list_insights, methods=["GET"]),
        Route(f"{k}/insights/stats", insight_stats, methods=["GET"]),
        Route(f"{k}/insights/{{id}}", get_insight, methods=["GET"]),
        Route(f"{k}/insights/{{id}}", update_insight, methods=["PUT"]),
        Route(f"{k}/insights/{{id}}/status", update_status, methods=["PUT"]),
        Route(f"{k}/changesets", list_changesets, methods=["GET"]),
        Route(f"{k}/changesets/{{id}}", get_changeset, methods=["GET"]),
        Route(f"{k}/changesets/{{id}}/rollback", rollback, methods=["POST"]),
        Route(f"{BASE}/audit/events", audit_events, methods=["GET"]),
        Route(f"{BASE}/audit/events/filters", audit_filters, methods=["GET"]),
        Route(f"{BASE}/audit/events/{{id}}", audit_event, methods=["GET"]),
        Route(f"{BASE}/reset", reset, methods=["POST"]),
    ]
