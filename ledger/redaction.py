"""Redacted bundles: publish a run with some events withheld, never hidden.

A withheld event's line is replaced by a **placeholder**: its envelope without the body,
plus its link hash::

    {"at":..,"hash":LINK,"kind":..,"prev":..,"refs":[..],"seq":..,"stream":..,"withheld":true}

The next event's ``prev`` (or, at a stream's end, the seal's head) must equal ``hash``,
so the chain, the heads and the root still check, against the same root and signature
as the full run. The body stays secret only as far as it cannot be guessed: a hash
commits to the content, it does not hide a low-entropy value (a true/false verdict)
from someone who tries both. A placeholder's kind, time and refs are the publisher's
claim until ``reveal`` compares them with the full run.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import msgspec

from ledger.bundle import REDACTED_FORMAT, BundleHeader, atomic_output, read_header, records
from ledger.chain import Failure, Summary, genesis, link_hash
from ledger.codec import canonical, canonical_json, decode_event, decode_link
from ledger.errors import UnusableInput
from ledger.events import KINDS, TERMINAL_KINDS, Event, StreamHead
from ledger.events import RunSealed as RunSealedEvent
from ledger.ledger import Ledger
from ledger.merkle import merkle_root

_HEX64 = re.compile(r"^[0-9a-f]{64}$")
WITHHOLDABLE = tuple(k for k in KINDS if k != "run_sealed")


class Placeholder(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A withheld event's line: its envelope without the body, and its link hash."""

    stream: str
    seq: int
    prev: str
    at: int
    kind: str
    refs: tuple[int, ...]
    hash: str
    withheld: bool


_placeholder_decoder = msgspec.json.Decoder(Placeholder)


class WithheldEvent(Event, frozen=True, tag="withheld"):
    """What a reader of a redacted bundle sees in place of a withheld event."""

    withheld_kind: str
    hash: str


def read_placeholder(data: bytes) -> Placeholder | None:
    """The placeholder on this line, or None when the line is not one."""
    try:
        ph = _placeholder_decoder.decode(data)
    except msgspec.DecodeError:
        return None
    return ph if ph.withheld is True else None


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
    """The placeholder line that stands for the event with canonical bytes ``data``."""
    link = decode_link(data)
    ph = Placeholder(
        link.stream, link.seq, link.prev, link.at, link.kind, link.refs, link_hash(data), True
    )
    return canonical_json(ph)


# -- choosing what to withhold -------------------------------------------------------------


@dataclass(frozen=True)
class Selection:
    """Events to withhold: every event of ``kinds``, and every event of a matching stream.

    A stream glob matches the full stream name or the part after ``RUN/``. The seal is
    never withheld: it is what every placeholder is checked against.
    """

    kinds: frozenset[str] = frozenset()
    streams: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for kind in self.kinds:
            if kind == "run_sealed":
                raise ValueError(
                    "run_sealed is never withheld: every placeholder is checked against it"
                )
            if kind not in KINDS:
                raise ValueError(f"no event kind {kind!r}; kinds: {', '.join(WITHHOLDABLE)}")
        if not self.kinds and not self.streams:
            raise ValueError("nothing to withhold: give --withhold KIND or --withhold-stream GLOB")

    def rules(self) -> list[str]:
        return [f"kind:{k}" for k in sorted(self.kinds)] + [f"stream:{g}" for g in self.streams]

    def _stream_matches(self, run_id: str, stream: str) -> bool:
        short = stream[len(run_id) + 1 :] if stream.startswith(run_id + "/") else stream
        return any(
            fnmatch.fnmatchcase(stream, g) or fnmatch.fnmatchcase(short, g) for g in self.streams
        )

    def selects(self, run_id: str, stream: str, kind: str) -> bool:
        if kind == "run_sealed":
            return False
        return kind in self.kinds or self._stream_matches(run_id, stream)


def export_redacted(
    ledger: Ledger, run_id: str, path: str, selection: Selection
) -> tuple[int, dict[str, int]]:
    """Write sealed ``run_id`` with the selected events as placeholders.

    Returns (lines written, withheld events per kind). Refuses (UnusableInput, nothing
    written) an unsealed run or a stream glob that matches no stream of the run.
    """
    info = ledger.run_info(run_id)
    if not info.root:
        raise UnusableInput(
            run_id, "run is not sealed; a redacted bundle is checked against the sealed root"
        )
    names = [h.stream for h in ledger.store.heads(run_id) if h.stream is not None]
    for glob in selection.streams:
        if not any(Selection(streams=(glob,))._stream_matches(run_id, s) for s in names):
            raise UnusableInput(glob, f"--withhold-stream matches no stream of run {run_id}")
    header = BundleHeader(
        format=REDACTED_FORMAT, run=run_id, root=info.root, withheld=selection.rules()
    )
    n = 0
    withheld: dict[str, int] = {}
    with atomic_output(path) as out:
        out.write(canonical_json(header) + b"\n")
        for stream, _seq, kind, data in ledger.store.scan(run_id):
            raw = bytes(data)
            if selection.selects(run_id, stream, kind):
                raw = placeholder_bytes(raw)
                withheld[kind] = withheld.get(kind, 0) + 1
            out.write(raw + b"\n")
            n += 1
    return n, withheld


# -- verifying a redacted bundle -----------------------------------------------------------


class _Stop(Exception):
    def __init__(self, failure: Failure) -> None:
        self.failure = failure


@dataclass
class _Last:
    kind: str
    hash: str
    at: int
    withheld: bool


class _Checker:
    """The chain rules of docs/ledger-format.md over events and placeholders, streamed."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.summary = Summary()
        self.withheld = 0
        self.heads: list[StreamHead] = []
        self.tails: dict[str, _Last] = {}
        self.seal: RunSealedEvent | None = None

    def fail(self, stream: str, seq: int, problem: str, detail: str, **kw: str) -> _Stop:
        return _Stop(Failure(stream, seq, problem, detail, **kw))

    def run(self, lines: Iterable[tuple[int, bytes]]) -> None:
        run_id = self.run_id
        cur = ""
        exp_seq, exp_prev = 0, ""
        last: _Last | None = None
        for lineno, data in lines:
            ph: Placeholder | None = None
            try:
                link = decode_link(data)
                stream, seq, prev, at, kind, refs = (
                    link.stream,
                    link.seq,
                    link.prev,
                    link.at,
                    link.kind,
                    link.refs,
                )
                h = link_hash(data)
            except msgspec.DecodeError:
                ph = read_placeholder(data)
                if ph is None:
                    raise self.fail(
                        cur or run_id,
                        exp_seq,
                        "undecodable line",
                        f"line {lineno} is neither an event nor a placeholder",
                    ) from None
                stream, seq, prev, at, kind, refs, h = (
                    ph.stream,
                    ph.seq,
                    ph.prev,
                    ph.at,
                    ph.kind,
                    ph.refs,
                    ph.hash,
                )
            if ph is not None:
                if not _HEX64.match(h):
                    raise self.fail(stream, seq, "bad placeholder", "hash is not 64 hex digits")
                self.withheld += 1
            if stream != cur:
                if cur:
                    self._end(cur, exp_seq, last)
                if stream != run_id and not stream.startswith(run_id + "/"):
                    raise self.fail(stream, seq, "foreign stream", f"not of run {run_id!r}")
                if not cur and stream != run_id:
                    raise self.fail(run_id, 0, "missing header stream", f"first is {stream!r}")
                if cur and stream <= cur:
                    raise self.fail(stream, seq, "out of order", f"appears after {cur!r}")
                cur, exp_seq, exp_prev, last = stream, 0, genesis(stream), None
            if seq != exp_seq:
                raise self.fail(stream, exp_seq, "gap", f"seq {exp_seq} expected, found {seq}")
            if any(not 0 <= r < seq for r in refs):
                raise self.fail(stream, seq, "bad ref", "a ref is not an earlier seq")
            if kind not in KINDS:
                raise self.fail(stream, seq, "unknown kind", f"no event kind {kind!r}")
            if stream == run_id and self.seal is not None:
                raise self.fail(stream, seq, "event after seal", "run_sealed must be last")
            if prev != exp_prev:
                if last is not None and last.withheld:
                    raise self.fail(
                        stream,
                        seq - 1,
                        "placeholder mismatch",
                        f"the withheld event's stated hash is not the link seq {seq} recorded",
                        expected=prev,
                        found=last.hash,
                    )
                raise self.fail(
                    stream,
                    seq,
                    "prev mismatch",
                    "prev is not the link hash of the event before",
                    expected=exp_prev,
                    found=prev,
                )
            if kind == "run_sealed":
                self._take_seal(stream, seq, last, data, ph)
            else:
                last = _Last(kind, h, at, ph is not None)
            self.summary.events += 1
            exp_seq, exp_prev = seq + 1, h
        if not cur:
            raise self.fail(run_id, 0, "missing header stream", "the bundle has no events")
        self._end(cur, exp_seq, last)
        self._finish()

    def _take_seal(
        self, stream: str, seq: int, before: _Last | None, data: bytes, ph: Placeholder | None
    ) -> None:
        if ph is not None:
            raise self.fail(stream, seq, "withheld seal", "run_sealed is never withheld")
        if stream != self.run_id or before is None:
            raise self.fail(stream, seq, "misplaced seal", "run_sealed ends the header stream")
        try:
            event = decode_event(data)
        except msgspec.DecodeError as exc:
            raise self.fail(stream, seq, "undecodable event", str(exc)) from None
        assert isinstance(event, RunSealedEvent)
        if canonical(event) != data:
            raise self.fail(stream, seq, "non-canonical seal", "seal bytes are not canonical")
        self.seal = event

    def _end(self, stream: str, length: int, last: _Last | None) -> None:
        assert last is not None
        self.summary.streams += 1
        self.summary.max_at = max(self.summary.max_at, last.at)
        if stream == self.run_id:
            if self.seal is None:
                raise self.fail(stream, length, "not sealed", "the run has no run_sealed event")
            length -= 1  # the header's leaf is its head just before the seal
        elif last.kind not in TERMINAL_KINDS:
            raise self.fail(
                stream,
                length - 1,
                "unterminated stream",
                f"sealed run's stream ends in {last.kind!r}",
            )
        self.heads.append(StreamHead(stream, length, last.hash))
        self.tails[stream] = last

    def _finish(self) -> None:
        seal = self.seal
        assert seal is not None
        body, s = seal.body, self.summary
        seq = seal.seq
        sealed = list(body.heads)
        for i, head in enumerate(self.heads):
            want = sealed[i] if i < len(sealed) else None
            if want == head:
                continue
            if want is None or want.stream != head.stream:
                name = want.stream if want is not None else head.stream
                raise self.fail(
                    name, 0, "stream mismatch", "the bundle's streams differ from the seal's"
                )
            if want.length != head.length:
                raise self.fail(
                    head.stream,
                    head.length,
                    "length mismatch",
                    f"sealed length is {want.length}, found {head.length}",
                )
            problem = (
                "placeholder mismatch"
                if self.tails[head.stream].withheld
                else ("link hash mismatch")
            )
            raise self.fail(
                head.stream,
                head.length - 1,
                problem,
                "the last event does not hash to the sealed head",
                expected=want.head,
                found=head.head,
            )
        if len(sealed) != len(self.heads):
            raise self.fail(
                sealed[len(self.heads)].stream,
                0,
                "stream missing",
                "the seal lists a stream the bundle lacks",
            )
        s.heads = self.heads
        s.computed_root = merkle_root(self.heads)
        s.sealed_root = body.root
        if s.computed_root != body.root:
            raise self.fail(
                self.run_id,
                seq,
                "root mismatch",
                "heads do not produce the root",
                expected=body.root,
                found=s.computed_root,
            )
        if body.streams != s.streams or body.events != s.events - 1:
            raise self.fail(self.run_id, seq, "count mismatch", "seal counts differ")
        if seal.at != s.max_at:
            raise self.fail(
                self.run_id,
                seq,
                "seal time mismatch",
                "run_sealed.at must equal the latest at of the stream heads",
                expected=str(s.max_at),
                found=str(seal.at),
            )
        if seal.refs:
            raise self.fail(self.run_id, seq, "bad ref", "run_sealed takes no refs")


def _numbered(path: str) -> Iterator[tuple[int, bytes]]:
    for n, rec in enumerate(records(path), start=2):
        yield n, rec.data


def verify_redacted(
    path: str, root: str | None = None
) -> tuple[Failure | None, Summary, BundleHeader, int]:
    """Check a redacted bundle: the chain through every placeholder, the heads, the root.

    Returns (first failure or None, summary, header, placeholders seen).
    """
    header = read_header(path)
    if header.format != REDACTED_FORMAT:
        raise UnusableInput(path, "field format: not a redacted bundle", line=1)
    checker = _Checker(header.run)
    failure: Failure | None = None
    try:
        checker.run(_numbered(path))
    except _Stop as stop:
        failure = stop.failure
    summary = checker.summary
    for want, what in ((header.root, "the bundle header's root"), (root, "the root you expected")):
        if failure is None and want and want.lower() != summary.sealed_root:
            failure = Failure(
                header.run,
                -1,
                "root mismatch",
                f"the seal's root is not {what}",
                expected=want.lower(),
                found=summary.sealed_root,
            )
    return failure, summary, header, checker.withheld


def seal_of(path: str) -> RunSealedEvent | None:
    """The run_sealed event of a bundle (any format), read from its header stream."""
    run = read_header(path).run
    for rec in records(path):
        try:
            link = decode_link(rec.data)
        except msgspec.DecodeError:
            continue  # a placeholder: never the seal
        if link.stream != run:
            return None
        if link.kind == "run_sealed":
            event = decode_event(rec.data)
            return event if isinstance(event, RunSealedEvent) else None
    return None


def reveal(redacted: str, full: str) -> tuple[Failure | None, int]:
    """Prove each placeholder of ``redacted`` matches the event it stands for in ``full``.

    Both bundles are read in step (same run, same order). Returns (first mismatch or
    None, placeholders matched). The caller verifies both bundles against one root.
    """
    matched = 0
    a_it, b_it = iter(_numbered(redacted)), iter(_numbered(full))
    for lineno, data in a_it:
        nxt = next(b_it, None)
        ph = read_placeholder(data)
        where = ph or _safe_link(data)
        if nxt is None:
            return Failure(
                where.stream if where else "",
                where.seq if where else -1,
                "reveal mismatch",
                "the full bundle ends early",
            ), matched
        full_data = nxt[1]
        if ph is None:
            if data != full_data:
                s, q = (where.stream, where.seq) if where else ("", -1)
                return Failure(
                    s, q, "reveal mismatch", f"line {lineno} differs between the bundles"
                ), matched
            continue
        try:
            link = decode_link(full_data)
        except msgspec.DecodeError:
            return Failure(
                ph.stream, ph.seq, "reveal mismatch", "the full bundle withholds this event too"
            ), matched
        got = link_hash(full_data)
        claims = (link.stream, link.seq, link.prev, link.at, link.kind, link.refs)
        if got != ph.hash or claims != (ph.stream, ph.seq, ph.prev, ph.at, ph.kind, ph.refs):
            return Failure(
                ph.stream,
                ph.seq,
                "reveal mismatch",
                "the full event does not match its placeholder",
                expected=ph.hash,
                found=got,
            ), matched
        matched += 1
    if next(b_it, None) is not None:
        return Failure("", -1, "reveal mismatch", "the full bundle has more lines"), matched
    return None, matched


def _safe_link(data: bytes) -> Placeholder | None:
    try:
        link = decode_link(data)
    except msgspec.DecodeError:
        return None
    return Placeholder(link.stream, link.seq, link.prev, link.at, link.kind, link.refs, "", False)
