"""The seal half of the chain checker: the one ``run_sealed``, its heads, root and counts.

``SealCheck`` holds what the checker knows of the run's seal and checks the run against
it: the seal's own bytes, header leaf, root and counts when it is read; each stream,
as it ends, against its sealed head; the whole run at the end. ``RunChecker``
(``ledger/checker.py``) is a ``SealCheck`` and drives it from its loop. Pure, no I/O.
"""

from __future__ import annotations

import msgspec

from benchledger.ledger.chain import ChainLink
from benchledger.ledger.codec import canonical, decode_event
from benchledger.ledger.events import RunSealedEvent, SealSignature, StreamHead, terminal
from benchledger.ledger.merkle import merkle_root
from benchledger.ledger.verdict import Failure, Fault, Stop, Summary


class SealCheck:
    """A run's seal as read so far, and every check made against it."""

    def __init__(self, run_id: str, *, require_seal: bool, partial: bool) -> None:
        self.run_id = run_id
        self.require_seal = require_seal or partial
        self.partial = partial
        self.summary = Summary()
        self._seal: RunSealedEvent | None = None
        self._seal_at_seq = -1
        self._expected_heads: list[StreamHead] = []
        self._sealed_index: dict[str, int] = {}
        self._next_head = 0
        self._leaf_heads: list[StreamHead] = []

    def _fail(self, stream: str, seq: int, problem: Fault, detail: str, **kw: str) -> Stop:
        return Stop(Failure(stream, seq, problem, detail, **kw))

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
                stream,
                first_seq,
                Fault.STREAM_NOT_IN_SEAL,
                "the sealed run lists no such stream",
            )
        want = self._expected_heads[self._next_head].stream
        if stream != want:
            at = self._sealed_index.get(stream)
            if at is None:
                raise self._fail(
                    want,
                    first_seq,
                    Fault.STREAM_MISMATCH,
                    f"event names stream {stream!r}",
                )
            if at > self._next_head and self.partial:
                self._next_head = at + 1  # an audit bundle holds only the streams it cites
                return
            if stream > want:
                raise self._fail(
                    want,
                    0,
                    Fault.STREAM_MISSING,
                    f"sealed run lists {want!r}; it is absent",
                )
            raise self._fail(
                stream,
                first_seq,
                Fault.DUPLICATE_STREAM,
                f"stream {stream!r} appears again where {want!r} belongs",
            )
        self._next_head += 1

    def _seal_vouches_for_prev(self, seal_item: ChainLink, data: bytes) -> bool:
        """An intact seal records its prev as the header leaf's head, under its own root."""
        try:
            seal = decode_event(data)
        except msgspec.DecodeError:
            return False
        if not isinstance(seal, RunSealedEvent) or not seal.body.heads:
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
        assert isinstance(seal, RunSealedEvent)
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
                stream,
                seq,
                Fault.COUNT_MISMATCH,
                "the seal's counts disagree with its heads",
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
                        stream,
                        length,
                        Fault.NOT_SEALED,
                        "the run has no run_sealed event",
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
        if not terminal(stream, last.kind):
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
                self.run_id,
                self._seal_at_seq,
                Fault.BAD_REF,
                "run_sealed takes no refs",
            )


_SIGNATURE_DEFAULTS = {
    f.name: f.default
    for f in msgspec.structs.fields(SealSignature)
    if f.default is not msgspec.NODEFAULT
}


def _defaults_as_defaults(seal: RunSealedEvent) -> RunSealedEvent:
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
