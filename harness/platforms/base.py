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


class Insight(NamedTuple):
    """An insight as the review API shows it."""

    id: str
    status: str
    content: str = ""


class PlatformClient(Protocol):
    """What the runner needs from a memory platform; a new platform implements this.

    Admin reads return the ``ReadBack`` they made so the runner can record it; MCP
    calls made on the runner's behalf go to ``observer``. Infrastructure failures
    raise ``harness.errors.InfraError``.
    """

    pool_size: int

    def email(self, pool_index: int) -> str:
        """The identity (as the platform records it) behind pool index ``pool_index``."""
        ...

    def session(
        self, pool_index: int | None, observer: Observer | None = None
    ) -> AbstractAsyncContextManager[PlatformSession]:
        """A fresh session as pool identity ``pool_index`` (None: the admin/reviewer)."""
        ...

    async def insights(
        self, *, captured_by: str, entity_urn: str, since: float, status: str = ""
    ) -> tuple[list[Insight], ReadBack]:
        """Insights by one identity on one entity, created since ``since`` (epoch seconds)."""
        ...

    async def insight(self, insight_id: str) -> tuple[Insight | None, ReadBack]:
        """One insight's current status (None if the platform does not know it)."""
        ...

    async def approve(self, insight_id: str, notes: str) -> tuple[bool, ReadBack]:
        """Approve a pending insight as the reviewer."""
        ...

    async def apply(
        self,
        insight_id: str,
        *,
        entity_urn: str,
        sink: str,
        fact: str,
        page: dict[str, str] | None,
        observer: Observer | None,
    ) -> tuple[bool, str]:
        """Apply an approved insight to a sink; (accepted, the platform's answer)."""
        ...

    async def changeset_lists(self, insight_id: str, entity_urn: str) -> tuple[bool, ReadBack]:
        """Whether a live changeset on the entity lists the insight."""
        ...

    async def read_sink(
        self, sink: str, entity_urn: str, observer: Observer | None
    ) -> tuple[str, ReadBack | None]:
        """The sink's current text (entity description, or the knowledge-page listing)."""
        ...

    async def aclose(self) -> None: ...
