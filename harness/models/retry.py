"""The provider transports' attempt loop: classify a failed attempt, report it, back off, retry.

Provider SDKs retry silently; ours are told not to, so that every failed attempt
reaches the ``ModelObserver`` (and becomes a ``model_call`` event with its error)
before the next one starts. Giving up raises ``harness.errors.InfraError``.
"""

from __future__ import annotations

import asyncio
import email.utils
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Final

from benchledger.harness.errors import InfraError
from benchledger.harness.models.limiter import RateLimiter, estimate_tokens, used_tokens
from benchledger.harness.models.request import CanonicalRequest
from benchledger.harness.models.response import ModelResponse
from benchledger.harness.models.transport import AttemptFailure, ModelObserver
from benchledger.harness.scrub import scrubber

Sleep = Callable[[float], Awaitable[None]]

REDACTED: Final = "<redacted>"


class AttemptError(Exception):
    """One attempt failed; raised by a transport's send function, already translated.

    ``kind`` is one of ``FAILURE_KINDS``; ``retry_after_s`` is the server's Retry-After
    (None when it sent none).
    """

    def __init__(
        self,
        kind: str,
        message: str,
        *,
        retryable: bool,
        status: int = 0,
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message
        self.retryable = retryable
        self.status = status
        self.retry_after_s = retry_after_s


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to retry: exponential backoff, bounded; Retry-After honoured."""

    max_retries: int = 4
    backoff_s: float = 1.0
    max_backoff_s: float = 30.0
    max_retry_after_s: float = 60.0  # a server asking for longer gets this much

    def delay(self, attempt: int, retry_after_s: float | None) -> float:
        """Seconds to wait after failed attempt ``attempt`` (0-based)."""
        if retry_after_s is not None:
            return min(max(retry_after_s, 0.0), self.max_retry_after_s)
        return min(self.backoff_s * 2**attempt, self.max_backoff_s)


_STATUS_KINDS: Final = {429: "rate_limited", 529: "overloaded", 408: "timeout"}


def status_failure(status: int, detail: str, retry_after_s: float | None = None) -> AttemptError:
    """An HTTP error status as an attempt failure: 429, 408, 5xx and 529 retry; others do not."""
    kind = _STATUS_KINDS.get(status) or ("http_5xx" if status >= 500 else "refused")
    retryable = kind != "refused"  # 400/401/403/404...: the same request would fail again
    return AttemptError(kind, f"HTTP {status} {detail}", retryable=retryable, status=status,
                        retry_after_s=retry_after_s if retryable else None)  # fmt: skip


def retry_after(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """Seconds from ``retry-after-ms`` or ``retry-after`` (seconds or HTTP date); None if absent."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return float(ms) / 1000
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - (time.time() if now is None else now), 0.0)


def redact(text: str, secret: str) -> str:
    """``text`` with ``secret`` replaced, as sent and in any case or encoding
    (harness/scrub.py): a server may echo what it was sent."""
    if not secret:
        return text
    return scrubber(secret).text(text.replace(secret, REDACTED))


async def with_retries(
    request: CanonicalRequest,
    send: Callable[[], Awaitable[ModelResponse]],
    *,
    provider: str,
    policy: RetryPolicy,
    observer: ModelObserver | None,
    limiter: RateLimiter | None = None,
    sleep: Sleep = asyncio.sleep,
    clock: Callable[[], float] = time.perf_counter,
) -> ModelResponse:
    """``send()`` until it answers; each failed attempt goes to ``observer``; InfraError at the end.

    ``send`` raises ``AttemptError`` for a failed attempt. The limiter (if any) is
    acquired before every attempt, with the request's estimated tokens, and corrected
    by the response's usage afterwards.
    """
    estimate = estimate_tokens(request)
    for attempt in range(policy.max_retries + 1):
        if limiter is not None:
            await limiter.acquire(estimate)
        start = clock()
        try:
            response = await send()
        except AttemptError as exc:
            latency_ms = (clock() - start) * 1000
            if limiter is not None:
                limiter.settle(estimate, 0)  # a refused attempt spends no tokens
            again = exc.retryable and attempt < policy.max_retries
            wait = policy.delay(attempt, exc.retry_after_s) if again else 0.0
            if observer is not None:
                observer.attempt_failed(
                    request,
                    AttemptFailure(
                        attempt=attempt,
                        kind=exc.kind,
                        message=exc.message,
                        status=exc.status,
                        retry_after_s=round(wait, 3),
                        latency_ms=round(latency_ms, 3),
                    ),
                )
            if not again:
                tries = f"after {attempt + 1} attempts" if attempt else "not retried"
                raise InfraError(
                    exc.kind, f"{provider} {request.model}: {exc.message} ({tries})",
                    retryable=exc.retryable,
                ) from None  # fmt: skip
            await sleep(wait)
            continue
        if limiter is not None:
            limiter.settle(estimate, used_tokens(response.usage))
        return response
    raise AssertionError("unreachable")
