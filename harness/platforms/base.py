"""The platform interface the runner depends on, so another platform slots in unchanged."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Any, NamedTuple, Protocol


class CallResult(NamedTuple):
    """One tool call's outcome: the text the agent sees, parsed JSON if any, and timing."""

    text: str
    is_error: bool
    data: Any
    latency_ms: float


class ReadBack(NamedTuple):
    """One admin API read: what was asked and what came back."""

    method: str
    path: str
    status: int
    body: Any
    latency_ms: float


class Observer(Protocol):
    """Receives every session call as it happens (the runner records them as events)."""

    def session_call(
        self,
        method: str,
        tool: str,
        arguments: dict[str, Any],
        result: Any,
        is_error: bool,
        latency_ms: float,
    ) -> None: ...


class PlatformSession(Protocol):
    """An open session as one identity: list tools, call them (the handle is injected)."""

    email: str

    async def list_tools(self) -> list[dict[str, Any]]: ...

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> CallResult: ...


class PlatformClient(Protocol):
    """Open sessions as pool identities; read back and promote over the admin API."""

    pool_size: int

    def session(
        self, pool_index: int | None, observer: Observer | None = None
    ) -> AbstractAsyncContextManager[PlatformSession]: ...

    async def rest(
        self, method: str, path: str, *, params: dict[str, Any] | None = None, body: Any = None
    ) -> ReadBack: ...

    async def aclose(self) -> None: ...
