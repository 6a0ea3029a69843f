"""The model-loop policy: build the canonical request, call the transport, make a turn."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from benchledger.harness.agents import answering
from benchledger.harness.agents.base import Episode, ToolCall, Turn, UnitInfo
from benchledger.harness.models.request import (
    CanonicalRequest,
    build_request,
    request_hash,
    request_json,
)
from benchledger.harness.models.response import response_json
from benchledger.harness.models.transport import AttemptFailure, ModelObserver, ModelTransport


class _Counting:
    """Forwards failed attempts and counts them, so the turn can carry its retries."""

    def __init__(self, inner: ModelObserver | None) -> None:
        self.inner = inner
        self.failures = 0

    def attempt_failed(self, request: CanonicalRequest, failure: AttemptFailure) -> None:
        self.failures += 1
        if self.inner is not None:
            self.inner.attempt_failed(request, failure)


def _calls(resp: Any) -> tuple[ToolCall, ...]:
    return tuple(ToolCall(c.id, c.name, dict(c.arguments)) for c in resp.tool_calls)


class ModelAgent:
    """An agent whose turns are model calls over ``transport`` (real, fake or replay log).

    On a LoCoMo question it answers from memories the harness found (``answering``):
    ``memory`` is how it gets them (``answering.SEARCH``, or a control's ``NONE``,
    ``FULL``); ``answers`` False keeps the tool loop there too (the fake model, whose
    scripted decisions search for themselves)."""

    records_model_calls = True

    def __init__(
        self,
        transport: ModelTransport,
        *,
        model: str,
        params: Mapping[str, Any] | None = None,
        name: str | None = None,
        memory: str = answering.SEARCH,
        answers: bool = True,
    ) -> None:
        self.transport = transport
        self.memory = memory
        self.answers = answers
        self.model = model
        self.params: dict[str, Any] = dict(params or {})
        self.name = name or f"{transport.name}:{model}"
        # Refuse credential-looking params now, at construction, not on the first turn.
        build_request(model, "", [], [], params=self.params)

    async def preflight(self) -> None:
        """One minimal request to the transport's endpoint, if it has one to check (the
        provider transports do; fakes and replay logs do not). PreflightFailed if it cannot
        serve the run; nothing is recorded."""
        check = getattr(self.transport, "preflight", None)
        if check is not None:
            await check()

    def for_unit(self, unit: UnitInfo) -> ModelAgent:
        """Stateless: the same agent for every unit."""
        return self

    def check_items(self, items: Sequence[Any], path: str) -> None:
        """ValueError when a control is asked to run anything but LoCoMo's questions."""
        if self.memory != answering.SEARCH:
            answering.locomo_only(self.name, items)

    async def next_turn(
        self,
        episode: Episode,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        observer: ModelObserver | None = None,
    ) -> Turn:
        """One model call: request from the episode's system prompt, messages and tools; on
        a LoCoMo question, the harness's search turn or one call with the answer prompt."""
        system, reading = episode.system_prompt, False
        if self.answers and answering.applies(episode, self.memory):
            step = answering.step(episode, messages, self.memory)
            if isinstance(step, Turn):
                return step  # the harness's search: no model call
            system, messages, tools = "", [{"role": "user", "text": step}], []
            reading = True  # one answer: a tool call it makes anyway is not run
        req = build_request(self.model, system, messages, tools, params=self.params)
        counting = _Counting(observer)
        start = time.perf_counter()
        resp = await self.transport.complete(req, observer=counting, hint=episode)
        ms = (time.perf_counter() - start) * 1000
        return Turn(
            text=resp.text,
            tool_calls=() if reading else _calls(resp),
            usage=dict(resp.usage),
            request=request_json(req),
            response=response_json(resp),
            latency_ms=ms,
            retry=counting.failures,
            request_hash=request_hash(req),
        )
