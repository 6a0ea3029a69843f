"""The scripted agent's decisions, made from a conversation alone (as a fake model server must).

A fake provider server sees only the wire request: it recovers the stage and protocol
from the first user message (and the system prompt), then asks ``ScriptedAgent.decide``.
"""

from __future__ import annotations

from typing import Any

from benchledger.harness.agents.base import Episode, Turn
from benchledger.harness.agents.scripted import ScriptedAgent
from benchledger.harness.prompts import SYSTEM
from benchledger.protocols.grading import surfaced
from benchledger.protocols.schema import Protocol


def _stages(p: Protocol) -> list[tuple[str, str, str]]:
    """(stage, user prompt, fact that must surface) for every episode of ``p``."""
    out = [("teach", p.teach.prompt, p.fact), ("recall", p.recall.prompt, p.fact)]
    if p.transfer is not None:
        out.append(("transfer", p.transfer.prompt, p.fact))
    if p.update is not None:
        out.append(("update", p.update.prompt, p.update.fact))
        out.append(("update_recall", p.update.recall.prompt, p.update.fact))
    if p.abstain is not None:
        out.append(("abstain", p.abstain.prompt, ""))
    return out


class ScriptedBrain:
    """Replies like the scripted agent to conversations about ``protocols``."""

    def __init__(self, protocols: list[Protocol] | tuple[Protocol, ...]) -> None:
        self._by_prompt: dict[str, list[tuple[Episode, str]]] = {}
        for p in protocols:
            for stage, prompt, fact in _stages(p):
                ep = Episode(stage, SYSTEM[stage], prompt, p, p.budget_tool_calls)
                self._by_prompt.setdefault(prompt, []).append((ep, fact))
        self._agent = ScriptedAgent()

    def episode(self, system: str, messages: list[dict[str, Any]]) -> Episode:
        """The episode a conversation belongs to; KeyError if no protocol asks its first prompt."""
        first = next(m["text"] for m in messages if m["role"] == "user")
        candidates = [c for c in self._by_prompt[first] if c[0].system_prompt == system]
        candidates = candidates or self._by_prompt[first]
        # Stages that share a prompt (recall, update recall): the one whose fact surfaced.
        results = [m for m in messages if m["role"] == "tool"]
        if results and len(candidates) > 1:
            hit = [c for c in candidates if c[1] and surfaced(c[1], results[0]["text"])]
            candidates = hit[-1:] or candidates
        return candidates[0][0]

    def decide(self, system: str, messages: list[dict[str, Any]]) -> Turn:
        """The scripted agent's next turn for this conversation (neutral messages)."""
        return self._agent.decide(self.episode(system, messages), messages)
