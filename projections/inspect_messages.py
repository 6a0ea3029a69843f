"""An Inspect AI sample's messages, built from one unit's recorded events (``inspect_log``
writes the log around them; the format: docs/inspect.md).

Each episode's system and user prompts, its model turns and tool calls, and its final
answer become Inspect chat messages, each naming the event it came from; the token usage
is the episodes' own, else the model calls'.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from benchledger.ledger.events import (
    EpisodeFinishedEvent,
    EpisodeStartedEvent,
    Event,
    ModelCallEvent,
    SessionCallEvent,
)
from benchledger.ledger.redaction import WithheldEvent


class _Turns:
    """The messages of one unit, built episode by episode."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.messages: list[dict[str, Any]] = []
        self.pending: list[tuple[str, str]] = []  # (call id, tool) the model asked for
        self.episode = ""

    def add(self, role: str, content: str, event: Event, **extra: Any) -> dict[str, Any]:
        meta = {"episode": self.episode, "stream": event.stream, "seq": event.seq}
        meta.update(extra.pop("metadata", {}))
        message = drop_none({"id": f"{event.stream}#{event.seq}#{len(self.messages)}",
                              "content": content, "role": role, **extra,
                              "metadata": meta})  # fmt: skip
        self.messages.append(message)
        return message

    def model_call(self, event: ModelCallEvent) -> None:
        b = event.body
        meta = drop_none({"request_hash": b.request_hash, "latency_ms": b.latency_ms,
                           "usage": dict(b.usage) or None, "stop_reason": b.stop_reason or None,
                           "retry": b.retry or None})  # fmt: skip
        response = b.response if isinstance(b.response, dict) else {}
        calls = [c for c in response.get("tool_calls") or () if isinstance(c, dict)]
        tool_calls: list[dict[str, Any]] = [
            {"id": str(c.get("id", "")), "function": str(c.get("name", "")),
             "arguments": c.get("arguments") if isinstance(c.get("arguments"), dict) else {},
             "type": "function"}
            for c in calls
        ]  # fmt: skip
        self.pending = [(str(c["id"]), str(c["function"])) for c in tool_calls]
        self.add("assistant", str(response.get("text") or ""), event, source="generate",
                 tool_calls=tool_calls or None, model=str(response.get("model") or self.model),
                 metadata=meta)  # fmt: skip

    def tool_call(self, event: SessionCallEvent) -> None:
        b = event.body
        found = next((i for i, (_, tool) in enumerate(self.pending) if tool == b.tool), None)
        if found is None:  # no model call asked for it (a scripted agent): one is written
            call_id = f"call-{event.stream}-{event.seq}"
            call = {"id": call_id, "function": b.tool, "arguments": dict(b.arguments),
                    "type": "function"}  # fmt: skip
            self.add("assistant", "", event, source="generate", tool_calls=[call],
                     model=self.model, metadata={"written_for": "session_call"})  # fmt: skip
        else:
            call_id = self.pending.pop(found)[0]
        text = b.text()
        error = {"type": "unknown", "message": text} if b.is_error else None
        self.add("tool", text, event, tool_call_id=call_id, function=b.tool, error=error,
                 metadata={"latency_ms": b.latency_ms, "is_error": b.is_error})  # fmt: skip

    def finished(self, event: EpisodeFinishedEvent) -> None:
        b = event.body
        meta = drop_none({"final_answer": True, "tool_calls": b.tool_calls,
                           "tool_errors": b.tool_errors or None,
                           "input_tokens": b.input_tokens or None,
                           "output_tokens": b.output_tokens or None,
                           "budget_exhausted": b.budget_exhausted or None,
                           "sources": list(b.sources) or None})  # fmt: skip
        last = self.messages[-1] if self.messages else None
        if (
            last is not None
            and last["role"] == "assistant"
            and not last.get("tool_calls")
            and last["content"] == b.final_answer
            and last["metadata"]["episode"] == b.episode
        ):
            last["metadata"].update(meta)  # the model's last turn was the final answer
            return
        self.add("assistant", b.final_answer, event, source="generate", model=self.model,
                 metadata=meta)  # fmt: skip


def turns_of(
    events: Iterable[tuple[Event, str]], model: str
) -> tuple[list[dict[str, Any]], dict[str, Any], str, str, int]:
    """(messages, token usage, the first user prompt, the last final answer, withheld
    events) of a unit: each episode's prompts, tool calls, model turns and final answer."""
    turns = _Turns(model)
    started: set[str] = set()
    totals = {"input_tokens": 0, "output_tokens": 0, "cache_read": 0, "cache_write": 0}
    from_calls = dict(totals)
    prompt = final = ""
    withheld = 0
    for event, _ in events:
        if isinstance(event, WithheldEvent):
            withheld += 1
        elif isinstance(event, EpisodeStartedEvent):
            b = event.body
            turns.episode, turns.pending = b.episode, []
            started.add(b.episode)
            meta = {"identity": b.identity, "attempt": b.attempt}
            if b.system_prompt:
                turns.add("system", b.system_prompt, event, source="input", metadata=meta)
            turns.add("user", b.user_prompt, event, source="input", metadata=meta)
            prompt = prompt or b.user_prompt
        elif isinstance(event, ModelCallEvent) and event.body.episode in started:
            _add_usage(from_calls, event.body.usage)
            if not event.body.error:  # a failed attempt has no response to show
                turns.model_call(event)
        elif (
            isinstance(event, SessionCallEvent)
            and event.body.method == "tools/call"
            and event.body.episode in started  # the harness's own calls open no episode
        ):
            turns.tool_call(event)
        elif isinstance(event, EpisodeFinishedEvent):
            end = event.body
            turns.finished(event)
            final = end.final_answer
            _add_usage(totals, {"input_tokens": end.input_tokens,
                                "output_tokens": end.output_tokens,
                                "cache_read_tokens": end.cache_read_tokens,
                                "cache_creation_tokens": end.cache_creation_tokens})  # fmt: skip
    counted = totals if any(totals.values()) else from_calls
    return turns.messages, _model_usage(counted), prompt, final, withheld


def _add_usage(into: dict[str, int], usage: dict[str, int]) -> None:
    into["input_tokens"] += int(usage.get("input_tokens", 0))
    into["output_tokens"] += int(usage.get("output_tokens", 0))
    into["cache_read"] += int(usage.get("cache_read_tokens", 0))
    into["cache_write"] += int(usage.get("cache_creation_tokens", 0))


def _model_usage(t: dict[str, int]) -> dict[str, Any]:
    """Token counts as an Inspect ``ModelUsage`` ({} when no tokens were counted)."""
    if not any(t.values()):
        return {}
    return drop_none({
        "input_tokens": t["input_tokens"],
        "output_tokens": t["output_tokens"],
        "total_tokens": sum(t.values()),
        "input_tokens_cache_write": t["cache_write"] or None,
        "input_tokens_cache_read": t["cache_read"] or None,
    })  # fmt: skip


def drop_none(values: dict[str, Any]) -> dict[str, Any]:
    """``values`` without its None entries (Inspect writes its documents without them);
    only this level: a null inside recorded data stays."""
    return {k: v for k, v in values.items() if v is not None}


__all__ = ["drop_none", "turns_of"]
