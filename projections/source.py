"""Where a run's events come from: a ledger (by run id) or a bundle file."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, NamedTuple

import msgspec

from ledger import Ledger, LedgerError, UnknownRun, UnusableInput
from ledger.bundle import (
    AUDIT_FORMAT,
    REDACTED_FORMAT,
    BundleHeader,
    read_header,
    records,
    verify_audit_bundle,
    verify_bundle,
)
from ledger.chain import Failure, RunChecker, link_hash
from ledger.codec import decode_event, decode_link
from ledger.events import Event, RunSealed
from ledger.redaction import as_event, read_placeholder

if TYPE_CHECKING:
    from projections.lifecycle import RunMeta, Unit


class RunEvents(NamedTuple):
    """Every event of one run with its link hash, ordered by stream then seq."""

    run_id: str
    root: str
    events: list[tuple[Event, str]]
    bundle: BundleHeader | None = None
    check: Verification | None = None  # set by open_run: what was verified, against what


def from_ledger(ledger: Ledger, run_id: str) -> RunEvents:
    """A run's events read from a ledger (UnknownRun if absent)."""
    info = ledger.run_info(run_id)
    return RunEvents(run_id, info.root, list(ledger.events(run_id)))


def from_bundle(path: str) -> RunEvents:
    """A run's events read from a bundle (or audit bundle) file.

    In a redacted bundle a withheld event reads as a ``WithheldEvent`` (kind and digest,
    no body), so projections can show it as withheld rather than absent.
    """
    header = read_header(path)
    redacted = header.format == REDACTED_FORMAT
    events: list[tuple[Event, str]] = []
    for n, rec in enumerate(records(path), start=2):
        try:
            events.append((decode_event(rec.data), link_hash(rec.data)))
        except Exception as exc:  # msgspec errors: a damaged line
            ph = read_placeholder(rec.data) if redacted else None
            if ph is None:
                raise UnusableInput(path, f"not a benchledger event ({exc})", line=n) from None
            events.append((as_event(ph), ph.hash))
    return RunEvents(header.run, header.root, events, header)


def is_bundle(target: str) -> bool:
    """Whether ``target`` names a bundle file rather than a run id."""
    return target.endswith((".jsonl", ".jsonl.gz", ".gz")) or os.path.isfile(target)


# -- the one verified door ------------------------------------------------------------------


class Verification(NamedTuple):
    """What ``open_run`` checked before handing out a run's events, and against what root."""

    source: str  # "ledger", "bundle", "redacted bundle" or "audit bundle"
    sealed: bool
    root: str  # the sealed root every link was checked against ("" when unsealed)
    heads_root: str  # the Merkle root of the stream heads as read
    streams: int
    events: int
    partial: bool = False  # an audit bundle: only the cited streams, each proven in the root
    total_streams: int = 0  # audit bundles: the streams of the whole run
    withheld: int = 0  # redacted bundles: events present only as placeholders

    def line(self) -> str:
        """One line for a report header: the result and the root it was checked against."""
        if self.partial:
            return (
                f"PARTIAL: audit bundle, {self.streams} of {self.total_streams} streams, each "
                f"proven by inclusion in root {self.root}; numbers cover these streams only"
            )
        if not self.sealed:
            return (
                f"chain intact ({self.streams} streams, {self.events} events) but NOT SEALED: "
                f"an unfinished run; no sealed root to check against (heads root "
                f"{self.heads_root})"
            )
        withheld = f", {self.withheld} withheld as placeholders" if self.withheld else ""
        return (
            f"ok: every link, head and the seal check out ({self.streams} streams, "
            f"{self.events} events{withheld}) against sealed root {self.root}"
        )


class VerifiedRun(RunEvents):
    """A run's events that ``open_run`` verified while decoding them (``check`` is set)."""

    __slots__ = ()

    @property
    def verification(self) -> Verification:
        assert self.check is not None
        return self.check


class RunUnverified(LedgerError):
    """The input does not verify (tampered, truncated, partial, unsealed where a seal is due).

    Nothing from it is shown; the CLI maps this to exit 1 with ``failure`` in one line.
    """

    def __init__(self, target: str, run_id: str, failure: Failure) -> None:
        self.target = target
        self.run_id = run_id
        self.failure = failure
        super().__init__(
            f"run {run_id} ({target}) does not verify, so nothing from it is shown: {failure}; "
            f"see `benchledger verify {target}`"
        )


class _Undecodable(Exception):
    def __init__(self, failure: Failure) -> None:
        self.failure = failure


def _decoding(
    rows: Iterable[Any], out: list[tuple[Event, str]], redacted: bool = False
) -> Iterator[Any]:
    """Pass ``rows`` through to the chain checker, decoding each into ``out`` on the way.

    An event whose envelope checks out but whose body this version cannot decode stops
    the read at the next record (after the checker had its say about the bad one).
    """
    pending: Failure | None = None
    for row in rows:
        if pending is not None:
            raise _Undecodable(pending)
        data = row[3]
        try:
            out.append((decode_event(data), link_hash(data)))
        except msgspec.DecodeError as exc:
            ph = read_placeholder(data) if redacted else None
            if ph is not None:
                out.append((as_event(ph), ph.hash))
            else:
                pending = _where(row, data, f"undecodable event: {' '.join(str(exc).split())}")
        yield row
    if pending is not None:
        raise _Undecodable(pending)


def _where(row: Any, data: bytes, detail: str) -> Failure:
    stream, seq = row[0], row[1]
    if stream is None:
        try:
            link = decode_link(data)
            stream, seq = link.stream, link.seq
        except msgspec.DecodeError:
            stream, seq = "?", -1
    return Failure(str(stream), int(seq or 0), "undecodable event", detail)


def _checked(
    run_id: str, rows: Iterable[Any], require_seal: bool, redacted: bool = False
) -> tuple[Failure | None, Any, list[tuple[Event, str]]]:
    """One streaming pass: the chain checker and the decoder see every record once."""
    events: list[tuple[Event, str]] = []
    checker = RunChecker(run_id, require_seal=require_seal)
    try:
        failure = checker.check(_decoding(rows, events, redacted))
    except _Undecodable as bad:
        failure = bad.failure
    return failure, checker.summary, events


def _first_missing(events: list[tuple[Event, str]], run_id: str) -> Failure:
    """Where an audit bundle stops being the whole run: its first sealed stream it lacks."""
    have = {e.stream for e, _ in events}
    for event, _ in events:
        if isinstance(event, RunSealed):
            for head in event.body.heads:
                if head.stream not in have:
                    return Failure(
                        head.stream,
                        0,
                        "stream missing",
                        "an audit bundle holds only the streams it cites; this command needs "
                        "the whole run (its bundle from `benchledger export`)",
                    )
    return Failure(run_id, 0, "partial", "an audit bundle holds only some streams of the run")


def open_run(
    target: str,
    ledger: Ledger | Callable[[], Ledger] | None = None,
    *,
    require_seal: bool,
    allow_partial: bool,
) -> VerifiedRun:
    """The run ``target`` names (a bundle file, or a run id in ``ledger``), verified.

    Verification and decoding happen in one streaming pass. A bundle whose header names a
    root must be sealed with that root. An audit bundle is accepted only with
    ``allow_partial`` and is then labelled partial. Raises RunUnverified (exit 1) on the
    first bad stream and seq, UnknownRun / UnusableInput (exit 2) when there is nothing
    to verify.
    """
    if is_bundle(target):
        return _open_bundle(target, require_seal=require_seal, allow_partial=allow_partial)
    if ledger is None:
        raise UnusableInput(target, "no such bundle file, and no ledger to find a run in")
    led = ledger if isinstance(ledger, Ledger) else ledger()
    store = led.store
    if store.head(target) is None:
        with _closing(store.scan(target)) as rows:
            if next(iter(rows), None) is None:
                raise UnknownRun(target, store.run_ids())
    with _closing(store.scan(target)) as rows:
        failure, summary, events = _checked(target, rows, require_seal)
    if failure is not None:
        raise RunUnverified(target, target, failure)
    sealed = bool(summary.sealed_root)
    check = Verification(
        "ledger",
        sealed,
        summary.sealed_root,
        summary.computed_root,
        summary.streams,
        summary.events,
    )
    return VerifiedRun(target, summary.sealed_root, events, None, check)


def _open_bundle(path: str, *, require_seal: bool, allow_partial: bool) -> VerifiedRun:
    header = read_header(path)
    if header.format == AUDIT_FORMAT:
        partial = from_bundle(path)
        if not allow_partial:
            raise RunUnverified(path, header.run, _first_missing(partial.events, header.run))
        failure, proven, _ = verify_audit_bundle(path)
        if failure is not None:
            raise RunUnverified(path, header.run, failure)
        total = max(
            (int(p.get("size", 0)) for p in header.proofs.values() if isinstance(p, dict)),
            default=0,
        )
        check = Verification(
            "audit bundle",
            True,
            header.root,
            "",
            proven,
            len(partial.events),
            partial=True,
            total_streams=total,
        )
        return VerifiedRun(header.run, header.root, partial.events, header, check)
    if header.format == REDACTED_FORMAT:
        failure, summary, _ = verify_bundle(path)
        if failure is None and require_seal and not summary.sealed_root:
            failure = Failure(header.run, -1, "not sealed", "the bundle's run is not sealed")
        if failure is not None:
            raise RunUnverified(path, header.run, failure)
        run = from_bundle(path)
        withheld = sum(1 for e, _ in run.events if type(e).__name__ == "WithheldEvent")
        check = Verification(
            "redacted bundle",
            bool(summary.sealed_root),
            summary.sealed_root,
            summary.computed_root,
            summary.streams,
            summary.events,
            withheld=withheld,
        )
        return VerifiedRun(header.run, summary.sealed_root, run.events, header, check)
    failure, summary, events = _checked(
        header.run, records(path), require_seal or bool(header.root)
    )
    if failure is None and header.root and summary.sealed_root != header.root:
        failure = Failure(
            header.run,
            -1,
            "root mismatch",
            "the bundle header's root differs from the seal's",
            expected=header.root,
            found=summary.sealed_root,
        )
    if failure is not None:
        raise RunUnverified(path, header.run, failure)
    check = Verification(
        "bundle",
        bool(summary.sealed_root),
        summary.sealed_root,
        summary.computed_root,
        summary.streams,
        summary.events,
    )
    return VerifiedRun(header.run, summary.sealed_root, events, header, check)


# -- how much of its plan a run finished ----------------------------------------------------


class Completeness(NamedTuple):
    """How much of its plan a run finished: what every display of a partial run says first."""

    run_id: str
    sealed: bool
    planned: int  # the run record's planned units, else protocols × k (0: nothing recorded)
    finished: int  # planned units with a finished, not abandoned stream (any, without a plan)
    missing: tuple[str, ...] = ()  # planned ``unit/attempt`` with none, in plan order

    @property
    def whole(self) -> bool:
        """Sealed, with every planned unit finished: nothing to warn about."""
        return self.sealed and self.finished >= self.planned and not self.missing

    @property
    def short(self) -> int:
        """How many planned units have not finished."""
        return max(self.planned - self.finished, len(self.missing))

    def counts(self) -> str:
        """``26 of 30 planned units finished`` (or, with no plan recorded, ``26 units``)."""
        if not self.planned:
            return f"{self.finished} units finished (the run recorded no plan)"
        return f"{self.finished} of {self.planned} planned units finished"

    def missing_text(self, shown: int = 3) -> str:
        """``4 planned units missing: p026/1, p027/1, p028/1, ...`` (or none missing)."""
        if not self.short:
            return "no planned unit missing"
        names = ", ".join(self.missing[:shown]) + (", ..." if len(self.missing) > shown else "")
        units = "unit" if self.short == 1 else "units"
        return f"{self.short} planned {units} missing" + (f": {names}" if names else "")

    def banner(self) -> str:
        """The first line of any display of this run; "" for a whole one."""
        if self.whole:
            return ""
        if not self.sealed:
            return (
                f"UNSEALED: {self.counts()}; run {self.run_id} was interrupted or is still "
                "running, so every number here covers only its finished units"
            )
        return f"INCOMPLETE: sealed with {self.counts()}; every number here covers only those units"

    def as_json(self) -> dict[str, Any]:
        """The JSON ``completeness`` field of reports and comparisons."""
        return {
            "run_id": self.run_id,
            "sealed": self.sealed,
            "planned_units": self.planned,
            "finished_units": self.finished,
            "missing_units": list(self.missing),
        }


def completeness(meta: RunMeta, units: Iterable[Unit]) -> Completeness:
    """The one count of a run's planned and finished units (every display, gate, --watch).

    The plan is the run record's ``units`` (else protocols × k, unnamed); a unit counts once
    its stream finished and was not abandoned. A finished unit whose end a redacted bundle
    withholds still counts: it is in the chain, only its body is not shown.
    """
    done: set[tuple[str, int]] = set()
    for u in units:
        ended = u.finished is not None or any(kind == "unit_finished" for _, kind in u.withheld)
        if ended and not u.abandoned:
            done.add(_unit_key(u, meta.run_id))
    sealed = bool(meta.root)
    if not meta.planned:
        return Completeness(meta.run_id, sealed, meta.planned_units, len(done))
    missing = tuple(f"{u}/{a}" for u, a in meta.planned if (u, a) not in done)
    planned = len(meta.planned)
    return Completeness(meta.run_id, sealed, planned, planned - len(missing), missing)


def _unit_key(unit: Unit, run_id: str) -> tuple[str, int]:
    """A unit's (protocol, attempt); from its stream name when its start is withheld."""
    if unit.protocol_id:
        return unit.protocol_id, unit.attempt
    name, _, attempt = unit.stream.removeprefix(run_id + "/").rpartition("/")
    number = attempt.split("-r")[0]  # a resumed unit's stream is .../<attempt>-rN
    return name, int(number) if number.isdigit() else -1


def completeness_of(run: RunEvents) -> Completeness:
    """How much of its plan a run finished, counted from its events (``completeness``)."""
    from projections.fold import fold
    from projections.lifecycle import LifecycleFold

    return completeness(*fold(LifecycleFold(), run.events))


def banner_of(run: RunEvents) -> str:
    """The line a display of ``run`` starts with when the run is partial ("" when whole).

    An audit bundle holds only the streams it cites by design; its ``PARTIAL`` verification
    line says so, so it gets no banner of its own.
    """
    if run.check is not None and run.check.partial:
        return ""
    return completeness_of(run).banner()


class _closing:
    """Close a store scan (a generator) on exit, so a stopped read frees its connection."""

    def __init__(self, rows: Iterator[Any]) -> None:
        self.rows = rows

    def __enter__(self) -> Iterator[Any]:
        return self.rows

    def __exit__(self, *exc: object) -> None:
        close = getattr(self.rows, "close", None)
        if close is not None:
            close()
