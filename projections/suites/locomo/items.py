"""A locomo run's items, found again in the run itself, and how a turn is written as memory.

An item is one question of one sample (``LocomoItem``: the question and its whole sample,
whose turns the first unit of the sample ingests). A run records, in
``run_started.config``, the sha256 of the LoCoMo file it read and every sample it used as
loaded, each beside its content hash (``run_config``), so a reader, re-derivation and a
full replay find the items again without the file: the ledger is the user's, and the data
stays in it (never in this repository; docs/locomo.md).
"""

from __future__ import annotations

import hashlib
import re
from typing import Any, Final, NamedTuple

import msgspec

from benchledger.ledger import UnusableInput
from benchledger.ledger.codec import canonical_json
from benchledger.ledger.events import RunStartedBody
from benchledger.projections.suites.base import ItemSet
from benchledger.protocols import locomo
from benchledger.protocols.locomo import Question, Sample, Session, Turn

# A turn as one memory: its dialogue id and session date lead the text, so the dialogue
# ids a search retrieved are read off any platform's recorded result by one pattern.
_MEMORY_ID: Final = re.compile(r"\[([A-Za-z]*\d+:\d+) \| ")


class LocomoItem(NamedTuple):
    """One question (``SAMPLE:qN``) and the sample it is asked of."""

    question: Question
    sample: Sample

    @property
    def id(self) -> str:
        """The question's id: what a unit of this item is named by."""
        return self.question.id


def memory_text(turn: Turn, session: Session) -> str:
    """A turn as the memory ingestion writes: ``[D3:1 | DATE] Speaker: text``."""
    return f"[{turn.dia_id} | {session.date}] {turn.speaker}: {turn.text}"


def memory_id(text: str) -> str | None:
    """The dialogue id a memory's text (or a hit holding it) leads with (None: none)."""
    m = _MEMORY_ID.search(text)
    return m.group(1) if m else None


def item_hash(item: LocomoItem) -> str:
    """sha256 of the question and its sample's content hash: what ``unit_started`` pins."""
    return hashlib.sha256(canonical_json([item.sample.content_hash, item.question])).hexdigest()


def items_of(samples: tuple[Sample, ...]) -> list[LocomoItem]:
    """Every question of ``samples``, in file order."""
    return [LocomoItem(q, s) for s in samples for q in s.questions]


def run_config(loaded: locomo.LocomoSet) -> dict[str, Any]:
    """``run_started.config`` of a locomo run: the file's sha256 and every sample as loaded,
    each with its content hash (``Sample.content_hash``)."""
    return {
        "file_sha256": loaded.sha256,
        "samples": {
            s.sample_id: {"content_hash": s.content_hash, "sample": msgspec.to_builtins(s)}
            for s in loaded.samples
        },
    }


def _sample(run: str, sid: str, data: Any) -> Sample:
    where = f"config.samples[{sid!r}]"
    if not isinstance(data, dict):
        raise UnusableInput(run, f"{where} must be an object")
    try:
        return msgspec.convert(data.get("sample"), Sample)
    except msgspec.ValidationError as exc:
        raise UnusableInput(run, f"{where}.sample: not a LoCoMo sample ({exc})") from None


def items(header: RunStartedBody, given: str | None = None) -> ItemSet:
    """The run's questions by id: from the samples it recorded, or from the LoCoMo file
    ``given`` (checked against the recorded sha256: a note when it differs)."""
    run = "run_started"
    config = header.config
    notes: list[str] = []
    if given is not None:
        loaded = locomo.load(given)
        if loaded.sha256 != config.get("file_sha256"):
            notes.append(f"{given} does not hash to the file the run read "
                         f"({str(config.get('file_sha256'))[:12]})")  # fmt: skip
        found = items_of(loaded.samples)
        return ItemSet({i.id: i for i in found}, given, notes)
    recorded = config.get("samples")
    if not isinstance(recorded, dict) or not recorded:
        raise UnusableInput(run, "config.samples: the run recorded no LoCoMo samples")
    samples = []
    for sid, data in recorded.items():
        sample = _sample(run, sid, data)
        if sample.content_hash != data.get("content_hash"):
            notes.append(f"sample {sid}: the recorded content does not hash to its "
                         "recorded content_hash")  # fmt: skip
        samples.append(sample)
    found = items_of(tuple(samples))
    return ItemSet({i.id: i for i in found}, "(recorded in the run)", notes)
