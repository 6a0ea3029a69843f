"""Canonical bytes: the one representation of an event that is hashed, stored and bundled."""

from __future__ import annotations

import re
from typing import Any

import msgspec

from benchledger.ledger.errors import UnusableInput
from benchledger.ledger.events import AnyEvent, Event

# Sorted keys, no whitespace, UTF-8: msgspec's JSON encoder emits no insignificant space.
_encoder = msgspec.json.Encoder(order="sorted")
_decoder = msgspec.json.Decoder(AnyEvent)


class Link(msgspec.Struct, frozen=True, forbid_unknown_fields=True, gc=False):
    """The envelope as verification sees it: every field required, the body left raw
    (``v``, the event format, is absent in format 1).

    ``gc=False``: its fields hold no containers that could form a cycle, and one Link
    per verified event is decoded, so the collector need not track them (~15% faster).
    Fields in the canonical (sorted) key order: msgspec then finds each key at the
    position it expects first.
    """

    at: int
    body: msgspec.Raw
    kind: str
    prev: str
    refs: tuple[int, ...]
    seq: int
    stream: str
    v: int = 1


_link_decoder = msgspec.json.Decoder(Link)


class PlaceholderV1(msgspec.Struct, frozen=True, forbid_unknown_fields=True, gc=False):
    """A withheld event's line in event format 1: its envelope without the body, and the
    link hash it *states* (format 1 cannot prove the envelope: see docs/ledger-format.md).
    Format 2 needs no struct of its own: a withheld event is the event with its body
    replaced by the body's digest."""

    at: int
    hash: str
    kind: str
    prev: str
    refs: tuple[int, ...]
    seq: int
    stream: str
    withheld: bool


_placeholder_v1_decoder = msgspec.json.Decoder(PlaceholderV1)


def decode_placeholder_v1(data: bytes) -> PlaceholderV1 | None:
    """The format-1 placeholder on this line, or None when the line is not one."""
    try:
        ph = _placeholder_v1_decoder.decode(data)
    except msgspec.DecodeError:
        return None
    return ph if ph.withheld is True else None


def canonical(event: Event) -> bytes:
    """Encode ``event`` as its canonical bytes."""
    return _encoder.encode(event)


canonical_json = _encoder.encode  # any msgspec-encodable value: sorted keys, no whitespace


_str = msgspec.json.encode


def envelope_bytes(
    stream_json: bytes,
    seq: int,
    prev: str,
    at: int,
    kind: str,
    refs: tuple[int, ...],
    body: bytes,
    v: int = 1,
) -> bytes:
    """Canonical bytes assembled from pre-encoded parts; equal to ``canonical(event)``.

    For bodies already encoded (tests build damaged or foreign events with it): the
    envelope's sorted key order is fixed (at, body, kind, prev, refs, seq, stream, v).
    ``stream_json`` is the stream name already JSON-encoded; ``kind`` and ``prev`` are
    plain ASCII (a tag and a hex hash) and need no escaping. ``v`` is the event format
    (1: no ``v`` key).
    """
    refs_json = b"[" + b",".join(b"%d" % r for r in refs) + b"]" if refs else b"[]"
    data = _ENVELOPE % (at, body, kind.encode(), prev.encode(), refs_json, seq, stream_json)
    return data if v == 1 else data[:-1] + b',"v":%d}' % v


_ENVELOPE = b'{"at":%d,"body":%s,"kind":"%s","prev":"%s","refs":%s,"seq":%d,"stream":%s}'


class Envelope(msgspec.Struct, gc=False):
    """An event as the writer encodes it: ``canonical_json(Envelope(...))`` is the event's
    canonical bytes, equal to ``canonical(event)``.

    The writer's hot path: one sorted-key encode of envelope and body together (about
    a microsecond less per event than encoding the body and assembling around it).
    Fields in the canonical key order, which sorting would give anyway.
    """

    at: int
    body: Any
    kind: str
    prev: str
    refs: tuple[int, ...]
    seq: int
    stream: str
    v: int | msgspec.UnsetType = msgspec.UNSET  # the event format; UNSET writes format 1


def encode_string(text: str) -> bytes:
    """``text`` as a JSON string."""
    return _str(text)


# The deepest an event line may nest JSON values, the event object itself at depth 1
# (docs/ledger-format.md, "Nesting"). Real events nest under 12; a deeper line is refused
# by the writer and every reader before a recursive decoder could overflow the stack.
MAX_DEPTH = 64

# A JSON string (skipped whole: brackets inside it do not nest) or a bracket.
_NESTING = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def depth(data: bytes) -> int:
    """How deep the JSON text ``data`` nests arrays and objects (0 for a scalar)."""
    deepest = level = 0
    for m in _NESTING.finditer(data):
        c = m.group()
        if c in (b"[", b"{"):
            level += 1
            deepest = max(deepest, level)
        elif c in (b"]", b"}"):
            level -= 1
    return deepest


# An event's place, read from the envelope's tail (after the body, so even a line too deep
# to decode names it).
_PLACE = re.compile(rb',"seq":(\d+),"stream":("(?:[^"\\]|\\.)*")(?:,"v":\d+)?\}\s*$')


class TooDeep(UnusableInput):
    """JSON nested deeper than ``MAX_DEPTH``: unusable input (exit 2), one line naming the
    stream and seq (or file) that holds it."""


def check_depth(data: bytes, where: str = "") -> None:
    """Raise TooDeep when ``data`` nests deeper than ``MAX_DEPTH`` (the one such check).

    ``where`` names a file; an event line names its own stream and seq.
    """
    # Counting brackets costs ~0.1 us; only a line with more than MAX_DEPTH of them is walked.
    if data.count(b"[") + data.count(b"{") > MAX_DEPTH and (d := depth(data)) > MAX_DEPTH:
        if not where:
            m = _PLACE.search(data)
            stream = msgspec.json.decode(m.group(2), type=str) if m else "?"
            where = f"stream {stream!r} seq {int(m.group(1)) if m else -1}"
        raise TooDeep(
            where,
            f"JSON nested {d} levels deep; at most {MAX_DEPTH} are allowed "
            "(docs/ledger-format.md, Nesting)",
        )


def decode_event(data: bytes) -> Event:
    """Decode canonical bytes into the typed event of its kind (raises msgspec errors)."""
    if data.count(b"[") + data.count(b"{") > MAX_DEPTH:  # check_depth's test, inline: hot
        check_depth(data)
    return _decoder.decode(data)


def decode_link(data: bytes) -> Link:
    """Decode just the envelope fields needed to check a chain (raises msgspec errors)."""
    check_depth(data)
    return _link_decoder.decode(data)
