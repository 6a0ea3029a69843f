"""A model answering LoCoMo from memories (docs/locomo.md, "A model answers"): the harness
searches, the model reads.

On a LoCoMo ``ask`` episode a model agent does not get the platform's tools. Its first
turn is the harness's own (no model call): one search with the question at the run's
depth (``Episode.search_k``) in the platform's declared vocabulary. The model is then
asked once, with ``PROMPT`` (shipped here; its blake3 ``PROMPT_HASH`` is in the run
record) filled with the question and the memories: exactly the hits of the recorded
search result, itemised by the platform's hit rule (``projections.retrieval.hits``, the
rule ``episode_finished.hits`` records), best first. The controls
(``projections.suites.locomo.controls``) fill the same prompt with no memories
(``no-memory``) or with the whole conversation cut to its budget (``full-context``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import blake3

from benchledger.harness.agents.base import Episode, Turn
from benchledger.projections import retrieval
from benchledger.projections.suites.locomo.controls import conversation
from benchledger.projections.suites.locomo.decisions import ASK
from benchledger.projections.suites.locomo.items import LocomoItem

SEARCH: Final = "search"  # the harness searches, the model reads what came back
NONE: Final = "none"  # no-memory: no search, no memories
FULL: Final = "full"  # full-context: the whole conversation, cut to the budget
MODES: Final = (SEARCH, NONE, FULL)
CALL_ID: Final = "harness-search"
NO_MEMORIES: Final = "(none)"
PROMPT: Final = (
    "You are answering a question about a long conversation between two people. Below are "
    "memories of that conversation: each is one dialogue turn, written "
    "[DIALOGUE_ID | DATE] Speaker: text. Answer from these memories only, as briefly as "
    "you can (a few words; for a question about when, the date as the memories give it, "
    "or relative to it). If the memories do not say, answer "
    "'no information available'. End your reply with a line 'FINAL ANSWER: <answer>'.\n"
    "\n"
    "Memories:\n"
    "{memories}\n"
    "\n"
    "Question: {question}"
)
PROMPT_HASH: Final = blake3.blake3(PROMPT.encode()).hexdigest()
_MEMORY: Final = "[memory {n}]\n{text}"


def prompt(question: str, memories: Sequence[str]) -> str:
    """``PROMPT`` for ``question`` and ``memories`` (best first), each memory as
    ``[memory N]`` on a line of its own and then its text as recorded."""
    shown = "\n".join(_MEMORY.format(n=n, text=m) for n, m in enumerate(memories, 1))
    return PROMPT.format(memories=shown or NO_MEMORIES, question=question)


def applies(episode: Episode, mode: str) -> bool:
    """Whether ``episode`` is answered this way: a LoCoMo question asked in a run that
    records a search depth (a run recorded before asks the model with the tools), or one of
    the controls."""
    if episode.stage != ASK or not isinstance(episode.protocol, LocomoItem):
        return False
    return mode != SEARCH or episode.search_k > 0


def hits(messages: Sequence[dict[str, Any]], rule: Any) -> list[str]:
    """The hits of the harness's search results among ``messages``, in rank order."""
    out: list[str] = []
    for m in messages:
        if m["role"] == "tool" and not m.get("is_error"):
            out += retrieval.hits(str(m.get("text", "")), rule)
    return out


def step(episode: Episode, messages: Sequence[dict[str, Any]], mode: str) -> Turn | str:
    """The harness's search turn (a ``Turn`` with no model call), or the user prompt the
    model answers with (a ``str``), for a LoCoMo ask episode (pure)."""
    item: LocomoItem = episode.protocol  # type: ignore[assignment]  # ``applies`` checked
    question = item.question.question
    vocab = episode.vocabulary
    if mode == FULL:
        return prompt(question, conversation(item.sample, episode.context_budget).memories)
    if mode == NONE or vocab is None:
        return prompt(question, ())
    if not any(m["role"] == "tool" for m in messages):
        return Turn("", (vocab.search_call(CALL_ID, question, episode.search_k),))
    return prompt(question, hits(messages, vocab.hits))


def locomo_only(agent: str, items: Sequence[Any]) -> None:
    """ValueError, one line, when a LoCoMo control (``agent``) is given other items."""
    if any(not isinstance(i, LocomoItem) for i in items):
        raise ValueError(f"--agent {agent} is a LoCoMo control: it runs with --suite locomo only")


__all__ = [
    "CALL_ID",
    "FULL",
    "MODES",
    "NONE",
    "NO_MEMORIES",
    "PROMPT",
    "PROMPT_HASH",
    "SEARCH",
    "applies",
    "hits",
    "locomo_only",
    "prompt",
    "step",
]
