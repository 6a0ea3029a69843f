"""Loading and validating a LoCoMo file (``locomo10.json``'s published format; docs/locomo.md).

The file is the user's: benchledger never ships LoCoMo's data and pins the file it was given
by sha256, and each sample by the hash of the content a run uses. Keys the benchmark does
not use (images, events, observations, session summaries) are ignored, never required.
Every problem found is reported, one line each, as ``InvalidInput`` (exit 2).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from typing import Any

import msgspec

from benchledger.ledger.codec import TooDeep, canonical_json, check_depth
from benchledger.ledger.names import RULE, is_name
from benchledger.protocols.document import kind_of
from benchledger.protocols.errors import InvalidInput, Problem

CATEGORIES = (1, 2, 3, 4, 5)
ADVERSARIAL = 5
_SESSION = re.compile(r"session_(\d+)")


class Turn(msgspec.Struct, frozen=True):
    """One utterance: its dialogue id (``D3:1``), who said it and what."""

    dia_id: str
    speaker: str
    text: str


class Session(msgspec.Struct, frozen=True):
    """One dated session of a conversation (``number`` 3 is ``session_3``, id ``S3``)."""

    number: int
    date: str
    turns: tuple[Turn, ...]

    @property
    def id(self) -> str:
        """The session's id as LoCoMo's session-level evidence names it: ``S3``."""
        return f"S{self.number}"


class Question(msgspec.Struct, frozen=True):
    """One question: id ``SAMPLE_ID:qN`` (N counts the sample's ``qa`` from 1), its category
    (1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop, 5 adversarial), the gold answer
    (``adversarial_answer`` for category 5 when it has no ``answer``) and its evidence ids."""

    id: str
    question: str
    category: int
    answer: str
    evidence: tuple[str, ...]


class Sample(msgspec.Struct, frozen=True):
    """One conversation between two speakers, its sessions in order and its questions."""

    sample_id: str
    speaker_a: str
    speaker_b: str
    sessions: tuple[Session, ...]
    questions: tuple[Question, ...]

    @property
    def content_hash(self) -> str:
        """sha256 of the sample's canonical JSON (sorted keys, no whitespace): exactly the
        content a run uses, so an edit to an ignored key leaves it unchanged."""
        return hashlib.sha256(canonical_json(self)).hexdigest()


class LocomoSet(msgspec.Struct, frozen=True):
    """A LoCoMo file as loaded: its path, the sha256 of its bytes and its samples in order."""

    file: str
    sha256: str
    samples: tuple[Sample, ...]


def read_bytes(path: str) -> bytes:
    """The bytes of the file the user named: a symlink named by the user is followed (their
    choice, as import-peer does), but it must end at a regular file (a FIFO would block)."""
    problem = None
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            problem = "not a regular file"
        else:
            with open(path, "rb") as fh:
                if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                    problem = "not a regular file"
                else:
                    return fh.read()
    except OSError as exc:
        problem = f"cannot read: {exc.strerror or exc}"
    raise InvalidInput([Problem(path, None, "", problem)])


def load(path: str) -> LocomoSet:
    """The LoCoMo file at ``path``, checked whole; InvalidInput listing every problem."""
    data = read_bytes(path)
    digest = hashlib.sha256(data).hexdigest()
    return LocomoSet(path, digest, parse(data, path))


def parse(data: bytes, file: str) -> tuple[Sample, ...]:
    """The samples in LoCoMo JSON ``data`` (named ``file`` in problems); InvalidInput."""
    try:
        check_depth(data, where=file)  # the ledger's one nesting bound
    except TooDeep as exc:
        raise InvalidInput([Problem(file, None, "", exc.problem)]) from None
    try:
        doc = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise InvalidInput([Problem(file, None, "", f"not UTF-8 text ({exc.reason})")]) from None
    except json.JSONDecodeError as exc:
        raise InvalidInput([Problem(file, exc.lineno, "", f"not JSON: {exc.msg}")]) from None
    check = _Check(file)
    samples = check.samples(doc)
    if check.problems:
        raise InvalidInput(check.problems)
    return samples


class _Check:
    """Walks the decoded document, collecting ``FILE: sample:field: problem`` lines."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.problems: list[Problem] = []

    def problem(self, where: str, message: str) -> None:
        self.problems.append(Problem(self.file, None, where, message))

    def text(self, obj: dict[str, Any], where: str, key: str, *, empty: bool = False) -> str:
        value = obj.get(key)
        if value is None:
            self.problem(f"{where}.{key}", "missing")
        elif not isinstance(value, str):
            self.problem(f"{where}.{key}", f"must be text, got {kind_of(value)}")
        elif not empty and not value.strip():
            self.problem(f"{where}.{key}", "must not be empty")
        else:
            return value
        return ""

    def samples(self, doc: Any) -> tuple[Sample, ...]:
        if not isinstance(doc, list) or not doc:
            self.problem("", f"must be a non-empty list of samples, got {kind_of(doc)}")
            return ()
        out: list[Sample] = []
        seen: set[str] = set()
        for i, raw in enumerate(doc):
            if not isinstance(raw, dict):
                self.problem(f"[{i}]", f"a sample must be an object, got {kind_of(raw)}")
                continue
            sample_id = self.text(raw, f"[{i}]", "sample_id")
            if sample_id and (sample_id in seen or not is_name(sample_id)):
                # It names the ledger's units (``SAMPLE_ID:qN``): the ledger's name grammar.
                why = "appears twice" if sample_id in seen else RULE
                self.problem(f"[{i}].sample_id", f"{sample_id!r} {why}")
            seen.add(sample_id)
            if sample := self.sample(raw, sample_id or f"[{i}]"):
                out.append(sample)
        return tuple(out)

    def sample(self, raw: dict[str, Any], name: str) -> Sample | None:
        conv = raw.get("conversation")
        if not isinstance(conv, dict):
            self.problem(f"{name}:conversation", f"must be an object, got {kind_of(conv)}")
            return None
        speaker_a = self.text(conv, f"{name}:conversation", "speaker_a")
        speaker_b = self.text(conv, f"{name}:conversation", "speaker_b")
        sessions = self.sessions(conv, name)
        qa = raw.get("qa")
        if not isinstance(qa, list):
            self.problem(f"{name}:qa", f"must be a list of questions, got {kind_of(qa)}")
            return None
        questions = tuple(q for i, item in enumerate(qa) if (q := self.question(item, name, i)))
        return Sample(name, speaker_a, speaker_b, sessions, questions)

    def sessions(self, conv: dict[str, Any], name: str) -> tuple[Session, ...]:
        numbers = sorted(int(m[1]) for k in conv if (m := _SESSION.fullmatch(k)))
        if not numbers:
            self.problem(f"{name}:conversation", "holds no session_N")
        out: list[Session] = []
        ids: set[str] = set()
        for n in numbers:
            where = f"{name}:conversation.session_{n}"
            turns = conv[f"session_{n}"]
            date = self.text(conv, f"{name}:conversation", f"session_{n}_date_time")
            if not isinstance(turns, list):
                self.problem(where, f"must be a list of turns, got {kind_of(turns)}")
                continue
            kept: list[Turn] = []
            for j, turn in enumerate(turns):
                if not isinstance(turn, dict):
                    self.problem(f"{where}[{j}]", f"a turn must be an object, got {kind_of(turn)}")
                    continue
                dia_id = self.text(turn, f"{where}[{j}]", "dia_id")
                if dia_id in ids:
                    self.problem(f"{where}[{j}].dia_id", f"{dia_id!r} appears twice")
                ids.add(dia_id)
                speaker = self.text(turn, f"{where}[{j}]", "speaker")
                kept.append(
                    Turn(dia_id, speaker, self.text(turn, f"{where}[{j}]", "text", empty=True))
                )
            out.append(Session(n, date, tuple(kept)))
        return tuple(out)

    def question(self, item: Any, name: str, i: int) -> Question | None:
        where = f"{name}:qa[{i}]"
        if not isinstance(item, dict):
            self.problem(where, f"a question must be an object, got {kind_of(item)}")
            return None
        question = self.text(item, where, "question")
        category = item.get("category")
        if isinstance(category, bool) or category not in CATEGORIES:
            self.problem(f"{where}.category", f"must be one of 1 to 5, got {category!r}")
            return None
        key = "answer"
        if category == ADVERSARIAL and "answer" not in item:
            key = "adversarial_answer"
        answer = item.get(key)
        # LoCoMo writes some answers as numbers (a year): graded as their text.
        if isinstance(answer, (int, float)) and not isinstance(answer, bool):
            answer = str(answer)
        if not isinstance(answer, str):
            got = "missing" if answer is None else f"must be text, got {kind_of(answer)}"
            self.problem(f"{where}.{key}", got)
            return None
        evidence = item.get("evidence", [])
        if not isinstance(evidence, list) or not all(isinstance(e, str) for e in evidence):
            self.problem(f"{where}.evidence", "must be a list of dialogue ids (text)")
            return None
        return Question(f"{name}:q{i + 1}", question, category, answer, tuple(evidence))
