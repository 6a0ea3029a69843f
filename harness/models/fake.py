"""A fake transport: a deterministic decision function served with model-like latency."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import msgspec

from benchledger.harness.models.request import CanonicalRequest
from benchledger.harness.models.response import ModelResponse
from benchledger.harness.models.transport import ModelObserver

Decide = Callable[[CanonicalRequest, Any], ModelResponse]


def fake_usage(request: CanonicalRequest, text: str) -> dict[str, int]:
    """Token usage as a pure function of the request's message text and the reply text."""
    prompt_chars = sum(len(str(m.get("text", ""))) for m in request.messages)
    return {"input_tokens": 1 + prompt_chars // 4, "output_tokens": 1 + len(text) // 4}


class FakeTransport:
    """Serves ``decide(request, hint)`` after ``delay_s`` (stand-in API latency); never fails."""

    name = "fake"

    def __init__(self, decide: Decide, *, delay_s: float = 0.3, model: str = "fake-model") -> None:
        self.decide = decide
        self.delay_s = delay_s
        self.model = model

    async def complete(
        self,
        request: CanonicalRequest,
        *,
        observer: ModelObserver | None = None,
        hint: Any = None,
    ) -> ModelResponse:
        """``decide``'s response with deterministic usage, model and stop reason filled in."""
        await asyncio.sleep(self.delay_s)
        resp = self.decide(request, hint)
        return msgspec.structs.replace(
            resp,
            usage=resp.usage or fake_usage(request, resp.text),
            model=resp.model or self.model,
            stop_reason="tool_use"
            if resp.tool_calls and resp.stop_reason == "end_turn"
            else resp.stop_reason,
        )
