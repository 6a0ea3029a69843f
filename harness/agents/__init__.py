"""Agents: scripted (no model), a fake model for benchmarks, and (later) real model agents."""

from __future__ import annotations

from harness.agents.base import Agent, Episode, ToolCall, Turn
from harness.agents.fake import FakeModelAgent
from harness.agents.scripted import ScriptedAgent


def from_spec(spec: str) -> Agent:
    """``scripted`` or ``fake[:DELAY_S]``; ValueError names what is supported."""
    if spec == "scripted":
        return ScriptedAgent()
    if spec == "fake" or spec.startswith("fake:"):
        delay = spec.partition(":")[2] or "0.3"
        try:
            return FakeModelAgent(float(delay))
        except ValueError:
            raise ValueError(f"--agent {spec}: the fake model's delay must be seconds") from None
    if spec.startswith(("anthropic:", "openai:")):
        raise ValueError(f"--agent {spec}: model agents are not available in this version yet")
    raise ValueError(f"--agent {spec!r}: use scripted or fake[:DELAY_S]")


__all__ = ["Agent", "Episode", "FakeModelAgent", "ScriptedAgent", "ToolCall", "Turn", "from_spec"]
