"""Redaction: what a published bundle may withhold, and what a withheld event looks like.

Pure, no I/O (writing, verifying and revealing redacted bundles is ledger/bundle.py).

In event format 2 a withheld event's line is its **sealed form**: the event with its body
replaced by the body's digest (a JSON string)::

    {"at":..,"body":"<digest>","kind":..,"prev":..,"refs":[..],"seq":..,"stream":..,"v":2}

and the event's link hash is computed over exactly that line, so a verifier recomputes it
from what it sees: the stream, seq, kind, at, prev and refs are proven by the next link
(or the seal's head); only the body is hidden. The body stays secret only as far as it
cannot be guessed: a digest commits to the content, it does not hide a low-entropy value
(a true/false verdict) from someone who tries both.

In event format 1 (runs recorded before format 2) the placeholder states its link hash::

    {"at":..,"hash":LINK,"kind":..,"prev":..,"refs":[..],"seq":..,"stream":..,"withheld":true}

which binds nothing of its envelope: its kind, time and refs are the publisher's claim
until ``verify --reveal`` compares them with the full run. Verify says so.

What may be withheld: ``session_call``, ``model_call`` and ``read_back`` (the evidence);
never the run's header or seal, nor any kind a metric is decided from
(``events.NEVER_WITHHELD``). Format 2 hashes those kinds whole, so no placeholder of
one can stand in the chain; the checker names one ``not withholdable`` first.
"""

from __future__ import annotations

import difflib
import fnmatch
import glob
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final, NamedTuple

import msgspec

from benchledger.ledger.chain import link_hash, sealed_form, try_link
from benchledger.ledger.checker import Rule
from benchledger.ledger.codec import canonical_json, decode_link, decode_placeholder_v1
from benchledger.ledger.events import KINDS, NEVER_WITHHELD, WITHHOLDABLE, Event

__all__ = [
    "COPY_MIN",
    "NEVER_WITHHELD",
    "WITHHOLDABLE",
    "Copy",
    "CopyFinder",
    "Placeholder",
    "Selection",
    "WithheldEvent",
    "as_event",
    "placeholder_bytes",
    "read_placeholder",
    "rule_of",
]


class Placeholder(msgspec.Struct, frozen=True):
    """A withheld event as a reader sees it: its envelope, link hash and body digest.

    ``bound``: the link hash proves the envelope (format 2); a format-1 placeholder only
    states its hash, and has no ``digest``.
    """

    stream: str
    seq: int
    prev: str
    at: int
    kind: str
    refs: tuple[int, ...]
    hash: str
    withheld: bool = True
    digest: str = ""
    bound: bool = True


class WithheldEvent(Event, frozen=True, tag="withheld"):
    """What a reader of a redacted bundle sees in place of a withheld event."""

    withheld_kind: str
    hash: str


def read_placeholder(data: bytes) -> Placeholder | None:
    """The placeholder on this line (either format), or None when the line is not one."""
    old = decode_placeholder_v1(data)
    if old is not None:
        return Placeholder(
            old.stream, old.seq, old.prev, old.at, old.kind, old.refs, old.hash, bound=False
        )
    link = try_link(data)
    if link is None or not link.withheld:
        return None
    digest = decode_link(data).body
    return Placeholder(
        link.stream,
        link.seq,
        link.prev,
        link.at,
        link.kind,
        link.refs,
        link.hash,
        digest=msgspec.json.decode(digest, type=str),
    )


def as_event(ph: Placeholder) -> WithheldEvent:
    """The placeholder as an event-shaped record for projections (body withheld)."""
    return WithheldEvent(
        stream=ph.stream,
        seq=ph.seq,
        prev=ph.prev,
        at=ph.at,
        refs=ph.refs,
        withheld_kind=ph.kind,
        hash=ph.hash,
    )


def placeholder_bytes(data: bytes) -> bytes:
    """The placeholder line that stands for the event with canonical bytes ``data``.

    Format 2: its sealed form. Format 1: the envelope without the body, plus the link hash.
    """
    link = decode_link(data)
    if link.v != 1:
        return sealed_form(data)
    fields = {
        "at": link.at,
        "hash": link_hash(data),
        "kind": link.kind,
        "prev": link.prev,
        "refs": link.refs,
        "seq": link.seq,
        "stream": link.stream,
        "withheld": True,
    }
    return canonical_json(fields)


# -- choosing what to withhold -------------------------------------------------------------


def _refuse(kind: str) -> None:
    if kind == "run_sealed":
        raise ValueError("run_sealed is never withheld: every placeholder is checked against it")
    if kind in NEVER_WITHHELD:
        raise ValueError(
            f"{kind} is never withheld: reports decide metrics from it (or it is the run's "
            f"header); withholdable kinds: {', '.join(WITHHOLDABLE)}"
        )
    if kind not in KINDS:
        close = difflib.get_close_matches(kind, WITHHOLDABLE, 1)
        guess = _SAID_AS.get(kind) or (close[0] if close else "")
        hint = f"did you mean {guess}? " if guess else ""
        raise ValueError(f"no event kind {kind!r}; {hint}withholdable kinds: "
                         f"{', '.join(WITHHOLDABLE)}")  # fmt: skip


# What the docs' prose calls the withholdable kinds ("tool calls", docs/trust.md): the
# kind each is recorded as.
_SAID_AS: Final[dict[str, str]] = {
    "tool_call": "session_call",
    "tool_calls": "session_call",
    "tool": "session_call",
    "model_calls": "model_call",
    "read_backs": "read_back",
}


@dataclass(frozen=True)
class Selection:
    """Events to withhold: every event of ``kinds``, and every withholdable event of a
    matching stream.

    A stream glob matches the full stream name or the part after ``RUN/``. Only
    ``WITHHOLDABLE`` kinds are ever withheld: the seal is what every placeholder is checked
    against, and the kinds a metric is decided from are always shown (a stream glob leaves
    them in place).
    """

    kinds: frozenset[str] = frozenset()
    streams: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for kind in sorted(self.kinds):
            _refuse(kind)
        if not self.kinds and not self.streams:
            raise ValueError("nothing to withhold: give --withhold KIND or --withhold-stream GLOB")

    def rules(self) -> list[str]:
        return [f"kind:{k}" for k in sorted(self.kinds)] + [f"stream:{g}" for g in self.streams]

    def _stream_matches(self, run_id: str, stream: str) -> bool:
        return _matches(self.streams, run_id, stream)

    def selects(self, run_id: str, stream: str, kind: str) -> bool:
        return _selects(self.kinds, self.streams, run_id, stream, kind)

    def with_streams(self, streams: Iterable[str]) -> Selection:
        """This selection plus every withholdable event of each of ``streams`` (exact names).

        Stream rules, not a rule per event: the bundle header keeps the two rule forms
        every verifier reads, at the cost of withholding the rest of those streams' evidence.
        """
        new = [glob.escape(s) for s in sorted(set(streams))]
        return Selection(self.kinds, (*self.streams, *(g for g in new if g not in self.streams)))


# -- copies of withheld text in shown events ------------------------------------------------

# The shortest text counted as a copy: long enough that a match is the text itself, not a
# common phrase. Measured in bytes of the JSON-escaped string, as the line holds it.
COPY_MIN: Final = 32
_DIGEST = re.compile(r"[0-9a-f]+")


class Copy(NamedTuple):
    """A shown event that holds ``passages`` separate stretches of withheld text."""

    stream: str
    seq: int
    kind: str
    passages: int


class CopyFinder:
    """Finds withheld text in shown events' bytes, in time linear in what it reads.

    Each withheld string of at least ``COPY_MIN`` bytes (as escaped in the line) is cut into
    ``COPY_MIN``-byte pieces at multiples of ``COPY_MIN``, plus its last ``COPY_MIN`` bytes;
    a shown line is probed at every offset against that set. So a whole string copied (or
    any stretch of at least ``2 * COPY_MIN - 1`` bytes of one) is always found, a shorter
    stretch when it covers a piece. Pure hex strings (request hashes, digests) are ids, not
    text, and are left out.
    """

    def __init__(self) -> None:
        self._pieces: set[bytes] = set()

    def __bool__(self) -> bool:
        return bool(self._pieces)

    def add(self, body: Any) -> None:
        """Index the strings of one withheld event's decoded body (nested values too)."""
        stack = [body]
        while stack:
            value = stack.pop()
            if isinstance(value, dict):
                stack.extend(value.values())
            elif isinstance(value, list):
                stack.extend(value)
            elif isinstance(value, str) and len(value) >= COPY_MIN / 4:
                text = canonical_json(value)[1:-1]  # the string as a line spells it
                if len(text) < COPY_MIN or _DIGEST.fullmatch(value):
                    continue
                for i in range(0, len(text) - COPY_MIN + 1, COPY_MIN):
                    self._pieces.add(text[i : i + COPY_MIN])
                self._pieces.add(text[-COPY_MIN:])

    def count(self, line: bytes) -> int:
        """How many separate passages of withheld text ``line`` holds (0: none)."""
        pieces, n, end, i = self._pieces, 0, -1, 0
        last = len(line) - COPY_MIN
        while i <= last:
            if line[i : i + COPY_MIN] in pieces:
                if i > end:  # not the continuation of the passage just counted
                    n += 1
                i += COPY_MIN
                end = i
            else:
                i += 1
        return n


def _matches(globs: tuple[str, ...], run_id: str, stream: str) -> bool:
    short = stream[len(run_id) + 1 :] if stream.startswith(run_id + "/") else stream
    return any(fnmatch.fnmatchcase(stream, g) or fnmatch.fnmatchcase(short, g) for g in globs)


def _selects(
    kinds: frozenset[str], globs: tuple[str, ...], run_id: str, stream: str, kind: str
) -> bool:
    if kind in NEVER_WITHHELD:
        return False
    return kind in kinds or _matches(globs, run_id, stream)


def rule_of(run_id: str, rules: list[str]) -> Rule:
    """What a redacted bundle header's ``withheld`` rules withhold, as ``(stream, kind)``
    -> bool. ValueError names a rule that is malformed or names a kind never withheld."""
    kinds: set[str] = set()
    globs: list[str] = []
    for rule in rules:
        what, _, value = rule.partition(":")
        if what == "kind" and value:
            _refuse(value)
            kinds.add(value)
        elif what == "stream" and value:
            globs.append(value)
        else:
            raise ValueError(f"rule {rule!r} is neither kind:KIND nor stream:GLOB")
    frozen, globs_t = frozenset(kinds), tuple(globs)
    return lambda stream, kind: _selects(frozen, globs_t, run_id, stream, kind)
