"""The refplatform ASGI app and the ways to serve it.

MCP (streamable HTTP, JSON responses) is served at the base URL itself, as the peer
serves it, and at ``/mcp``; the admin and portal REST routes live under ``/api/v1``.
Every request but ``GET /healthz`` needs an API key (``X-API-Key`` or ``Authorization:
Bearer``); a missing or unknown key is a 401 problem with ``WWW-Authenticate``.
"""

from __future__ import annotations

import asyncio
import logging
import math
import secrets
import socket
import threading
from typing import Any, Final

import anyio
import httpx2
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from benchledger.refplatform import admin_rest, portal, rest, tools
from benchledger.refplatform.auth import Identity, Keyring, pool_key
from benchledger.refplatform.embedder import Embedder
from benchledger.refplatform.errors import PlatformError
from benchledger.refplatform.packs import Pack
from benchledger.refplatform.platform import NAME, VERSION, Platform

_LOOPBACK = ("127.0.0.1", "localhost", "::1")
# MCP transport sessions (the SDK's): one idle this long (no request in flight) is closed,
# its id then answers 404; past this many open, a new one is refused with 503 and a
# JSON-RPC error ("Too many open sessions") until one ends. A session costs ~40 KiB.
SESSION_IDLE_S: Final = 600.0
MAX_SESSIONS: Final = 1000


class AuthGate:
    """ASGI middleware: resolve the API key to an identity, or answer a 401 problem."""

    def __init__(self, app: ASGIApp, keyring: Keyring) -> None:
        self.app = app
        self.keyring = keyring

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] != "/healthz":
            headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
            who = self.keyring.identify(headers)
            if who is None:
                response = rest.problem(401, "authentication required")
                response.headers["WWW-Authenticate"] = "Bearer"
                await response(scope, receive, send)
                return
            scope[rest.IDENTITY_KEY] = who
        await self.app(scope, receive, send)


def _caller(keyring: Keyring, ctx: ServerRequestContext[Any]) -> Identity:
    headers = getattr(ctx.request, "headers", None) or {}
    who = keyring.identify(dict(headers))
    if who is None:  # the gate refused these already; kept for direct ASGI use
        raise PlatformError("authentication required", status=401)
    return who


def mcp_server(platform: Platform, keyring: Keyring) -> Server[Any]:
    """The MCP server: ``tools/list`` per caller, ``tools/call`` through the tool chain."""

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools.listing(_caller(keyring, ctx)))

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        who = _caller(keyring, ctx)
        # Tool handlers are synchronous (SQLite, DuckDB, an embedder): run them off the loop.
        return await anyio.to_thread.run_sync(
            tools.call_tool, platform, who, params.name, params.arguments
        )

    server: Server[Any] = Server(
        NAME,
        version=VERSION,
        instructions="A data platform with memory: call platform_info first and pass its "
        "session_id on every other call; call search before querying.",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )
    # The SDK's OpenTelemetry span per message, which it says to drop from this list to opt
    # out: refplatform exports no traces, and the spans cost every request.
    server.middleware = [
        m for m in server.middleware if type(m).__name__ != "OpenTelemetryMiddleware"
    ]
    return server


def build_app(
    platform: Platform,
    keyring: Keyring,
    *,
    host: str = "127.0.0.1",
    max_sessions: int = MAX_SESSIONS,
    session_idle_s: float = SESSION_IDLE_S,
    max_body_bytes: int = rest.MAX_BODY_BYTES,
) -> ASGIApp:
    """The whole platform as one ASGI app (MCP at ``/`` and ``/mcp``, REST under ``/api/v1``).

    Bounded: request bodies at ``max_body_bytes`` (413), MCP sessions at ``max_sessions``
    open (503) and ``session_idle_s`` idle (closed).
    """
    return _build(
        platform,
        keyring,
        host=host,
        max_sessions=max_sessions,
        session_idle_s=session_idle_s,
        max_body_bytes=max_body_bytes,
    )[0]


def _build(
    platform: Platform,
    keyring: Keyring,
    *,
    host: str,
    max_sessions: int,
    session_idle_s: float,
    max_body_bytes: int,
) -> tuple[ASGIApp, StreamableHTTPSessionManager]:
    """The app of ``build_app`` and its MCP session manager (whose ``run()`` is its lifespan)."""
    security = None
    if host in _LOOPBACK:
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
            allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
        )
    sessions = StreamableHTTPSessionManager(
        app=mcp_server(platform, keyring),
        json_response=True,
        security_settings=security,
        session_idle_timeout=session_idle_s,
        max_sessions=max_sessions,
        max_request_body_size=max_body_bytes,  # the SDK's own check, streamed, 413
    )
    mcp_app = StreamableHTTPASGIApp(sessions)

    async def healthz(request: Request) -> Response:
        return JSONResponse({"ok": True})

    app = Starlette(
        routes=[
            Route("/healthz", healthz, methods=["GET"]),
            *admin_rest.routes(platform),
            *portal.routes(platform),
            Route("/", mcp_app),
            Route("/mcp", mcp_app),
        ],
        lifespan=lambda _app: sessions.run(),
    )
    return AuthGate(rest.BodyLimit(app, max_body_bytes, prefix="/api/"), keyring), sessions


def quiet_logs() -> None:
    """Silence per-request INFO logs of the MCP SDK, its HTTP stack and uvicorn."""
    for name in (
        "mcp",
        "httpx2",
        "httpx",
        "httpcore",
        "httpcore2",
        "uvicorn",
        "uvicorn.error",
        "uvicorn.access",
        "sse_starlette",
    ):
        logging.getLogger(name).setLevel(logging.WARNING)
    error_log = logging.getLogger("uvicorn.error")
    if not any(isinstance(f, _NotAStopError) for f in error_log.filters):
        error_log.addFilter(_NotAStopError())


class _NotAStopError(logging.Filter):
    """Drop uvicorn's report of the ASGI lifespan task cancelled at Ctrl-C: a normal stop,
    which would otherwise print a traceback after the server already said it stopped."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, asyncio.CancelledError | KeyboardInterrupt)


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
        import uvicorn  # here: the in-memory platform (a run's default) serves without it

        config = uvicorn.Config(
            app, log_level="warning", access_log=False, timeout_graceful_shutdown=2, lifespan="on",
            use_colors=False,  # the CLI writes stderr inert (ledger/inert.py): no ANSI colours
        )  # fmt: skip
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
        pack: Pack | None = None,
        pool_admin: bool = True,
        max_sessions: int = MAX_SESSIONS,
        session_idle_s: float = SESSION_IDLE_S,
    ) -> None:
        self.platform = platform or Platform(pack=pack)
        self.admin_key = admin_key or f"bl-admin-{secrets.token_hex(8)}"
        self.pool_base = pool_base or f"bl-key-{secrets.token_hex(4)}"
        self.pool_size = pool_size
        try:
            self.keyring = Keyring(self.admin_key, self.pool_base, pool_size, pool_admin=pool_admin)
            app = build_app(
                self.platform,
                self.keyring,
                host=host,
                max_sessions=max_sessions,
                session_idle_s=session_idle_s,
            )
            self.server = LoopbackServer(app, host=host, port=port)
        except BaseException:
            if platform is None:
                self.platform.close()
            raise
        self.url = self.server.url
        self.port = self.server.port
        if background:
            self.server.start()

    @property
    def mcp_url(self) -> str:
        """The MCP endpoint (the base URL itself also serves MCP)."""
        return f"{self.url}/mcp"

    def key(self, index: int) -> str:
        """The API key of pool identity ``index`` (1-based)."""
        return pool_key(self.pool_base, index)

    def stop(self) -> None:
        """Stop serving and close the platform."""
        self.server.stop()
        self.platform.close()

    def __enter__(self) -> RunningPlatform:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


# The in-memory platform's base URL: a loopback host (the app's DNS-rebinding check is the
# served one's) with port 0, which no socket ever has, so it names no listening server.
IN_MEMORY_URL: Final = "http://127.0.0.1:0"


class _Bounded(httpx2.ASGITransport):
    """httpx2's ASGI transport with the client's read timeout, as a socket would bound it,
    and a server error as the served app answers it (HTTP 500), not raised into the client."""

    def __init__(self, app: ASGIApp) -> None:
        super().__init__(app, raise_app_exceptions=False)

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        timeout = request.extensions.get("timeout", {}).get("read")
        with anyio.move_on_after(timeout if timeout is not None else math.inf) as scope:
            return await super().handle_async_request(request)
        assert scope.cancelled_caught
        raise httpx2.ReadTimeout("the in-memory platform did not answer in time", request=request)


class InMemoryPlatform:
    """A refplatform spoken to over MCP's streamable HTTP without a socket (async context).

    The same ASGI app as ``RunningPlatform`` serves, on the caller's event loop, the HTTP
    requests of clients that use ``transport``: each MCP message and REST call is one
    HTTP request and answer, as over loopback, without the TCP and HTTP/1.1 framing (and
    without the server thread, whose event loop contended with the caller's for the GIL).
    """

    def __init__(
        self,
        *,
        pool_size: int,
        admin_key: str,
        pool_base: str,
        pack: Pack | None = None,
        max_sessions: int = MAX_SESSIONS,
        session_idle_s: float = SESSION_IDLE_S,
        embedder: Embedder | None = None,
    ) -> None:
        self.platform = Platform(pack=pack, embedder=embedder)
        try:
            keyring = Keyring(admin_key, pool_base, pool_size)
            app, self._sessions = _build(
                self.platform,
                keyring,
                host="127.0.0.1",
                max_sessions=max_sessions,
                session_idle_s=session_idle_s,
                max_body_bytes=rest.MAX_BODY_BYTES,
            )
        except BaseException:
            self.platform.close()
            raise
        self.url = IN_MEMORY_URL
        self.transport: httpx2.AsyncBaseTransport = _Bounded(app)
        self._running: Any = None

    async def __aenter__(self) -> InMemoryPlatform:
        try:
            # Before anything is served: a part that cannot start fails here, in one line.
            await anyio.to_thread.run_sync(self.platform.ready)
            self._running = self._sessions.run()
            await self._running.__aenter__()
        except BaseException:
            self.platform.close()
            raise
        return self

    async def __aexit__(self, *exc: Any) -> None:
        try:
            # Not handed the caller's exception: the manager's task group would wrap it in
            # an ExceptionGroup; it goes on as it was raised once the sessions are stopped.
            await self._running.__aexit__(None, None, None)
        finally:
            self.platform.close()
