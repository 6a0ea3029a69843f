"""The transport seam: a transport turns a canonical request into a response.

Real transports (Anthropic, OpenAI-compatible), the fake and the replay log all
implement ``ModelTransport``. Every failed attempt a transport retries or gives up
on goes to the ``ModelObserver``, so each becomes an event; giving up raises
``harness.errors.InfraError``.
"""

from __future__ import annotations

from typing import Any, Final, Protocol

import msgspec

from benchledger.harness.models.request import CanonicalRequest
from benchledger.harness.models.response import ModelResponse

FAILURE_KINDS: Final = ("rate_limited", "overloaded", "http_5xx", "timeout", "transport", "refused")


class AttemptFailure(msgspec.Struct, frozen=True):
    """One failed attempt of a model call. ``kind`` is one of ``FAILURE_KINDS``."""

    attempt: int  # 0-based attempt number within the call
    kind: str
    message: str
    status: int = 0  # HTTP status, 0 when there was no response
    retry_after_s: float = 0.0  # the server's Retry-After, or the backoff chosen
    latency_ms: float = 0.0


class ModelObserver(Protocol):
    """Told about every failed attempt (the episode recorder turns each into an event)."""

    def attempt_failed(self, request: CanonicalRequest, failure: AttemptFailure) -> None: ...


class ModelTransport(Protocol):
    """Completes canonical requests; ``hint`` is context outside the request (fakes read it)."""

    name: str

    async def complete(
        self,
        request: CanonicalRequest,
        *,
        observer: ModelObserver | None = None,
        hint: Any = None,
    ) -> ModelResponse: ...
