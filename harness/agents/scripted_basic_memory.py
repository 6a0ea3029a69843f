"""The scripted agent in basic-memory's dialect: Markdown notes, searched as text.

On basic-memory (its vocabulary's dialect ``notes``) the scripted agent speaks
basic-memory's tools (as deterministic and model-free as on the other platforms): teach
writes the fact as an observation (``- [definition] FACT``) in the note named by the
protocol's dataset under ``datasets/`` (appending when that note exists); update replaces
the old fact's text with the correction in place (``edit_note`` ``find_replace``); the
questions search by keyword (``search_notes``, JSON): the fact's quoted term, else the
dataset name, since a text search for a whole question matches nothing. There is no SQL
there, so a surfaced fact is answered with the protocol's expected answer (the oracle).
It never names a project: the adapter scopes every call to the identity's own (and, for
searches, the shared one).
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

NOTES_DIALECT: Final = "notes"  # the vocabulary's dialect: speak basic-memory's notes
FOLDER: Final = "datasets"
NOTE_TYPE: Final = "dataset"


def observation(fact: str) -> str:
    """The fact as a basic-memory observation line."""
    return f"- [definition] {fact}"


def _refused_as_existing(text: str) -> bool:
    """Whether a write_note answer says the note already exists."""
    try:
        said = json.loads(text)
    except ValueError:
        return False
    return isinstance(said, dict) and said.get("error") == "NOTE_ALREADY_EXISTS"


def notes_turn(
    episode: Episode, results: list[dict[str, Any]], *, fact: str, query: str, answer: str
) -> Turn:
    """The next turn in basic-memory's dialect (see the module docstring): ``fact`` must
    surface in the search for ``query`` before ``answer`` is given ("": the stage asks no
    question, so it abstains)."""
    n = len(results)
    p = episode.protocol
    # the scripted agent answers these first
    assert not isinstance(p, Case | Task | LocomoItem | LongMemEvalItem)
    entity = dataset_name(p.entity_urn)
    if episode.stage == "teach":
        if n == 0:
            args = {
                "title": entity,
                "content": f"# {entity}\n\n{observation(p.fact)}\n",
                "directory": FOLDER,
                "note_type": NOTE_TYPE,
                "output_format": "json",
            }
            return Turn("", (ToolCall("call-1", "write_note", args),))
        if n == 1 and results[0].get("is_error") and _refused_as_existing(results[0]["text"]):
            # The note exists: add the fact to it.
            edit = {
                "identifier": f"{FOLDER}/{entity}",
                "operation": "append",
                "content": f"\n{observation(p.fact)}\n",
                "output_format": "json",
            }
            return Turn("", (ToolCall("call-2", "edit_note", edit),))
        saved = not results[-1].get("is_error")
        return Turn("Saved the definition." if saved else "I could not save the definition.")
    if episode.stage == "update" and p.update is not None:
        if n == 0:
            edit = {
                "identifier": f"{FOLDER}/{entity}",
                "operation": "find_replace",
                "find_text": p.fact,
                "content": p.update.fact,
                "output_format": "json",
            }
            return Turn("", (ToolCall("call-1", "edit_note", edit),))
        saved = not results[0].get("is_error")
        return Turn("Updated the definition." if saved else "I could not update it.")
    if n == 0:
        search = {"query": query, "output_format": "json"}
        return Turn("", (ToolCall("call-1", "search_notes", search),))
    found = not results[0].get("is_error") and surfaced(fact, results[0]["text"])
    if not answer or not found:
        return Turn(f"FINAL ANSWER: {ABSTAIN_ANSWER}")
    return Turn(f"FINAL ANSWER: {answer}")
