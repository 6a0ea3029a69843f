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
import sys
from collections.abc import Sequence
from typing import Any, Final, NamedTuple

import msgspec

from benchledger.ledger.codec import TooDeep, canonical_json, check_depth
from benchledger.ledger.names import RULE, is_name
from benchledger.protocols.document import FieldCheck, kind_of
from benchledger.protocols.errors import InvalidInput, Problem

CATEGORIES = (1, 2, 3, 4, 5)
ADVERSARIAL = 5
# A session key as LoCoMo writes it: ASCII digits, no leading zero, a sane number of them.
# Anything else spelled like one (``session_01``, another script's digits) is refused, not
# read as the session it does not name.
_SESSION = re.compile(r"session_([1-9][0-9]{0,5})", re.ASCII)
_SESSION_LIKE = re.compile(r"session_(\d+)")
# A well-formed dialogue id: D<session>:<turn>.
_DIA_ID = re.compile(r"D([1-9][0-9]*):([1-9][0-9]*)", re.ASCII)
_SURROGATE = re.compile("[\ud800-\udfff]")
REPLACEMENT = "\ufffd"


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
    """A LoCoMo file as loaded: its path, the sha256 of its bytes and its samples in order;
    ``surrogates``: how many lone surrogate escapes (``\\ud83d`` with no pair) were read as
    U+FFFD (the ledger, UTF-8 throughout, cannot hold one)."""

    file: str
    sha256: str
    samples: tuple[Sample, ...]
    surrogates: int = 0


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
    doc, surrogates = decode(data, path)
    return LocomoSet(path, digest, samples_of(doc, path), surrogates)


def parse(data: bytes, file: str) -> tuple[Sample, ...]:
    """The samples in LoCoMo JSON ``data`` (named ``file`` in problems); InvalidInput."""
    return samples_of(decode(data, file)[0], file)


def decode(data: bytes, file: str) -> tuple[Any, int]:
    """LoCoMo JSON ``data`` decoded, each lone surrogate escape read as U+FFFD, and how many
    there were; InvalidInput (one line) for what is not JSON."""
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
    except ValueError:  # Python's bound on int() of a long digit string
        why = f"a number of more than {sys.get_int_max_str_digits()} digits"
        raise InvalidInput([Problem(file, None, "", why)]) from None
    return _without_surrogates(doc)


def _without_surrogates(doc: Any) -> tuple[Any, int]:
    """``doc`` with every lone surrogate in its strings (keys too) replaced by U+FFFD, and
    the count. A paired escape (an emoji) is one character once decoded: never replaced."""
    count = 0

    def walk(value: Any) -> Any:
        nonlocal count
        if isinstance(value, str):
            fixed, n = _SURROGATE.subn(REPLACEMENT, value)
            count += n
            return fixed
        if isinstance(value, list):
            return [walk(v) for v in value]
        if isinstance(value, dict):
            return {walk(k): walk(v) for k, v in value.items()}
        return value

    return walk(doc), count


def samples_of(doc: Any, file: str) -> tuple[Sample, ...]:
    """The samples of a decoded LoCoMo document, checked whole; InvalidInput listing every
    problem."""
    check = _Check(file)
    samples = check.samples(doc)
    if check.problems:
        raise InvalidInput(check.problems)
    return samples


class _Check(FieldCheck):
    """Walks the decoded document, collecting ``FILE: sample:field: problem`` lines."""

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
        for k in conv:
            if _SESSION_LIKE.fullmatch(k) and not _SESSION.fullmatch(k):
                self.problem(f"{name}:conversation.{k}", "not a session key: sessions are "
                             "session_N, N in ASCII digits with no leading zero")  # fmt: skip
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
        if type(category) is not int or category not in CATEGORIES:  # 1.0 and True are not 1
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


# -- evidence as the published file writes it ----------------------------------------------

SEVERAL: Final = "several ids in one string"
NOT_AN_ID: Final = "not a dialogue id"
NO_TURN: Final = "names no turn"
# How projections/suites/locomo/grading.py grades each (an evidence id is matched whole,
# stripped, against the retrieved dialogue ids; each listed id counts, as written).
GRADED: Final = {
    SEVERAL: "matched whole it equals no retrieved id: one miss in evidence recall, recall@k "
    "and MRR (not one per id it names); under session-level retrieval, evidence recall "
    "counts its first id's session",
    NOT_AN_ID: "it equals no retrieved id: a miss in evidence recall, recall@k and MRR",
    NO_TURN: "no retrieved id can equal it: a miss in evidence recall, recall@k and MRR; "
    "under session-level retrieval, evidence recall counts its session if there is one",
}


class Finding(NamedTuple):
    """One evidence string the grading cannot match as LoCoMo meant it."""

    question: str  # SAMPLE_ID:qN
    evidence: str  # as written
    kind: str  # SEVERAL, NOT_AN_ID or NO_TURN


def evidence_findings(samples: Sequence[Sample]) -> list[Finding]:
    """Every malformed evidence string (several ids in one, or no dialogue id at all) and
    every well-formed id naming no turn of its sample, in file order."""
    out: list[Finding] = []
    for sample in samples:
        turns = {t.dia_id.strip() for s in sample.sessions for t in s.turns}
        for q in sample.questions:
            for e in q.evidence:
                wanted = e.strip()
                if _DIA_ID.fullmatch(wanted):
                    if wanted not in turns:
                        out.append(Finding(q.id, e, NO_TURN))
                elif len(_DIA_ID.findall(wanted)) > 1:
                    out.append(Finding(q.id, e, SEVERAL))
                else:
                    out.append(Finding(q.id, e, NOT_AN_ID))
    return out
