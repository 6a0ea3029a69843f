"""Link hashes: how an event's bytes become the hash its successor links to. Pure, no I/O.

Everything that is verified becomes a **link** ``(stream, seq, kind, prev, at, refs,
hash)`` (``ChainLink``): a stored event (a record with its key columns), a bundle line (a
record whose keys are left to the bytes), a redacted bundle's placeholder. The one chain
checker (``ledger/checker.py``) checks the links in order.

Two event formats (docs/ledger-format.md): format 1 hashes an event's canonical bytes.
Format 2 (``"v":2``, the last key) hashes an event's **sealed form**: for the kinds a
bundle may withhold (``events.WITHHOLDABLE``), the bytes with the body replaced by the
body's digest, which is exactly what a withheld event's placeholder line holds; for every
other kind, the bytes themselves, so those can never be shown as a placeholder. A run is
in the format of its ``run_started``; every event of it must be.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import blake3
import msgspec

from benchledger.ledger.codec import _link_decoder, check_depth, decode_placeholder_v1
from benchledger.ledger.events import EVENT_FORMATS, WITHHOLDABLE
from benchledger.ledger.verdict import Failure, Fault, Stop

EVENT_DOMAIN_V1 = b"benchledger:event:v1\x00"  # format 1: blake3(domain + canonical bytes)
EVENT_DOMAIN = b"benchledger:event:v2\x00"  # format 2: blake3(domain + sealed form)
BODY_DOMAIN = b"benchledger:body:v2\x00"  # format 2: a body's digest
GENESIS_DOMAIN = b"benchledger:genesis:v1\x00"  # both formats
V2_END = b',"v":2}'  # how a format-2 event's canonical bytes end ("v" sorts last)
BODY_KEY = b',"body":'
KIND_KEY = b',"kind":"'
_WITHHOLDABLE = frozenset(WITHHOLDABLE)  # format 2 hashes these over envelope + body digest
_HEX = frozenset(b"0123456789abcdef")


def genesis(stream: str) -> str:
    """The ``prev`` of a stream's seq 0: the hash of the stream name."""
    return blake3.blake3(GENESIS_DOMAIN + stream.encode()).hexdigest()


def body_digest(body: bytes) -> str:
    """Format 2: the digest of an event body's canonical bytes, as lowercase hex."""
    return blake3.blake3(BODY_DOMAIN + body).hexdigest()


def event_format(data: bytes) -> int:
    """The event format of canonical bytes: 2 when they end in ``,"v":2}``, else 1."""
    return 2 if data.endswith(V2_END) else 1


def _body_span(data: bytes) -> tuple[int, int]:
    """Where a format-2 event's body is: after the first ``,"body":``, up to the last
    ``,"kind":"`` (the envelope's kind key; no string can hold those bytes unescaped)."""
    return data.find(BODY_KEY) + len(BODY_KEY), data.rfind(KIND_KEY)


def _kind_at(data: bytes, t: int) -> bytes:
    """The kind named by the ``,"kind":"`` key at ``t`` (a tag: no escapes)."""
    start = t + len(KIND_KEY)
    return data[start : data.find(b'"', start)]


_WITHHOLDABLE_B = frozenset(k.encode() for k in WITHHOLDABLE)


def sealed_form(data: bytes) -> bytes:
    """What a format-2 event's link hash is computed over.

    For a withholdable kind, the bytes with the body replaced by its digest (a JSON
    string): the line a redacted bundle shows when it withholds the event (a placeholder
    already is its own sealed form). For every other kind, the bytes themselves.
    """
    b, t = _body_span(data)
    if t < b or data[b : b + 1] == b'"' or _kind_at(data, t) not in _WITHHOLDABLE_B:
        return data
    return data[:b] + b'"' + body_digest(data[b:t]).encode() + b'"' + data[t:]


def link_hash(data: bytes) -> str:
    """The link hash of an event's canonical bytes (or a format-2 placeholder), as hex."""
    if data.endswith(V2_END):
        return blake3.blake3(EVENT_DOMAIN + sealed_form(data)).hexdigest()
    return blake3.blake3(EVENT_DOMAIN_V1 + data).hexdigest()


class Record(NamedTuple):
    """A stored event: its key columns (None on a bundle line) and its canonical bytes."""

    stream: str | None
    seq: int | None
    kind: str | None
    data: bytes


class ChainLink(NamedTuple):
    """What the checker checks of one event, however it arrived."""

    stream: str
    seq: int
    kind: str
    prev: str
    at: int
    refs: tuple[int, ...]
    hash: str
    v: int = 1  # the event format
    withheld: bool = False  # a placeholder: the body is not shown
    bound: bool = True  # the hash proves the envelope (False: a format-1 placeholder)


def chain_link(link: Any, h: str) -> ChainLink:
    """A decoded envelope (or a ChainLink already) as a ChainLink with hash ``h``."""
    if isinstance(link, ChainLink):
        return link
    return ChainLink(link.stream, link.seq, link.kind, link.prev, link.at, link.refs, h, link.v)


def try_link(data: bytes) -> ChainLink | None:
    """One event's (or placeholder's) link from its bytes; None when it has none."""
    try:
        return read_link(data)
    except Stop:
        return None


def read_link(data: bytes) -> ChainLink:
    """One event's (or placeholder's) link from its bytes; raises ``Stop`` when it has none.

    The stop's failure names the line's own stream and seq when they can be read, else
    an empty stream and seq -1 (the caller knows better where it is).
    """
    check_depth(data)  # the full path only: too deep is refused here, never a RecursionError
    try:
        link = _link_decoder.decode(data)
    except msgspec.DecodeError as exc:  # ValidationError is a DecodeError
        ph = decode_placeholder_v1(data)
        if ph is None:
            raise Stop(Failure("", -1, Fault.UNDECODABLE, str(exc))) from None
        if len(ph.hash) != 64 or not _HEX.issuperset(ph.hash.encode()):
            raise Stop(
                Failure(
                    ph.stream,
                    ph.seq,
                    Fault.BAD_PLACEHOLDER,
                    "hash is not 64 hex digits",
                )
            ) from None
        return ChainLink(
            ph.stream, ph.seq, ph.kind, ph.prev, ph.at, ph.refs, ph.hash, 1, True, False
        )
    if link.v == 1:
        return chain_link(link, blake3.blake3(EVENT_DOMAIN_V1 + data).hexdigest())
    where = (link.stream, link.seq)
    if link.v not in EVENT_FORMATS:
        raise Stop(Failure(*where, Fault.FORMAT_MISMATCH, f"no event format {link.v}"))
    b, t = _body_span(data)
    if not data.endswith(V2_END):
        raise Stop(Failure(*where, Fault.NON_CANONICAL, 'a format-2 event ends in ,"v":2}'))
    if data[b] == 0x22:  # '"': a placeholder, whose body is the body's digest
        digest = data[b + 1 : t - 1]
        if t - b != 66 or not _HEX.issuperset(digest):
            raise Stop(Failure(*where, Fault.BAD_PLACEHOLDER, "its body is not a 64-hex digest"))
        # Of a kind never withheld, it cannot hash to the event's link (that covers the
        # whole body); the checker names it as such.
        h = blake3.blake3(EVENT_DOMAIN + data).hexdigest()
        return ChainLink(
            link.stream, link.seq, link.kind, link.prev, link.at, link.refs, h, 2, True
        )
    if data[b] != 0x7B:  # '{'
        raise Stop(Failure(*where, Fault.NON_CANONICAL, "a body is a JSON object"))
    if link.kind not in _WITHHOLDABLE:
        return chain_link(link, blake3.blake3(EVENT_DOMAIN + data).hexdigest())
    if t != b + len(link.body):
        raise Stop(
            Failure(
                *where,
                Fault.NON_CANONICAL,
                "a format-2 event's envelope must be canonical: keys sorted, no spaces",
            )
        )
    sealed = data[:b] + b'"' + body_digest(data[b:t]).encode() + b'"' + data[t:]
    return chain_link(link, blake3.blake3(EVENT_DOMAIN + sealed).hexdigest())
