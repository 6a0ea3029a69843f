"""LoCoMo's controls: runs that answer without searching the platform, set beside a
platform's runs to show what knowing nothing, or knowing everything, scores
(docs/locomo.md, "Controls").

- ``no-memory``: the retrieval reader with no search (it abstains on every question), or
  ``no-memory:SPEC`` a model (any model spec) answering each question from no memories;
- ``full-context:SPEC``: a model given the whole conversation, every turn written as the
  ingestion writes it, in order, cut to a token budget (``conversation``): when the
  conversation is longer, its earliest turns are left out, so the latest fit.

A run's agent spec says whether it is a control (``control``); the budget is recorded in
the run record (``RunRecord.context_budget``), so what a question was shown is found
again from the run alone.
"""

from __future__ import annotations

import math
from typing import Final, NamedTuple

from benchledger.projections.suites.locomo.items import memory_text
from benchledger.protocols.locomo import Sample

NO_MEMORY: Final = "no-memory"
FULL_CONTEXT: Final = "full-context"
CONTROLS: Final = (NO_MEMORY, FULL_CONTEXT)
DEFAULT_CONTEXT_BUDGET: Final = 100_000  # tokens: LoCoMo's longest conversation fits whole
CHARS_PER_TOKEN: Final = 4  # the estimate a budget is counted in (no tokenizer is assumed)


def control(agent: str) -> str:
    """The control an agent spec names (``no-memory``, ``full-context``), "" for none."""
    name = agent.partition(":")[0]
    return name if name in CONTROLS else ""


def tokens(text: str) -> int:
    """A text's estimated tokens: one per ``CHARS_PER_TOKEN`` characters, rounded up."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


class Context(NamedTuple):
    """What the full-context control shows of a conversation: its memories in order, how
    many turns it has and how many are shown (fewer: cut to the budget)."""

    memories: tuple[str, ...]
    turns: int

    @property
    def truncated(self) -> bool:
        return len(self.memories) < self.turns


def conversation(sample: Sample, budget: int) -> Context:
    """Every turn of ``sample`` as a memory, in order, less its earliest turns while the
    whole is estimated above ``budget`` tokens (0: no budget)."""
    texts = [memory_text(t, s) for s in sample.sessions for t in s.turns]
    kept: list[str] = []
    used = 0
    for text in reversed(texts):  # the latest first: the earliest are the ones cut
        used += tokens(text)
        if budget and used > budget:
            break
        kept.append(text)
    return Context(tuple(reversed(kept)), len(texts))


__all__ = [
    "CHARS_PER_TOKEN",
    "CONTROLS",
    "DEFAULT_CONTEXT_BUDGET",
    "FULL_CONTEXT",
    "NO_MEMORY",
    "Context",
    "control",
    "conversation",
    "tokens",
]
