"""The one verified door: a run opened from a store or a bundle file, checked once.

Every reader of a run (projections, replay, the command line) gets its events from here,
with what stands behind them: whether the chain verified and against which root
(``Verification``), who vouches for that root (``Standing``), and where its units came
from (``Origin``).
"""

from __future__ import annotations

import datetime as dt
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NamedTuple, Protocol

import msgspec

from benchledger.ledger.bundle import (
    AUDIT_FORMAT,
    REDACTED_FORMAT,
    BundleHeader,
    check_records,
    located,
    read_bundle,
)
from benchledger.ledger.chain import link_hash
from benchledger.ledger.checker import RunChecker
from benchledger.ledger.codec import decode_event
from benchledger.ledger.command_line import command_line
from benchledger.ledger.completeness import Completeness, Plan, UnitState, completeness, plan_of
from benchledger.ledger.errors import LedgerError, UnknownRun, UnusableInput
from benchledger.ledger.events import (
    PROBE,
    Event,
    GraderDecisionEvent,
    RunImportedEvent,
    RunSealedBody,
    RunSealedEvent,
    RunStartedEvent,
    StreamHead,
    UnitAbandonedEvent,
    UnitFinishedEvent,
    UnitStartedEvent,
    is_probe_stream,
    stream_unit,
)
from benchledger.ledger.ledger import Imported, Ledger, check_run_id
from benchledger.ledger.names import RULE, is_name
from benchledger.ledger.redaction import WithheldEvent, as_event, read_placeholder
from benchledger.ledger.verdict import Failure, Fault, Summary

# Standing.state values: one word each, so JSON readers can switch on them.
TRUSTED = "trusted"  # signed, the signature verifies, by a key the reader named
UNTRUSTED_KEY = "untrusted key"  # signed and valid, but by a key the reader did not name
NO_KEY_GIVEN = "no key given"  # signed and valid; the reader named no key to trust
UNSIGNED = "unsigned"  # sealed, but the seal carries no signature
UNSEALED = "unsealed"  # no seal: nothing to sign
BAD_SIGNATURE = "bad signature"  # signed, but the signature does not verify
# Sealed (signed or not), but some placeholders are event format 1: nothing binds their
# kind, time or refs, so the seal vouches for the chain, not for what they claim to be.
UNBOUND = "unbound placeholders"


def _when(ns: int) -> str:
    return dt.datetime.fromtimestamp(ns / 1e9, tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Standing(NamedTuple):
    """Who vouches for a verified run's root: the line every display prints with it."""

    state: str
    key: str = ""  # the signer's key fingerprint, when the seal is signed
    signed_at: int = 0
    tool_version: str = ""
    problem: str = ""
    unbound: int = 0  # UNBOUND: how many placeholders nothing binds

    @property
    def authenticated(self) -> bool:
        """Signed by a key the reader trusts, and the signature verifies."""
        return self.state == TRUSTED

    def line(self) -> str:
        """``authenticated by key … (trusted)``, else ``UNAUTHENTICATED: why``."""
        signed = (
            f"key {self.key[:16]} at {_when(self.signed_at)} ({self.tool_version})"
            if self.key
            else ""
        )
        if self.state == TRUSTED:
            return f"authenticated by {signed} (trusted)"
        why = {
            UNTRUSTED_KEY: f"sealed by {signed}, which is not among the trusted keys",
            NO_KEY_GIVEN: f"sealed by {signed}, but no key was named as trusted "
            "(give --pubkey PUBLISHER.pub)",
            UNSIGNED: "the seal is not signed",
            UNSEALED: "the run is not sealed",
            BAD_SIGNATURE: f"bad seal signature: {self.problem}",
            UNBOUND: self.problem,
        }.get(self.state, self.problem)
        return f"UNAUTHENTICATED: {why}"

    def as_json(self) -> dict[str, Any]:
        """The JSON ``authentication`` field of every display."""
        return {
            "authenticated": self.authenticated,
            "state": self.state,
            "key": self.key,
            "signed_at": self.signed_at,
            "tool_version": self.tool_version,
            "line": self.line(),
        }


def standing(
    run_id: str,
    seal: RunSealedBody | None,
    trusted: Iterable[bytes] | None,
    unbound: int = 0,
) -> Standing:
    """Who vouches for ``run_id`` sealed with ``seal`` (None: unsealed), given the reader's
    ``trusted`` raw public keys (None: the reader named none).

    ``unbound`` format-1 placeholders (a redacted bundle's, nothing binding their kind,
    time or refs) make a valid seal UNBOUND, never authenticated, whoever signed it; pass 0
    once ``verify --reveal`` matched each against the full run.
    """
    base = _seal_standing(run_id, seal, trusted)
    if not unbound or base.state in (UNSEALED, BAD_SIGNATURE):
        return base
    why = (
        f"the seal covers the chain, but nothing binds the kind, time or refs of {unbound} "
        "withheld events (event format 1); check them with `verify --reveal FULL`"
    )
    return base._replace(state=UNBOUND, problem=why, unbound=unbound)


def _seal_standing(
    run_id: str, seal: RunSealedBody | None, trusted: Iterable[bytes] | None
) -> Standing:
    if seal is None:
        return Standing(UNSEALED)
    if seal.signature is None:
        return Standing(UNSIGNED, problem="the seal carries no signature")
    # Imported only now: signatures need cryptography, which reading a run does not.
    from benchledger.ledger.signing import authenticate

    keys = list(trusted) if trusted is not None else None
    auth = authenticate(run_id, seal, keys)
    if not auth.valid:
        return Standing(BAD_SIGNATURE, auth.key, auth.signed_at, auth.tool_version, auth.problem)
    state = TRUSTED if auth.trusted else (NO_KEY_GIVEN if keys is None else UNTRUSTED_KEY)
    return Standing(state, auth.key, auth.signed_at, auth.tool_version, auth.problem)


# Origin.kind values: who wrote a run's units.
OWN = "own"  # written by this tool against a platform, in this or another ledger
IMPORTED = "imported"  # an unsealed run brought in by ``import --allow-unsealed``
PEER_CLAIMS = "peer claims"  # a peer's results file: its verdicts are the peer's claims
OWN_GRADER = "benchledger"  # grader_decision.origin of a verdict benchledger's graders made


class Origin(NamedTuple):
    """Where a run's units came from; displays label anything but ``own``."""

    kind: str
    source: str = ""  # the peer's name, or the bundle file an imported run came from
    rederived: bool = False  # peer claims: whether our graders re-derived the verdicts

    def line(self) -> str:
        """Empty for a run of our own; else what its numbers stand on."""
        if self.kind == PEER_CLAIMS:
            how = (
                "graded again by benchledger's graders beside the peer's verdicts"
                if self.rederived
                else "not re-derived: the verdicts are the peer's own"
            )
            return f"PEER CLAIMS: units imported from {self.source}'s results file, {how}"
        if self.kind == IMPORTED:
            return (
                f"IMPORTED: units written by another ledger ({self.source}); "
                "this ledger did not run them"
            )
        return ""

    def as_json(self) -> dict[str, Any]:
        """The JSON ``origin`` field of every display."""
        return {"kind": self.kind, "source": self.source, "rederived": self.rederived}


class Tally:
    """Completeness and origin counted from a run's events as they pass, in one read."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.plan = Plan()
        self.sealed = False
        self.origin = Origin(OWN)
        # stream -> [protocol, attempt, finished, abandoned, error]
        self._units: dict[str, list[Any]] = {}

    def add(self, event: Event) -> None:
        """Count one event of the run."""
        if event.stream == self.run_id:
            if isinstance(event, RunStartedEvent):
                self.plan = plan_of(event.body)
                if event.body.tool_version == "import-peer":
                    self.origin = Origin(PEER_CLAIMS, event.body.platform)
            elif isinstance(event, RunSealedEvent):
                self.sealed = True
            elif isinstance(event, RunImportedEvent):
                self.origin = Origin(IMPORTED, event.body.bundle)
            return
        if (
            isinstance(event, GraderDecisionEvent)
            and self.origin.kind == PEER_CLAIMS
            and event.body.origin == OWN_GRADER
        ):  # an import that also ran our decision function: its rates are our rulings
            self.origin = self.origin._replace(rederived=True)
            return
        if not isinstance(
            event, UnitStartedEvent | UnitFinishedEvent | UnitAbandonedEvent | WithheldEvent
        ):
            return
        unit = self._units.setdefault(event.stream, ["", 0, False, False, ""])
        if isinstance(event, UnitStartedEvent):
            unit[0], unit[1] = event.body.protocol_id, event.body.attempt
        elif isinstance(event, UnitFinishedEvent):
            unit[2], unit[4] = True, event.body.error
        elif isinstance(event, UnitAbandonedEvent):
            unit[3] = True
        elif event.withheld_kind == "unit_finished":
            unit[2] = True

    def completeness(self) -> Completeness:
        """How much of its plan the events counted so far finished."""
        units = (UnitState(s, *u) for s, u in sorted(self._units.items()))
        return completeness(self.run_id, self.sealed, self.plan, units)


# -- the door -------------------------------------------------------------------------------


class Verification(NamedTuple):
    """What ``open_run`` checked before handing out a run's events, and against what root."""

    source: str  # "ledger", "bundle", "redacted bundle" or "audit bundle"
    sealed: bool
    root: str  # the sealed root every link was checked against ("" when unsealed)
    heads_root: str  # the Merkle root of the stream heads as read
    streams: int
    events: int
    partial: bool = False  # an audit bundle: only the cited streams, each proven in the root
    total_streams: int = 0  # audit bundles: the streams of the whole run, as its seal lists
    withheld: int = 0  # redacted bundles: events present only as placeholders
    # Audit bundles: the units (``p3/1``) of the sealed streams the bundle does not hold,
    # in the seal's order; uncited or dropped, the numbers shown do not count them.
    missing_units: tuple[str, ...] = ()

    def line(self) -> str:
        """One line for a report header: the result and the root it was checked against."""
        if self.partial:
            return (
                f"PARTIAL: audit bundle, {self.streams} of {self.total_streams} streams, each "
                f"proven by inclusion in root {self.root}{self.missing_text()}; numbers cover "
                "these streams only"
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

    def missing_text(self, shown: int = 5) -> str:
        """``; units not in this bundle: p3/1, p7/1 and 4 more (6)`` ("" when none is)."""
        n = len(self.missing_units)
        if not n:
            return ""
        more = f" and {n - shown} more" if n > shown else ""
        return f"; units not in this bundle: {', '.join(self.missing_units[:shown])}{more} ({n})"


class RunEvents(NamedTuple):
    """Every event of one run with its link hash, ordered by stream then seq."""

    run_id: str
    root: str
    events: list[tuple[Event, str]]
    bundle: BundleHeader | None = None
    check: Verification | None = None  # set by open_run: what was verified, against what
    standing: Standing | None = None  # set by open_run: who vouches for the root
    origin: Origin | None = None  # set by open_run: who wrote the units
    completeness: Completeness | None = None  # set by open_run: how much of its plan ran
    summary: Summary | None = None  # set by open_run: what the chain checker saw, its seal
    lines: list[bytes] | None = None  # open_run(keep_lines=True): a bundle's lines as read


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

    def __init__(self, target: str, run_id: str, failure: Failure, source: str = "") -> None:
        self.target = target
        self.run_id = run_id
        self.failure = failure
        self.source = source  # what was read, as Verification.source names it
        super().__init__(
            f"run {run_id} ({target}) does not verify, so nothing from it is shown: {failure}; "
            f"see `{command_line('benchledger', 'verify', target)}`"
        )


class PartialRun(RunUnverified):
    """An audit bundle (some streams only) where the whole run is needed."""


def is_bundle(target: str) -> bool:
    """Whether ``target`` names a bundle file rather than a run id, from how it is written
    alone: a bundle's suffix, a path separator, or no run id's spelling. What files exist
    never decides it, so a file named like a run id cannot shadow the run (``./NAME`` reads
    the file)."""
    if target.endswith((".jsonl", ".jsonl.gz", ".gz")) or os.sep in target:
        return True
    if os.altsep and os.altsep in target:
        return True
    try:
        check_run_id(target)
    except ValueError:
        return True
    return False


class UnknownRunHere(UnknownRun):
    """No run of that id, though a file of that name is here: a bare name is a run id, so
    the message says how to read the file instead."""

    def __init__(self, run_id: str, known: list[str]) -> None:
        super().__init__(run_id, known)
        self.args = (
            f"{self.args[0]}; a file {run_id!r} is here, but a bare name is a run id: give "
            f"./{run_id} to read the file as a bundle",
        )


def open_run(
    target: str,
    ledger: Ledger | Callable[[], Ledger] | None = None,
    *,
    require_seal: bool,
    allow_partial: bool,
    trusted: Iterable[bytes] | None = None,
    root: str | None = None,
    keep_events: bool = True,
    keep_lines: bool = False,
) -> VerifiedRun:
    """The run ``target`` names (a bundle file, or a run id in ``ledger``), verified.

    The input is read once: each record goes to the one chain checker and to the decoder
    in the same pass, so what is shown is what was checked. A bundle whose header names a
    root must be sealed with that root, as must any run when ``root`` is given. An audit
    bundle is accepted only with ``allow_partial`` and is then labelled partial (else
    PartialRun). ``trusted`` raw public keys decide the run's ``standing``, from the seal
    the checker accepted. ``keep_events=False`` counts without holding the events (verify's
    constant memory); ``keep_lines=True`` also keeps a bundle's raw lines (``verify --reveal``
    compares them with the full bundle, so the file is not read twice). Raises RunUnverified
    (exit 1) on the first bad stream and seq, UnknownRun / UnusableInput (exit 2) when
    there is nothing to verify.
    """
    if is_bundle(target):
        lines: list[bytes] | None = [] if keep_lines else None
        run = _open_bundle(target, require_seal, allow_partial, root, keep_events, lines)
    else:
        run = _open_stored(target, ledger, require_seal, root, keep_events)
    assert run.summary is not None
    keys = list(trusted) if trusted is not None else None
    seal = _seal_body(run.summary)
    return run._replace(standing=standing(run.run_id, seal, keys, run.summary.unbound))


def _seal_body(summary: Summary) -> RunSealedBody | None:
    return summary.seal.body if summary.seal is not None else None


def seal_standing(run: RunEvents, trusted: Iterable[bytes] | None) -> Standing:
    """``run``'s standing judged from its seal alone: what ``verify --reveal`` leaves once
    it matched every placeholder against the full run (nothing is left unbound)."""
    assert run.summary is not None
    return standing(run.run_id, _seal_body(run.summary), trusted)


class _Lines(Protocol):
    """Where the one pass keeps a bundle's raw lines as it reads them."""

    def append(self, data: bytes, /) -> None: ...


class _Copy:
    """A bundle's lines as the verifying read saw them, in a private temporary file: what
    ``import_bundle`` writes (constant memory, and nothing else can change it)."""

    def __init__(self) -> None:
        self._file = tempfile.TemporaryFile(prefix=".benchledger-import-")  # noqa: SIM115

    def append(self, data: bytes, /) -> None:
        self._file.write(data + b"\n")  # a bundle line holds no newline

    def __iter__(self) -> Iterator[bytes]:
        self._file.seek(0)
        for line in self._file:
            yield line.rstrip(b"\n")

    def close(self) -> None:
        self._file.close()


def import_bundle(ledger: Ledger, path: str, *, allow_unsealed: bool = False) -> Imported:
    """Add a bundle file's run, verified, which the ledger must not hold (``Ledger.import_run``
    says what is taken and what is refused); nothing is written unless all of it is.

    The bundle is read once, through the door's one pass, into a private copy; what is
    written is that copy, the very lines that verified. A bundle that fails verification
    (LedgerError, exit 1), a redacted and an audit bundle are refused whole.
    """
    copy = _Copy()
    try:
        try:
            run = _open_bundle(path, False, False, None, False, copy)
        except RunUnverified as exc:
            raise LedgerError(
                f"{path}: bundle failed verification: {exc.failure}; nothing was imported"
            ) from None
        assert run.bundle is not None and run.summary is not None
        if run.bundle.format == REDACTED_FORMAT:
            raise UnusableInput(path, "a redacted bundle withholds events; it cannot be imported")
        return ledger.import_run(path, run.run_id, run.summary, copy, allow_unsealed=allow_unsealed)
    finally:
        copy.close()


class _Undecodable(Exception):
    def __init__(self, failure: Failure) -> None:
        self.failure = failure


class _Pass:
    """The decoding half of the one pass: rows go on to the chain checker unchanged."""

    def __init__(self, run_id: str, redacted: bool, keep: bool, lines: _Lines | None) -> None:
        self.events: list[tuple[Event, str]] = []
        self.lines = lines
        self.tally = Tally(run_id)
        self.redacted = redacted
        self.keep = keep
        self.decoded = 0
        self.withheld = 0

    def rows(self, rows: Iterable[Any]) -> Iterator[Any]:
        """Pass ``rows`` through, decoding each on the way.

        An event whose envelope checks out but whose body this version cannot decode stops
        the read at the next record (after the checker had its say about the bad one).
        """
        pending: Failure | None = None
        for row in rows:
            if pending is not None:
                raise _Undecodable(pending)
            data = row[3]
            if self.lines is not None:
                self.lines.append(data)
            event: Event
            try:
                event, h = decode_event(data), link_hash(data)
            except msgspec.DecodeError as exc:
                ph = read_placeholder(data) if self.redacted else None
                if ph is None:
                    detail = f"undecodable event: {' '.join(str(exc).split())}"
                    # A store row names its place; a bundle line only in its bytes.
                    stream, seq = (row[0], row[1]) if row[0] is not None else located(data)
                    pending = Failure(str(stream), int(seq or 0), Fault.UNDECODABLE, detail)
                    yield row
                    continue
                event, h = as_event(ph), ph.hash
                self.withheld += 1
            if isinstance(event, UnitStartedEvent) and not is_name(event.body.protocol_id):
                pending = Failure(
                    event.stream,
                    event.seq,
                    Fault.BAD_NAME,
                    f"protocol id {event.body.protocol_id!r} {RULE}",
                )
                yield row
                continue
            self.decoded += 1
            self.tally.add(event)
            if self.keep:
                self.events.append((event, h))
            yield row
        if pending is not None:
            raise _Undecodable(pending)

    def check(
        self, check: Callable[[Iterable[Any]], tuple[Failure | None, Summary]], rows: Iterable[Any]
    ) -> tuple[Failure | None, Summary]:
        """``check`` run over ``rows`` as they are decoded; its failure, or an undecodable one."""
        try:
            return check(self.rows(rows))
        except _Undecodable as bad:
            return bad.failure, Summary()


def _first_missing(summary: Summary, run_id: str) -> Failure:
    """Where an audit bundle stops being the whole run: its first sealed stream it lacks."""
    have = {h.stream for h in summary.heads}
    for head in summary.seal.body.heads if summary.seal is not None else ():
        if head.stream not in have:
            return Failure(
                head.stream,
                0,
                Fault.STREAM_MISSING,
                "an audit bundle holds only the streams it cites; this command needs "
                "the whole run (its bundle from `benchledger export`)",
            )
    return Failure(run_id, 0, "partial", "an audit bundle holds only some streams of the run")


def _root_is(run_id: str, summary: Summary, root: str | None) -> Failure | None:
    """Whether the sealed root is the one the reader expected (``--root``)."""
    if root and summary.sealed_root != root.lower():
        return Failure(
            run_id,
            -1,
            Fault.ROOT_MISMATCH,
            "sealed root is not the one expected",
            expected=root.lower(),
            found=summary.sealed_root,
        )
    return None


def _open_stored(
    target: str,
    ledger: Ledger | Callable[[], Ledger] | None,
    require_seal: bool,
    root: str | None,
    keep: bool,
) -> VerifiedRun:
    if ledger is None:
        raise UnusableInput(
            target, "a run id (a bare name), and no ledger to find a run in; give ./NAME for a "
            "bundle file of that name"
        )  # fmt: skip
    led = ledger if isinstance(ledger, Ledger) else ledger()
    store = led.store
    if store.head(target) is None:
        with _closing(store.scan(target)) as rows:
            if next(iter(rows), None) is None:
                unknown = UnknownRunHere if os.path.lexists(target) else UnknownRun
                raise unknown(target, store.recent_run_ids())
    checker = RunChecker(target, require_seal=require_seal or bool(root))

    def check(rows: Iterable[Any]) -> tuple[Failure | None, Summary]:
        return checker.check(rows), checker.summary

    one = _Pass(target, False, keep, None)
    with _closing(store.scan(target)) as rows:
        failure, summary = one.check(check, rows)
    failure = failure or _root_is(target, summary, root)
    if failure is not None:
        raise RunUnverified(target, target, failure, "ledger")
    check_ = Verification(
        "ledger",
        bool(summary.sealed_root),
        summary.sealed_root,
        summary.computed_root,
        summary.streams,
        summary.events,
    )
    return VerifiedRun(target, summary.sealed_root, one.events, None, check_, None,
                       one.tally.origin, one.tally.completeness(), summary)  # fmt: skip


def _open_bundle(
    path: str,
    require_seal: bool,
    allow_partial: bool,
    root: str | None,
    keep: bool,
    lines: _Lines | None,
) -> VerifiedRun:
    with read_bundle(path) as (header, recs):
        redacted = header.format == REDACTED_FORMAT
        one = _Pass(header.run, redacted, keep, lines)
        seal = require_seal or bool(root)
        failure, summary = one.check(
            lambda rows: check_records(header, rows, root, require_seal=seal), recs
        )
    if header.format == AUDIT_FORMAT:
        if not allow_partial:
            missing = failure or _first_missing(summary, header.run)
            raise PartialRun(path, header.run, missing, "audit bundle")
        if failure is not None:
            raise RunUnverified(path, header.run, failure, "audit bundle")
        # The whole run is what the accepted (signed) seal lists, never the unsigned proofs.
        sealed = summary.seal.body.heads if summary.seal is not None else []
        check = Verification(
            "audit bundle",
            True,
            summary.sealed_root,
            "",
            len(summary.heads),
            one.decoded,
            partial=True,
            total_streams=len(sealed),
            missing_units=_units_lacking(header.run, sealed, summary.heads),
        )
    else:
        if failure is None and require_seal and not summary.sealed_root:
            failure = Failure(header.run, -1, Fault.NOT_SEALED, "the bundle's run is not sealed")
        source = "redacted bundle" if redacted else "bundle"
        if failure is not None:
            raise RunUnverified(path, header.run, failure, source)
        check = Verification(
            source,
            bool(summary.sealed_root),
            summary.sealed_root,
            summary.computed_root,
            summary.streams,
            summary.events,
            withheld=one.withheld,
        )
    return VerifiedRun(header.run, summary.sealed_root, one.events, header, check, None,
                       one.tally.origin, one.tally.completeness(), summary,
                       lines if isinstance(lines, list) else None)  # fmt: skip


def _units_lacking(
    run_id: str, sealed: Iterable[StreamHead], held: Iterable[StreamHead]
) -> tuple[str, ...]:
    """The units (``p3/1``, each once) of the ``sealed`` heads whose stream is not ``held``."""
    have = {h.stream for h in held}
    units: dict[str, None] = {}
    for head in sealed:
        if head.stream not in have:
            if is_probe_stream(head.stream):  # no unit's: the probe's calls
                units.setdefault(PROBE)
            elif head.stream.startswith(run_id + "/"):
                name, attempt = stream_unit(run_id, head.stream)
                units.setdefault(f"{name}/{attempt}")
            else:  # not a unit stream (a seal lists its header stream first, always held)
                units.setdefault(head.stream)
    return tuple(units)


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
