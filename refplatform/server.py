"""The refplatform ASGI app: MCP over streamable HTTP plus the admin REST routes.

Every request under ``/mcp`` and ``/api`` needs ``Authorization: Bearer KEY``: a
missing or unknown key gets 401, a pool key on an admin route 403.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import socket
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from refplatform.errors import PlatformError
from refplatform.identity import Identity, Keyring, pool_key
from refplatform.platform import VERSION, Platform, parse_time
from refplatform.sql import DEFAULT_ROWS, SqlEngine

IDENTITY_KEY = "refplatform.identity"
_GUARDED = ("/mcp", "/api/")


class AuthGate:
    """ASGI middleware: resolve the bearer key to an identity, or answer 401."""

    def __init__(self, app: ASGIApp, keyring: Keyring) -> None:
        self.app = app
        self.keyring = keyring

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].startswith(_GUARDED):
            headers = {
                k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]
            }
            who = self.keyring.identify(headers.get("authorization"))
            if who is None:
                response = JSONResponse(
                    {"error": "missing or unknown bearer key"},
                    status_code=401,
                    headers={"WWW-Authenticate": "Bearer"},
                )
                await response(scope, receive, send)
                return
            scope[IDENTITY_KEY] = who
        await self.app(scope, receive, send)


def _tool_identity(keyring: Keyring, ctx: Context) -> Identity:
    who = keyring.identify((ctx.headers or {}).get("authorization"))
    if who is None:  # the gate already refused these; kept for direct ASGI use
        raise ToolError("unauthorized: missing or unknown bearer key")
    return who


def build_app(platform: Platform, keyring: Keyring, sql: SqlEngine | None = None) -> ASGIApp:
    """The whole platform as one ASGI app (MCP at ``/mcp``, REST under ``/api/v1``)."""
    engine = sql or SqlEngine()
    mcp = MCPServer(
        "benchledger-refplatform",
        version=VERSION,
        instructions="A memory platform: call platform_info first and pass its session_id.",
        log_level="WARNING",
    )

    def guard(ctx: Context, session_id: str | None) -> Identity:
        who = _tool_identity(keyring, ctx)
        try:
            platform.check_session(who, session_id)
        except PlatformError as exc:
            raise ToolError(exc.message) from None
        return who

    def run(fn: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        try:
            return fn()
        except PlatformError as exc:
            prefix = "forbidden: " if exc.status == 403 else ""
            raise ToolError(prefix + exc.message) from None

    @mcp.tool(description="Start a session: returns the session_id every other tool needs.")
    def platform_info(ctx: Context) -> dict[str, Any]:
        return platform.open_session(_tool_identity(keyring, ctx))

    @mcp.tool(
        description="Save knowledge to memory. Types business_knowledge, schema_entity and "
        "operational_rule become insights pending review; link the entities it concerns."
    )
    def memory_capture(
        type: str,
        content: str,
        ctx: Context,
        category: str = "",
        entity_urns: list[str] | None = None,
        session_id: str = "",
    ) -> dict[str, Any]:
        who = guard(ctx, session_id)
        return run(lambda: platform.capture(
            who, type=type, content=content, category=category, entity_urns=entity_urns or []
        ))  # fmt: skip

    @mcp.tool(
        description="List, update or forget your own memory records (action: list|update|forget)."
    )
    def memory_manage(
        action: str,
        ctx: Context,
        id: str = "",
        content: str = "",
        limit: int = 50,
        session_id: str = "",
    ) -> dict[str, Any]:
        who = guard(ctx, session_id)
        return run(lambda: platform.manage(who, action=action, id=id, content=content, limit=limit))

    @mcp.tool(
        description="Search memory (yours), insights (applied, shared), knowledge_pages and "
        "catalog."
    )
    def search(
        intent: str,
        ctx: Context,
        entity_urns: list[str] | None = None,
        sources: list[str] | None = None,
        limit: int = 10,
        session_id: str = "",
    ) -> dict[str, Any]:
        who = guard(ctx, session_id)
        return run(lambda: platform.search(
            who, intent=intent, entity_urns=entity_urns or [], sources=sources or [], limit=limit
        ))  # fmt: skip

    @mcp.tool(
        description="Admin: approve, reject, apply (sink datahub or knowledge_page), rollback, "
        "list_changesets."
    )
    def apply_knowledge(
        action: str,
        ctx: Context,
        entity_urn: str = "",
        insight_ids: list[str] | None = None,
        confirm: bool = False,
        sink: str = "",
        changes: list[dict[str, Any]] | None = None,
        page: dict[str, Any] | None = None,
        changeset_id: str = "",
        review_notes: str = "",
        session_id: str = "",
    ) -> dict[str, Any]:
        who = guard(ctx, session_id)
        ids = insight_ids or []

        def act() -> dict[str, Any]:
            platform._admin(who)
            if action == "apply":
                return platform.apply(who, entity_urn=entity_urn, insight_ids=ids, sink=sink,
                                      confirm=confirm, changes=changes, page=page)  # fmt: skip
            if action in ("approve", "reject"):
                return platform.review(
                    who, action=action, insight_ids=ids, review_notes=review_notes
                )
            if action == "rollback":
                if not changeset_id:
                    raise PlatformError("changeset_id: required for rollback")
                return platform.rollback(who, changeset_id)
            if action == "list_changesets":
                return platform.changesets(entity_urn=entity_urn)
            raise PlatformError(
                f"action: {action!r}; use apply, approve, reject, rollback or list_changesets"
            )

        return run(act)

    @mcp.tool(description="A catalog entity (dataset) with its description and columns.")
    def datahub_get_entity(urn: str, ctx: Context, session_id: str = "") -> dict[str, Any]:
        guard(ctx, session_id)
        return run(lambda: platform.entity(urn))

    @mcp.tool(description="List the knowledge pages (slug, title, summary).")
    def list_knowledge_pages(ctx: Context, session_id: str = "") -> dict[str, Any]:
        guard(ctx, session_id)
        return platform.pages()

    @mcp.tool(description="Read one knowledge page by slug.")
    def get_knowledge_page(slug: str, ctx: Context, session_id: str = "") -> dict[str, Any]:
        guard(ctx, session_id)
        return run(lambda: platform.page(slug))

    @mcp.tool(description="List the SQL tables of the dataset.")
    def list_tables(ctx: Context, session_id: str = "") -> dict[str, Any]:
        guard(ctx, session_id)
        return {"tables": engine.tables()}

    @mcp.tool(description="Columns of one SQL table.")
    def describe_table(table: str, ctx: Context, session_id: str = "") -> dict[str, Any]:
        guard(ctx, session_id)
        return run(lambda: engine.describe(table))

    @mcp.tool(
        description="Run one read-only SELECT (SQLite dialect) over the dataset; money columns "
        "are integer cents."
    )
    def query_sql(
        sql: str, ctx: Context, limit: int = DEFAULT_ROWS, session_id: str = ""
    ) -> dict[str, Any]:
        guard(ctx, session_id)
        return run(lambda: engine.query(sql, limit))

    _rest_routes(mcp, platform)
    return AuthGate(mcp.streamable_http_app(json_response=True), keyring)


Handler = Callable[[Request], Awaitable[Response]]


def _rest(admin: bool) -> Callable[[Callable[[Request], Awaitable[Any]]], Handler]:
    """Wrap a REST handler: admin check, PlatformError -> status + JSON error."""

    def wrap(fn: Callable[[Request], Awaitable[Any]]) -> Handler:
        async def handler(request: Request) -> Response:
            who: Identity = request.scope[IDENTITY_KEY]
            if admin and not who.admin:
                return JSONResponse({"error": f"{who.email} is not an admin"}, status_code=403)
            try:
                return JSONResponse(await fn(request))
            except PlatformError as exc:
                return JSONResponse({"error": exc.message}, status_code=exc.status)

        return handler

    return wrap


def _int(request: Request, name: str, default: int) -> int:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise PlatformError(f"{name}: {raw!r} is not a whole number") from None


def _time(request: Request, name: str) -> int | None:
    raw = request.query_params.get(name)
    return parse_time(raw, name) if raw else None


def _rest_routes(mcp: MCPServer, platform: Platform) -> None:
    base = "/api/v1/admin/knowledge"

    @mcp.custom_route("/healthz", methods=["GET"])
    async def healthz(request: Request) -> Response:
        return JSONResponse({"ok": True})

    @mcp.custom_route(f"{base}/insights", methods=["GET"])
    @_rest(admin=True)
    async def insights(request: Request) -> Any:
        q = request.query_params
        return platform.insights(
            status=q.get("status", ""),
            entity_urn=q.get("entity_urn", ""),
            captured_by=q.get("captured_by", ""),
            since=_time(request, "since"),
            until=_time(request, "until"),
            page=_int(request, "page", 1),
            per_page=_int(request, "per_page", 50),
        )

    @mcp.custom_route(f"{base}/insights/{{insight_id}}", methods=["GET"])
    @_rest(admin=True)
    async def insight(request: Request) -> Any:
        return platform.insight(request.path_params["insight_id"])

    @mcp.custom_route(f"{base}/insights/{{insight_id}}/status", methods=["PUT"])
    @_rest(admin=True)
    async def status(request: Request) -> Any:
        body = await _body(request)
        new = body.get("status")
        notes = body.get("review_notes", "")
        if not isinstance(new, str) or not isinstance(notes, str):
            raise PlatformError("status and review_notes must be text")
        return platform.set_status(request.path_params["insight_id"], new, notes)

    @mcp.custom_route(f"{base}/changesets", methods=["GET"])
    @_rest(admin=True)
    async def changesets(request: Request) -> Any:
        return platform.changesets(
            entity_urn=request.query_params.get("entity_urn", ""),
            page=_int(request, "page", 1),
            per_page=_int(request, "per_page", 50),
        )

    @mcp.custom_route(f"{base}/changesets/{{changeset_id}}/rollback", methods=["POST"])
    @_rest(admin=True)
    async def rollback(request: Request) -> Any:
        return platform.rollback(request.scope[IDENTITY_KEY], request.path_params["changeset_id"])

    @mcp.custom_route("/api/v1/portal/knowledge-pages", methods=["GET"])
    @_rest(admin=False)
    async def pages(request: Request) -> Any:
        return platform.pages()

    @mcp.custom_route("/api/v1/portal/knowledge-pages/{slug}", methods=["GET"])
    @_rest(admin=False)
    async def page(request: Request) -> Any:
        return platform.page(request.path_params["slug"])


async def _body(request: Request) -> dict[str, Any]:
    raw = await request.body()
    try:
        body = json.loads(raw or b"null")
    except (ValueError, UnicodeDecodeError) as exc:
        raise PlatformError(f"request body is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise PlatformError("request body must be a JSON object")
    return body


def quiet_logs() -> None:
    """Silence per-request INFO logs of the MCP SDK, its HTTP stack and uvicorn."""
    for name in ("mcp", "httpx2", "httpx", "httpcore", "httpcore2", "uvicorn", "uvicorn.error",
                 "uvicorn.access", "sse_starlette"):  # fmt: skip
        logging.getLogger(name).setLevel(logging.WARNING)


class LoopbackServer:
    """Serve an ASGI app with uvicorn on a pre-bound port, in a background thread.

    The socket is bound and listening before the thread starts, so clients may connect
    at once: the kernel queues them until the server accepts.
    """

    def __init__(self, app: ASGIApp, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # Accepted sockets inherit this; without it, small replies wait on delayed ACKs (~40 ms).
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            self._sock.bind((host, port))
        except OSError as exc:
            self._sock.close()
            raise PlatformError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
        self._sock.listen(512)
        self.host, self.port = self._sock.getsockname()[:2]
        self.url = f"http://{host}:{self.port}"
        quiet_logs()
        config = uvicorn.Config(
            app, log_level="warning", access_log=False, timeout_graceful_shutdown=2, lifespan="on"
        )
        self._server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Serve in a daemon thread."""
        self._thread = threading.Thread(target=self.serve_forever, name="loopback", daemon=True)
        self._thread.start()

    def serve_forever(self) -> None:
        """Serve in the calling thread until stopped (Ctrl-C stops it in the main thread)."""
        asyncio.run(self._server.serve(sockets=[self._sock]))

    def stop(self) -> None:
        """Stop serving and wait for the server thread."""
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._sock.close()


class RunningPlatform:
    """A refplatform on a loopback port: started in a background thread unless told not to."""

    def __init__(
        self,
        platform: Platform | None = None,
        *,
        pool_size: int = 64,
        admin_key: str | None = None,
        pool_base: str | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        background: bool = True,
    ) -> None:
        self.platform = platform or Platform()
        self.admin_key = admin_key or f"bl-admin-{secrets.token_hex(8)}"
        self.pool_base = pool_base or f"bl-key-{secrets.token_hex(4)}"
        self.pool_size = pool_size
        self.keyring = Keyring(self.admin_key, self.pool_base, pool_size)
        self.server = LoopbackServer(build_app(self.platform, self.keyring), host=host, port=port)
        self.url = self.server.url
        self.port = self.server.port
        if background:
            self.server.start()

    @property
    def mcp_url(self) -> str:
        return f"{self.url}/mcp"

    def key(self, index: int) -> str:
        """The API key of pool identity ``index`` (1-based)."""
        return pool_key(self.pool_base, index)

    def stop(self) -> None:
        self.server.stop()
        self.platform.close()

    def __enter__(self) -> RunningPlatform:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
