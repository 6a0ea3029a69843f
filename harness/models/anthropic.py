"""The Anthropic Messages API transport, through the ``anthropic`` SDK on an ``httpx2`` client.

Prompt caching as the peer's harness does it: an ephemeral breakpoint on the system
prompt (caching tools + system, the constant prefix) and a rolling one on the last
block of the last message (each turn reads the previous turn's transcript back from
cache). The SDK's own retries are off: ``with_retries`` retries so every attempt is seen.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, Final

import anthropic
import httpx2

from benchledger.harness.models import preflight
from benchledger.harness.models.limiter import RateLimiter
from benchledger.harness.models.request import CanonicalRequest
from benchledger.harness.models.response import ModelResponse, ModelToolCall
from benchledger.harness.models.retry import (
    AttemptError,
    RetryPolicy,
    Sleep,
    redact,
    retry_after,
    status_failure,
    with_retries,
)
from benchledger.harness.models.transport import ModelObserver

DEFAULT_BASE_URL: Final = "https://api.anthropic.com"
DEFAULT_MAX_TOKENS: Final = 4096
EPHEMERAL: Final = {"type": "ephemeral"}


def _tool_choice(choice: str) -> dict[str, Any]:
    if choice in ("auto", "any", "none"):
        return {"type": choice}
    return {"type": "tool", "name": choice}


def _message(role: str, blocks: list[dict[str, Any]]) -> dict[str, Any]:
    return {"role": role, "content": blocks}


def messages(neutral: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Neutral messages in Messages API form; tool results (and text after) form one user turn."""
    out: list[dict[str, Any]] = []
    for m in neutral:
        role = m.get("role")
        if role == "assistant":
            blocks: list[dict[str, Any]] = []
            if m.get("text"):
                blocks.append({"type": "text", "text": m["text"]})
            for call in m.get("tool_calls") or ():
                blocks.append({"type": "tool_use", "id": call["id"], "name": call["name"],
                               "input": call.get("arguments") or {}})  # fmt: skip
            out.append(_message("assistant", blocks))
            continue
        if role == "tool":
            block: dict[str, Any] = {"type": "tool_result", "tool_use_id": m["call_id"],
                                     "content": m.get("text", "")}  # fmt: skip
            if m.get("is_error"):
                block["is_error"] = True
        elif role == "user":
            block = {"type": "text", "text": m.get("text", "")}
        else:
            raise ValueError(f"a message with role {role!r} has no Messages API form")
        # The API alternates roles: results of one assistant turn go back as one user turn.
        if out and out[-1]["role"] == "user":
            out[-1]["content"].append(block)
        else:
            out.append(_message("user", [block]))
    return out


def messages_body(request: CanonicalRequest) -> dict[str, Any]:
    """The JSON body of ``POST /v1/messages`` for ``request``, cache breakpoints included."""
    params = dict(request.params)
    body: dict[str, Any] = {
        "model": request.model,
        "max_tokens": params.pop("max_tokens", DEFAULT_MAX_TOKENS),
        "messages": messages(request.messages),
    }
    if request.system:
        body["system"] = [{"type": "text", "text": request.system, "cache_control": EPHEMERAL}]
    if request.tools:
        body["tools"] = [
            {"name": t.name, "description": t.description, "input_schema": t.input_schema}
            for t in request.tools
        ]
        body["tool_choice"] = _tool_choice(request.tool_choice)
    if body["messages"] and body["messages"][-1]["content"]:
        body["messages"][-1]["content"][-1]["cache_control"] = EPHEMERAL
    body.update(params)  # every other sampling parameter, as given
    return body


def to_response(message: Any) -> ModelResponse:
    """A Messages API reply as a ModelResponse; a cut-off (max_tokens, refusal) keeps no calls."""
    texts: list[str] = []
    calls: list[ModelToolCall] = []
    for block in message.content or ():
        if block.type == "text":
            texts.append(block.text)
        elif block.type == "tool_use":
            args = block.input if isinstance(block.input, dict) else {}
            calls.append(ModelToolCall(block.id, block.name, dict(args)))
    stop = str(message.stop_reason or "end_turn")
    if stop in ("max_tokens", "refusal"):
        calls = []  # a tool_use cut off mid-way has unreliable input: end with the text
    u = message.usage
    usage = {
        "input_tokens": int(getattr(u, "input_tokens", 0) or 0),
        "output_tokens": int(getattr(u, "output_tokens", 0) or 0),
        "cache_read_tokens": int(getattr(u, "cache_read_input_tokens", 0) or 0),
        "cache_creation_tokens": int(getattr(u, "cache_creation_input_tokens", 0) or 0),
    }
    return ModelResponse(
        text="\n".join(texts),
        tool_calls=calls,
        stop_reason=stop,
        usage=usage,
        model=str(message.model or ""),
    )


def _failure(exc: Exception, api_key: str) -> AttemptError:
    """An SDK or HTTP exception as an attempt failure; the key never enters the message."""
    if isinstance(exc, anthropic.APIStatusError):
        status = exc.status_code
        kind = f" ({exc.type})" if exc.type else ""
        detail = redact(f"from the Anthropic API{kind}: {exc.api_message or ''}".strip(), api_key)
        if status == 401:
            detail += "; check ANTHROPIC_API_KEY"
        if status != 529 and exc.type == "overloaded_error":
            status = 529
        return status_failure(status, detail[:300], retry_after(exc.response.headers))
    if isinstance(exc, anthropic.APITimeoutError | httpx2.TimeoutException):
        return AttemptError("timeout", "the Anthropic API did not answer in time", retryable=True)
    if isinstance(exc, anthropic.APIConnectionError | httpx2.TransportError):
        cause = exc.__cause__ or exc
        return AttemptError("transport", redact(f"cannot reach the Anthropic API: {cause}",
                                                api_key)[:300], retryable=True)  # fmt: skip
    return AttemptError("transport", redact(f"unusable Anthropic API reply: {exc}", api_key)[:300],
                        retryable=False)  # fmt: skip


class AnthropicTransport:
    """Completes canonical requests with the Messages API; retries and reports every attempt."""

    name = "anthropic"

    def __init__(
        self,
        model: str,
        *,
        api_key: str,
        base_url: str | None = None,
        max_retries: int = RetryPolicy.max_retries,
        http_client: httpx2.AsyncClient | None = None,
        limiter: RateLimiter | None = None,
        timeout_s: float = 600.0,
        backoff_s: float = RetryPolicy.backoff_s,
        sleep: Sleep = asyncio.sleep,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.model = model
        self._api_key = api_key
        self.base_url = (base_url or DEFAULT_BASE_URL).rstrip("/")
        self.policy = RetryPolicy(max_retries=max_retries, backoff_s=backoff_s)
        self.limiter = limiter
        self.timeout_s = timeout_s
        self._sleep, self._clock = sleep, clock
        self._given_client = http_client
        self._clients: dict[asyncio.AbstractEventLoop, anthropic.AsyncAnthropic] = {}

    def __repr__(self) -> str:  # never the key
        return f"AnthropicTransport({self.model!r}, base_url={self.base_url!r})"

    def _client(self) -> anthropic.AsyncAnthropic:
        # An async HTTP client's connections belong to one event loop: one SDK client per loop.
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            self._clients = {lp: c for lp, c in self._clients.items() if not lp.is_closed()}
            http = self._given_client or httpx2.AsyncClient(
                timeout=httpx2.Timeout(self.timeout_s, connect=10.0)
            )
            client = anthropic.AsyncAnthropic(
                api_key=self._api_key, base_url=self.base_url, max_retries=0, http_client=http
            )
            self._clients[loop] = client
        return client

    async def complete(
        self,
        request: CanonicalRequest,
        *,
        observer: ModelObserver | None = None,
        hint: Any = None,
    ) -> ModelResponse:
        """One Messages API call, retried on 429/5xx/529/timeouts; InfraError when it gives up."""
        body = messages_body(request)
        return await with_retries(
            request, lambda: self._attempt(body), provider="anthropic", policy=self.policy,
            observer=observer, limiter=self.limiter, sleep=self._sleep, clock=self._clock,
        )  # fmt: skip

    async def _attempt(self, body: dict[str, Any], timeout_s: float | None = None) -> ModelResponse:
        """One try of ``body``; AttemptError (translated, the key never in it) if it fails."""
        client = self._client()
        try:
            # extra_body carries the sampling parameters this SDK version has no kwarg for.
            required = {k: body[k] for k in ("model", "max_tokens", "messages")}
            rest = {k: v for k, v in body.items() if k not in required}
            message = await client.messages.create(
                **required, extra_body=rest,
                timeout=anthropic.NOT_GIVEN if timeout_s is None else timeout_s,
            )  # fmt: skip
        except (anthropic.AnthropicError, httpx2.HTTPError) as exc:
            raise _failure(exc, self._api_key) from None
        return to_response(message)

    async def preflight(self) -> None:
        """One minimal request; PreflightFailed when this endpoint cannot serve a run."""
        body = messages_body(preflight.request(self.model))
        await preflight.check(
            lambda: self._attempt(body, preflight.TIMEOUT_S), model=self.model,
            where=f"anthropic:{self.model} at {preflight.shown(self.base_url)}",
            key_var="ANTHROPIC_API_KEY", url_hint="check --base-url or $ANTHROPIC_BASE_URL",
            secret=self._api_key, limiter=self.limiter, sleep=self._sleep,
        )  # fmt: skip
