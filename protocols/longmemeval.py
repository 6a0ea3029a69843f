"""Loading and validating a LongMemEval file (its README's "Dataset Format"; docs/longmemeval.md).

One format covers ``longmemeval_s.json``, ``longmemeval_m.json``, ``longmemeval_oracle.json``
and their cleaned releases: a JSON list of questions, each with ``question_id``,
``question_type``, ``question``, ``answer``, ``question_date``, ``haystack_session_ids``,
``haystack_dates``, ``haystack_sessions`` (each session a list of ``{"role": "user" |
"assistant", "content": ..., "has_answer": true?}`` turns) and ``answer_session_ids``. A
question whose id ends with ``_abs`` is an abstention question. Keys the format does not
name are ignored, never required.

The file is the user's: benchledger pins it by sha256 and each question by the hash of the
content a run uses. Every problem found is reported, one line each naming the question's
index and id and the field, as ``InvalidInput`` (exit 2).
"""

from __future__ import annotations

import hashlib
from typing import Any, Final

import msgspec

from benchledger.ledger.codec import canonical_json
from benchledger.ledger.names import RULE, is_name
from benchledger.protocols.document import FieldCheck, kind_of
from benchledger.protocols.errors import InvalidInput
from benchledger.protocols.locomo import decode, read_bytes

QUESTION_TYPES: Final = (
    "single-session-user",
    "single-session-assistant",
    "single-session-preference",
    "temporal-reasoning",
    "knowledge-update",
    "multi-session",
)
ABSTENTION_SUFFIX: Final = "_abs"
ROLES: Final = ("user", "assistant")
# A session id names memories as ``[SESSION_N | DATE]``: these would make that ambiguous.
_BAD_IN_ID: Final = frozenset(" \t\n\r|[]")


class Turn(msgspec.Struct, frozen=True):
    """One message of a session: who said it, what, and whether it holds the evidence."""

    role: str
    content: str
    has_answer: bool = False


class Session(msgspec.Struct, frozen=True):
    """One dated session of a question's haystack, its turns in order."""

    id: str
    date: str
    turns: tuple[Turn, ...]


class Question(msgspec.Struct, frozen=True):
    """One evaluation instance: the question, its gold answer (numbers read as their text),
    its date, its own haystack in file order and the ids of its evidence sessions."""

    id: str
    type: str
    question: str
    answer: str
    date: str
    sessions: tuple[Session, ...]
    answer_session_ids: tuple[str, ...]

    @property
    def abstention(self) -> bool:
        """Whether it is an abstention question (its id ends with ``_abs``)."""
        return self.id.endswith(ABSTENTION_SUFFIX)

    @property
    def content_hash(self) -> str:
        """sha256 of the question's canonical JSON: exactly the content a run uses."""
        return hashlib.sha256(canonical_json(self)).hexdigest()


class LongMemEvalSet(msgspec.Struct, frozen=True):
    """A LongMemEval file as loaded: its path, the sha256 of its bytes, its questions."""

    file: str
    sha256: str
    questions: tuple[Question, ...]
    surrogates: int = 0


def load(path: str) -> LongMemEvalSet:
    """The LongMemEval file at ``path``, checked whole; InvalidInput listing every problem."""
    data = read_bytes(path)
    digest = hashlib.sha256(data).hexdigest()
    doc, surrogates = decode(data, path)
    return LongMemEvalSet(path, digest, questions_of(doc, path), surrogates)


def questions_of(doc: Any, file: str) -> tuple[Question, ...]:
    """The questions of a decoded LongMemEval document; InvalidInput listing every problem."""
    check = _Check(file)
    out = check.questions(doc)
    if check.problems:
        raise InvalidInput(check.problems)
    return out


def looks_like(head: bytes) -> bool:
    """Whether the start of a JSON list file is LongMemEval's (its items carry
    ``question_id`` and a haystack; LoCoMo's carry ``sample_id``)."""
    return b'"question_id"' in head or b'"haystack_sessions"' in head


class _Check(FieldCheck):
    """Walks the decoded document, collecting ``FILE: [i] ID.field: problem`` lines."""

    def texts(self, obj: dict[str, Any], where: str, key: str) -> list[str] | None:
        value = obj.get(key)
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            got = "missing" if value is None else f"got {kind_of(value)}"
            self.problem(f"{where}.{key}", f"must be a list of text ({got})")
            return None
        return value

    def questions(self, doc: Any) -> tuple[Question, ...]:
        if not isinstance(doc, list) or not doc:
            self.problem("", f"must be a non-empty list of questions, got {kind_of(doc)}")
            return ()
        out: list[Question] = []
        seen: set[str] = set()
        for i, raw in enumerate(doc):
            if not isinstance(raw, dict):
                self.problem(f"[{i}]", f"a question must be an object, got {kind_of(raw)}")
                continue
            qid = self.text(raw, f"[{i}]", "question_id")
            if qid and (qid in seen or not is_name(qid)):
                # It names the ledger's units: the ledger's name grammar.
                why = "appears twice" if qid in seen else RULE
                self.problem(f"[{i}].question_id", f"{qid!r} {why}")
            seen.add(qid)
            if q := self.question(raw, f"[{i}] {qid}" if qid else f"[{i}]", qid):
                out.append(q)
        return tuple(out)

    def question(self, raw: dict[str, Any], where: str, qid: str) -> Question | None:
        before = len(self.problems)
        qtype = self.text(raw, where, "question_type")
        if qtype and qtype not in QUESTION_TYPES:
            self.problem(f"{where}.question_type",
                         f"{qtype!r} is not one of {', '.join(QUESTION_TYPES)}")  # fmt: skip
        question = self.text(raw, where, "question")
        answer = raw.get("answer")
        # LongMemEval writes some answers as numbers (a count): graded as their text.
        if isinstance(answer, int | float) and not isinstance(answer, bool):
            answer = str(answer)
        if not isinstance(answer, str):
            got = "missing" if answer is None else f"must be text, got {kind_of(answer)}"
            self.problem(f"{where}.answer", got)
        date = self.text(raw, where, "question_date")
        ids = self.texts(raw, where, "haystack_session_ids")
        dates = self.texts(raw, where, "haystack_dates")
        answer_ids = self.texts(raw, where, "answer_session_ids")
        sessions = raw.get("haystack_sessions")
        if not isinstance(sessions, list):
            got = "missing" if sessions is None else f"got {kind_of(sessions)}"
            self.problem(f"{where}.haystack_sessions", f"must be a list of sessions ({got})")
            sessions = None
        if ids is not None:
            for j, sid in enumerate(ids):
                if not sid.strip() or _BAD_IN_ID & set(sid):
                    self.problem(f"{where}.haystack_session_ids[{j}]",
                                 f"{sid!r}: a session id must be non-empty, without spaces, "
                                 "'|', '[' or ']'")  # fmt: skip
        named = (("haystack_session_ids", ids), ("haystack_dates", dates),
                 ("haystack_sessions", sessions))  # fmt: skip
        lengths = {k: len(v) for k, v in named if v is not None}
        if len(set(lengths.values())) > 1:
            said = ", ".join(f"{k} {n}" for k, n in lengths.items())
            self.problem(
                f"{where}.haystack_sessions", f"the haystack lists differ in length ({said})"
            )
        if answer_ids is not None and ids is not None:
            for a in answer_ids:
                if a not in ids:
                    self.problem(f"{where}.answer_session_ids",
                                 f"{a!r} is not among haystack_session_ids")  # fmt: skip
        built: list[Session] = []
        if sessions is not None and ids is not None and dates is not None:
            for j, (sid, day, turns) in enumerate(zip(ids, dates, sessions, strict=False)):
                built.append(self.session(turns, f"{where}.haystack_sessions[{j}]", sid, day))
        if len(self.problems) > before:
            return None
        return Question(qid, qtype, question, str(answer), date, tuple(built),
                        tuple(answer_ids or ()))  # fmt: skip

    def session(self, turns: Any, where: str, sid: str, date: str) -> Session:
        kept: list[Turn] = []
        if not isinstance(turns, list):
            self.problem(where, f"a session must be a list of turns, got {kind_of(turns)}")
            return Session(sid, date, ())
        for k, turn in enumerate(turns):
            at = f"{where}[{k}]"
            if not isinstance(turn, dict):
                self.problem(at, f"a turn must be an object, got {kind_of(turn)}")
                continue
            role = self.text(turn, at, "role")
            if role and role not in ROLES:
                self.problem(f"{at}.role", f"must be user or assistant, got {role!r}")
            content = self.text(turn, at, "content", empty=True)
            has = turn.get("has_answer", False)
            if not isinstance(has, bool):
                self.problem(f"{at}.has_answer", f"must be true or false, got {kind_of(has)}")
                has = False
            kept.append(Turn(role, content, has))
        return Session(sid, date, tuple(kept))


__all__ = ["QUESTION_TYPES", "LongMemEvalSet", "Question", "Session", "Turn", "load",
           "looks_like", "questions_of"]  # fmt: skip
