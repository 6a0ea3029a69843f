"""The scripted agent: deterministic, no model, no key — it measures the platform's mechanics.

It speaks the peer's tools (txn2/mcp-data-platform): teach/update capture the
(corrected) fact with ``memory_capture`` (type ``schema_entity``, a category from the
peer's enum, linked to the protocol's entity). recall/transfer/update_recall
``search`` for the question; only if the taught fact surfaced in the results does it
answer: with the protocol's stored query through ``trino_query`` when it has one,
otherwise (the peer's protocols carry no query) with the protocol's expected answer,
as an oracle that knows the data but not the definition. Otherwise, and always for
abstain, it answers INSUFFICIENT INFORMATION. Its scores measure capture, surfacing
and promotion, never reasoning.
"""

from __future__ import annotations

import json
from typing import Any, Final

from harness.agents.base import Agent, Episode, ToolCall, Turn, UnitInfo
from harness.models.transport import ModelObserver
from protocols.grading import ABSTAIN_ANSWER, surfaced
from protocols.schema import Grading, Question

CAPTURE_TYPE: Final = "schema_entity"
CAPTURE_CATEGORY: Final = "business_context"


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


def first_json(text: str) -> Any:
    """The first JSON value of a tool result; enrichment may append more text after it."""
    try:
        value, _ = json.JSONDecoder().raw_decode(text.lstrip())
    except ValueError:
        return None
    return value


def first_value(result_text: str) -> str | None:
    """The first column of the first row of a ``trino_query`` result, as text."""
    data = first_json(result_text)
    try:
        row = data["rows"][0]
        value = row[data["columns"][0]["name"]] if isinstance(row, dict) else row[0]
    except (KeyError, IndexError, TypeError):
        return None
    return None if value is None else str(value)


def oracle(g: Grading) -> str:
    """The answer a grader expects: the numeric value, or the first alias."""
    if g.kind == "numeric" and g.value is not None:
        return str(int(g.value)) if float(g.value).is_integer() else repr(float(g.value))
    return g.aliases[0] if g.aliases else ""


class ScriptedAgent:
    name = "scripted"
    model = ""
    records_model_calls = False

    def for_unit(self, unit: UnitInfo) -> Agent:
        """Stateless: one scripted agent serves every unit."""
        return self

    async def next_turn(
        self,
        episode: Episode,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        observer: ModelObserver | None = None,
    ) -> Turn:
        return self.decide(episode, messages)

    def decide(self, episode: Episode, messages: list[dict[str, Any]]) -> Turn:
        """The next turn, from the episode and the tool results so far (pure)."""
        results = [m for m in messages if m["role"] == "tool"]
        n = len(results)
        p = episode.protocol
        if episode.stage in ("teach", "update"):
            if n == 0:
                fact = p.update.fact if episode.stage == "update" and p.update else p.fact
                args = {"type": CAPTURE_TYPE, "content": fact, "category": CAPTURE_CATEGORY,
                        "entity_urns": [p.entity_urn]}  # fmt: skip
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
            if not found:
                return Turn(f"FINAL ANSWER: {ABSTAIN_ANSWER}")
            if not question.query:
                return Turn(f"FINAL ANSWER: {oracle(question.grading)}")
            return Turn("", (ToolCall("call-2", "trino_query", {"sql": question.query}),))
        value = None if results[1].get("is_error") else first_value(results[1]["text"])
        if value is None:
            return Turn(f"FINAL ANSWER: {ABSTAIN_ANSWER}")
        return Turn(f"FINAL ANSWER: {value}")
