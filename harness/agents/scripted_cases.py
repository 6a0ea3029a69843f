"""The scripted agent on a provenance case: teach the primes, then answer citing its hits.

Deterministic and model-free, like the lifecycle script. A prime episode saves its
prompt with one ``memory_capture``: a definition as reviewed knowledge
(``business_knowledge``, which goes to review: a teaching), anything else as a personal
note (``episodic_event``, live at once: a memory). The scored episode splits the
question into its parts (``..., and ...``), searches each part once, and for each part
uses the best hit it has not used yet (groups come best source first). It answers with
those hits' text and cites their ``ref``s on a ``SOURCES:`` line; with no hits it
abstains and cites nothing. It never reads the case's expected sources.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

from benchledger.harness.agents.base import Episode, ToolCall, Turn
from benchledger.protocols.grading import ABSTAIN_ANSWER

TEACHING_TYPE: Final = "business_knowledge"
MEMORY_TYPE: Final = "episodic_event"
CATEGORY: Final = "business_context"
SEARCH_LIMIT: Final = 10
_PARTS: Final = re.compile(r",\s+and\s+|;\s+")


def question_parts(prompt: str) -> list[str]:
    """A question split at ``, and`` and ``;`` into the parts it asks (at least one)."""
    parts = [p.strip() for p in _PARTS.split(prompt) if p.strip()]
    return parts or [prompt]


def capture_type(prompt: str) -> str:
    """A definition is taught for review; any other note is kept as a personal memory."""
    return TEACHING_TYPE if "definition" in prompt.lower() else MEMORY_TYPE


def _hits(text: str) -> list[dict[str, Any]]:
    """A search result's hits, best source first, each group's hits best first."""
    try:
        data, _ = json.JSONDecoder().raw_decode(text.lstrip())
    except ValueError:
        return []
    groups = data.get("groups") if isinstance(data, dict) else None
    return [h for g in groups or [] if isinstance(g, dict) for h in g.get("hits") or []
            if isinstance(h, dict) and isinstance(h.get("ref"), str) and h["ref"]]  # fmt: skip


def _teach(episode: Episode, results: list[dict[str, Any]]) -> Turn:
    if not results:
        args = {"type": capture_type(episode.user_prompt), "content": episode.user_prompt,
                "category": CATEGORY}  # fmt: skip
        return Turn("", (ToolCall("call-1", "memory_capture", args),))
    saved = not results[0].get("is_error")
    return Turn("Saved." if saved else "I could not save it.")


def _answer(episode: Episode, results: list[dict[str, Any]]) -> Turn:
    parts = question_parts(episode.user_prompt)
    n = len(results)
    if n < len(parts):
        args = {"intent": parts[n], "limit": SEARCH_LIMIT}
        return Turn("", (ToolCall(f"call-{n + 1}", "search", args),))
    used: list[dict[str, Any]] = []
    for result in results:
        hits = [] if result.get("is_error") else _hits(str(result.get("text", "")))
        hit = next((h for h in hits if h["ref"] not in {u["ref"] for u in used}), None)
        if hit is not None:
            used.append(hit)
    if not used:
        return Turn(f"FINAL ANSWER: {ABSTAIN_ANSWER}")
    said = " / ".join(" ".join(str(h.get("text", "")).split())[:200] for h in used)
    return Turn(f"FINAL ANSWER: {said}\nSOURCES: {', '.join(h['ref'] for h in used)}")


def case_turn(episode: Episode, messages: list[dict[str, Any]]) -> Turn:
    """The next turn of a provenance episode: a prime (teach) or the scored answer (pure)."""
    results = [m for m in messages if m["role"] == "tool"]
    if episode.stage.startswith("prime"):
        return _teach(episode, results)
    return _answer(episode, results)
