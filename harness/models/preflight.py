"""The model preflight: one minimal request before a run writes anything.

A run against a wrong key, model or server would otherwise fail every unit, each one
only after its retries. A provider transport's ``preflight`` sends ``request(model)``
(one short user message, ``max_tokens`` 1) through ``check``, which refuses in one
line what no retry can mend: a server that cannot be reached (after a short bound), a
refused key (401, 403), an unknown model or a wrong path (404), a reply that is not
the provider's format. A transient answer (429, 5xx, 529, a timeout) lets the run go
on at once: its own calls retry and every attempt is recorded there. The preflight is
recorded nowhere: it is no unit's model call.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from typing import Final
from urllib.parse import urlsplit, urlunsplit

from benchledger.harness.models.errors import PreflightFailed
from benchledger.harness.models.limiter import RateLimiter, estimate_tokens, used_tokens
from benchledger.harness.models.request import CanonicalRequest, build_request
from benchledger.harness.models.response import ModelResponse
from benchledger.harness.models.retry import AttemptError, Sleep, redact

PROMPT: Final = "benchledger preflight: reply with one word."
CONNECT_TRIES: Final = 3  # a server that refuses connections is tried this often, in < 1 s
BACKOFF_S: Final = 0.25
TIMEOUT_S: Final = 30.0  # a preflight that times out is transient: the run goes on
FATAL_STATUSES: Final = frozenset({401, 403, 404})
# A preflight still waiting after this long says so on stderr, once: a server that cannot
# be reached (no network, a resolver timing out) can keep it silent for many seconds.
NOTE_AFTER_S: Final = 2.0


def request(model: str) -> CanonicalRequest:
    """The preflight's request: one short user message, a one-token reply, no tools."""
    return build_request(model, "", [{"role": "user", "text": PROMPT}], [],
                         params={"max_tokens": 1})  # fmt: skip


def shown(url: str) -> str:
    """``url`` without user info or query, fit for a message."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host  # an IPv6 address keeps its brackets
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _problem(exc: AttemptError, *, model: str, key_var: str, url_hint: str) -> str:
    """Why the run cannot go on after this failed attempt, or "" when it is transient."""
    said = exc.message.rstrip(": ")  # a reply with no error text ends in "from HOST:"
    if exc.kind == "transport":  # unreachable, or a reply that is not the provider's format
        return f"{said} ({'is the server running? ' if exc.retryable else ''}{url_hint})"
    if exc.status not in FATAL_STATUSES:
        return ""  # 429, 5xx, 529, timeouts; 400s the preflight's own tiny request may cause
    if exc.status in (401, 403):
        return said if key_var in said else f"{said}; check {key_var}"
    detail = said.split(": ", 1)[-1]  # the server's words, after "HTTP 404 from HOST"
    if ": " in said and "model" in detail.lower():
        return f"{said} (the server has no model {model!r}: check the model name)"
    return f"{said} (no such endpoint: {url_hint})"


async def check(
    send: Callable[[], Awaitable[ModelResponse]],
    *,
    model: str,
    where: str,
    key_var: str,
    url_hint: str,
    secret: str = "",
    limiter: RateLimiter | None = None,
    sleep: Sleep = asyncio.sleep,
) -> None:
    """``send()`` the preflight request; PreflightFailed (one line, no key) if the run cannot go on.

    ``send`` raises ``AttemptError`` for a failed attempt, as a transport's does;
    ``where`` names the endpoint, ``key_var`` the variable the key comes from and
    ``url_hint`` how to fix the server URL. A connection failure is tried
    ``CONNECT_TRIES`` times; anything transient returns at once.
    """
    note = f"model preflight: still waiting for {where} (one minimal request; Ctrl-C stops)"
    slow = asyncio.get_running_loop().call_later(
        NOTE_AFTER_S, lambda: print(note, file=sys.stderr, flush=True)
    )
    try:
        await _check(send, model=model, where=where, key_var=key_var, url_hint=url_hint,
                     secret=secret, limiter=limiter, sleep=sleep)  # fmt: skip
    finally:
        slow.cancel()


async def _check(
    send: Callable[[], Awaitable[ModelResponse]],
    *,
    model: str,
    where: str,
    key_var: str,
    url_hint: str,
    secret: str,
    limiter: RateLimiter | None,
    sleep: Sleep,
) -> None:
    estimate = estimate_tokens(request(model))
    for attempt in range(CONNECT_TRIES):
        if limiter is not None:
            await limiter.acquire(estimate)  # the preflight counts against --rpm / --tpm too
        try:
            response = await send()
        except AttemptError as exc:
            if limiter is not None:
                limiter.settle(estimate, 0)
            if exc.kind == "transport" and exc.retryable and attempt + 1 < CONNECT_TRIES:
                await sleep(BACKOFF_S * 2**attempt)
                continue
            problem = _problem(exc, model=model, key_var=key_var, url_hint=url_hint)
            if problem:
                line = f"model preflight failed for {where}: {problem}; nothing was written"
                raise PreflightFailed(redact(line, secret)) from None
            return
        if limiter is not None:
            limiter.settle(estimate, used_tokens(response.usage))
        return
