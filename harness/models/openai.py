"""The OpenAI-compatible chat-completions transport over ``httpx2`` (vLLM, llama.cpp, Ollama, ...).

``POST BASE_URL/chat/completions`` with tools as functions; the key, if any, only in
the ``Authorization`` header. Usage follows the Anthropic meaning of the four keys:
``input_tokens`` are the prompt tokens not read from cache, ``cache_read_tokens`` the
cached ones (``prompt_tokens_details.cached_tokens``).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any, Final

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

STOP_REASONS: Final = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}


def _tool_choice(choice: str) -> Any:
    if choice in ("auto", "none", "required"):
        return choice
    if choice == "any":
        return "required"
    return {"type": "function", "function": {"name": choice}}


def chat_messages(system: str, neutral: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Neutral messages as chat-completions messages, the system prompt first."""
    out: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    for m in neutral:
        role = m.get("role")
        if role == "user":
            out.append({"role": "user", "content": m.get("text", "")})
        elif role == "assistant":
            msg: dict[str, Any] = {"role": "assistant", "content": m.get("text", "")}
            calls = m.get("tool_calls") or ()
            if calls:
                msg["tool_calls"] = [
                    {"id": c["id"], "type": "function", "function": {
                        "name": c["name"], "arguments": json.dumps(c.get("arguments") or {})}}
                    for c in calls
                ]  # fmt: skip
            out.append(msg)
        elif role == "tool":
            out.append({"role": "tool", "tool_call_id": m["call_id"], "content": m.get("text", "")})
        else:
            raise ValueError(f"a message with role {role!r} has no chat-completions form")
    return out


def chat_body(request: CanonicalRequest) -> dict[str, Any]:
    """The JSON body of ``POST /chat/completions`` for ``request``."""
    body: dict[str, Any] = {
        "model": request.model,
        "messages": chat_messages(request.system, request.messages),
    }
    if request.tools:
        body["tools"] = [
            {"type": "function", "function": {
                "name": t.name, "description": t.description, "parameters": t.input_schema}}
            for t in request.tools
        ]  # fmt: skip
        body["tool_choice"] = _tool_choice(request.tool_choice)
    body.update(request.params)
    return body


def _arguments(raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(raw or "{}")
    except (TypeError, ValueError):
        return {}  # not JSON: the tool call goes out without arguments; the platform says why
    return value if isinstance(value, dict) else {}


def to_response(data: Any) -> ModelResponse:
    """A chat-completions reply as a ModelResponse; ValueError if it has no choice."""
    try:
        choice = data["choices"][0]
        message = choice.get("message") or {}
    except (KeyError, IndexError, TypeError, AttributeError):
        raise ValueError("the reply has no choices[0].message") from None
    calls = [
        ModelToolCall(
            str(c.get("id") or f"call-{i}"),
            str((c.get("function") or {}).get("name", "")),
            _arguments((c.get("function") or {}).get("arguments")),
        )
        for i, c in enumerate(message.get("tool_calls") or (), 1)
    ]
    finish = str(choice.get("finish_reason") or "stop")
    stop = STOP_REASONS.get(finish, finish)
    if stop in ("max_tokens", "refusal"):
        calls = []  # cut off mid-way, arguments cannot be trusted: end with the text
    elif calls and stop == "end_turn":
        stop = "tool_use"  # some servers say "stop" even when they called tools
    u = data.get("usage") or {}
    cached = int(((u.get("prompt_tokens_details") or {}).get("cached_tokens")) or 0)
    usage = {
        "input_tokens": max(int(u.get("prompt_tokens") or 0) - cached, 0),
        "output_tokens": int(u.get("completion_tokens") or 0),
        "cache_read_tokens": cached,
        "cache_creation_tokens": 0,
    }
    return ModelResponse(
        text=str(message.get("content") or ""),
        tool_calls=calls,
        stop_reason=stop,
        usage=usage,
        model=str(data.get("model") or ""),
    )


def _detail(response: httpx2.Response) -> str:
    try:
        error = response.json().get("error")
        message = error.get("message", "") if isinstance(error, dict) else str(error or "")
    except (ValueError, AttributeError):
        message = response.text
    return f"from {response.request.url.host}: {message}".strip()


class OpenAICompatTransport:
    """Completes canonical requests with any OpenAI-compatible chat-completions server."""

    name = "openai"

    def __init__(
        self,
        model: str,
        *,
        base_url: str,
        api_key: str = "",
        limiter: RateLimiter | None = None,
        max_retries: int = RetryPolicy.max_retries,
        http_client: httpx2.AsyncClient | None = None,
        timeout_s: float = 600.0,
        backoff_s: float = RetryPolicy.backoff_s,
        sleep: Sleep = asyncio.sleep,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.model = model
        self.base_url = base_url.rstrip("/")
        self._api_key = api_key
        self.policy = RetryPolicy(max_retries=max_retries, backoff_s=backoff_s)
        self.limiter = limiter
        self.timeout_s = timeout_s
        self._sleep, self._clock = sleep, clock
        self._given_client = http_client
        self._clients: dict[asyncio.AbstractEventLoop, httpx2.AsyncClient] = {}

    def __repr__(self) -> str:  # never the key
        return f"OpenAICompatTransport({self.model!r}, base_url={self.base_url!r})"

    def _client(self) -> httpx2.AsyncClient:
        # An async HTTP client's connections belong to one event loop: one client per loop.
        if self._given_client is not None:
            return self._given_client
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            self._clients = {lp: c for lp, c in self._clients.items() if not lp.is_closed()}
            client = self._clients[loop] = httpx2.AsyncClient(
                timeout=httpx2.Timeout(self.timeout_s, connect=10.0)
            )
        return client

    async def complete(
        self,
        request: CanonicalRequest,
        *,
        observer: ModelObserver | None = None,
        hint: Any = None,
    ) -> ModelResponse:
        """One chat completion, retried on 429/5xx/timeouts; InfraError when it gives up."""
        body = chat_body(request)
        return await with_retries(
            request, lambda: self._attempt(body), provider="openai", policy=self.policy,
            observer=observer, limiter=self.limiter, sleep=self._sleep, clock=self._clock,
        )  # fmt: skip

    async def _attempt(self, body: dict[str, Any], timeout_s: float | None = None) -> ModelResponse:
        """One try of ``body``; AttemptError (translated, the key never in it) if it fails."""
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        client = self._client()
        url = f"{self.base_url}/chat/completions"
        key = self._api_key
        timeout = (httpx2.USE_CLIENT_DEFAULT if timeout_s is None
                   else httpx2.Timeout(timeout_s, connect=10.0))  # fmt: skip
        try:
            resp = await client.post(url, json=body, headers=headers, timeout=timeout)
        except httpx2.TimeoutException:
            raise AttemptError("timeout", f"{url} did not answer in time",
                               retryable=True) from None  # fmt: skip
        except httpx2.HTTPError as exc:
            raise AttemptError("transport", redact(f"cannot reach {url}: {exc}", key)[:300],
                               retryable=True) from None  # fmt: skip
        if resp.status_code >= 400:
            detail = redact(_detail(resp), key)[:300]
            if resp.status_code == 401:
                detail += "; check OPENAI_API_KEY"
            raise status_failure(resp.status_code, detail, retry_after(resp.headers))
        try:
            return to_response(resp.json())
        except ValueError as exc:
            raise AttemptError("transport", f"unusable reply from {url}: {exc}"[:300],
                               retryable=False) from None  # fmt: skip

    async def preflight(self) -> None:
        """One minimal request; PreflightFailed when this endpoint cannot serve a run."""
        body = chat_body(preflight.request(self.model))
        await preflight.check(
            lambda: self._attempt(body, preflight.TIMEOUT_S), model=self.model,
            where=f"openai:{self.model} at {preflight.shown(self.base_url)}",
            key_var="OPENAI_API_KEY",
            url_hint="check the server URL in openai:MODEL@URL or --base-url, e.g. "
            "http://127.0.0.1:8000/v1",
            secret=self._api_key, limiter=self.limiter, sleep=self._sleep,
        )  # fmt: skip
