"""Link hashes and the one chain checker: pure functions over canonical bytes, no I/O.

Everything that is verified becomes a **link** ``(stream, seq, kind, prev, at, refs,
hash)`` and goes through ``RunChecker``: a stored event (a record with its key columns),
a bundle line (a record whose keys are left to the bytes), a redacted bundle's
placeholder, and the streams an audit bundle cites (``partial``). Records must arrive
ordered by stream name, then seq. The checker finds the first fault (``Fault``) and names
the stream and seq responsible for it.

Two event formats (docs/ledger-format.md): format 1 hashes an event's canonical bytes.
Format 2 (``"v":2``, the last key) hashes an event's **sealed form**: for the kinds a
bundle may withhold (``events.WITHHOLDABLE``), the bytes with the body replaced by the
body's digest, which is exactly what a withheld event's placeholder line holds; for every
other kind, the bytes themselves, so those can never be shown as a placeholder. A run is
in the format of its ``run_started``; every event of it must be.
"""

from __future__ import annotations

import binascii
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, NamedTuple

import blake3
import msgspec

from ledger.codec import (
    _link_decoder,
    canonical,
    decode_event,
    decode_placeholder_v1,
)
from ledger.events import (
    EVENT_FORMATS,
    KINDS,
    NEVER_WITHHELD,
    TERMINAL_KINDS,
    WITHHOLDABLE,
    RunSealed,
    SealSignature,
    StreamHead,
)
from ledger.merkle import merkle_root

EVENT_DOMAIN_V1 = b"benchledger:event:v1\x00"  # format 1: blake3(domain + canonical bytes)
EVENT_DOMAIN = b"benchledger:event:v2\x00"  # format 2: blake3(domain + sealed form)
BODY_DOMAIN = b"benchledger:body:v2\x00"  # format 2: a body's digest
GENESIS_DOMAIN = b"benchledger:genesis:v1\x00"  # both formats
V2_END = b',"v":2}'  # how a format-2 event's canonical bytes end ("v" sorts last)
_BODY_KEY = b',"body":'
_KIND_KEY = b',"kind":"'
_KINDS = frozenset(KINDS)
_PLAIN_KINDS = _KINDS - {"run_sealed"}  # kinds an event may have on the fast path
_WITHHOLDABLE = frozenset(WITHHOLDABLE)  # format 2 hashes these over envelope + body digest
_NO_STREAM = object()  # equal to no stream key, not even a bundle line's None
_HEX = frozenset(b"0123456789abcdef")


class Fault(StrEnum):
    """Every fault a check can find: one name each, wherever it is found (ledger-format.md)."""

    UNDECODABLE = "undecodable event"
    NON_CANONICAL = "non-canonical event"
    FORMAT_MISMATCH = "format mismatch"
    MISSING_HEADER = "missing header stream"
    FOREIGN_STREAM = "foreign stream"
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
    return data.find(_BODY_KEY) + len(_BODY_KEY), data.rfind(_KIND_KEY)


def _kind_at(data: bytes, t: int) -> bytes:
    """The kind named by the ``,"kind":"`` key at ``t`` (a tag: no escapes)."""
    start = t + len(_KIND_KEY)
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
    seal: RunSealed | None = None  # the run's only run_sealed, last in its header stream
    format: int = 0  # the run's event format (its run_started's)
    withheld: int = 0  # placeholders seen (redacted bundles)
    unbound: int = 0  # of those, format-1 placeholders: their envelope is only claimed


class _Stop(Exception):
    def __init__(self, failure: Failure) -> None:
        self.failure = failure


def _chain_link(link: Any, h: str) -> ChainLink:
    """A decoded envelope (or a ChainLink already) as a ChainLink with hash ``h``."""
    if isinstance(link, ChainLink):
        return link
    return ChainLink(link.stream, link.seq, link.kind, link.prev, link.at, link.refs, h, link.v)


def try_link(data: bytes) -> ChainLink | None:
    """One event's (or placeholder's) link from its bytes; None when it has none."""
    try:
        return _read_link(data)
    except _Stop:
        return None


def _read_link(data: bytes) -> ChainLink:
    """One event's (or placeholder's) link from its bytes; raises ``_Stop`` when it has none.

    The stop's failure names the line's own stream and seq when they can be read, else
    an empty stream and seq -1 (the caller knows better where it is).
    """
    try:
        link = _link_decoder.decode(data)
    except msgspec.DecodeError as exc:  # ValidationError is a DecodeError
        ph = decode_placeholder_v1(data)
        if ph is None:
            raise _Stop(Failure("", -1, Fault.UNDECODABLE, str(exc))) from None
        if len(ph.hash) != 64 or not _HEX.issuperset(ph.hash.encode()):
            raise _Stop(
                Failure(ph.stream, ph.seq, Fault.BAD_PLACEHOLDER, "hash is not 64 hex digits")
            ) from None
        return ChainLink(
            ph.stream, ph.seq, ph.kind, ph.prev, ph.at, ph.refs, ph.hash, 1, True, False
        )
    if link.v == 1:
        return _chain_link(link, blake3.blake3(EVENT_DOMAIN_V1 + data).hexdigest())
    where = (link.stream, link.seq)
    if link.v not in EVENT_FORMATS:
        raise _Stop(Failure(*where, Fault.FORMAT_MISMATCH, f"no event format {link.v}"))
    b, t = _body_span(data)
    if not data.endswith(V2_END):
        raise _Stop(Failure(*where, Fault.NON_CANONICAL, 'a format-2 event ends in ,"v":2}'))
    if data[b] == 0x22:  # '"': a placeholder, whose body is the body's digest
        digest = data[b + 1 : t - 1]
        if t - b != 66 or not _HEX.issuperset(digest):
            raise _Stop(Failure(*where, Fault.BAD_PLACEHOLDER, "its body is not a 64-hex digest"))
        # Of a kind never withheld, it cannot hash to the event's link (that covers the
        # whole body); the checker names it as such.
        h = blake3.blake3(EVENT_DOMAIN + data).hexdigest()
        return ChainLink(
            link.stream, link.seq, link.kind, link.prev, link.at, link.refs, h, 2, True
        )
    if data[b] != 0x7B:  # '{'
        raise _Stop(Failure(*where, Fault.NON_CANONICAL, "a body is a JSON object"))
    if link.kind not in _WITHHOLDABLE:
        return _chain_link(link, blake3.blake3(EVENT_DOMAIN + data).hexdigest())
    if t != b + len(link.body):
        raise _Stop(
            Failure(
                *where,
                Fault.NON_CANONICAL,
                "a format-2 event's envelope must be canonical: keys sorted, no spaces",
            )
        )
    sealed = data[:b] + b'"' + body_digest(data[b:t]).encode() + b'"' + data[t:]
    return _chain_link(link, blake3.blake3(EVENT_DOMAIN + sealed).hexdigest())


Rule = Callable[[str, str], bool]  # (stream, kind) -> whether the bundle's rules withhold it


class RunChecker:
    """Verify one run's records (header stream first, as sorting puts it).

    ``require_seal``: an unsealed run is a fault. ``partial``: an audit bundle, which holds
    only some streams (each must still match the seal's head for it). ``redacted``:
    placeholders are allowed, and ``rule`` says which events the bundle's rules withhold
    (a placeholder it does not cover, or an event it covers shown in full, is a fault).

    One flat loop over the records: this is the hot path of ``verify``.
    """

    def __init__(
        self,
        run_id: str,
        *,
        require_seal: bool = False,
        partial: bool = False,
        redacted: bool = False,
        rule: Rule | None = None,
    ) -> None:
        self.run_id = run_id
        self.require_seal = require_seal or partial
        self.partial = partial
        self.redacted = redacted
        self.rule = rule
        self.summary = Summary()
        self._seal: RunSealed | None = None
        self._seal_at_seq = -1
        self._expected_heads: list[StreamHead] = []
        self._sealed_index: dict[str, int] = {}
        self._next_head = 0
        self._leaf_heads: list[StreamHead] = []

    def check(
        self, records: Iterable[Record] | Iterable[tuple[str, int, str, bytes]]
    ) -> Failure | None:
        """Consume every record; return the first failure or None when all is intact."""
        try:
            self._run(iter(records))
        except _Stop as stop:
            return stop.failure
        return None

    def _fail(self, stream: str, seq: int, problem: Fault, detail: str, **kw: str) -> _Stop:
        return _Stop(Failure(stream, seq, problem, detail, **kw))

    def _run(self, it: Iterator[Any]) -> None:
        run_id = self.run_id
        prefix = run_id + "/"
        decode = _link_decoder.decode
        hasher = blake3.blake3
        # Format 2's body digests: one hasher reset for each (constructing one costs ~0.3 us
        # more), read as raw bytes and hexlified (hexdigest().encode() costs ~0.4 us more);
        # a format-2 raw baseline digests its bodies the same way. The link hash itself is
        # computed as the baseline computes it (docs/performance.md).
        body_hasher = blake3.blake3()
        reset, update, digest = body_hasher.reset, body_hasher.update, body_hasher.digest
        hexlify = binascii.hexlify
        join = b"".join
        domain_v1, domain, body_domain = EVENT_DOMAIN_V1, EVENT_DOMAIN, BODY_DOMAIN
        body_key, kind_key, v2_end = _BODY_KEY, _KIND_KEY, V2_END
        summary = self.summary
        fmt = 0  # the run's event format, once its run_started is read
        cur_stream = ""
        expected_seq = 0
        expected_prev = ""
        is_header = False
        # The previous event's envelope; its link hash is always expected_prev, so a
        # ChainLink is built only where one is needed (a failure, a seal, a stream's end).
        last: Any = None
        plain_kinds = _PLAIN_KINDS
        withholdable = _WITHHOLDABLE
        unit_stream: object = _NO_STREAM  # the current stream when it is a unit stream
        for stream_k, seq_k, kind_k, data in it:
            # The common case, checked in one expression: the next full event of the same
            # unit stream, keys agreeing with the bytes, linked, of a known kind that is not
            # a seal, with no refs, in the run's format. Anything else (a stream's first
            # event, the header stream, whose unit_stream never matches, a bundle line, a
            # placeholder, every failure) takes the full path below.
            h = ""
            try:
                link = decode(data)
            except msgspec.DecodeError:
                link = None
            if link is not None:
                if fmt == 1:
                    h = hasher(domain_v1 + data).hexdigest()
                else:
                    # Format 2; a body that is no object (a placeholder, or worse) and a
                    # non-canonical end take the full path.
                    b = data.find(body_key) + 8
                    if fmt == 2 and data[b] == 123 and data.endswith(v2_end):
                        if link.kind not in withholdable:
                            h = hasher(domain + data).hexdigest()
                        else:
                            # The decoded body's end must be the spec's, the last kind
                            # key: searched for only from there on (the same answer,
                            # measured ~0.1 us faster than over the whole line).
                            t = b + len(link.body)
                            if data.rfind(kind_key, t) == t:
                                # The body digest (of the body in place, no copy), then
                                # the sealed form spliced from the bytes around the body
                                # in one join.
                                reset()
                                update(body_domain)
                                update(link.body)
                                hexed = hexlify(digest())
                                sealed = join((domain, data[:b], b'"', hexed, b'"', data[t:]))
                                h = hasher(sealed).hexdigest()
                if (
                    h
                    and seq_k == expected_seq
                    and stream_k == unit_stream
                    and link.prev == expected_prev
                    and link.seq == seq_k
                    and link.stream == stream_k
                    and link.kind == kind_k
                    and kind_k in plain_kinds
                    and not link.refs
                    and link.v == fmt
                ):
                    expected_prev = h
                    expected_seq += 1
                    last = link
                    continue
            if h:
                lk = _chain_link(link, h)
            else:
                try:
                    lk = _read_link(data)
                except _Stop as stop:
                    raise self._locate(
                        stop.failure, stream_k, seq_k, cur_stream, expected_seq
                    ) from None
            if stream_k is None:
                stream = lk.stream
            else:
                stream = stream_k
                if lk.stream != stream_k or lk.seq != seq_k or lk.kind != kind_k:
                    self._key_mismatch(stream_k, seq_k or 0, kind_k, lk)
            if stream != cur_stream:
                if last is not None:
                    if lk.seq == expected_seq and lk.prev == expected_prev:
                        raise self._fail(
                            cur_stream,
                            lk.seq,
                            Fault.STREAM_MISMATCH,
                            f"event continues {cur_stream!r} but names {stream!r}",
                        )
                    self._end_stream(cur_stream, _chain_link(last, expected_prev), expected_seq)
                if stream != run_id and not stream.startswith(prefix):
                    where = stream if cur_stream else run_id
                    if self._seal is not None and self._next_head < len(self._expected_heads):
                        where = self._expected_heads[self._next_head].stream
                    raise self._fail(
                        where,
                        lk.seq,
                        Fault.FOREIGN_STREAM,
                        f"event names stream {stream!r}, not of run {run_id!r}",
                    )
                self._expect_stream(stream, cur_stream, lk.seq)
                if cur_stream and stream <= cur_stream:
                    raise self._fail(
                        stream,
                        lk.seq,
                        Fault.OUT_OF_ORDER,
                        f"stream {stream!r} appears after {cur_stream!r}",
                    )
                cur_stream = stream
                expected_seq = 0
                expected_prev = genesis(stream)
                is_header = stream == run_id
                unit_stream = _NO_STREAM if is_header else stream
                last = None
            seq = lk.seq
            if seq != expected_seq:
                if seq < expected_seq:
                    raise self._fail(
                        stream,
                        expected_seq,
                        Fault.DUPLICATE_SEQ,
                        f"seq {seq} appears again where seq {expected_seq} belongs",
                    )
                if self._peek(it, stream, expected_seq) is not None:
                    raise self._fail(
                        stream,
                        expected_seq,
                        Fault.OUT_OF_ORDER,
                        f"seq {seq} comes before seq {expected_seq} (events swapped or reordered)",
                    )
                raise self._fail(
                    stream,
                    expected_seq,
                    Fault.GAP,
                    f"seq {expected_seq} is missing (next found is {seq})",
                )
            if lk.refs:
                for r in lk.refs:
                    if not 0 <= r < seq:
                        raise self._fail(
                            stream,
                            seq,
                            Fault.BAD_REF,
                            f"ref {r} is not an earlier seq of this stream",
                        )
            if is_header and self._seal is not None:
                raise self._fail(
                    stream,
                    seq,
                    Fault.EVENT_AFTER_SEAL,
                    f"seq {seq} follows run_sealed at seq {self._seal_at_seq}: a run has one "
                    "seal, the last event of its header stream",
                )
            if lk.kind not in _KINDS:
                raise self._fail(stream, seq, Fault.UNKNOWN_KIND, f"no event kind {lk.kind!r}")
            if not fmt and is_header and seq == 0:
                fmt = summary.format = lk.v
            if lk.v != fmt:
                raise self._fail(
                    stream,
                    seq,
                    Fault.FORMAT_MISMATCH,
                    f"event format {lk.v} in a run of event format {fmt or '?'} "
                    "(every event of a run is in the format of its run_started)",
                )
            self._withholding(lk)
            if lk.prev != expected_prev:
                before = None if last is None else _chain_link(last, expected_prev)
                after = self._peek(it, stream, seq + 1)
                raise self._blame_link(stream, before, lk, after, data)
            if lk.kind == "run_sealed":
                if not is_header:
                    raise self._fail(
                        stream,
                        seq,
                        Fault.MISPLACED_SEAL,
                        "run_sealed outside the run's header stream",
                    )
                before = None if last is None else _chain_link(last, expected_prev)
                self._take_seal(stream, lk, before, data)
            expected_prev = lk.hash
            expected_seq = seq + 1
            last = lk
        if last is None:
            raise self._fail(run_id, 0, Fault.MISSING_HEADER, "the run has no events")
        self._end_stream(cur_stream, _chain_link(last, expected_prev), expected_seq)
        self._finish()

    def _locate(
        self, failure: Failure, stream_k: str | None, seq_k: int | None, cur: str, exp: int
    ) -> _Stop:
        """Place a fault found reading a record: at its keys, else where the line sits."""
        if stream_k is not None:
            where, at = stream_k, seq_k or 0
        elif failure.stream:
            where, at = failure.stream, failure.seq
        else:
            where, at = self._position_of_unreadable(cur, exp)
        return _Stop(Failure(where, at, failure.problem, failure.detail))

    def _withholding(self, lk: ChainLink) -> None:
        """A placeholder is allowed only in a redacted bundle, for a withholdable kind its
        rules cover; an event the rules cover must not be shown in full."""
        if lk.withheld:
            if not self.redacted:
                raise self._fail(
                    lk.stream,
                    lk.seq,
                    Fault.UNEXPECTED_PLACEHOLDER,
                    "a withheld event outside a redacted bundle",
                )
            if lk.kind in NEVER_WITHHELD:
                raise self._fail(
                    lk.stream,
                    lk.seq,
                    Fault.NOT_WITHHOLDABLE,
                    f"{lk.kind} is never withheld: the run's header, seal and every kind a "
                    "metric is decided from are always shown",
                )
            if self.rule is not None and not self.rule(lk.stream, lk.kind):
                raise self._fail(
                    lk.stream,
                    lk.seq,
                    Fault.WITHHELD_WITHOUT_RULE,
                    f"a withheld {lk.kind} that no rule of the bundle header withholds",
                )
            self.summary.withheld += 1
            self.summary.unbound += not lk.bound
        elif self.rule is not None and self.rule(lk.stream, lk.kind):
            raise self._fail(
                lk.stream,
                lk.seq,
                Fault.SHOWN_DESPITE_RULE,
                f"a {lk.kind} shown in full that a rule of the bundle header withholds",
            )

    def _position_of_unreadable(self, cur_stream: str, expected_seq: int) -> tuple[str, int]:
        """Where an unreadable bundle line sits: the next sealed stream if this one is done."""
        if not cur_stream:
            return self.run_id, 0
        if self._seal is not None and cur_stream != self.run_id:
            want = self._expected_heads[self._next_head - 1]
            if expected_seq >= want.length and self._next_head < len(self._expected_heads):
                return self._expected_heads[self._next_head].stream, 0
        elif self._seal is not None and self._next_head < len(self._expected_heads):
            return self._expected_heads[self._next_head].stream, 0
        return cur_stream, expected_seq

    def _key_mismatch(self, stream: str, seq: int, kind: str | None, link: ChainLink) -> None:
        if link.stream != stream:
            raise self._fail(
                stream, seq, Fault.STREAM_MISMATCH, f"event names stream {link.stream!r}"
            )
        if link.seq != seq:
            raise self._fail(
                stream, seq, Fault.SEQ_MISMATCH, f"event stored at seq {seq} says seq {link.seq}"
            )
        raise self._fail(
            stream, seq, Fault.KIND_MISMATCH, f"stored topic {kind!r}, event kind {link.kind!r}"
        )

    def _peek(self, it: Iterator[Any], stream: str, seq: int) -> ChainLink | None:
        """The next record when it is ``stream``'s ``seq`` (used only to assign blame)."""
        nxt = next(it, None)
        if nxt is None:
            return None
        link = try_link(nxt[3])
        if link is None or link.stream != stream or link.seq != seq:
            return None
        return link

    def _expect_stream(self, stream: str, prev_stream: str, first_seq: int) -> None:
        """With a seal, streams must appear exactly as it lists them (an audit bundle may
        skip some)."""
        if self._seal is None:
            if not prev_stream and stream != self.run_id:
                raise self._fail(
                    self.run_id, 0, Fault.MISSING_HEADER, f"first stream is {stream!r}"
                )
            return
        if self._next_head >= len(self._expected_heads):
            raise self._fail(
                stream, first_seq, Fault.STREAM_NOT_IN_SEAL, "the sealed run lists no such stream"
            )
        want = self._expected_heads[self._next_head].stream
        if stream != want:
            at = self._sealed_index.get(stream)
            if at is None:
                raise self._fail(
                    want, first_seq, Fault.STREAM_MISMATCH, f"event names stream {stream!r}"
                )
            if at > self._next_head and self.partial:
                self._next_head = at + 1  # an audit bundle holds only the streams it cites
                return
            if stream > want:
                raise self._fail(
                    want, 0, Fault.STREAM_MISSING, f"sealed run lists {want!r}; it is absent"
                )
            raise self._fail(
                stream,
                first_seq,
                Fault.DUPLICATE_STREAM,
                f"stream {stream!r} appears again where {want!r} belongs",
            )
        self._next_head += 1

    def _blame_link(
        self,
        stream: str,
        before: ChainLink | None,
        cur: ChainLink,
        after: ChainLink | None,
        data: bytes,
    ) -> _Stop:
        """A broken link between N-1 and N: blame N-1 if N is intact, else N."""
        seq = cur.seq
        if before is None:
            return self._fail(
                stream,
                seq,
                Fault.PREV_MISMATCH,
                "seq 0 does not start from the stream's genesis hash",
                expected=genesis(stream),
                found=cur.prev,
            )
        if after is not None:
            n_intact = after.prev == cur.hash
        elif cur.kind == "run_sealed":
            n_intact = self._seal_vouches_for_prev(cur, data)
        else:
            n_intact = self._head_is(stream, cur)
        if n_intact:
            what = (
                "the withheld event's envelope and body digest no longer hash"
                if before.withheld
                else "event bytes no longer hash"
            )
            return self._fail(
                stream,
                seq - 1,
                Fault.LINK_MISMATCH,
                f"{what} to the link seq {seq} recorded",
                expected=cur.prev,
                found=before.hash,
            )
        return self._fail(
            stream,
            seq,
            Fault.PREV_MISMATCH,
            f"prev does not equal the link hash of seq {seq - 1}",
            expected=before.hash,
            found=cur.prev,
        )

    def _seal_vouches_for_prev(self, seal_item: ChainLink, data: bytes) -> bool:
        """An intact seal records its prev as the header leaf's head, under its own root."""
        try:
            seal = decode_event(data)
        except msgspec.DecodeError:
            return False
        if not isinstance(seal, RunSealed) or not seal.body.heads:
            return False
        heads = seal.body.heads
        return heads[0].head == seal_item.prev and merkle_root(heads) == seal.body.root

    def _head_is(self, stream: str, item: ChainLink) -> bool:
        at = self._sealed_index.get(stream)
        return at is not None and self._expected_heads[at].head == item.hash

    def _take_seal(
        self, stream: str, item: ChainLink, before: ChainLink | None, data: bytes
    ) -> None:
        seq = item.seq
        if before is None:
            raise self._fail(stream, seq, Fault.MISPLACED_SEAL, "run_sealed cannot be seq 0")
        try:
            seal = decode_event(data)
        except msgspec.DecodeError as exc:
            raise self._fail(stream, seq, Fault.UNDECODABLE, str(exc)) from None
        assert isinstance(seal, RunSealed)
        if canonical(_defaults_as_defaults(seal)) != data:
            # Nothing after the seal links to it, so its bytes must be exactly canonical.
            raise self._fail(
                stream,
                seq,
                Fault.NON_CANONICAL,
                "run_sealed bytes differ from the canonical encoding of its fields",
            )
        body = seal.body
        self._seal = self.summary.seal = seal
        self._seal_at_seq = seq
        self._expected_heads = list(body.heads)
        self._sealed_index = {h.stream: i for i, h in enumerate(self._expected_heads)}
        header_leaf = StreamHead(stream, seq, before.hash)
        if not self._expected_heads or self._expected_heads[0] != header_leaf:
            raise self._fail(
                stream,
                seq,
                Fault.ROOT_MISMATCH,
                "seal's header leaf does not match the header stream before it",
            )
        if merkle_root(self._expected_heads) != body.root:
            raise self._fail(
                stream,
                seq,
                Fault.ROOT_MISMATCH,
                "the seal's own heads do not produce its root",
                expected=body.root,
                found=merkle_root(self._expected_heads),
            )
        if body.streams != len(self._expected_heads) or body.events != sum(
            h.length for h in self._expected_heads
        ):
            raise self._fail(
                stream, seq, Fault.COUNT_MISMATCH, "the seal's counts disagree with its heads"
            )
        names = [h.stream for h in self._expected_heads]
        if names != sorted(set(names)):
            raise self._fail(
                stream,
                seq,
                Fault.ROOT_MISMATCH,
                "the seal's heads are not sorted unique stream names",
            )
        self._next_head = 1
        self._leaf_heads.append(header_leaf)
        self.summary.max_at = max(self.summary.max_at, before.at)

    def _end_stream(self, stream: str, last: ChainLink, length: int) -> None:
        self.summary.streams += 1
        self.summary.events += length
        if last.kind != "run_sealed":
            self.summary.max_at = max(self.summary.max_at, last.at)
        if stream == self.run_id:
            if self._seal is None:
                if self.require_seal:
                    raise self._fail(
                        stream, length, Fault.NOT_SEALED, "the run has no run_sealed event"
                    )
                self._leaf_heads.append(StreamHead(stream, length, last.hash))
            return
        self._leaf_heads.append(StreamHead(stream, length, last.hash))
        if self._seal is None:
            return
        want = self._expected_heads[self._next_head - 1]
        if length < want.length:
            raise self._fail(
                stream,
                length,
                Fault.TAIL_TRUNCATED,
                f"sealed length is {want.length}, found {length} events",
            )
        if length > want.length:
            raise self._fail(
                stream,
                want.length,
                Fault.APPENDED_AFTER_SEAL,
                f"sealed length is {want.length}, found {length} events",
            )
        if last.hash != want.head:
            what = (
                "last event (withheld: its envelope and digest) does"
                if last.withheld
                else ("last event does")
            )
            raise self._fail(
                stream,
                length - 1,
                Fault.LINK_MISMATCH,
                f"{what} not hash to the sealed head",
                expected=want.head,
                found=last.hash,
            )
        if last.kind not in TERMINAL_KINDS:
            raise self._fail(
                stream,
                length - 1,
                Fault.UNTERMINATED,
                f"sealed run's stream ends in {last.kind!r}",
            )

    def _finish(self) -> None:
        s = self.summary
        s.heads = self._leaf_heads
        seal = self._seal
        if seal is not None and (self.partial or self._leaf_heads == self._expected_heads):
            # _take_seal already computed the root of the sealed heads and found it equal
            # to the sealed one, and every stream read matched its head.
            s.computed_root = seal.body.root
        else:
            s.computed_root = merkle_root(self._leaf_heads)
        if seal is None:
            if self.require_seal:
                raise self._fail(
                    self.run_id, 0, Fault.NOT_SEALED, "the run has no run_sealed event"
                )
            return
        body = seal.body
        s.sealed_root = body.root
        if self.partial:
            return  # an audit bundle: the streams it lacks are the point, not a fault
        if self._next_head < len(self._expected_heads):
            missing = self._expected_heads[self._next_head]
            raise self._fail(
                missing.stream,
                0,
                Fault.STREAM_MISSING,
                f"sealed run lists {missing.stream!r}; it is absent",
            )
        if s.computed_root != body.root:
            raise self._fail(
                self.run_id,
                self._seal_at_seq,
                Fault.ROOT_MISMATCH,
                "the Merkle root of the stream heads differs from the sealed root",
                expected=body.root,
                found=s.computed_root,
            )
        if body.streams != s.streams or body.events != s.events - 1:
            raise self._fail(
                self.run_id,
                self._seal_at_seq,
                Fault.COUNT_MISMATCH,
                f"seal counts {body.streams} streams / {body.events} events, "
                f"found {s.streams} / {s.events - 1}",
            )
        if seal.at != s.max_at:
            raise self._fail(
                self.run_id,
                self._seal_at_seq,
                Fault.SEAL_TIME_MISMATCH,
                "run_sealed.at must equal the latest at of the stream heads",
                expected=str(s.max_at),
                found=str(seal.at),
            )
        if seal.refs:
            raise self._fail(
                self.run_id, self._seal_at_seq, Fault.BAD_REF, "run_sealed takes no refs"
            )


_SIGNATURE_DEFAULTS = {
    f.name: f.default
    for f in msgspec.structs.fields(SealSignature)
    if f.default is not msgspec.NODEFAULT
}


def _defaults_as_defaults(seal: RunSealed) -> RunSealed:
    """``seal`` with each signature field equal to its default set to the default object.

    msgspec's ``omit_defaults`` tells a default string by identity, so a decoded
    ``"algorithm":"ed25519"`` would re-encode spelled out and pass as canonical: a second
    spelling of one seal. With the default objects back, re-encoding omits them.
    """
    sig = seal.body.signature
    if sig is None:
        return seal
    same = {k: v for k, v in _SIGNATURE_DEFAULTS.items() if getattr(sig, k) == v}
    if not same:
        return seal
    body = msgspec.structs.replace(seal.body, signature=msgspec.structs.replace(sig, **same))
    return msgspec.structs.replace(seal, body=body)
