"""The ledger: append events to hash-chained streams, group them into runs, seal runs."""

from __future__ import annotations

import binascii
import contextlib
import os
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

import blake3
import msgspec

from benchledger.ledger.backend import Store
from benchledger.ledger.chain import (
    BODY_DOMAIN,
    BODY_KEY,
    EVENT_DOMAIN,
    EVENT_DOMAIN_V1,
    KIND_KEY,
    Record,
    event_format,
    genesis,
    link_hash,
)
from benchledger.ledger.checker import RunChecker
from benchledger.ledger.codec import (
    MAX_DEPTH,
    Envelope,
    TooDeep,
    canonical,
    canonical_json,
    check_depth,
    decode_event,
    decode_link,
)
from benchledger.ledger.errors import (
    AppendConflict,
    DamagedEvent,
    ImportedRun,
    ImportRefused,
    LedgerError,
    RunSealed,
    UnitsMissing,
    UnknownRun,
    UnusableInput,
)
from benchledger.ledger.events import (
    EVENT_FORMAT,
    WITHHOLDABLE,
    Body,
    Event,
    RunImportedBody,
    RunImportedEvent,
    RunSealedBody,
    RunSealedEvent,
    RunStartedBody,
    RunStartedEvent,
    StreamHead,
    UnitFinishedEvent,
    UnitStartedEvent,
    failed_units,
    is_probe_stream,
    make_event,
    stream_unit,
    terminal,
)
from benchledger.ledger.merkle import merkle_root
from benchledger.ledger.names import RULE, is_name, is_stream_name
from benchledger.ledger.verdict import Failure, Summary

if TYPE_CHECKING:
    from benchledger.ledger.signing import Signer

Clock = Callable[[], int]
_hash = blake3.blake3
_hexlify = binascii.hexlify
_join = b"".join
_tuple_new = tuple.__new__
_encode = canonical_json
_T = TypeVar("_T")
_WITHHOLDABLE = frozenset(WITHHOLDABLE)


def _stored(
    decode: Callable[[bytes], _T], stream: str | None, seq: int | None, data: bytes | None
) -> _T:
    """Decode a stored row; a row that does not decode raises DamagedEvent, never msgspec's.

    Rows come from a database anyone can edit, so this is the boundary where a damaged
    row becomes a ledger error naming where it is, instead of a decoder traceback.
    """
    if not data:  # a NULL or emptied state column
        raise DamagedEvent(stream or "", seq or 0, "the state column is empty")
    try:
        return decode(data)
    except msgspec.DecodeError as exc:  # ValidationError is a DecodeError
        raise DamagedEvent(stream or "", seq or 0, str(exc)) from None


def check_run_id(run_id: str) -> str:
    """Return ``run_id`` or raise ValueError: letters, digits and ``._:-``, no ``/``."""
    if not is_name(run_id):
        raise ValueError(f"run id {run_id!r} {RULE}")
    return run_id


def check_stream(stream: str) -> str:
    """Return ``stream`` or raise UnusableInput: parts as ``check_run_id``'s joined by ``/``."""
    if not is_stream_name(stream):
        raise UnusableInput(
            f"stream {stream!r}", f"not a stream name: each /-separated part {RULE}"
        )
    return stream


class StreamWriter:
    """The single writer of one stream: stages events, tracks seq and head hash.

    ``fmt`` is the event format it writes: its run's (a run keeps the format of its
    run_started, so a resumed format-1 run goes on in format 1).
    """

    def __init__(
        self,
        stream: str,
        next_seq: int,
        head: str,
        clock: Clock,
        *,
        keep_log: bool = False,
        fmt: int = EVENT_FORMAT,
    ) -> None:
        self.stream = stream
        self.next_seq = next_seq
        self.head = head
        self._clock = clock
        self.staged: list[Record] = []
        # With keep_log, every body appended through this writer, typed, with its seq: what
        # a unit's decisions and trace hash are computed from (staged bytes leave at commit).
        self.keep_log = keep_log
        self.log: list[tuple[int, Body]] = []
        self.format = fmt
        self._v: int | msgspec.UnsetType = msgspec.UNSET if fmt == 1 else fmt
        # Format 2's body digests: one hasher kept and reset for each (the checker's and
        # the raw baseline's idiom: a new one costs ~0.3 us more).
        self._body_hasher = _hash()

    def append(self, body: Body, refs: Iterable[int] = ()) -> int:
        """Stage ``body`` as the next event; return its seq (written at the next commit)."""
        seq = self.next_seq
        refs_t: tuple[int, ...] = ()
        if refs:
            refs_t = tuple(refs)
            for r in refs_t:
                if not 0 <= r < seq:
                    raise ValueError(
                        f"{self.stream}: ref {r} is not an earlier seq (next is {seq})"
                    )
        kind = body.KIND
        stream = self.stream
        # The hot path of every run: encoded here, not through a helper's extra frame.
        try:
            data = _encode(
                Envelope(self._clock(), body, kind, self.head, refs_t, seq, stream, self._v)
            )
        except RecursionError:  # far deeper than MAX_DEPTH: the encoder's own stack ran out
            raise TooDeep(
                f"stream {stream!r} seq {seq}", f"JSON nested deeper than {MAX_DEPTH} levels"
            ) from None
        if data.count(b"[") + data.count(b"{") > MAX_DEPTH:  # check_depth's test, inline: hot
            check_depth(data)  # what every reader refuses is never written
        # tuple.__new__: a Record without the NamedTuple constructor's Python frame.
        self.staged.append(_tuple_new(Record, (stream, seq, kind, data)))
        if self.keep_log:
            self.log.append((seq, body))
        if self._v is msgspec.UNSET:
            self.head = _hash(EVENT_DOMAIN_V1 + data).hexdigest()
        elif kind not in _WITHHOLDABLE:
            self.head = _hash(EVENT_DOMAIN + data).hexdigest()
        else:
            # Format 2, a withholdable kind (chain.link_hash, inline): the bytes with the
            # body replaced by its digest. The body starts after the first ',"body":' and
            # ends at the last ',"kind":"' (the envelope's own; no string holds it unescaped).
            b = data.find(BODY_KEY) + 8
            t = data.rfind(KIND_KEY)
            body_hasher = self._body_hasher
            body_hasher.reset()
            body_hasher.update(BODY_DOMAIN)
            body_hasher.update(data[b:t])
            sealed = _join(
                (EVENT_DOMAIN, data[:b], b'"', _hexlify(body_hasher.digest()), b'"', data[t:])
            )
            self.head = _hash(sealed).hexdigest()
        self.next_seq = seq + 1
        return seq


@dataclass(frozen=True)
class RunInfo:
    run_id: str
    streams: int
    events: int
    root: str  # "" while unsealed


@dataclass(frozen=True)
class Imported:
    """What ``Ledger.import_run`` did: the run, the events it added, the run's sealed
    root ('' for an unsealed run, which it marked ``run_imported``), and whether the run
    was here already as that sealed whole (then nothing was added)."""

    run_id: str
    added: int
    root: str
    already: bool = False


class Ledger:
    """Events in a Store, written through StreamWriters and read back typed."""

    def __init__(
        self,
        store: Store,
        clock: Clock = time.time_ns,
        *,
        signer: Signer | None = None,
        event_format: int = EVENT_FORMAT,
    ) -> None:
        self.store = store
        self.clock = clock
        self.signer = signer  # signs every seal this ledger writes (never stored itself)
        # The event format of runs this ledger starts (existing runs keep their own); 1 only
        # to reproduce runs of the earlier format (tests, the format-1 golden bundle).
        self.new_format = event_format
        self._formats: dict[str, int] = {}  # run id -> its event format (its run_started's)

    def event_format(self, run_id: str) -> int:
        """The event format of ``run_id``: its run_started's; ``new_format`` for a new run."""
        fmt = self._formats.get(run_id)
        if fmt is None:
            rows = self.store.read_stream(run_id, -1)[:1]
            if not rows or not rows[0].data:
                return self.new_format  # no header yet: not cached, the run may start later
            fmt = self._formats[run_id] = event_format(bytes(rows[0].data))
        return fmt

    # -- writing --------------------------------------------------------------
    def writer(self, stream: str) -> StreamWriter:
        """A writer positioned after the stream's current head."""
        check_stream(stream)
        last = self.store.head(stream)
        if last is None:
            fmt = self.event_format(stream.split("/", 1)[0])
            return StreamWriter(stream, 0, genesis(stream), self.clock, fmt=fmt)
        assert last.seq is not None
        data = bytes(last.data)
        return StreamWriter(
            stream, last.seq + 1, link_hash(data), self.clock, fmt=event_format(data)
        )

    def new_stream(self, stream: str, *, keep_log: bool = False) -> StreamWriter:
        """A writer for a stream this caller creates; skips the head read.

        If the stream exists after all, the first commit fails with AppendConflict.
        ``keep_log`` keeps the typed bodies appended (``StreamWriter.log``).
        """
        check_stream(stream)
        fmt = self.event_format(stream.split("/", 1)[0])
        return StreamWriter(stream, 0, genesis(stream), self.clock, keep_log=keep_log, fmt=fmt)

    def commit(self, *writers: StreamWriter) -> int:
        """Write every staged event of ``writers`` in one transaction; return how many."""
        rows = [r for w in writers for r in w.staged]
        self.store.append(rows)
        for w in writers:
            w.staged.clear()
        return len(rows)

    def start_run(self, run_id: str, body: RunStartedBody) -> StreamWriter:
        """Create a run's header stream with ``run_started``; refuse an existing run id."""
        check_run_id(run_id)
        w = self.writer(run_id)
        if w.next_seq != 0:
            raise LedgerError(f"run {run_id!r} already exists; pick another --run-id")
        w.append(body)
        self.commit(w)
        self._formats[run_id] = w.format
        return w

    def join_run(self, run_id: str, body: RunStartedBody) -> RunStartedBody | None:
        """Start the run with ``body``, or join it: None when this call started it, else
        the ``run_started`` body another writer recorded first (for the caller to compare).

        Writers racing to start one run cannot both write its seq 0; the loser reads the
        winner's header instead. A sealed run takes no one (RunSealed).
        """
        check_run_id(run_id)
        w = self.new_stream(run_id)
        w.append(body)
        try:
            self.commit(w)
            self._formats[run_id] = w.format
            return None
        except AppendConflict:
            pass
        head = self.store.head(run_id)
        if head is not None and head.kind == "run_sealed":
            raise RunSealed(run_id)
        self.check_own(run_id)
        first = self.store.read_stream(run_id)[0]
        event = _stored(decode_event, first.stream, first.seq, first.data)
        if not isinstance(event, RunStartedEvent):
            raise DamagedEvent(run_id, 0, f"the header starts with {type(event).__name__}")
        return event.body

    def unfinished(self, run_id: str) -> list[str]:
        """Planned units (the run record's ``units``) with no finished stream, as
        ``unit/attempt`` in plan order; [] for a run without a record.

        A stream abandoned after it finished (an infra-failed unit re-run by ``run
        --retry-infra``) is no longer a finished one. Decodes only ``run_started``,
        ``unit_started``, ``unit_finished`` and ``unit_abandoned`` rows.
        """
        wanted = ("run_started", "unit_started", "unit_finished", "unit_abandoned")
        planned: list[tuple[str, int]] = []
        started: dict[str, tuple[str, int]] = {}
        finished: dict[str, tuple[str, int]] = {}
        with contextlib.closing(self.store.scan(run_id)) as rows:  # type: ignore[type-var]
            for stream, seq, kind, data in rows:
                if kind not in wanted:
                    continue
                event = _stored(decode_event, stream, seq, data)
                if isinstance(event, RunStartedEvent) and event.body.record is not None:
                    planned = [(u.unit_id, u.attempt) for u in event.body.record.units]
                elif isinstance(event, UnitStartedEvent):
                    started[stream] = (event.body.protocol_id, event.body.attempt)
                elif stream in started and kind == "unit_finished":
                    finished[stream] = started[stream]
                else:
                    finished.pop(stream or "", None)
        done = set(finished.values())
        return [f"{unit}/{attempt}" for unit, attempt in planned if (unit, attempt) not in done]

    def infra_failed(self, run_id: str, heads: list[Record] | None = None) -> list[str]:
        """Units whose every counting stream ended in an infrastructure error
        (``events.infra_failure``), as sorted ``unit/attempt``.

        Read from the stream heads alone (``heads``, if the caller has them): a counting
        stream is one whose head is ``unit_finished`` (a retried one ends in
        ``unit_abandoned``), so this decodes one event per unit, never the run.
        """
        return self.failed(run_id, heads)[0]

    def failed(self, run_id: str, heads: list[Record] | None = None) -> tuple[list[str], list[str]]:
        """(infra-failed, harness-failed) units as ``events.failed_units`` splits them, read
        from the stream heads as ``infra_failed`` reads them."""
        rows = self.store.heads(run_id) if heads is None else heads
        ends = []
        for row in rows:
            if row.stream == run_id or row.kind != "unit_finished":
                continue
            event = _stored(decode_event, row.stream, row.seq, row.data)
            error = event.body.error if isinstance(event, UnitFinishedEvent) else ""
            ends.append(("/".join(stream_unit(run_id, row.stream or "")), error))
        return failed_units(ends)

    def seal_complete(self, run_id: str, *, signer: Signer | None = None) -> str:
        """Seal the run once every planned unit has finished; return its root.

        UnitsMissing names the planned units that have not. When another writer seals
        the run first (two queue workers finishing together), its root is returned.
        """
        missing = self.unfinished(run_id)
        if missing:
            raise UnitsMissing(run_id, missing)
        try:
            return self.seal(run_id, signer=signer)
        except (AppendConflict, RunSealed):
            root = self.run_info(run_id).root
            if not root:
                raise
            return root

    def seal(self, run_id: str, *, signer: Signer | None = None) -> str:
        """Append ``run_sealed`` with the run root over every stream head; return the root.

        With a ``signer`` (or the ledger's), the seal carries its signature over the root.
        """
        heads = self.store.heads(run_id)
        if not heads or heads[0].stream != run_id:
            raise UnknownRun(run_id, self.store.recent_run_ids())
        self.check_own(run_id)
        leaves: list[StreamHead] = []
        latest = 0
        for row in heads:
            link = _stored(decode_link, row.stream, row.seq, row.data)
            assert row.stream is not None and row.seq is not None
            if row.stream == run_id and link.kind == "run_sealed":
                raise RunSealed(run_id)
            if row.stream != run_id and not terminal(row.stream, link.kind):
                raise LedgerError(
                    f"cannot seal run {run_id!r}: stream {row.stream!r} ends at seq {row.seq} "
                    f"with {link.kind!r}, not a finished or abandoned unit"
                )
            leaves.append(StreamHead(row.stream, row.seq + 1, link_hash(row.data)))
            latest = max(latest, link.at)
        root = merkle_root(leaves)
        header = leaves[0]
        fmt = event_format(bytes(heads[0].data))  # the header's last event is in the run's
        body = RunSealedBody(
            root=root, streams=len(leaves), events=sum(h.length for h in leaves), heads=leaves
        )
        signer = signer or self.signer
        if signer is not None:
            body = msgspec.structs.replace(body, signature=signer.sign(run_id, body, self.clock()))
        event = make_event(run_id, header.length, header.head, latest, body, v=fmt)
        self.store.append([Record(run_id, header.length, "run_sealed", canonical(event))])
        return root

    # -- import ---------------------------------------------------------------
    # A bundle becomes a run of this ledger only whole, and only where no run of its id is:
    # adding streams to a run this ledger holds would let a bundle's units be resumed,
    # sealed and signed as this ledger's (or, onto a sealed run, break it for good: the
    # store is append-only). An unsealed run is taken only when asked, and marked.
    def import_run(
        self,
        path: str,
        run_id: str,
        summary: Summary,
        lines: Iterable[bytes],
        *,
        allow_unsealed: bool = False,
    ) -> Imported:
        """Add the run a bundle at ``path`` holds, verified as ``summary``, which this ledger
        must not hold; nothing is written unless all of it is (one transaction).

        ``lines`` are the bundle's event lines exactly as the one verifying read saw them,
        from a private copy nothing else can change (``ledger.verified.import_bundle`` reads,
        verifies and keeps them): what is written is what was verified, even when the file
        itself reads differently later (a FIFO, a network mount).

        The run already here as the bundle's sealed whole, same root, is a no-op. Any other
        run of that id here refuses the bundle (ImportRefused), as does an unsealed bundle
        unless ``allow_unsealed``: then its header stream gets a ``run_imported`` event, and
        the run is never resumed, joined or sealed here (``check_own``).
        """
        root = summary.sealed_root
        if self._holds_sealed_whole(path, run_id, root, summary.heads):
            return Imported(run_id, 0, root, already=True)
        if not root and not allow_unsealed:
            raise ImportRefused(
                path,
                run_id,
                "in this bundle is not sealed: imported, it could be finished and sealed here "
                "as this ledger's own run; pass --allow-unsealed to import it as another "
                "ledger's run, never resumed, joined or sealed here (log, report and verify "
                "also read the bundle as it is)",
            )
        marker: list[Record] = []
        if not root:
            top = summary.heads[0]  # the header stream: the mark goes after its last event
            body = RunImportedBody(
                bundle=os.path.basename(path),
                root=summary.computed_root,
                streams=summary.streams,
                events=summary.events,
            )
            event = make_event(run_id, top.length, top.head, self.clock(), body, v=summary.format)
            marker = [Record(run_id, top.length, body.KIND, canonical(event))]

        def batches() -> Iterator[list[Record]]:
            batch: list[Record] = []
            for data in lines:
                link = decode_link(data)
                batch.append(Record(link.stream, link.seq, link.kind, data))
                if len(batch) >= 1000:
                    yield batch
                    batch = []
            if batch or marker:
                yield batch + marker

        added = self.store.append_all(batches())
        return Imported(run_id, added - len(marker), root)

    def _holds_sealed_whole(
        self, path: str, run_id: str, root: str, heads: list[StreamHead]
    ) -> bool:
        """Whether ``run_id`` is here as the bundle's sealed whole (``root``, ``heads``);
        False when no stream of it is here; ImportRefused for anything else."""
        stored = self.store.heads(run_id)
        if not stored:
            return False
        if stored[0].stream != run_id:
            names = ", ".join(str(r.stream) for r in stored[:3])
            raise ImportRefused(
                path, run_id, f"has streams here without its header stream ({names}): an "
                "import never adds to a run this ledger holds part of"
            )  # fmt: skip
        sealed = self.sealed(run_id)
        if sealed is None:
            raise ImportRefused(
                path, run_id, f"exists here, unsealed ({len(stored)} streams): an import "
                "never adds streams or events to a run this ledger holds, whose units would "
                "then be resumed and sealed as this ledger's own"
            )  # fmt: skip
        if sealed.root != root:
            theirs = f"the bundle's root is {root}" if root else "the bundle's run is unsealed"
            raise ImportRefused(
                path, run_id, f"is sealed here with root {sealed.root} and {theirs}: a sealed "
                "run takes no more events"
            )  # fmt: skip
        mine = [StreamHead(str(r.stream), (r.seq or 0) + 1, link_hash(r.data)) for r in stored]
        if stored[0].seq != heads[0].length or mine[1:] != heads[1:]:
            raise ImportRefused(
                path, run_id, f"is sealed here with the bundle's root {root} but holds events "
                f"its seal does not cover: check it with `benchledger verify {run_id}`"
            )  # fmt: skip
        return True

    def imported(self, run_id: str) -> RunImportedBody | None:
        """The ``run_imported`` mark of a run another ledger wrote; None for this one's.

        The mark is the header stream's last event: nothing is appended to a marked run.
        """
        head = self.store.head(run_id)
        if head is None or head.kind != RunImportedBody.KIND:
            return None
        event = _stored(decode_event, head.stream, head.seq, head.data)
        return event.body if isinstance(event, RunImportedEvent) else None

    def check_own(self, run_id: str) -> None:
        """ImportedRun, naming its units, when another ledger wrote ``run_id``: it is
        never resumed, joined or sealed here."""
        mark = self.imported(run_id)
        if mark is not None:
            prefix = run_id + "/"
            units = [str(h.stream).removeprefix(prefix) for h in self.store.heads(run_id)[1:]
                     if not is_probe_stream(str(h.stream))]  # fmt: skip
            raise ImportedRun(run_id, mark.bundle, units)

    # -- reading --------------------------------------------------------------
    def runs(self) -> list[RunInfo]:
        """Every run with its stream and event counts and sealed root."""
        out = []
        for run_id in self.store.run_ids():
            out.append(self.run_info(run_id))
        return out

    def run_info(self, run_id: str) -> RunInfo:
        """Counts and sealed root of one run; UnknownRun when absent."""
        heads = self.store.heads(run_id)
        if not heads or heads[0].stream != run_id:
            raise UnknownRun(run_id, self.store.recent_run_ids())
        root = ""
        first = heads[0]
        header = _stored(decode_event, first.stream, first.seq, first.data)
        if isinstance(header, RunSealedEvent):
            root = header.body.root
        events = sum((h.seq or 0) + 1 for h in heads)
        return RunInfo(run_id, len(heads), events, root)

    def sealed(self, run_id: str) -> RunSealedBody | None:
        """The run's seal (None while unsealed); UnknownRun when absent."""
        head = self.store.head(run_id)
        if head is None:
            raise UnknownRun(run_id, self.store.recent_run_ids())
        event = _stored(decode_event, head.stream, head.seq, head.data)
        return event.body if isinstance(event, RunSealedEvent) else None

    def events(self, run_id: str, stream: str | None = None) -> Iterator[tuple[Event, str]]:
        """Typed events of a run (or one of its streams) with their link hashes, in order."""
        if stream is not None:
            for name, seq, _kind, data in self.store.read_stream(stream):
                yield _stored(decode_event, name, seq, data), link_hash(data)
            return
        self.run_info(run_id)
        # When a damaged row stops the read, close the scan (a generator) now, not at garbage
        # collection: until then its transaction stays open and holds a pooled connection.
        with contextlib.closing(self.store.scan(run_id)) as rows:  # type: ignore[type-var]
            for name, seq, _kind, data in rows:
                yield _stored(decode_event, name, seq, data), link_hash(data)

    def verify(self, run_id: str, *, require_seal: bool = False) -> tuple[Failure | None, Summary]:
        """Check one run: every link, prev, seq, and the sealed root."""
        if self.store.head(run_id) is None and next(iter(self.store.scan(run_id)), None) is None:
            raise UnknownRun(run_id, self.store.recent_run_ids())
        checker = RunChecker(run_id, require_seal=require_seal)
        failure = checker.check(self.store.scan(run_id))
        return failure, checker.summary

    def orphans(self) -> list[str]:
        """Streams whose run header is missing (a 'run/...' name with no 'run' stream)."""
        runs = set(self.store.run_ids())
        seen: list[str] = []
        last = None
        for stream, _seq, _kind, _data in self.store.scan(None):
            if stream == last:
                continue
            last = stream
            if stream.split("/", 1)[0] not in runs:
                seen.append(stream)
        return seen
