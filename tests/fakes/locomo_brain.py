"""A fake model's way of answering LoCoMo from the memories in its prompt, by rule, as the
fake provider servers' brain (``FakeProvider(brain)``): deterministic, no network.

It reads the prompt ``harness/agents/answering.py`` writes: the memories (``[memory N]``
then the memory's text) and the question. It answers the memory that shares the most
content words with the question (the retrieval reader's ``words``; ties: the earlier
memory), without its ``[id | date] Speaker:`` lead, and "no information available" when no
memory shares a word. Every prompt it parsed is kept, for tests to check what a model was
shown.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

from benchledger.harness.agents.answering import NO_MEMORIES
from benchledger.harness.agents.base import Turn
from benchledger.harness.agents.retrieval import hit_texts, words

_PROMPT: Final = re.compile(r"\nMemories:\n(?P<memories>.*)\n\nQuestion: (?P<question>.*)$", re.S)
_MEMORY: Final = re.compile(r"^\[memory (\d+)\]\n", re.M)
_LEAD: Final = re.compile(r"^\[[^\]]*\] (?:[^:\n]{1,80}: )?")


def parse(prompt: str) -> tuple[list[str], str]:
    """(the memories, the question) of an answer prompt; ValueError if it is not one."""
    m = _PROMPT.search(prompt)
    if m is None:
        raise ValueError("not a LoCoMo answer prompt")
    block = m["memories"]
    if block == NO_MEMORIES:
        return [], m["question"]
    parts = _MEMORY.split(block)  # ["", "1", text, "2", text, ...]
    return [t.removesuffix("\n") for t in parts[2::2]], m["question"]


def _text(memory: str) -> str:
    """A memory's words as a reader would take them: a JSON hit's string field holding a
    turn (else all its string fields), without the turn's lead."""
    try:
        json.loads(memory)
    except ValueError:
        return _LEAD.sub("", memory)
    texts = hit_texts(memory)
    turns = [t for t in texts if _LEAD.match(t)]
    return " ".join(_LEAD.sub("", t) for t in (turns or texts))


class LocomoBrain:
    """Answers LoCoMo prompts by rule (module docstring)."""

    def __init__(self) -> None:
        self.prompts: list[tuple[list[str], str]] = []

    def decide(self, system: str, messages: list[dict[str, Any]]) -> Turn:
        prompt = next(m["text"] for m in messages if m["role"] == "user")
        memories, question = parse(prompt)
        self.prompts.append((memories, question))
        wanted = words(question)
        best, shared = "", 0
        for memory in memories:
            text = _text(memory)
            n = len(wanted & words(text))
            if n > shared:
                best, shared = text, n
        return Turn(f"FINAL ANSWER: {best.strip() or 'no information available'}")
