"""A longmemeval run's items, found again in the run itself, and how a turn is written as memory.

An item is one question with its own haystack (``LongMemEvalItem``). A run records, in
``run_started.config``, the sha256 of the file it read and every question as loaded, each
beside its content hash (``run_config``), so a reader, re-derivation and a full replay
find the items again without the file (the data is the user's; docs/longmemeval.md).
"""

from __future__ import annotations

import re
from typing import Any, Final, NamedTuple

import msgspec

from benchledger.ledger import UnusableInput
from benchledger.ledger.events import RunStartedBody
from benchledger.projections.suites.base import ItemSet
from benchledger.protocols import longmemeval
from benchledger.protocols.longmemeval import Question, Session, Turn

# A turn as one memory leads with its id (``SESSION_N``, N its 1-based place in the
# session, as LongMemEval's turn-level corpus ids are) and its session's date, so the
# turns a search retrieved are read off any platform's recorded result by one pattern.
_MEMORY_ID: Final = re.compile(r"\[([^\s|\[\]]+_[0-9]+) \| ")


class LongMemEvalItem(NamedTuple):
    """One question (its id names the unit) and its haystack."""

    question: Question

    @property
    def id(self) -> str:
        return self.question.id


def turn_id(session: Session, index: int) -> str:
    """The id of the session's turn at 0-based ``index``: ``SESSION_N``, N = index + 1."""
    return f"{session.id}_{index + 1}"


def memory_text(turn: Turn, session: Session, index: int) -> str:
    """A turn as the memory ingestion writes: ``[SESSION_N | DATE] role: content``."""
    return f"[{turn_id(session, index)} | {session.date}] {turn.role}: {turn.content}"


def memory_id(text: str) -> str | None:
    """The turn id a memory's text (or a hit holding it) leads with (None: none)."""
    m = _MEMORY_ID.search(text)
    return m.group(1) if m else None


def turns(question: Question) -> int:
    """How many turns the question's haystack holds (what its ingestion writes)."""
    return sum(len(s.turns) for s in question.sessions)


def item_hash(item: LongMemEvalItem) -> str:
    """The question's content hash: what ``unit_started`` pins."""
    return item.question.content_hash


def items_of(questions: tuple[Question, ...]) -> list[LongMemEvalItem]:
    return [LongMemEvalItem(q) for q in questions]


def run_config(loaded: longmemeval.LongMemEvalSet) -> dict[str, Any]:
    """``run_started.config``: the file's sha256 and every question as loaded, each with its
    content hash."""
    return {
        "file_sha256": loaded.sha256,
        "questions": {
            q.id: {"content_hash": q.content_hash, "question": msgspec.to_builtins(q)}
            for q in loaded.questions
        },
    }


def items(header: RunStartedBody, given: str | None = None) -> ItemSet:
    """The run's questions by id: from those it recorded, or from the file ``given``
    (checked against the recorded sha256: a note when it differs)."""
    run = "run_started"
    config = header.config
    notes: list[str] = []
    if given is not None:
        loaded = longmemeval.load(given)
        if loaded.sha256 != config.get("file_sha256"):
            notes.append(f"{given} does not hash to the file the run read "
                         f"({str(config.get('file_sha256'))[:12]})")  # fmt: skip
        return ItemSet({i.id: i for i in items_of(loaded.questions)}, given, notes)
    recorded = config.get("questions")
    if not isinstance(recorded, dict) or not recorded:
        raise UnusableInput(run, "config.questions: the run recorded no LongMemEval questions")
    found = []
    for qid, data in recorded.items():
        where = f"config.questions[{qid!r}]"
        if not isinstance(data, dict):
            raise UnusableInput(run, f"{where} must be an object")
        try:
            q = msgspec.convert(data.get("question"), Question)
        except msgspec.ValidationError as exc:
            raise UnusableInput(run, f"{where}.question: not a LongMemEval question ({exc})"
                                ) from None  # fmt: skip
        if q.content_hash != data.get("content_hash"):
            notes.append(f"question {qid}: the recorded content does not hash to its "
                         "recorded content_hash")  # fmt: skip
        found.append(LongMemEvalItem(q))
    return ItemSet({i.id: i for i in found}, "(recorded in the run)", notes)


__all__ = ["LongMemEvalItem", "item_hash", "items", "items_of", "memory_id", "memory_text",
           "run_config", "turn_id", "turns"]  # fmt: skip
