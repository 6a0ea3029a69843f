"""What a chain check concludes: the first ``Failure`` (with its ``Fault``) or a ``Summary``.

Pure values, no I/O. ``Stop`` carries a failure out of the checker's loop (and out of
reading one link) to where it is returned.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from benchledger.ledger.events import RunSealedEvent, StreamHead


class Fault(StrEnum):
    """Every fault a check can find: one name each, wherever it is found (ledger-format.md)."""

    UNDECODABLE = "undecodable event"
    NON_CANONICAL = "non-canonical event"
    FORMAT_MISMATCH = "format mismatch"
    MISSING_HEADER = "missing header stream"
    FOREIGN_STREAM = "foreign stream"
    BAD_NAME = "bad name"
    OUT_OF_ORDER = "out of order"
    STREAM_MISMATCH = "stream mismatch"
    SEQ_MISMATCH = "seq mismatch"
    KIND_MISMATCH = "kind mismatch"
    DUPLICATE_SEQ = "duplicate seq"
    GAP = "gap"
    BAD_REF = "bad ref"
    UNKNOWN_KIND = "unknown kind"
    PREV_MISMATCH = "prev mismatch"
    LINK_MISMATCH = "link hash mismatch"
    MISPLACED_SEAL = "misplaced seal"
    EVENT_AFTER_SEAL = "event after seal"
    NOT_SEALED = "not sealed"
    ROOT_MISMATCH = "root mismatch"
    COUNT_MISMATCH = "count mismatch"
    SEAL_TIME_MISMATCH = "seal time mismatch"
    STREAM_NOT_IN_SEAL = "stream not in seal"
    STREAM_MISSING = "stream missing"
    DUPLICATE_STREAM = "duplicate stream"
    TAIL_TRUNCATED = "tail truncated"
    APPENDED_AFTER_SEAL = "appended after seal"
    UNTERMINATED = "unterminated stream"
    BAD_PLACEHOLDER = "bad placeholder"
    UNEXPECTED_PLACEHOLDER = "unexpected placeholder"
    NOT_WITHHOLDABLE = "not withholdable"
    WITHHELD_WITHOUT_RULE = "withheld without rule"
    SHOWN_DESPITE_RULE = "shown despite rule"
    BAD_RULE = "bad withheld rule"
    NO_PROOF = "no proof"
    NOT_IN_ROOT = "not in root"
    REVEAL_MISMATCH = "reveal mismatch"


@dataclass(frozen=True)
class Failure:
    """The first thing wrong with a run: where, what, and the evidence."""

    stream: str
    seq: int
    problem: str
    detail: str
    expected: str = ""
    found: str = ""

    def __str__(self) -> str:
        return f"stream {self.stream!r} seq {self.seq}: {self.problem}: {self.detail}"


@dataclass
class Summary:
    """What a clean pass saw: counts, heads, roots, and the one seal they were checked against."""

    streams: int = 0
    events: int = 0
    heads: list[StreamHead] = field(default_factory=list)
    sealed_root: str = ""
    computed_root: str = ""
    max_at: int = 0
    seal: RunSealedEvent | None = None  # the run's only run_sealed, last in its header stream
    format: int = 0  # the run's event format (its run_started's)
    withheld: int = 0  # placeholders seen (redacted bundles)
    unbound: int = 0  # of those, format-1 placeholders: their envelope is only claimed


class Stop(Exception):
    """Raised with the first failure found; the checker returns it."""

    def __init__(self, failure: Failure) -> None:
        self.failure = failure
