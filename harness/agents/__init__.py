"""Agents: scripted (no model), model agents over a transport (fake now, real ones later)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.agents.base import Agent, Episode, ToolCall, Turn, UnitInfo
from harness.agents.fake import FakeModelAgent
from harness.agents.model import ModelAgent
from harness.agents.scripted import ScriptedAgent
from harness.models.transport import ModelTransport

FAKE_MODEL = "fake-model"


def from_spec(
    spec: str,
    *,
    transport: ModelTransport | None = None,
    params: Mapping[str, Any] | None = None,
) -> Agent:
    """``scripted``, ``fake[:DELAY_S]``, or with ``transport`` any model spec; ValueError otherwise.

    A given ``transport`` replaces the spec's own (replay passes a ``LogTransport``):
    ``fake:*`` then keeps the fake's model name, ``anthropic:M`` / ``openai:M`` use M.
    """
    if spec == "scripted":
        return ScriptedAgent()
    if spec == "fake" or spec.startswith("fake:"):
        delay = spec.partition(":")[2] or "0.3"
        try:
            delay_s = float(delay)
        except ValueError:
            raise ValueError(f"--agent {spec}: the fake model's delay must be seconds") from None
        if transport is not None:
            return ModelAgent(transport, model=FAKE_MODEL, params=params, name=f"fake:{FAKE_MODEL}")
        return FakeModelAgent(delay_s, params=params)
    if spec.startswith(("anthropic:", "openai:")):
        provider, _, model = spec.partition(":")
        if transport is None:
            raise ValueError(f"--agent {spec}: model agents are not available in this version yet")
        if not model:
            raise ValueError(f"--agent {spec}: name the model, e.g. {provider}:MODEL")
        return ModelAgent(transport, model=model, params=params, name=spec)
    raise ValueError(f"--agent {spec!r}: use scripted or fake[:DELAY_S]")


__all__ = [
    "Agent",
    "Episode",
    "FakeModelAgent",
    "ModelAgent",
    "ScriptedAgent",
    "ToolCall",
    "Turn",
    "UnitInfo",
    "from_spec",
]
