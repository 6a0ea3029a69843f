"""The agent interface: given an episode, its messages and tools, produce the next turn.

Messages are provider-neutral JSON dicts, the same for every agent:
``{"role": "user", "text": ...}``,
``{"role": "assistant", "text": ..., "tool_calls": [{"id", "name", "arguments"}]}``,
``{"role": "tool", "call_id": ..., "name": ..., "text": ..., "is_error": bool}``.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol

from protocols.schema import Protocol as LifecycleProtocol


class ToolCall(NamedTuple):
    id: str
    name: str
    arguments: dict[str, Any]


class Turn(NamedTuple):
    """An agent's reply: text, tool calls, and (for model agents) the exchange to record."""

    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    usage: dict[str, int] | None = None
    request: Any = None  # canonical request (model agents); recorded as a model_call
    response: Any = None
    latency_ms: float = 0.0
    retry: int = 0


class Episode(NamedTuple):
    """What an episode is about. Model agents use the prompts; the scripted agent the protocol."""

    stage: str
    system_prompt: str
    user_prompt: str
    protocol: LifecycleProtocol
    budget: int


class Agent(Protocol):
    """Produces turns. ``records_model_calls`` says whether turns are model exchanges."""

    name: str
    model: str
    records_model_calls: bool

    async def next_turn(
        self, episode: Episode, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> Turn: ...
