"""A unit's recorded interactions, served back in their recorded order.

The tape holds what the episode loop and the platform adapter exchanged with the outside:
session calls, successful model calls, admin REST read-backs and infrastructure errors.
Replay takes them one at a time; asking for something the recording does not hold next
is a divergence, never a live call. A recorded infrastructure error is raised again
where it happened, so retries replay exactly as they ran.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from benchledger.harness.errors import HarnessError, InfraError
from benchledger.harness.models import CanonicalRequest, Divergence, ModelObserver
from benchledger.harness.models.request import request_hash, request_json
from benchledger.harness.models.response import ModelResponse
from benchledger.ledger.events import (
    Body,
    InfraErrorBody,
    ModelCallBody,
    ReadBackBody,
    SessionCallBody,
)
from benchledger.replay.log_transport import LogTransport

# Read-backs made over REST; others (``MCP``) were computed from session calls on the tape.
HTTP_METHODS: Final = frozenset({"GET", "PUT", "POST", "PATCH", "DELETE", "HEAD"})
# Read-backs of files on disk (basic-memory's Markdown notes): on the tape, like REST reads.
FILE_METHODS: Final = frozenset({"DISK"})


class ToolDivergence(HarnessError):
    """Replay asked the platform for something other than what the recording holds next.

    ``expected`` describes the recorded interaction (None when the recording ended),
    ``actual`` what replay asked for; ``seq`` is the recorded event's (-1: none left).
    """

    def __init__(self, stream: str, seq: int, expected: Any, actual: Any, reason: str) -> None:
        self.stream = stream
        self.seq = seq
        self.expected = expected
        self.actual = actual
        self.reason = reason
        where = f"seq {seq}" if seq >= 0 else "the end of the recording"
        super().__init__(
            f"replay of {stream} diverged at {where}: {reason}; the agent or the platform "
            "behaves differently from the recorded run: compare expected and actual"
        )


class RequestDivergence(Divergence):
    """A model request other than the one recorded at this point of the unit (``seq``)."""

    def __init__(
        self,
        stream: str,
        seq: int,
        request_hash: str,
        expected: ModelCallBody,
        position: int,
        request: Any,
    ) -> None:
        super().__init__(
            request_hash,
            expected.request_hash,
            position,
            reason=f"it differs from the request recorded at {stream} seq {seq}",
            request=request,
            expected=expected.request,
        )
        self.stream = stream
        self.seq = seq


def describe(body: Body | None) -> Any:
    """A recorded interaction as the short dict a divergence shows."""
    if isinstance(body, SessionCallBody):
        return {
            "kind": "session_call",
            "method": body.method,
            "tool": body.tool,
            "arguments": body.arguments,
        }
    if isinstance(body, ReadBackBody):
        return {"kind": "read_back", "method": body.method, "path": body.path}
    if isinstance(body, ModelCallBody):
        return {"kind": "model_call", "request_hash": body.request_hash}
    if isinstance(body, InfraErrorBody):
        return {"kind": "infra_error", "stage": body.stage, "error": body.error}
    return None


def _interaction(body: Body, platform: bool) -> bool:
    if isinstance(body, ModelCallBody):
        return not body.error  # failed attempts were retried inside the transport
    if not platform:
        return False
    if isinstance(body, ReadBackBody):
        return body.method in HTTP_METHODS or body.method in FILE_METHODS
    return isinstance(body, SessionCallBody | InfraErrorBody)


class Tape:
    """The interactions of one recorded unit stream, with a cursor.

    ``platform=False`` keeps only the model calls (tools then come from a live platform).
    """

    def __init__(
        self, stream: str, events: Sequence[tuple[int, Body]], *, platform: bool = True
    ) -> None:
        self.stream = stream
        self.items = [(s, b) for s, b in events if _interaction(b, platform)]
        self.pos = 0

    def peek(self, offset: int = 0) -> tuple[int, Body] | None:
        i = self.pos + offset
        return self.items[i] if i < len(self.items) else None

    def take(self, kind: type[Body], actual: Any) -> tuple[int, Body]:
        """The next interaction, which must be a ``kind``; a recorded infra error is raised."""
        item = self.peek()
        if item is None:
            raise ToolDivergence(self.stream, -1, None, actual, "the recording holds nothing more")
        seq, body = item
        if isinstance(body, InfraErrorBody):
            self.pos += 1
            raise InfraError(body.error, body.message, retryable=body.retryable)
        if not isinstance(body, kind):
            raise ToolDivergence(
                self.stream,
                seq,
                describe(body),
                actual,
                f"expected a {body.KIND}, replay asked for a {kind.KIND}",
            )
        self.pos += 1
        return item

    def left(self) -> list[tuple[int, Body]]:
        """Interactions never replayed."""
        return self.items[self.pos :]


class TapeTransport:
    """Model responses from the log (``LogTransport``), in the tape's order.

    A request must be the one recorded at this point of the unit; otherwise ``Divergence``
    with the recorded request as ``expected``. Never makes a live call.
    """

    name = "log"

    def __init__(self, tape: Tape, recorded: Sequence[ModelCallBody]) -> None:
        self.tape = tape
        self.log = LogTransport(recorded)
        self.served = 0

    async def complete(
        self,
        request: CanonicalRequest,
        *,
        observer: ModelObserver | None = None,
        hint: Any = None,
    ) -> ModelResponse:
        h = request_hash(request)
        seq, body = self.tape.take(ModelCallBody, {"kind": "model_call", "request_hash": h})
        assert isinstance(body, ModelCallBody)
        if body.request_hash != h:
            raise RequestDivergence(
                self.tape.stream, seq, h, body, self.served, request_json(request)
            )
        self.served += 1
        return await self.log.complete(request, observer=observer, hint=hint)
