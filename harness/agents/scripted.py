"""The scripted agent: deterministic, no model, no key — it measures the platform's mechanics.

teach/update: ``memory_capture`` of the (corrected) fact, linked to the protocol's
entity. recall/transfer/update_recall: ``search`` for the question; only if the
taught fact surfaced in the results, run the protocol's stored query with
``query_sql`` and answer from its result, otherwise answer INSUFFICIENT
INFORMATION. abstain: ``search``, then INSUFFICIENT INFORMATION.
"""

from __future__ import annotations

import json
from typing import Any, Final

from harness.agents.base import Episode, ToolCall, Turn, UnitInfo
from harness.models.transport import ModelObserver
from protocols.grading import ABSTAIN_ANSWER, surfaced
from protocols.schema import Question

CAPTURE_TYPE: Final = "business_knowledge"


def _question(episode: Episode) -> tuple[Question | None, str]:
    """The stage's question and the fact that must surface before it can be answered."""
    p = episode.protocol
    if episode.stage == "recall":
        return p.recall, p.fact
    if episode.stage == "transfer":
        return p.transfer, p.fact
    if episode.stage == "update_recall" and p.update is not None:
        return p.update.recall, p.update.fact
    return None, p.fact


def _value(result_text: str) -> str | None:
    try:
        rows = json.loads(result_text)["rows"]
        value = rows[0][0]
    except (ValueError, KeyError, IndexError, TypeError):
        return None
    return None if value is None else str(value)


class ScriptedAgent:
    name = "scripted"
    model = ""
    records_model_calls = False

    def for_unit(self, unit: UnitInfo) -> ScriptedAgent:
        """Stateless: the same agent for every unit."""
        return self

    async def next_turn(
        self,
        episode: Episode,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        observer: ModelObserver | None = None,
    ) -> Turn:
        """``decide`` (no model, so nothing ever reaches ``observer``)."""
        return self.decide(episode, messages)

    def decide(self, episode: Episode, messages: list[dict[str, Any]]) -> Turn:
        """The next turn, from the episode and the tool results so far (pure)."""
        results = [m for m in messages if m["role"] == "tool"]
        n = len(results)
        p = episode.protocol
        if episode.stage in ("teach", "update"):
            if n == 0:
                fact = p.update.fact if episode.stage == "update" and p.update else p.fact
                args = {"type": CAPTURE_TYPE, "content": fact, "entity_urns": [p.entity_urn],
                        "category": "definition"}  # fmt: skip
                return Turn("", (ToolCall("call-1", "memory_capture", args),))
            saved = not results[0].get("is_error")
            return Turn("Saved the definition." if saved else "I could not save the definition.")
        if n == 0:
            intent = episode.user_prompt
            return Turn("", (ToolCall("call-1", "search", {"intent": intent, "limit": 10}),))
        question, fact = _question(episode)
        if question is None:  # abstain: nothing taught grounds an answer
            return Turn(f"FINAL ANSWER: {ABSTAIN_ANSWER}")
        if n == 1:
            found = not results[0].get("is_error") and surfaced(fact, results[0]["text"])
            if not found or not question.query:
                return Turn(f"FINAL ANSWER: {ABSTAIN_ANSWER}")
            return Turn("", (ToolCall("call-2", "query_sql", {"sql": question.query}),))
        value = None if results[1].get("is_error") else _value(results[1]["text"])
        if value is None:
            return Turn(f"FINAL ANSWER: {ABSTAIN_ANSWER}")
        return Turn(f"FINAL ANSWER: {value}")
