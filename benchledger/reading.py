"""Reading runs through the one verified door: ``open_run``, ``verify`` and ``export``.

Every run the library hands out was read by ``ledger.verified.open_run`` (each record
checked as it was decoded); this module only wraps what the door returns in public,
typed objects, and says who vouches for it (``--pubkey``: the keys a reader trusts).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from benchledger.harness.settings import Settings
from benchledger.ledger import Ledger
from benchledger.ledger.bundle import export_redacted, export_run, find_copies
from benchledger.ledger.completeness import Completeness
from benchledger.ledger.events import Event
from benchledger.ledger.redaction import Copy, Selection
from benchledger.ledger.verdict import Failure
from benchledger.ledger.verified import (
    BAD_SIGNATURE,
    UNBOUND,
    UNSEALED,
    Origin,
    RunUnverified,
    Standing,
    VerifiedRun,
)
from benchledger.ledger.verified import Verification as DoorVerification
from benchledger.ledger.verified import open_run as door
from benchledger.ledgers import LedgerLike, reader
from benchledger.trust import PubKeys, read, trusted_keys

if TYPE_CHECKING:
    from benchledger.projections.prices import PriceTable
    from benchledger.scoring import CiChoice, Scorecard


def _when(ns: int) -> str:
    return dt.datetime.fromtimestamp(ns / 1e9, tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def vouched(
    standing: Standing, run_id: str, *, keys_named: bool, root_given: bool
) -> tuple[bool, str]:
    """Whether ``standing`` passes ``verify`` (keys named: a trusted key signed; else the
    chain alone), and the line that says who sealed the run ("" when there is none)."""
    st = standing
    if st.state == UNBOUND and keys_named:
        return False, f"FAILED run {run_id}: not authenticated: {st.problem}"
    if st.state == UNSEALED:
        if keys_named:
            return False, f"FAILED run {run_id}: not sealed, so no trusted key vouches for it"
        return True, ""
    if st.state == BAD_SIGNATURE:
        return False, f"FAILED run {run_id}: bad seal signature: {st.problem}"
    signed = (
        f"sealed by key {st.key[:16]} at {_when(st.signed_at)} ({st.tool_version})"
        if st.key
        else ""
    )
    if keys_named:
        if st.authenticated:
            return True, f"authenticated: {signed}, a trusted key"
        return False, f"FAILED run {run_id}: not authenticated: {st.problem}"
    if root_given:
        return True, (
            "root matches the one you gave: as trustworthy as the channel you got it from"
            + (f"; {signed}" if signed else "")
        )
    who = f"{signed}, but no key was named as trusted" if st.key else "the seal is not signed"
    return True, (
        f"UNAUTHENTICATED: {who}. Anyone who can write a ledger can rebuild a run that "
        "verifies; check it with --pubkey PUBLISHER.pub or --root PUBLISHED_ROOT"
    )


class Verification(DoorVerification):
    """What the door checked before handing out a run, and against what root; ``ok`` when
    every link, head and the seal checked out against the sealed root."""

    __slots__ = ()

    @property
    def ok(self) -> bool:
        """Sealed, and every link and head checked against the sealed root (an audit bundle:
        each of its streams proven by inclusion in it)."""
        return self.sealed and bool(self.root)


@dataclass(frozen=True)
class Run:
    """A run read through the verified door: its events, what was checked, who vouches for
    it, where its units came from and how much of its plan ran; ``scorecard()`` scores it.
    """

    target: str  # the run id or bundle file it was opened as
    opened: VerifiedRun = field(repr=False)
    ledger: Callable[[], Ledger] = field(repr=False, compare=False)

    @property
    def run_id(self) -> str:
        return self.opened.run_id

    @property
    def root(self) -> str:
        """The sealed Merkle root (hex; "" when the run is not sealed)."""
        return self.opened.root

    @property
    def events(self) -> list[tuple[Event, str]]:
        """Every event with its link hash, ordered by stream then seq, as verified."""
        return self.opened.events

    @property
    def verification(self) -> Verification:
        return Verification(*self.opened.verification)

    @property
    def completeness(self) -> Completeness:
        """How many planned units finished (``.banner()``: the line a partial run shows)."""
        assert self.opened.completeness is not None  # the door counts as it reads
        return self.opened.completeness

    @property
    def standing(self) -> Standing:
        """Who vouches for the root (``.authenticated``: a key the reader trusts signed it)."""
        assert self.opened.standing is not None  # the door judges every seal it checks
        return self.opened.standing

    @property
    def origin(self) -> Origin:
        """Where its units came from (own, imported, or a peer's claims)."""
        return self.opened.origin or Origin("own")

    @property
    def suite(self) -> str:
        """The suite the run recorded (its readers score it)."""
        from benchledger.projections.suites import of_run

        return of_run(self.opened).name

    def scorecard(
        self,
        *,
        ci: CiChoice = "auto",
        prices: str | PriceTable | None = None,
        replay: bool = True,
    ) -> Scorecard:
        """The run's scorecard as ``benchledger report`` computes it (``replay``: also the
        log-driven replay a suite's card counts, if it counts one)."""
        from benchledger.scoring import scorecard_of

        return scorecard_of(self.target, self.opened, self.ledger, ci=ci, prices=prices,
                            replay=replay)  # fmt: skip


def open_run(
    target: str,
    *,
    ledger: LedgerLike = None,
    pubkey: PubKeys = None,
    require_seal: bool = False,
    allow_partial: bool = False,
    settings: Settings | None = None,
) -> Run:
    """The run ``target`` names (a run id in ``ledger``, or a bundle file), verified as it
    was read. Raises RunUnverified (exit 1) when it does not verify, Unauthenticated when
    ``pubkey`` names keys and none signed it, UnknownRun / UnusableInput (exit 2) when there
    is nothing to verify."""
    keys = trusted_keys(pubkey)
    opener = reader(ledger, settings)
    opened = read(target, opener, keys, require_seal=require_seal, allow_partial=allow_partial)
    return Run(target, opened, opener)


@dataclass(frozen=True)
class Checked:
    """One run's ``verify``: whether it passed, the run as the door read it (None when it
    did not verify), and why not."""

    run_id: str
    ok: bool
    run: Run | None = None
    failure: Failure | None = None  # the first bad stream and seq, when the chain failed
    problem: str = ""  # why it failed otherwise (unsealed, not vouched for)
    authenticity: str = ""  # who sealed the run, in one line ("" when unsealed)


@dataclass(frozen=True)
class Verified:
    """``verify``'s answer: every run checked, and whether all passed."""

    checked: tuple[Checked, ...]
    orphans: tuple[str, ...] = ()  # streams whose run header stream is missing

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checked) and not self.orphans


def verify(
    target: str | None = None,
    *,
    ledger: LedgerLike = None,
    pubkey: PubKeys = None,
    root: str | None = None,
    allow_unsealed: bool = False,
    settings: Settings | None = None,
) -> Verified:
    """Verify a bundle, one run, or (no ``target``) every run of the ledger, as ``benchledger
    verify`` does: the chain against the sealed root (``root``: the one you expect), then who
    vouches for it (``pubkey``: only a trusted key's seal passes). An unsealed run fails
    unless ``allow_unsealed``."""
    from benchledger.ledger.verified import is_bundle

    keys = trusted_keys(pubkey)
    opener = reader(ledger, settings)
    bundle = bool(target and is_bundle(target))
    targets = [target] if target else opener().store.run_ids()
    checked = [
        check(t, opener, keys, root=root, allow_unsealed=allow_unsealed, partial=bundle)
        for t in targets
        if t is not None
    ]
    orphans = () if target else tuple(opener().orphans())
    return Verified(tuple(checked), orphans)


def check(
    target: str,
    ledger: Callable[[], Ledger],
    trusted: list[bytes] | None,
    *,
    root: str | None = None,
    allow_unsealed: bool = False,
    partial: bool = False,
) -> Checked:
    """One run (or bundle) verified without keeping its events: constant memory per run."""
    try:
        opened = door(target, ledger, require_seal=bool(root) and not partial,
                      allow_partial=partial, trusted=trusted, root=root,
                      keep_events=False)  # fmt: skip
    except RunUnverified as exc:
        return Checked(exc.run_id, False, failure=exc.failure, problem=str(exc))
    run = Run(target, opened, ledger)
    if not opened.root and not opened.verification.partial and not allow_unsealed:
        done = run.completeness
        return Checked(run.run_id, False, run, problem=f"UNSEALED: {done.counts()}; "
                       f"{done.missing_text()}")  # fmt: skip
    assert opened.standing is not None
    ok, line = vouched(opened.standing, run.run_id, keys_named=trusted is not None,
                       root_given=bool(root))  # fmt: skip
    return Checked(run.run_id, ok, run, problem="" if ok else line, authenticity=line)


@dataclass(frozen=True)
class Exported:
    """What ``export`` wrote: how many lines (events, or an eval log's samples), the
    run's root, and for a redacted bundle what was withheld and what still shows copies."""

    run_id: str
    path: str
    format: str
    written: int
    root: str  # "" when the run is not sealed
    heads_root: str = ""  # an eval log of an unsealed run: the root of its heads as read
    withheld: dict[str, int] = field(default_factory=dict)  # events withheld, by kind
    copies: tuple[Copy, ...] = ()  # shown events that hold copies of withheld text
    asked: Selection | None = None  # the redaction as asked
    selection: Selection | None = None  # as written (--withhold-copies adds streams)
    event_format: int = 0


def export(
    run: str,
    output: str,
    *,
    ledger: LedgerLike = None,
    format: Literal["bundle", "inspect"] = "bundle",
    withhold: Sequence[str] = (),
    withhold_streams: Sequence[str] = (),
    withhold_copies: bool = False,
    settings: Settings | None = None,
) -> Exported:
    """Write ``run`` to ``output``: as a bundle (with ``withhold``/``withhold_streams``, a
    redacted one: those events as placeholders), or (``format="inspect"``, also from a
    bundle) as an Inspect AI eval log. Every format reads the run through the door first:
    one that does not verify raises RunUnverified (exit 1, naming the first bad stream and
    seq) before anything is written."""
    opener = reader(ledger, settings)
    if format == "inspect":
        from benchledger.projections.inspect_log import inspect_log, write_inspect_log

        opened = door(run, opener, require_seal=False, allow_partial=False)
        n = write_inspect_log(inspect_log(opened), output)
        heads = opened.verification.heads_root
        return Exported(opened.run_id, output, format, n, opened.root, heads)
    # A bundle copies the stored rows; they are checked first, without keeping them.
    door(run, opener, require_seal=False, allow_partial=False, keep_events=False)
    led = opener()
    if withhold or withhold_streams or withhold_copies:
        kinds = frozenset(k.strip() for spec in withhold for k in spec.split(",") if k)
        asked = redaction(kinds, withhold_streams)
        selection, copies = find_copies(led, run, asked, withhold_copies)
        n, withheld = export_redacted(led, run, output, selection)
        return Exported(run, output, format, n, led.run_info(run).root, "", withheld,
                        tuple(copies), asked, selection, led.event_format(run))  # fmt: skip
    n = export_run(led, run, output)
    return Exported(run, output, format, n, led.run_info(run).root)


def redaction(kinds: frozenset[str], streams: Sequence[str]) -> Selection:
    """The events a redacted export withholds; Refused when the selection is unusable."""
    from benchledger.projections.errors import Refused

    try:
        return Selection(kinds, tuple(streams))
    except ValueError as exc:
        raise Refused(str(exc)) from None
