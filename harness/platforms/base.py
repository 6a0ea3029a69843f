"""The platform interface: a small core every platform implements, and per-suite capabilities.

``PlatformClient`` is the core: identities, sessions for agents, what the platform says it
is, close. A suite that needs more asks for a capability: the lifecycle suite for
``LifecycleCapability`` (check a capture, promote, check an update), the provenance suite
for ``RefCapability`` (resolve a cited ref), each a runtime-checkable protocol.
The runner never speaks a platform's admin API itself: an adapter performs each step,
records what it read through the unit's ``UnitRecorder``, and returns a small typed
observation the suite decides on. What "newest" means, which routes exist and how a
promotion is verified are the adapter's business, so a platform with another API slots in
unchanged; a platform without a capability gets those stages reported not applicable.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any, NamedTuple, Protocol, TypeVar, runtime_checkable

from benchledger.ledger.events import SessionCallBody
from benchledger.projections.suites.lifecycle.decisions import NOT_APPLICABLE
from benchledger.protocols.schema import Protocol as LifecycleProtocol

T = TypeVar("T")

STAGES = ("teach", "capture", "recall", "promote", "transfer", "update", "abstain")


class CallResult(NamedTuple):
    """One tool call's outcome: the text the agent sees, parsed JSON if any, and timing.

    ``content`` holds the result's content blocks as the server sent them; ``text`` is
    their text blocks joined by newlines (what an agent reads).
    """

    text: str
    is_error: bool
    data: Any
    latency_ms: float
    content: tuple[dict[str, Any], ...] = ()


class ReadBack(NamedTuple):
    """One admin API read: what was asked and what came back."""

    method: str
    path: str
    status: int
    body: Any
    latency_ms: float


class Observer(Protocol):
    """Receives every session call as it happens, as the event the runner records.

    ``episode`` is the stage the calls belong to; the session puts it in each body.
    """

    episode: str

    def session_call(self, body: SessionCallBody) -> None: ...


class SessionObserver(Observer, Protocol):
    """An observer that remembers the seqs of the events it recorded."""

    seqs: list[int]


class PlatformSession(Protocol):
    """An open session as one identity: list tools, call them (the handle is injected)."""

    email: str

    async def list_tools(self) -> list[dict[str, Any]]: ...

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> CallResult: ...


class Clock(Protocol):
    """Time as the runner sees it; injected so replay can run without the wall clock."""

    def time(self) -> float: ...

    def monotonic(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class UnitRecorder(Protocol):
    """Where an adapter records its reads and calls: the unit's stream (``harness.unit``)."""

    clock: Clock

    async def read(
        self,
        purpose: str,
        action: Callable[[], Awaitable[ReadBack]],
        observe: Callable[[ReadBack], Any],
    ) -> tuple[Any, int | None]:
        """Run one read (retried on infra errors), record it with ``observe(read)``."""
        ...

    def observer(self, purpose: str) -> SessionObserver:
        """An observer recording MCP calls the adapter makes on the runner's behalf."""
        ...

    async def retrying(self, purpose: str, action: Callable[[], Awaitable[T]]) -> T:
        """Run ``action``, recording and retrying retryable infra errors."""
        ...


async def declare_not_applicable(
    ev: UnitRecorder, platform: str, what: str, why: str
) -> int | None:
    """Record, as a read-back of ``platform``'s capabilities, that ``what`` does not apply on
    it and why; the seq, which the stage's decision cites (None: not recorded)."""

    async def declared() -> ReadBack:
        return ReadBack("DESCRIBE", f"{platform} capabilities", 200, {"what": what, "why": why},
                        0.0)  # fmt: skip

    _, seq = await ev.read(NOT_APPLICABLE, declared, lambda rb: dict(rb.body))
    return seq


class KnowledgePageTarget(NamedTuple):
    """The knowledge page a promotion to the ``knowledge_page`` sink should land as."""

    slug: str
    title: str
    summary: str
    body: str


class Target(NamedTuple):
    """What a protocol teaches and where its promotion should land."""

    entity_urn: str
    sink: str  # "datahub" (the entity's description) or "knowledge_page"
    fact: str
    page: KnowledgePageTarget | None = None
    correction: str = ""  # update protocols: the corrected fact (an adapter may look for it)


def target_of(p: LifecycleProtocol) -> Target:
    """Where a lifecycle protocol's fact lives and where its promotion should land."""
    page = None
    if p.page is not None:
        page = KnowledgePageTarget(p.page.slug, p.page.title, p.page.summary, p.page.body)
    return Target(p.entity_urn, p.sink, p.fact, page, p.update.fact if p.update else "")


class PollPolicy(NamedTuple):
    """How long to wait for an asynchronous capture to show, and how often to look."""

    timeout_s: float = 10.0
    interval_s: float = 0.25


class CaptureCheck(NamedTuple):
    """Whether a capture by the identity on the target showed, and which (the newest)."""

    found: str | None
    reason: str
    refs: list[int]


class Promotion(NamedTuple):
    """A promotion's steps as the platform answered them."""

    ok: bool
    reason: str
    refs: list[int]


class UpdateCheck(NamedTuple):
    """Whether a correction landed as a new capture, and what became of the original."""

    landed: str | None
    landed_reason: str
    landed_refs: list[int]
    original_status: str | None = None
    status_refs: tuple[int, ...] = ()

    @property
    def duplicated(self) -> bool:
        """The original is still live beside its correction."""
        return self.original_status in ("pending", "approved", "applied")


class RefCheck(NamedTuple):
    """Whether a cited ref exists on the platform, and what kind it is."""

    ref: str
    kind: str  # pack | vault | unknown
    exists: bool
    detail: str
    refs: list[int]


class Description(NamedTuple):
    """What a platform says it is and which lifecycle stages and sinks it supports."""

    name: str
    version: str
    stages: tuple[str, ...] = STAGES
    sinks: tuple[str, ...] = ("datahub", "knowledge_page")
    pack: str = ""  # the seed pack it serves, where it says so
    pack_hash: str = ""
    held: int = 0  # memories and changesets a shared platform already holds (earlier runs')


class PlatformClient(Protocol):
    """The core every memory platform implements: identities, sessions, describe, close.

    Infrastructure failures raise ``harness.errors.InfraError``. What a suite needs beyond
    this is a capability (``LifecycleCapability``, ``RefCapability``) the client may have;
    a suite asks with ``isinstance`` (the capabilities are runtime-checkable protocols).
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

    async def describe(self) -> Description:
        """Preflight: reach the platform as admin and as a pool identity; say what it is."""
        ...

    async def aclose(self) -> None:
        """Release what the client holds (connections); the platform itself stays."""
        ...


@runtime_checkable
class LifecycleCapability(Protocol):
    """What the lifecycle suite asks of a platform: capture, promotion and update checks.

    Every read made for a step is recorded through the ``UnitRecorder`` the step is given.
    """

    async def check_capture(
        self, ev: UnitRecorder, *, identity: int, target: Target, since: float, poll: PollPolicy
    ) -> CaptureCheck:
        """Find the newest pending capture by ``identity`` on the target since ``since``."""
        ...

    async def promote(self, ev: UnitRecorder, *, capture: str, target: Target) -> Promotion:
        """Promote a capture into shared knowledge and verify it landed in the sink."""
        ...

    async def check_update(
        self, ev: UnitRecorder, *, identity: int, original: str, target: Target, since: float
    ) -> UpdateCheck:
        """Did a correction land as a new live capture; is the original superseded?"""
        ...


@runtime_checkable
class RefCapability(Protocol):
    """What the provenance suite asks of a platform: resolve a ref an agent cited."""

    async def read_ref(self, ev: UnitRecorder, ref: str) -> RefCheck:
        """Resolve a ref an agent cited: a catalog entity or page (pack) or a memory (vault)."""
        ...
