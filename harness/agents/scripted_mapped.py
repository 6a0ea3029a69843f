"""The scripted agent on a platform known only by its declared vocabulary.

A plugin's client, or a server known by its mapping (``--platform mcp:FILE``), declares
its memory verbs (``Episode.vocabulary``, harness/platforms/vocabulary.py), and the
scripted agent speaks them, with no dialect of its own: teach writes the fact with the
vocabulary's write call; update makes the vocabulary's correction (a mapping's: finding
the original's id with the read-back first when the correction names it by id; a
``delete`` correction then writes the corrected fact; without a correction the corrected
fact is written as a new memory); the questions search with the mapping's search call for a keyword
(the fact's quoted term, else the dataset name: a substring search finds nothing for a
whole question, a semantic one finds the fact either way) and, only when the fact
surfaced, answer with the protocol's expected answer (the oracle: there is no SQL).
"""

from __future__ import annotations

from typing import Any

from benchledger.harness.agents.base import Episode, ToolCall, Turn
from benchledger.harness.platforms.vocabulary import Vocabulary
from benchledger.projections.suites.locomo.items import LocomoItem
from benchledger.projections.suites.longmemeval.items import LongMemEvalItem
from benchledger.protocols.cases import Case
from benchledger.protocols.grading import ABSTAIN_ANSWER, surfaced
from benchledger.protocols.tasks import Task

K = 10  # results asked of a search


def _done(results: list[dict[str, Any]], ok: str, failed: str) -> Turn:
    return Turn(failed if any(r.get("is_error") for r in results) else ok)


def mapped_turn(
    vocab: Vocabulary, episode: Episode, results: list[dict[str, Any]], *,
    entity: str, fact: str, query: str, answer: str,
) -> Turn:  # fmt: skip
    """The next turn on a declared vocabulary (see the module docstring): ``fact`` must
    surface in the search for ``query`` before ``answer`` is given ("": no question,
    abstain)."""
    n = len(results)
    p = episode.protocol
    # the scripted agent answers these first
    assert not isinstance(p, Case | Task | LocomoItem | LongMemEvalItem)
    if episode.stage == "teach":
        if n == 0:
            return Turn("", (vocab.write_call("call-1", p.fact, entity),))
        return _done(results, "Saved the definition.", "I could not save the definition.")
    if episode.stage == "update" and p.update is not None:
        if vocab.lifecycle is None:
            return _corrected(vocab, results, entity=entity, old=p.fact, new=p.update.fact)
        return _update(vocab, results, entity=entity, old=p.fact, new=p.update.fact)
    if n == 0:
        return Turn("", (vocab.search_call("call-1", query, K),))
    found = not results[0].get("is_error") and surfaced(fact, results[0]["text"])
    if not answer or not found:
        return Turn(f"FINAL ANSWER: {ABSTAIN_ANSWER}")
    return Turn(f"FINAL ANSWER: {answer}")


def _corrected(
    vocab: Vocabulary, results: list[dict[str, Any]], *, entity: str, old: str, new: str
) -> Turn:
    """A correction by the vocabulary's own call, or, without one, the new fact written."""
    if results:
        return _done(results, "Updated the definition.", "I could not update it.")
    if vocab.correct is not None and vocab.correct_tool:
        return Turn("", (ToolCall("call-1", vocab.correct_tool, vocab.correct(old, new, entity)),))
    return Turn("", (vocab.write_call("call-1", new, entity),))


def _update(
    vocab: Vocabulary, results: list[dict[str, Any]], *, entity: str, old: str, new: str
) -> Turn:
    """The correction: [read back to find the original's id,] correct, [write the new fact]."""
    m = vocab.lifecycle
    if m is None or m.correction is None:  # the platform reports update not applicable
        return Turn("This memory cannot be corrected here.")
    steps: list[str] = (["find"] if m.needs_id else []) + ["correct"]
    steps += ["write"] if m.correction_mode == "delete" else []
    n = len(results)
    if n and results[-1].get("is_error"):
        return Turn("I could not update it.")
    if n >= len(steps):
        return Turn("Updated the definition.")
    step = steps[n]
    call = f"call-{n + 1}"
    if step == "find":
        args = m.fill_readback(fact=old, entity=entity)
        return Turn("", (ToolCall(call, m.readback.tool, args),))
    if step == "correct":
        ident = ""
        if m.needs_id:
            ids = [i for i, said in m.memories(results[0]["text"]) if surfaced(old, said)]
            if not ids:
                return Turn("I could not find the definition to correct.")
            ident = ids[0]
        args = m.fill_correction(id=ident, old=old, fact=new, entity=entity)
        return Turn("", (ToolCall(call, m.correction.tool, args),))
    return Turn("", (vocab.write_call(call, new, entity),))
