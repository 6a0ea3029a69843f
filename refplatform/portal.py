"""The portal's knowledge-page routes under ``/api/v1/portal/knowledge-pages``.

Reads are open to every authenticated identity; writes (create, edit, delete) need
apply_knowledge access, the admin role. Pages are addressed by id; a create with a
slug that names a live page is a 409 (update that page instead), a content edit is a
new version (which is what makes an older promotion's rollback a 409: it would
clobber the edit), and delete is a soft delete answering 204.
"""

from __future__ import annotations

import re
from typing import Any, Final

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from benchledger.refplatform import rest
from benchledger.refplatform.errors import NotFound, PlatformError
from benchledger.refplatform.platform import Platform

BASE: Final = "/api/v1/portal/knowledge-pages"
FORBIDDEN: Final = "editing knowledge requires apply_knowledge access"
LIMITS: Final = {"title": 200, "summary": 2000, "slug": 120}
MAX_BODY, MAX_TAGS, MAX_TAG = 1 << 20, 20, 50
PAGE_FIELDS: Final = {
    "slug": str,
    "title": str,
    "summary": str,
    "body": str,
    "tags": list,
    "change_summary": str,
    "force_new": bool,
}


def _validate(req: dict[str, Any]) -> dict[str, Any]:
    title = str(req.get("title") or "").strip()
    if not title:
        raise PlatformError("title is required")
    for field, most in LIMITS.items():
        if (
            len(str(req.get(field) or "").strip() if field != "summary" else req.get(field) or "")
            > most
        ):
            raise PlatformError(f"{field} exceeds {most} characters")
    if len(str(req.get("body") or "").encode()) > MAX_BODY:
        raise PlatformError(f"body exceeds {MAX_BODY} bytes")
    tags = req.get("tags") or []
    if len(tags) > MAX_TAGS:
        raise PlatformError(f"too many tags (max {MAX_TAGS})")
    for tag in tags:
        if not isinstance(tag, str):
            raise PlatformError("tags must be strings")
        if len(tag) > MAX_TAG:
            raise PlatformError(f'tag "{tag}" exceeds {MAX_TAG} characters')
    return {
        "slug": str(req.get("slug") or "").strip(),
        "title": title,
        "summary": str(req.get("summary") or ""),
        "body": str(req.get("body") or ""),
        "tags": list(dict.fromkeys(t.strip() for t in tags if t.strip())),
        "change_summary": str(req.get("change_summary") or ""),
    }


def slugify(title: str) -> str:
    """A slug from a title, for a create that names none."""
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")[:120] or "page"


def routes(platform: Platform) -> list[Route]:
    """The portal routes over ``platform``."""
    pages = platform.pages

    def writer(request: Request) -> str:
        who = rest.identity(request)
        if not who.admin:
            raise PlatformError(FORBIDDEN, status=403)
        return who.email

    @rest.route(admin=False)
    async def list_pages(request: Request) -> Any:
        limit = rest.int_param(request, "limit", 20)
        limit = 20 if limit <= 0 else min(limit, 100)
        found, total = pages.listing(
            tag=request.query_params.get("tag", "").strip(),
            query=request.query_params.get("q", "").strip(),
            limit=limit,
            offset=max(0, rest.int_param(request, "offset", 0)),
        )
        return {"pages": found, "total": total}

    @rest.route(admin=False)
    async def create_page(request: Request) -> Any:
        author = writer(request)
        req = _validate(await rest.body(request, PAGE_FIELDS))
        slug = req["slug"] or slugify(req["title"])
        if pages.by_slug(slug) is not None:
            raise PlatformError(
                f'a knowledge page with slug "{slug}" already exists; update it instead', status=409
            )
        created = pages.create(
            slug=slug,
            title=req["title"],
            summary=req["summary"],
            body=req["body"],
            tags=req["tags"],
            author=author,
        )
        return JSONResponse(created, status_code=201)

    @rest.route(admin=False)
    async def get_page(request: Request) -> Any:
        return pages.get(request.path_params["id"])

    @rest.route(admin=False)
    async def update_page(request: Request) -> Any:
        author = writer(request)
        req = _validate(await rest.body(request, PAGE_FIELDS))
        return pages.update(
            request.path_params["id"],
            title=req["title"],
            summary=req["summary"],
            body=req["body"],
            tags=req["tags"],
            author=author,
            change_summary=req["change_summary"],
            slug=req["slug"] or None,
        )

    @rest.route(admin=False)
    async def delete_page(request: Request) -> Any:
        writer(request)
        pages.soft_delete(request.path_params["id"])
        return Response(status_code=204)

    @rest.route(admin=False)
    async def versions(request: Request) -> Any:
        limit = rest.int_param(request, "limit", 20)
        found, total = pages.versions(
            request.path_params["id"],
            limit=20 if limit <= 0 else min(limit, 100),
            offset=max(0, rest.int_param(request, "offset", 0)),
        )
        return {"versions": found, "total": total}

    @rest.route(admin=False)
    async def refs(request: Request) -> Any:
        page = pages.get(request.path_params["id"])
        return {
            "refs": [
                {
                    "urn": r["urn"],
                    "source": r["source"],
                    "type": _ref_type(r["urn"]),
                    "exists": True,
                    "label": r["urn"],
                }
                for r in pages.refs(page["id"])
            ]
        }

    @rest.route(admin=False)
    async def backlinks(request: Request) -> Any:
        urn = request.query_params.get("urn", "").strip()
        if not urn:
            raise PlatformError("urn parameter is required")
        return {"pages": pages.pages_for([urn], 100)}

    @rest.route(admin=False)
    async def lineage(request: Request) -> Any:
        page = pages.get(request.path_params["id"])
        return platform_lineage(platform, page["slug"])

    @rest.route(admin=False)
    async def search(request: Request) -> Any:
        query = request.query_params.get("q", "").strip()
        if not query:
            raise PlatformError("q parameter is required")
        limit = rest.int_param(request, "limit", 20)
        ranked = platform.search.rank_pages(query)
        return JSONResponse(ranked[: 20 if limit <= 0 else min(limit, 100)])

    return [
        Route(BASE, list_pages, methods=["GET"]),
        Route(BASE, create_page, methods=["POST"]),
        Route(f"{BASE}/search", search, methods=["GET"]),
        Route(f"{BASE}/backlinks", backlinks, methods=["GET"]),
        Route(f"{BASE}/{{id}}", get_page, methods=["GET"]),
        Route(f"{BASE}/{{id}}", update_page, methods=["PUT"]),
        Route(f"{BASE}/{{id}}", delete_page, methods=["DELETE"]),
        Route(f"{BASE}/{{id}}/versions", versions, methods=["GET"]),
        Route(f"{BASE}/{{id}}/refs", refs, methods=["GET"]),
        Route(f"{BASE}/{{id}}/lineage", lineage, methods=["GET"]),
    ]


def _ref_type(urn: str) -> str:
    if urn.startswith("urn:li:"):
        return urn.split(":")[2]
    return urn.split(":")[1] if urn.count(":") >= 2 else "unknown"


def platform_lineage(platform: Platform, slug: str) -> dict[str, Any]:
    """The changesets that promoted into a page, and the insights they came from."""
    changesets, _ = platform.knowledge.changesets({"entity_urn": f"kp:{slug}"}, limit=100, offset=0)
    insights = []
    for insight_id in dict.fromkeys(i for cs in changesets for i in cs["source_insight_ids"]):
        try:
            view = platform.knowledge.insight(insight_id)
        except NotFound:
            continue
        insights.append(
            {k: view[k] for k in ("id", "status", "captured_by", "category", "confidence")}
            | {"text": view["insight_text"]}
        )
    return {
        "changesets": [
            {
                k: cs[k]
                for k in ("id", "change_type", "created_at", "rolled_back", "source_insight_ids")
            }
            for cs in changesets
        ],
        "insights": insights,
    }
