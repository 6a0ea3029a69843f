"""One observed MCP client session, whatever carries it (streamable HTTP, in-memory ASGI, stdio).

A transport only opens the read/write streams and says how its library errors read as
``InfraError``; everything above the streams lives here once: ``initialize``,
``tools/list`` and ``tools/call`` timed, their results parsed into ``CallResult`` and
scrubbed of the client's secrets (harness/scrub.py) before anything reads them, each
call handed to the observer as the ``session_call`` event body it becomes, and the
cause of a session that ended picked out of the SDK's nested task-group errors.

``observed`` is the one session boundary: every platform kind opens its sessions through
it, and it gives the session its platform's scrubber, so everything the server sends (its
name and version, its tools and their descriptions, its answers, and the stderr a failure
quotes) is scrubbed there once, whichever adapter reads it (docs/trust.md, "Secrets a
server echoes").
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import Any, TypeVar

import msgspec
from mcp.client.session import ClientSession

from benchledger.harness.errors import InfraError
from benchledger.harness.platforms.base import CallResult, Observer
from benchledger.harness.scrub import Scrubber, scrubber
from benchledger.ledger.codec import TooDeep, check_depth
from benchledger.ledger.events import SessionCallBody

# How a transport's failure reads: (the exception, what was being done) -> InfraError.
Fail = Callable[[BaseException, str], InfraError]
S = TypeVar("S", bound="ObservedSession")


def parse(text: str) -> Any:
    """``text`` as JSON, or None when it is not JSON (or nests past Python's recursion)."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def fits(structured: Any) -> Any:
    """``structured`` when the ledger can record it, else None: a server's structured
    content nested deeper than ``codec.MAX_DEPTH`` (docs/ledger-format.md) is kept out of
    the record, the call's text content still carries the answer."""
    if structured is None:
        return None
    try:
        check_depth(msgspec.json.encode(structured), "a structured tool answer")
    except (TooDeep, TypeError, ValueError):
        return None
    return structured


def leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside (nested) exception groups, in order; ``[exc]`` for one."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in leaves(sub)]
    return [exc]


def cause(
    group: BaseExceptionGroup,
    transport: tuple[type[BaseException], ...],
    fail: Callable[[BaseException], BaseException],
) -> BaseException:
    """What really ended a session: an InfraError or a cancellation as it is, then the
    caller's own exception as it is (anything not in ``transport``), else ``fail`` of the
    first transport failure."""
    found = leaves(group)
    for leaf in found:
        if isinstance(leaf, InfraError) or not isinstance(leaf, Exception):
            return leaf
    for leaf in found:
        if not isinstance(leaf, transport):
            return leaf
    return fail(found[0])


def scrubbed(exc: BaseException, scrub: Scrubber) -> BaseException:
    """``exc`` with its message scrubbed when it is an InfraError whose message holds a
    secret (an error may quote the server's answer, and infra errors are recorded)."""
    if isinstance(exc, InfraError) and scrub:
        message = scrub.text(exc.message)
        if message != exc.message:
            return InfraError(exc.kind, message, retryable=exc.retryable)
    return exc


def notify(
    observer: Observer | None,
    method: str,
    tool: str = "",
    arguments: dict[str, Any] | None = None,
    result: Any = None,
    *,
    is_error: bool = False,
    latency_ms: float = 0.0,
    content: tuple[dict[str, Any], ...] = (),
    structured: Any = None,
    scrub: Scrubber | None = None,
) -> None:
    """Hand ``observer`` (if any) the ``session_call`` body of one call, in its episode,
    its arguments, result and content scrubbed by ``scrub`` when given."""
    if observer is not None:
        if scrub is not None:
            s = scrub.value
            arguments, result, content, structured = (
                s(arguments), s(result), s(content), s(structured)
            )  # fmt: skip
        observer.session_call(
            SessionCallBody(
                episode=observer.episode,
                method=method,
                tool=tool,
                arguments=arguments if arguments is not None else {},
                result=result,
                is_error=is_error,
                latency_ms=round(latency_ms, 3),
                content=list(content),
                structured=fits(structured),
            )
        )


class ObservedSession:
    """An MCP client session whose calls are timed, scrubbed and reported to ``observer``.

    Subclasses say what a platform adds above MCP (a handle injected into calls, tools
    hidden from listings); ``fail`` translates a failed call into an InfraError.
    """

    hidden: frozenset[str] = frozenset()  # tools the harness calls itself, never listed

    def __init__(
        self,
        session: ClientSession,
        observer: Observer | None,
        *,
        fail: Fail,
    ) -> None:
        self._session = session
        self._observer = observer
        self._fail = fail
        # Set by ``observed``, the boundary every session is opened through, before ``open``.
        self.scrub = scrubber()
        self.email = ""
        self.server: dict[str, str] = {}

    def observe(self, *args: Any, **kwargs: Any) -> None:
        """Report one call to the observer, if any, scrubbed: notify's own parameter list."""
        notify(self._observer, *args, scrub=self.scrub, **kwargs)

    async def open(self) -> None:
        """The MCP handshake; remembers the server's self-reported name and version."""
        start = time.perf_counter()
        init = await self._session.initialize()
        ms = (time.perf_counter() - start) * 1000
        self.server = self.scrub.value(
            {"name": init.server_info.name, "version": init.server_info.version}
        )
        self.observe("initialize", result={"server": self.server}, latency_ms=ms)

    def schema(self, schema: dict[str, Any]) -> dict[str, Any]:
        """A tool's input schema as the agent sees it."""
        return dict(schema)

    def wire(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """A call's arguments as sent (what the platform adds to the agent's)."""
        return arguments

    def recorded_structured(self, got: CallResult, structured: Any) -> Any:
        """What a call's event records as ``structured``: the server's structured content."""
        return structured

    async def list_tools(self) -> list[dict[str, Any]]:
        """Tools as ``{name, description, input_schema}``, recorded as ``tools/list``."""
        start = time.perf_counter()
        listed = await self._session.list_tools()
        ms = (time.perf_counter() - start) * 1000
        tools = self.scrub.value([  # the agent, so every model request, sees these
            {"name": t.name, "description": t.description or "",
             "input_schema": self.schema(t.input_schema)}
            for t in listed.tools
            if t.name not in self.hidden
        ])  # fmt: skip
        self.observe("tools/list", result={"tools": [t["name"] for t in tools]}, latency_ms=ms)
        return tools

    async def _call(self, name: str, arguments: dict[str, Any]) -> tuple[CallResult, Any]:
        start = time.perf_counter()
        res = await self._session.call_tool(name, self.wire(arguments))
        ms = (time.perf_counter() - start) * 1000
        # Scrubbed before anything reads it: the agent, the grader and the record see the same.
        content = self.scrub.value(
            tuple(c.model_dump(mode="json", exclude_none=True) for c in res.content)
        )
        structured = self.scrub.value(res.structured_content)
        text = "\n".join(str(b["text"]) for b in content if "text" in b)
        data = structured if structured is not None else parse(text)
        return CallResult(text, bool(res.is_error), data, ms, content), structured

    async def call(self, name: str, arguments: dict[str, Any]) -> CallResult:
        """One ``tools/call``, not recorded nor translated (the caller records what it makes
        of it)."""
        return (await self._call(name, arguments))[0]

    async def recorded(self, name: str, arguments: dict[str, Any]) -> CallResult:
        """One ``tools/call``, recorded; failures are not translated."""
        got, structured = await self._call(name, arguments)
        self.observe("tools/call", name, arguments, is_error=got.is_error,
                     latency_ms=got.latency_ms, content=got.content,
                     structured=self.recorded_structured(got, structured))  # fmt: skip
        return got

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> CallResult:
        """Call a tool and record it; tool errors come back as results (``is_error``),
        transport failures raise InfraError."""
        try:
            return await self.recorded(name, arguments)
        except Exception as exc:
            raise scrubbed(self._fail(exc, f"tools/call {name}"), self.scrub) from None


@asynccontextmanager
async def observed(
    streams: AbstractAsyncContextManager[tuple[Any, Any]],
    client: Callable[[Any, Any], ClientSession],
    make: Callable[[ClientSession], S],
    *,
    transport: tuple[type[BaseException], ...],
    fail: Fail,
    opening: str,
    during: str,
    scrub: Scrubber | None = None,
) -> AsyncIterator[S]:
    """An opened session over the streams ``streams`` yields: ``client(read, write)`` is the
    SDK session, ``make`` wraps it; a failure to open raises ``fail(exc, opening)``, one
    that ends the session its ``cause`` (``fail(exc, during)`` for a transport failure),
    every InfraError scrubbed. ``scrub`` (the platform's secrets; none by default) is the
    session's: whatever the server sends is scrubbed by it before anything reads it."""
    scrub = scrub or scrubber()
    try:
        async with AsyncExitStack() as stack:
            try:
                read, write = await stack.enter_async_context(streams)
                session = make(await stack.enter_async_context(client(read, write)))
                session.scrub = scrub
                await session.open()
            except Exception as exc:
                raise scrubbed(fail(exc, opening), scrub) from None
            yield session
    except BaseExceptionGroup as group:
        # The SDK's task groups wrap whatever ended the session; surface the cause.
        raise scrubbed(cause(group, transport, lambda e: fail(e, during)), scrub) from None
