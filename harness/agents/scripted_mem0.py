"""The scripted agent in mem0's dialect: one memory per fact, searched by meaning.

On mem0 (its vocabulary's dialect ``mem0``: benchledger's MCP server over mem0,
docs/mem0.md) the scripted agent speaks its tools, as deterministic and model-free
as on the other platforms: teach adds the fact as one memory naming the protocol's dataset
(``DATASET: FACT``); update searches for the old fact and replaces that memory's text with
the correction (``update_memory``; a new memory when the old one is not found); the
questions search with the question as asked (mem0 ranks by embedding similarity, so a
whole question is a fair query). There is no SQL there, so a surfaced fact is answered
with the protocol's expected answer (the oracle). It never names a user: the adapter
scopes every call to the identity's own memories (and, for searches, the shared ones).
"""

from __future__ import annotations

import json
from typing import Any, Final

from benchledger.harness.agents.base import Episode, ToolCall, Turn
from benchledger.harness.platforms.server_memory import dataset_name
from benchledger.projections.suites.locomo.items import LocomoItem
from benchledger.projections.suites.longmemeval.items import LongMemEvalItem
from benchledger.protocols.cases import Case
from benchledger.protocols.grading import ABSTAIN_ANSWER, surfaced
from benchledger.protocols.tasks import Task

MEM0_DIALECT: Final = "mem0"  # the vocabulary's dialect: speak mem0's memories
SEARCH_LIMIT: Final = 10


def memory_text(entity_urn: str, fact: str) -> str:
    """How a fact is written: one memory naming the dataset it is about."""
    return f"{dataset_name(entity_urn)}: {fact}"


def holding(result_text: str, fact: str) -> str:
    """The id of the first memory of a search answer whose text shows ``fact`` ("": none)."""
    try:
        said = json.loads(result_text)
    except ValueError:
        return ""
    found = said.get("results") if isinstance(said, dict) else None
    for row in found if isinstance(found, list) else []:
        if isinstance(row, dict) and surfaced(fact, str(row.get("memory") or "")):
            return str(row.get("id") or "")
    return ""


def mem0_turn(episode: Episode, results: list[dict[str, Any]], *, fact: str, answer: str) -> Turn:
    """The next turn in mem0's dialect (see the module docstring): ``fact`` must surface in
    the search before ``answer`` is given ("": the stage asks no question, so it abstains)."""
    n = len(results)
    p = episode.protocol
    # the scripted agent answers these first
    assert not isinstance(p, Case | Task | LocomoItem | LongMemEvalItem)
    if episode.stage == "teach":
        if n == 0:
            args = {"text": memory_text(p.entity_urn, p.fact)}
            return Turn("", (ToolCall("call-1", "add_memory", args),))
        saved = not results[0].get("is_error")
        return Turn("Saved the definition." if saved else "I could not save the definition.")
    if episode.stage == "update" and p.update is not None:
        new = memory_text(p.entity_urn, p.update.fact)
        if n == 0:
            search = {"query": p.fact, "limit": SEARCH_LIMIT}
            return Turn("", (ToolCall("call-1", "search_memories", search),))
        if n == 1:
            old = "" if results[0].get("is_error") else holding(results[0]["text"], p.fact)
            if old:
                edit = {"memory_id": old, "text": new}
                return Turn("", (ToolCall("call-2", "update_memory", edit),))
            return Turn("", (ToolCall("call-2", "add_memory", {"text": new}),))
        saved = not results[1].get("is_error")
        return Turn("Updated the definition." if saved else "I could not update it.")
    if n == 0:
        search = {"query": episode.user_prompt, "limit": SEARCH_LIMIT}
        return Turn("", (ToolCall("call-1", "search_memories", search),))
    found = not results[0].get("is_error") and bool(holding(results[0]["text"], fact))
    if not answer or not found:
        return Turn(f"FINAL ANSWER: {ABSTAIN_ANSWER}")
    return Turn(f"FINAL ANSWER: {answer}")
