"""The one chain checker: a run's links in order, the first fault named. Pure, no I/O.

Everything that is verified goes through ``RunChecker``: a stored event, a bundle line,
a redacted bundle's placeholder, and the streams an audit bundle cites (``partial``).
Records must arrive ordered by stream name, then seq. The checker finds the first fault
(``Fault``) and names the stream and seq responsible for it. Links are read and hashed as
``ledger/chain.py`` says; the seal is checked by ``SealCheck`` (``ledger/seal_check.py``).
"""

from __future__ import annotations

import binascii
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import blake3
import msgspec

from benchledger.ledger.chain import (
    BODY_DOMAIN,
    BODY_KEY,
    EVENT_DOMAIN,
    EVENT_DOMAIN_V1,
    KIND_KEY,
    V2_END,
    ChainLink,
    Record,
    chain_link,
    genesis,
    read_link,
    try_link,
)
from benchledger.ledger.codec import _link_decoder, check_depth
from benchledger.ledger.events import KINDS, NEVER_WITHHELD, WITHHOLDABLE
from benchledger.ledger.names import RULE, is_stream_name
from benchledger.ledger.seal_check import SealCheck
from benchledger.ledger.verdict import Failure, Fault, Stop

_KINDS = frozenset(KINDS)
_PLAIN_KINDS = _KINDS - {"run_sealed"}  # kinds an event may have on the fast path
_WITHHOLDABLE = frozenset(WITHHOLDABLE)  # format 2 hashes these over envelope + body digest
_NO_STREAM = object()  # equal to no stream key, not even a bundle line's None

Rule = Callable[[str, str], bool]  # (stream, kind) -> whether the bundle's rules withhold it


class RunChecker(SealCheck):
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
        super().__init__(run_id, require_seal=require_seal, partial=partial)
        self.redacted = redacted
        self.rule = rule

    def check(
        self, records: Iterable[Record] | Iterable[tuple[str, int, str, bytes]]
    ) -> Failure | None:
        """Consume every record; return the first failure or None when all is intact."""
        try:
            self._run(iter(records))
        except Stop as stop:
            return stop.failure
        return None

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
        reset, update, digest = (
            body_hasher.reset,
            body_hasher.update,
            body_hasher.digest,
        )
        hexlify = binascii.hexlify
        join = b"".join
        domain_v1, domain, body_domain = EVENT_DOMAIN_V1, EVENT_DOMAIN, BODY_DOMAIN
        body_key, kind_key, v2_end = BODY_KEY, KIND_KEY, V2_END
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
            except RecursionError:  # nested too deep for the decoder: refused, one line
                check_depth(data)
                raise
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
                lk = chain_link(link, h)
            else:
                try:
                    lk = read_link(data)
                except Stop as stop:
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
                    self._end_stream(cur_stream, chain_link(last, expected_prev), expected_seq)
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
                if not is_stream_name(stream):  # names are shown and used as paths
                    raise self._fail(
                        stream,
                        lk.seq,
                        Fault.BAD_NAME,
                        f"stream name {stream!r}: each /-separated part {RULE}",
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
                before = None if last is None else chain_link(last, expected_prev)
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
                before = None if last is None else chain_link(last, expected_prev)
                self._take_seal(stream, lk, before, data)
            expected_prev = lk.hash
            expected_seq = seq + 1
            last = lk
        if last is None:
            raise self._fail(run_id, 0, Fault.MISSING_HEADER, "the run has no events")
        self._end_stream(cur_stream, chain_link(last, expected_prev), expected_seq)
        self._finish()

    def _locate(
        self,
        failure: Failure,
        stream_k: str | None,
        seq_k: int | None,
        cur: str,
        exp: int,
    ) -> Stop:
        """Place a fault found reading a record: at its keys, else where the line sits."""
        if stream_k is not None:
            where, at = stream_k, seq_k or 0
        elif failure.stream:
            where, at = failure.stream, failure.seq
        else:
            where, at = self._position_of_unreadable(cur, exp)
        return Stop(Failure(where, at, failure.problem, failure.detail))

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

    def _key_mismatch(self, stream: str, seq: int, kind: str | None, link: ChainLink) -> None:
        if link.stream != stream:
            raise self._fail(
                stream,
                seq,
                Fault.STREAM_MISMATCH,
                f"event names stream {link.stream!r}",
            )
        if link.seq != seq:
            raise self._fail(
                stream,
                seq,
                Fault.SEQ_MISMATCH,
                f"event stored at seq {seq} says seq {link.seq}",
            )
        raise self._fail(
            stream,
            seq,
            Fault.KIND_MISMATCH,
            f"stored topic {kind!r}, event kind {link.kind!r}",
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

    def _blame_link(
        self,
        stream: str,
        before: ChainLink | None,
        cur: ChainLink,
        after: ChainLink | None,
        data: bytes,
    ) -> Stop:
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
