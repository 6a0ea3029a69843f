"""Link hashes and chain verification: pure functions over canonical bytes, no I/O.

A record is ``(stream, seq, kind, data)`` where the first three come from storage keys
(or are ``None`` when reading a bundle, whose lines carry them only inside ``data``).
Records must arrive ordered by stream name, then seq. ``RunChecker`` finds the first
problem and names the stream and seq responsible for it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import blake3
import msgspec

from ledger.codec import Link, _link_decoder, canonical, decode_event, decode_link
from ledger.events import KINDS, TERMINAL_KINDS, RunSealed, StreamHead
from ledger.merkle import merkle_root

EVENT_DOMAIN = b"benchledger:event:v1\x00"
_KINDS = frozenset(KINDS)
_PLAIN_KINDS = _KINDS - {"run_sealed"}  # kinds an event may have on the fast path
_NO_STREAM = object()  # equal to no stream key, not even a bundle line's None
GENESIS_DOMAIN = b"benchledger:genesis:v1\x00"


def link_hash(data: bytes) -> str:
    """The link hash of an event's canonical bytes, as lowercase hex."""
    return blake3.blake3(EVENT_DOMAIN + data).hexdigest()


def genesis(stream: str) -> str:
    """The ``prev`` of a stream's seq 0: the hash of the stream name."""
    return blake3.blake3(GENESIS_DOMAIN + stream.encode()).hexdigest()


class Record(NamedTuple):
    stream: str | None
    seq: int | None
    kind: str | None
    data: bytes


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
    """What a clean pass saw."""

    streams: int = 0
    events: int = 0
    heads: list[StreamHead] = field(default_factory=list)
    sealed_root: str = ""
    computed_root: str = ""
    max_at: int = 0


class _Stop(Exception):
    def __init__(self, failure: Failure) -> None:
        self.failure = failure


class _Item(NamedTuple):
    link: Link
    hash: str


class RunChecker:
    """Verify one run's records (header stream first, as sorting puts it).

    One flat loop over the records: this is the hot path of ``verify``.
    """

    def __init__(self, run_id: str, *, require_seal: bool = False) -> None:
        self.run_id = run_id
        self.require_seal = require_seal
        self.summary = Summary()
        self._seal: RunSealed | None = None
        self._seal_at_seq = -1
        self._expected_heads: list[StreamHead] = []
        self._sealed_names: set[str] = set()
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

    def _fail(self, stream: str, seq: int, problem: str, detail: str, **kw: str) -> _Stop:
        return _Stop(Failure(stream, seq, problem, detail, **kw))

    def _decode(self, data: bytes, stream: str, seq: int) -> Link:
        try:
            return decode_link(data)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise self._fail(stream, seq, "undecodable event", str(exc)) from None

    def _run(self, it: Iterator[Any]) -> None:
        run_id = self.run_id
        prefix = run_id + "/"
        decode = _link_decoder.decode
        hasher = blake3.blake3
        domain = EVENT_DOMAIN
        cur_stream = ""
        expected_seq = 0
        expected_prev = ""
        is_header = False
        # The previous event's envelope; its link hash is always expected_prev, so an _Item
        # is built only where one is needed (a failure, a seal, a stream's end).
        last: Link | None = None
        plain_kinds = _PLAIN_KINDS
        unit_stream: object = _NO_STREAM  # the current stream when it is a unit stream
        for stream_k, seq_k, kind_k, data in it:
            try:
                link = decode(data)
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                if stream_k is not None:
                    where, at = stream_k, seq_k or 0
                else:
                    where, at = self._position_of_unreadable(cur_stream, expected_seq)
                raise self._fail(where, at, "undecodable event", str(exc)) from None
            h = hasher(domain + data).hexdigest()
            # The common case, checked in one expression: the next event of the same unit
            # stream, keys agreeing with the bytes, linked, of a known kind that is not a
            # seal, with no refs. Anything else (a stream's first event, the header stream,
            # whose unit_stream never matches, a bundle line, every failure) takes the full
            # path below.
            if (
                seq_k == expected_seq
                and stream_k == unit_stream
                and link.prev == expected_prev
                and link.seq == seq_k
                and link.stream == stream_k
                and link.kind == kind_k
                and kind_k in plain_kinds
                and not link.refs
            ):
                expected_prev = h
                expected_seq += 1
                last = link
                continue
            if stream_k is None:
                stream = link.stream
            else:
                stream = stream_k
                if link.stream != stream_k or link.seq != seq_k or link.kind != kind_k:
                    self._key_mismatch(stream_k, seq_k or 0, kind_k, link)
            if stream != cur_stream:
                if last is not None:
                    if link.seq == expected_seq and link.prev == expected_prev:
                        raise self._fail(
                            cur_stream,
                            link.seq,
                            "stream mismatch",
                            f"event continues {cur_stream!r} but names {stream!r}",
                        )
                    self._end_stream(cur_stream, _Item(last, expected_prev), expected_seq)
                if stream != run_id and not stream.startswith(prefix):
                    where = stream if cur_stream else run_id
                    if self._seal is not None and self._next_head < len(self._expected_heads):
                        where = self._expected_heads[self._next_head].stream
                    raise self._fail(
                        where,
                        link.seq,
                        "foreign stream",
                        f"event names stream {stream!r}, not of run {run_id!r}",
                    )
                self._expect_stream(stream, cur_stream, link.seq)
                if cur_stream and stream <= cur_stream:
                    raise self._fail(
                        stream,
                        link.seq,
                        "out of order",
                        f"stream {stream!r} appears after {cur_stream!r}",
                    )
                cur_stream = stream
                expected_seq = 0
                expected_prev = genesis(stream)
                is_header = stream == run_id
                unit_stream = _NO_STREAM if is_header else stream
                last = None
            seq = link.seq
            if seq != expected_seq:
                if seq < expected_seq:
                    raise self._fail(
                        stream,
                        expected_seq,
                        "duplicate seq",
                        f"seq {seq} appears again where seq {expected_seq} belongs",
                    )
                if self._peek(it, stream, expected_seq) is not None:
                    raise self._fail(
                        stream,
                        expected_seq,
                        "out of order",
                        f"seq {seq} comes before seq {expected_seq} (events swapped or reordered)",
                    )
                raise self._fail(
                    stream,
                    expected_seq,
                    "gap",
                    f"seq {expected_seq} is missing (next found is {seq})",
                )
            if link.refs:
                for r in link.refs:
                    if not 0 <= r < seq:
                        raise self._fail(
                            stream, seq, "bad ref", f"ref {r} is not an earlier seq of this stream"
                        )
            if is_header and self._seal is not None:
                raise self._fail(
                    stream,
                    seq,
                    "event after seal",
                    f"seq {seq} follows run_sealed at seq {self._seal_at_seq}",
                )
            if link.kind not in _KINDS:
                raise self._fail(stream, seq, "unknown kind", f"no event kind {link.kind!r}")
            if link.prev != expected_prev:
                before = None if last is None else _Item(last, expected_prev)
                after = self._peek(it, stream, seq + 1)
                raise self._blame_link(stream, before, _Item(link, h), after, data)
            if link.kind == "run_sealed":
                if not is_header:
                    raise self._fail(
                        stream, seq, "misplaced seal", "run_sealed outside the run's header stream"
                    )
                before = None if last is None else _Item(last, expected_prev)
                self._take_seal(stream, _Item(link, h), before, data)
            expected_prev = h
            expected_seq = seq + 1
            last = link
        if last is None:
            raise self._fail(run_id, 0, "missing header stream", "the run has no events")
        self._end_stream(cur_stream, _Item(last, expected_prev), expected_seq)
        self._finish()

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

    def _key_mismatch(self, stream: str, seq: int, kind: str | None, link: Link) -> None:
        if link.stream != stream:
            raise self._fail(stream, seq, "stream mismatch", f"event names stream {link.stream!r}")
        if link.seq != seq:
            raise self._fail(
                stream, seq, "seq mismatch", f"event stored at seq {seq} says seq {link.seq}"
            )
        raise self._fail(
            stream, seq, "kind mismatch", f"stored topic {kind!r}, event kind {link.kind!r}"
        )

    def _peek(self, it: Iterator[Any], stream: str, seq: int) -> _Item | None:
        """The next record when it is ``stream``'s ``seq`` (used only to assign blame)."""
        nxt = next(it, None)
        if nxt is None:
            return None
        try:
            link = decode_link(nxt[3])
        except (msgspec.DecodeError, msgspec.ValidationError):
            return None
        if link.stream != stream or link.seq != seq:
            return None
        return _Item(link, link_hash(nxt[3]))

    def _expect_stream(self, stream: str, prev_stream: str, first_seq: int) -> None:
        """With a seal, streams must appear exactly as it lists them."""
        if self._seal is None:
            if not prev_stream and stream != self.run_id:
                raise self._fail(
                    self.run_id, 0, "missing header stream", f"first stream is {stream!r}"
                )
            return
        if self._next_head >= len(self._expected_heads):
            raise self._fail(
                stream, first_seq, "stream not in seal", "the sealed run lists no such stream"
            )
        want = self._expected_heads[self._next_head].stream
        if stream != want:
            if stream not in self._sealed_names:
                raise self._fail(
                    want, first_seq, "stream mismatch", f"event names stream {stream!r}"
                )
            if stream > want:
                raise self._fail(
                    want, 0, "stream missing", f"sealed run lists {want!r}; it is absent"
                )
            raise self._fail(
                stream,
                first_seq,
                "duplicate stream",
                f"stream {stream!r} appears again where {want!r} belongs",
            )
        self._next_head += 1

    def _blame_link(
        self, stream: str, before: _Item | None, cur: _Item, after: _Item | None, data: bytes
    ) -> _Stop:
        """A broken link between N-1 and N: blame N-1 if N is intact, else N."""
        seq = cur.link.seq
        if before is None:
            return self._fail(
                stream,
                seq,
                "prev mismatch",
                "seq 0 does not start from the stream's genesis hash",
                expected=genesis(stream),
                found=cur.link.prev,
            )
        if after is not None:
            n_intact = after.link.prev == cur.hash
        elif cur.link.kind == "run_sealed":
            n_intact = self._seal_vouches_for_prev(cur, data)
        else:
            n_intact = self._head_is(stream, cur)
        if n_intact:
            return self._fail(
                stream,
                seq - 1,
                "link hash mismatch",
                f"event bytes no longer hash to the link seq {seq} recorded",
                expected=cur.link.prev,
                found=before.hash,
            )
        return self._fail(
            stream,
            seq,
            "prev mismatch",
            f"prev does not equal the link hash of seq {seq - 1}",
            expected=before.hash,
            found=cur.link.prev,
        )

    def _seal_vouches_for_prev(self, seal_item: _Item, data: bytes) -> bool:
        """An intact seal records its prev as the header leaf's head, under its own root."""
        try:
            seal = decode_event(data)
        except (msgspec.DecodeError, msgspec.ValidationError):
            return False
        if not isinstance(seal, RunSealed) or not seal.body.heads:
            return False
        heads = seal.body.heads
        return heads[0].head == seal_item.link.prev and merkle_root(heads) == seal.body.root

    def _head_is(self, stream: str, item: _Item) -> bool:
        for h in self._expected_heads:
            if h.stream == stream:
                return h.head == item.hash
        return False

    def _take_seal(self, stream: str, item: _Item, before: _Item | None, data: bytes) -> None:
        if before is None:
            raise self._fail(stream, item.link.seq, "misplaced seal", "run_sealed cannot be seq 0")
        try:
            seal = decode_event(data)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise self._fail(stream, item.link.seq, "undecodable event", str(exc)) from None
        assert isinstance(seal, RunSealed)
        if canonical(seal) != data:
            # Nothing after the seal links to it, so its bytes must be exactly canonical.
            raise self._fail(
                stream,
                item.link.seq,
                "non-canonical seal",
                "run_sealed bytes differ from the canonical encoding of its fields",
            )
        self._seal = seal
        self._seal_at_seq = item.link.seq
        self._expected_heads = list(seal.body.heads)
        self._sealed_names = {h.stream for h in self._expected_heads}
        header_leaf = StreamHead(stream, item.link.seq, before.hash)
        body = seal.body
        if not self._expected_heads or self._expected_heads[0] != header_leaf:
            raise self._fail(
                stream,
                item.link.seq,
                "root mismatch",
                "seal's header leaf does not match the header stream before it",
            )
        if merkle_root(self._expected_heads) != body.root:
            raise self._fail(
                stream,
                item.link.seq,
                "root mismatch",
                "the seal's own heads do not produce its root",
            )
        if body.streams != len(self._expected_heads) or body.events != sum(
            h.length for h in self._expected_heads
        ):
            raise self._fail(
                stream, item.link.seq, "count mismatch", "the seal's counts disagree with its heads"
            )
        names = [h.stream for h in self._expected_heads]
        if names != sorted(set(names)):
            raise self._fail(
                stream,
                item.link.seq,
                "root mismatch",
                "the seal's heads are not sorted unique stream names",
            )
        self._next_head = 1
        self._leaf_heads.append(header_leaf)
        self.summary.max_at = max(self.summary.max_at, before.link.at)

    def _end_stream(self, stream: str, last: _Item, length: int) -> None:
        self.summary.streams += 1
        self.summary.events += length
        if last.link.kind != "run_sealed":
            self.summary.max_at = max(self.summary.max_at, last.link.at)
        if stream == self.run_id:
            if self._seal is None:
                if self.require_seal:
                    raise self._fail(
                        stream, length, "not sealed", "the run has no run_sealed event"
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
                "tail truncated",
                f"sealed length is {want.length}, found {length} events",
            )
        if length > want.length:
            raise self._fail(
                stream,
                want.length,
                "appended after seal",
                f"sealed length is {want.length}, found {length} events",
            )
        if last.hash != want.head:
            raise self._fail(
                stream,
                length - 1,
                "link hash mismatch",
                "last event does not hash to the sealed head",
                expected=want.head,
                found=last.hash,
            )
        if last.link.kind not in TERMINAL_KINDS:
            raise self._fail(
                stream,
                length - 1,
                "unterminated stream",
                f"sealed run's stream ends in {last.link.kind!r}",
            )

    def _finish(self) -> None:
        s = self.summary
        s.heads = self._leaf_heads
        if self._seal is not None and self._leaf_heads == self._expected_heads:
            # _take_seal already computed the root of exactly these heads and found it
            # equal to the sealed one; a second Merkle pass would repeat the same hashes.
            s.computed_root = self._seal.body.root
        else:
            s.computed_root = merkle_root(self._leaf_heads)
        if self._seal is None:
            if self.require_seal:
                raise self._fail(self.run_id, 0, "not sealed", "the run has no run_sealed event")
            return
        seal = self._seal
        if self._next_head < len(self._expected_heads):
            missing = self._expected_heads[self._next_head]
            raise self._fail(
                missing.stream,
                0,
                "stream missing",
                f"sealed run lists {missing.stream!r}; it is absent",
            )
        body = seal.body
        s.sealed_root = body.root
        if s.computed_root != body.root:
            raise self._fail(
                self.run_id,
                self._seal_at_seq,
                "root mismatch",
                "the Merkle root of the stream heads differs from the sealed root",
                expected=body.root,
                found=s.computed_root,
            )
        if body.streams != s.streams or body.events != s.events - 1:
            raise self._fail(
                self.run_id,
                self._seal_at_seq,
                "count mismatch",
                f"seal counts {body.streams} streams / {body.events} events, "
                f"found {s.streams} / {s.events - 1}",
            )
        if seal.at != s.max_at:
            raise self._fail(
                self.run_id,
                self._seal_at_seq,
                "seal time mismatch",
                "run_sealed.at must equal the latest at of the stream heads",
                expected=str(s.max_at),
                found=str(seal.at),
            )
        if seal.refs:
            raise self._fail(self.run_id, self._seal_at_seq, "bad ref", "run_sealed takes no refs")
