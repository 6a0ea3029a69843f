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

On server-memory (its vocabulary's dialect ``graph``) it speaks
@modelcontextprotocol/server-memory's knowledge-graph tools instead: teach writes the fact
as an observation on the protocol's entity (``create_entities``, or ``add_observations``
when the entity exists), update
deletes the old observation and adds the corrected one, and the questions search by
keyword (``search_nodes`` matches a contiguous substring, so a whole question finds
nothing): the fact's quoted term, else the entity's name. There is no SQL there, so a
surfaced fact is answered with the oracle.

Which dialect it speaks is the platform's declared vocabulary's (``Episode.vocabulary``,
harness/platforms/vocabulary.py: ``dialect``), never the tools a session lists; a platform
declaring a vocabulary of its own (a plugin, a mapping) is spoken through it alone
(``scripted_mapped``), and one declaring none gets the peer's calls, which count as
nothing there (harness/episode.py: only a listed tool's call counts).
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from typing import Any, Final

from benchledger.harness.agents.base import Agent, Episode, ToolCall, Turn, UnitInfo
from benchledger.harness.agents.scripted_basic_memory import NOTES_DIALECT, notes_turn
from benchledger.harness.agents.scripted_cases import case_turn
from benchledger.harness.agents.scripted_locomo import locomo_turn
from benchledger.harness.agents.scripted_mapped import mapped_turn
from benchledger.harness.agents.scripted_mem0 import MEM0_DIALECT, mem0_turn
from benchledger.harness.agents.scripted_tasks import task_turn
from benchledger.harness.models.transport import ModelObserver
from benchledger.harness.platforms.server_memory import dataset_name
from benchledger.projections.suites.locomo.items import LocomoItem
from benchledger.projections.suites.longmemeval.items import LongMemEvalItem
from benchledger.protocols.cases import Case
from benchledger.protocols.grading import ABSTAIN_ANSWER, surfaced
from benchledger.protocols.schema import Grading, Question
from benchledger.protocols.tasks import Task

CAPTURE_TYPE: Final = "schema_entity"
CAPTURE_CATEGORY: Final = "business_context"
GRAPH_DIALECT: Final = "graph"  # server-memory's vocabulary: its knowledge-graph tools
ENTITY_TYPE: Final = "dataset"
_QUOTED = re.compile(r"'([^']+)'")


def _question(episode: Episode) -> tuple[Question | None, str]:
    """The stage's question and the fact that must surface before it can be answered."""
    p = episode.protocol
    if isinstance(p, Case | Task | LocomoItem | LongMemEvalItem):  # answered by their own turns
        return None, ""
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


def keyword(fact: str, entity_urn: str) -> str:
    """What to search a knowledge graph for: the fact's quoted term, else the entity's name."""
    m = _QUOTED.search(fact)
    return m.group(1) if m else dataset_name(entity_urn)


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
        return self.decide(episode, messages, {t["name"] for t in tools})

    def decide(
        self, episode: Episode, messages: list[dict[str, Any]], tools: Collection[str] = ()
    ) -> Turn:
        """The next turn, from the episode, the tool results so far and the tools' names (pure)."""
        p = episode.protocol
        if isinstance(p, Case):
            return case_turn(episode, messages)
        if isinstance(p, Task):
            return task_turn(episode, messages, first_value)
        if isinstance(p, LocomoItem | LongMemEvalItem):
            return locomo_turn(episode, messages, tools)
        results = [m for m in messages if m["role"] == "tool"]
        n = len(results)
        vocab = episode.vocabulary
        dialect = vocab.dialect if vocab is not None else "peer"
        if vocab is not None and not dialect:  # a vocabulary of its own (scripted_mapped.py)
            question, fact = _question(episode)
            said = oracle(question.grading) if question is not None else ""
            entity, query = dataset_name(p.entity_urn), keyword(fact, p.entity_urn)
            return mapped_turn(vocab, episode, results, entity=entity, fact=fact, query=query,
                               answer=said)  # fmt: skip
        if dialect == GRAPH_DIALECT:
            return self._graph_turn(episode, results)
        if dialect == MEM0_DIALECT:  # mem0's memories (scripted_mem0.py)
            question, fact = _question(episode)
            said = oracle(question.grading) if question is not None else ""
            return mem0_turn(episode, results, fact=fact, answer=said)
        if dialect == NOTES_DIALECT:  # basic-memory's Markdown notes
            question, fact = _question(episode)
            said = oracle(question.grading) if question is not None else ""
            query = keyword(fact, p.entity_urn)
            return notes_turn(episode, results, fact=fact, query=query, answer=said)
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

    def _graph_turn(self, episode: Episode, results: list[dict[str, Any]]) -> Turn:
        """The next turn in server-memory's dialect (see the module docstring)."""
        n = len(results)
        p = episode.protocol
        # decide() answers these first
        assert not isinstance(p, Case | Task | LocomoItem | LongMemEvalItem)
        entity = dataset_name(p.entity_urn)
        if episode.stage == "teach":
            if n == 0:
                new = {"name": entity, "entityType": ENTITY_TYPE, "observations": [p.fact]}
                return Turn("", (ToolCall("call-1", "create_entities", {"entities": [new]}),))
            if n == 1 and not results[0].get("is_error") and first_json(results[0]["text"]) == []:
                # The entity already existed, so create_entities wrote nothing: add to it.
                adds = [{"entityName": entity, "contents": [p.fact]}]
                return Turn("", (ToolCall("call-2", "add_observations", {"observations": adds}),))
            saved = not results[-1].get("is_error")
            return Turn("Saved the definition." if saved else "I could not save the definition.")
        if episode.stage == "update" and p.update is not None:
            if n == 0:
                old = [{"entityName": entity, "observations": [p.fact]}]
                return Turn("", (ToolCall("call-1", "delete_observations", {"deletions": old}),))
            if n == 1:
                adds = [{"entityName": entity, "contents": [p.update.fact]}]
                return Turn("", (ToolCall("call-2", "add_observations", {"observations": adds}),))
            saved = not any(r.get("is_error") for r in results)
            return Turn("Updated the definition." if saved else "I could not update it.")
        question, fact = _question(episode)
        if n == 0:
            query = {"query": keyword(fact, p.entity_urn)}
            return Turn("", (ToolCall("call-1", "search_nodes", query),))
        found = not results[0].get("is_error") and surfaced(fact, results[0]["text"])
        if question is None or not found:
            return Turn(f"FINAL ANSWER: {ABSTAIN_ANSWER}")
        return Turn(f"FINAL ANSWER: {oracle(question.grading)}")
