"""REST plumbing shared by the admin and portal routes: problem+json, identity, parameters.

Errors are RFC 9457 problem details (``{type, title, status, detail}``, content type
``application/problem+json``), as the peer's ``writeError``. Query parameters are read
leniently, as the peer's ``httpjson`` helpers do: an unparsable page, size or time is
ignored rather than refused. Request bodies are decoded strictly: unknown fields are a
400, as the peer's ``decodeStrict``.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from http import HTTPStatus
from typing import Any, Final

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from benchledger.refplatform import times
from benchledger.refplatform.auth import Identity
from benchledger.refplatform.errors import PlatformError

IDENTITY_KEY: Final = "refplatform.identity"
PROBLEM_TYPE: Final = "application/problem+json"
# A request body larger than this is refused (413) as soon as it is known to be: a page's
# 1 MiB body fits even JSON-escaped; MCP requests have the same bound (the SDK's check).
MAX_BODY_BYTES: Final = 4 << 20

Handler = Callable[[Request], Awaitable[Response]]


def problem(status: int, detail: str) -> JSONResponse:
    """An RFC 9457 problem response."""
    body = {
        "type": "about:blank",
        "title": HTTPStatus(status).phrase,
        "status": status,
        "detail": detail,
    }
    return JSONResponse(body, status_code=status, media_type=PROBLEM_TYPE)


def identity(request: Request) -> Identity:
    """The caller the authentication gate resolved for this request."""
    who: Identity = request.scope[IDENTITY_KEY]
    return who


def route(*, admin: bool) -> Callable[[Callable[[Request], Awaitable[Any]]], Handler]:
    """Wrap a handler: the admin check, PlatformError -> problem, a dict -> JSON 200."""

    def wrap(fn: Callable[[Request], Awaitable[Any]]) -> Handler:
        async def handler(request: Request) -> Response:
            if admin and not identity(request).admin:
                return problem(403, "admin role required")
            try:
                result = await fn(request)
            except PlatformError as exc:
                return problem(exc.status, exc.message)
            return result if isinstance(result, Response) else JSONResponse(result)

        return handler

    return wrap


def int_param(request: Request, name: str, default: int) -> int:
    """An integer query parameter; ``default`` when absent or not a whole number."""
    raw = request.query_params.get(name, "").strip()
    try:
        return int(raw) if raw else default
    except ValueError:
        return default


def time_param(request: Request, name: str) -> int | None:
    """An RFC 3339 query parameter as nanoseconds; None when absent or not a time."""
    raw = request.query_params.get(name, "")
    return times.parse(raw) if raw else None


def bool_param(request: Request, name: str) -> bool | None:
    """A boolean query parameter (Go's ParseBool spellings); None when absent or unparsable."""
    raw = request.query_params.get(name, "").strip().lower()
    if raw in ("1", "t", "true"):
        return True
    if raw in ("0", "f", "false"):
        return False
    return None


def paging(request: Request, *, default: int = 20, most: int = 100) -> tuple[int, int, int]:
    """``(page, per_page, offset)``: per_page <= 0 is the default, above the cap is the cap."""
    per_page = int_param(request, "per_page", 0)
    per_page = default if per_page <= 0 else min(per_page, most)
    page = max(1, int_param(request, "page", 1))
    return page, per_page, (page - 1) * per_page


class BodyLimit:
    """ASGI middleware: read a request body as it arrives, at most ``limit`` bytes of it.

    A declared ``Content-Length`` over the limit is refused before anything is read; a body
    that passes the limit while it streams is refused at that chunk, the rest never read.
    The body read so far is handed to the app, which therefore never holds more. Only
    paths under ``prefix`` (the REST routes; the MCP transport has its own check).
    """

    def __init__(self, app: ASGIApp, limit: int, *, prefix: str = "/") -> None:
        self.app = app
        self.limit = limit
        self.prefix = prefix

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith(self.prefix):
            await self.app(scope, receive, send)
            return
        too_large = problem(413, f"request body exceeds {self.limit} bytes")
        for name, value in scope["headers"]:
            if name == b"content-length" and value.isdigit() and int(value) > self.limit:
                await too_large(scope, receive, send)
                return
        chunks: list[bytes] = []
        size = 0
        pending: list[Message] = []
        while True:
            message = await receive()
            if message["type"] != "http.request":
                pending.append(message)  # a disconnect: the app sees it after the body
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.limit:
                await too_large(scope, receive, send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        pending.insert(0, {"type": "http.request", "body": b"".join(chunks), "more_body": False})

        async def replay() -> Message:
            return pending.pop(0) if pending else await receive()

        await self.app(scope, replay, send)


async def body(request: Request, fields: dict[str, type]) -> dict[str, Any]:
    """A JSON object body with only the named fields of the named types (400 otherwise)."""
    raw = await request.body()
    try:
        value = json.loads(raw or b"null")
    except (ValueError, UnicodeDecodeError) as exc:
        raise PlatformError(f"invalid request body: {exc}") from None
    if not isinstance(value, dict):
        raise PlatformError("invalid request body: expected a JSON object")
    unknown = sorted(set(value) - set(fields))
    if unknown:
        raise PlatformError(f'json: unknown field "{unknown[0]}"')
    for key, kind in fields.items():
        if key in value and value[key] is not None and not isinstance(value[key], kind):
            raise PlatformError(f"invalid request body: {key} must be {kind.__name__}")
    return value
