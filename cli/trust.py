"""Trust commands and helpers: keys, signed seals, pre-registered gates, redacted exports.

``keys new|show``, ``seal`` and ``prereg new|show`` are registered here; ``verify``,
``export``, ``run`` and ``gate`` call the helpers below for their trust options. See
docs/trust.md for the threat model.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
from importlib import metadata
from typing import TYPE_CHECKING

from cli.common import EXIT_FAILED, EXIT_OK, UsageError, ledger_arg, open_ledger
from harness import settings
from ledger.errors import LedgerError

if TYPE_CHECKING:
    from ledger import Ledger
    from ledger.events import Preregistration
    from ledger.redaction import Copy, Selection
    from ledger.signing import Signer
    from ledger.verified import VerifiedRun
    from projections.compare import GateRow
    from projections.prereg import Bar
    from projections.source import RunEvents


def tool_version() -> str:
    """``benchledger X.Y.Z``, as recorded in run_started and in seal signatures."""
    try:
        return f"benchledger {metadata.version('benchledger')}"
    except metadata.PackageNotFoundError:
        return "benchledger"


def _when(ns: int) -> str:
    return dt.datetime.fromtimestamp(ns / 1e9, tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# -- keys and signing ----------------------------------------------------------------------


def signer_from(path: str | None) -> Signer | None:
    """The signer for ``--sign-key PATH`` (else $BENCHLEDGER_SIGNING_KEY); None if neither.

    A bad key file is UnusableInput: one line, exit 2, before anything is written.
    """
    from ledger.keys import load_private_key
    from ledger.signing import Signer

    path = path or settings.load().signing_key
    if not path:
        return None
    return Signer(load_private_key(path), tool_version())


def trusted_keys(args: argparse.Namespace) -> list[bytes] | None:
    """The raw public keys named by ``--pubkey`` (None when none was given)."""
    paths = getattr(args, "pubkey", None)
    if not paths:
        return None
    # Imported only now: key files need cryptography, which verify without --pubkey does not.
    from ledger.keys import load_public_keys

    return load_public_keys(paths)


class Unauthenticated(LedgerError):
    """``--pubkey`` named keys, and none of them vouches for the run: nothing is shown (exit 1)."""

    def __init__(self, run_id: str, why: str) -> None:
        self.run_id = run_id
        super().__init__(f"run {run_id}: not authenticated by the given keys: {why}")


def require_trusted(run: RunEvents, trusted: list[bytes] | None) -> RunEvents:
    """``run`` when no key was named or a named key signed its seal; else Unauthenticated."""
    if trusted is None or run.standing is None or run.standing.authenticated:
        return run
    raise Unauthenticated(run.run_id, run.standing.line().removeprefix("UNAUTHENTICATED: "))


def pubkey_arg(p: argparse.ArgumentParser, what: str = "") -> None:
    """Add ``--pubkey PATH`` (alias ``--trusted-key``, repeatable): the keys the reader trusts.

    ``what`` names whose seal a display checks (`` of both runs``); a display says
    UNAUTHENTICATED without the option.
    """
    shown = "; without it the display says UNAUTHENTICATED" if what else ""
    p.add_argument(
        "--pubkey",
        "--trusted-key",
        action="append",
        metavar="PATH",
        help=f"fail unless a key in this .pub or trusted-keys file signed the seal{what} "
        f"(repeatable){shown}",
    )


def verify_options(args: argparse.Namespace, *, bundle: bool) -> list[bytes] | None:
    """Check ``verify``'s trust options before any work; return the trusted keys.

    A bad key file, or ``--reveal`` without a bundle, is one line and exit 2.
    """
    if getattr(args, "reveal", None) and not bundle:
        raise UsageError("--reveal checks a redacted bundle FILE's placeholders, not a run id")
    return trusted_keys(args)


def authenticity(
    run_id: str, run: VerifiedRun, trusted: list[bytes] | None, root_given: bool
) -> int:
    """Say who sealed the run (or that nobody vouches for its root); 1 if that fails.

    Read from the run's ``standing``: the door's judgement of the one seal it checked.
    """
    from ledger.verified import BAD_SIGNATURE, UNBOUND, UNSEALED

    st = run.standing
    assert st is not None
    if st.state == UNBOUND and trusted is not None:
        print(f"FAILED run {run_id}: not authenticated: {st.problem}")
        return EXIT_FAILED
    if st.state == UNSEALED:
        if trusted is not None:
            print(f"FAILED run {run_id}: not sealed, so no trusted key vouches for it")
            return EXIT_FAILED
        return EXIT_OK
    if st.state == BAD_SIGNATURE:
        print(f"FAILED run {run_id}: bad seal signature: {st.problem}")
        return EXIT_FAILED
    signed = (
        f"sealed by key {st.key[:16]} at {_when(st.signed_at)} ({st.tool_version})"
        if st.key
        else ""
    )
    if trusted is not None:
        if st.authenticated:
            print(f"authenticated: {signed}, a trusted key")
            return EXIT_OK
        print(f"FAILED run {run_id}: not authenticated: {st.problem}")
        return EXIT_FAILED
    if root_given:
        print(
            "root matches the one you gave: as trustworthy as the channel you got it from"
            + (f"; {signed}" if signed else "")
        )
        return EXIT_OK
    who = f"{signed}, but no key was named as trusted" if st.key else "the seal is not signed"
    print(
        f"UNAUTHENTICATED: {who}. Anyone who can write a ledger can rebuild a run that "
        "verifies; check it with --pubkey PUBLISHER.pub or --root PUBLISHED_ROOT"
    )
    return EXIT_OK


def after_bundle_verify(target: str, run: VerifiedRun, args: argparse.Namespace) -> int:
    """A bundle the door verified: withheld events, ``--reveal``, then who sealed it.

    Everything here is the door's one read of ``target`` (its summary, standing and, for
    ``--reveal``, its lines); only the full bundle named by ``--reveal`` is read again.
    """
    from ledger.bundle import REDACTED_FORMAT, verify_revealing
    from ledger.verified import seal_standing

    header = run.bundle
    assert header is not None and run.summary is not None
    run_id = run.run_id
    status = EXIT_OK
    unbound = 0
    if header.format == REDACTED_FORMAT:
        unbound = run.summary.unbound
        print(
            f"withheld: {run.summary.withheld} events ({', '.join(header.withheld)}), each by "
            "its digest, and the chain checks through every one"
            + ("" if unbound else " (each one's stream, seq, kind, time and refs proven)")
        )
        if unbound:
            print(
                f"UNBOUND: {unbound} withheld events are event format 1 placeholders: no hash "
                "binds their kind, time or refs, so those are the publisher's claim until "
                "--reveal FULL checks them"
            )
    reveal_path = getattr(args, "reveal", None)
    if reveal_path:
        if header.format != REDACTED_FORMAT:
            raise UsageError(f"--reveal checks a redacted bundle's placeholders; {target} is not")
        assert run.lines is not None  # kept by the door for this
        failure, full, mismatch, matched = verify_revealing(run.lines, reveal_path, header.root)
        if failure is None and full.run != run_id:
            raise UsageError(f"{reveal_path} is run {full.run}, not {run_id}")
        failure = failure or mismatch
        if failure is not None:
            print(f"FAILED reveal with {reveal_path}: {failure}")
            status = EXIT_FAILED
        else:
            print(f"revealed: all {matched} withheld events match their placeholders")
            # Every placeholder matched the full run: nothing is unbound, the seal decides.
            run = run._replace(standing=seal_standing(run, args.trusted))
    return max(status, authenticity(run_id, run, args.trusted, bool(args.root)))


# -- keys new | show ------------------------------------------------------------------------


def cmd_keys_new(args: argparse.Namespace) -> int:
    """Make an Ed25519 key pair: DIR/benchledger.key (0600) and DIR/benchledger.pub."""
    from ledger.keys import write_key_pair

    out = args.out or settings.load().key_dir
    if not args.out and not os.path.isdir(out):
        os.makedirs(out, mode=0o700)
    key, pub, fp = write_key_pair(out)
    print(f"wrote {key} (private, mode 0600: keep it secret, never commit or publish it)")
    print(f"wrote {pub} (public: publish it beside your runs)")
    print(f"fingerprint {fp}")
    print(f"sign:   benchledger run --sign-key {key}   (or BENCHLEDGER_SIGNING_KEY={key})")
    print(f"verify: benchledger verify BUNDLE --pubkey {pub}")
    return EXIT_OK


def cmd_keys_show(args: argparse.Namespace) -> int:
    """Print the fingerprint and public line of a .pub file (or of a private key's pair)."""
    from ledger import UnusableInput
    from ledger.keys import load_public_keys, public_line
    from ledger.signing import fingerprint

    try:
        keys = load_public_keys([args.file])
    except UnusableInput as exc:
        if "private key" not in exc.problem:
            raise
        signer = signer_from(args.file)  # a private key file: show its public half
        assert signer is not None
        keys = [signer.public_key]
    for raw in keys:
        print(f"{fingerprint(raw)}  {public_line(raw)}")
    return EXIT_OK


# -- seal -----------------------------------------------------------------------------------


def cmd_seal(args: argparse.Namespace) -> int:
    """Seal a run whose planned units all finished, signing the seal when given a key."""
    signer = signer_from(args.sign_key)
    ledger = open_ledger(args, create=False, read_only=False)  # sealing writes
    info = ledger.run_info(args.run)
    if info.root:
        raise UsageError(
            f"run {args.run} is already sealed (root {info.root}); a seal is written once, so "
            "sign runs when they are sealed (`run --sign-key`, `seal --sign-key`)"
        )
    # Unfinished planned units: UnitsMissing names them, exit 1 (issue 17); a shard
    # sealing at the same moment is no error (its root is the root).
    root = ledger.seal_complete(args.run, signer=signer)
    signed = f", signed by key {signer.key_id[:16]}" if signer else " (unsigned)"
    print(f"run {args.run} sealed, root {root}{signed}")
    return EXIT_OK


# -- redacted export --------------------------------------------------------------------------


def export_redacted(ledger: Ledger, args: argparse.Namespace) -> int:
    """``export RUN --withhold KIND[,KIND] --withhold-stream GLOB``: a redacted bundle."""
    from ledger.bundle import export_redacted as write
    from ledger.bundle import find_copies
    from ledger.redaction import Selection

    kinds = frozenset(k.strip() for spec in args.withhold or () for k in spec.split(",") if k)
    try:
        selection = Selection(kinds, tuple(args.withhold_stream or ()))
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    asked = selection
    selection, copies = find_copies(ledger, args.run, selection, args.withhold_copies)
    _name_copies(copies, asked, selection)  # before the file exists
    n, withheld = write(ledger, args.run, args.output, selection)
    root = ledger.run_info(args.run).root
    counts = ", ".join(f"{c} {k}" for k, c in sorted(withheld.items())) or "none matched"
    print(f"exported run {args.run}: {n} lines to {args.output} (root {root})")
    print(f"withheld {sum(withheld.values())} events ({counts}); each line keeps its digest")
    if ledger.event_format(args.run) == 1:
        print(
            f"note: run {args.run} is in event format 1: no hash binds a placeholder's kind, "
            "time or refs, so verify calls them UNBOUND; runs recorded now are format 2"
        )
    return EXIT_OK


COPIES_SHOWN = 20  # listed one a line; the rest as "and N more"


def _name_copies(copies: list[Copy], asked: Selection, used: Selection) -> None:
    """Say on stderr which shown events hold copies of withheld text, and what to do."""
    from ledger.events import WITHHOLDABLE
    from ledger.redaction import COPY_MIN

    added = len(used.streams) - len(asked.streams)
    if added:
        print(
            f"--withhold-copies: also withholding the evidence of {added} streams that held "
            "copies of withheld text (a stream rule each in the bundle header)",
            file=sys.stderr,
        )
    if not copies:
        return
    print(
        f"warning: {len(copies)} shown events hold copies of withheld text "
        f"(passages of at least {COPY_MIN} bytes):",
        file=sys.stderr,
    )
    for c in copies[:COPIES_SHOWN]:
        print(f"  {c.stream} seq {c.seq} {c.kind}: {c.passages} passages", file=sys.stderr)
    if len(copies) > COPIES_SHOWN:
        print(f"  and {len(copies) - COPIES_SHOWN} more", file=sys.stderr)
    movable = sum(c.kind in WITHHOLDABLE for c in copies)
    if movable:
        print(
            f"  {movable} of them are {'/'.join(WITHHOLDABLE)} events: add --withhold-copies "
            "to withhold them (their streams' evidence) as well",
            file=sys.stderr,
        )
    if movable < len(copies):
        print(
            f"  {len(copies) - movable} are of kinds never withheld (reports decide from them): "
            "the bundle shows that text; if it must stay private, do not publish this run",
            file=sys.stderr,
        )


# -- pre-registration -------------------------------------------------------------------------


def _protocol_items(suite_name: str, path: str | None) -> tuple[str, list[str], str]:
    """(protocol set hash, item content hashes, path) of the protocols a run would load."""
    from harness.suites import suite_for
    from protocols.hashing import benchledger_hash

    suite = suite_for(suite_name)
    loaded = suite.load(path or suite.default_path())
    items = [benchledger_hash([item]) for item in loaded.items] if suite.name == "lifecycle" else []
    return loaded.set_hash, items, loaded.path


def _events(target: str, args: argparse.Namespace) -> RunEvents:
    """A run (id in the ledger, or a bundle) whose chain checked out; UsageError otherwise."""
    from ledger import LedgerError
    from ledger.verified import RunUnverified, open_run

    try:
        return open_run(target, lambda: open_ledger(args, create=False), require_seal=False,
                        allow_partial=False)  # fmt: skip
    except RunUnverified as exc:
        raise UsageError(f"baseline {target} does not verify: {exc.failure}") from None
    except LedgerError as exc:
        raise UsageError(f"baseline {target}: {exc}") from None


def _metrics_option(value: str | None) -> list[str] | None:
    return [m.strip() for m in value.split(",") if m.strip()] if value else None


def _build(args: argparse.Namespace, baseline: str, protocols: str | None) -> Preregistration:
    from projections.prereg import BadPreregistration, build

    set_hash, items, _ = _protocol_items(args.suite, protocols)
    try:
        return build(
            _events(baseline, args),
            protocol_set_hash=set_hash,
            items=items,
            metrics=_metrics_option(args.gate_metrics),
            tolerance=args.tolerance,
            strict=getattr(args, "strict", False),
        )
    except BadPreregistration as exc:
        raise UsageError(str(exc)) from None


def read_prereg(path: str) -> Preregistration:
    """A pre-registration file, checked; UsageError (exit 2) when it cannot be used."""
    from projections.prereg import BadPreregistration, parse

    try:
        with open(path, "rb") as fh:
            data = fh.read(1 << 20)
    except OSError as exc:
        raise UsageError(f"{path}: cannot read the pre-registration ({exc.strerror})") from None
    try:
        return parse(data, path)
    except BadPreregistration as exc:
        raise UsageError(str(exc)) from None


def prereg_for_run(args: argparse.Namespace) -> Preregistration | None:
    """The bar ``run`` records in run_started (--prereg FILE or --gate-baseline RUN)."""
    from projections.prereg import BadPreregistration, digest, matches_run

    bar_opts = args.tolerance is not None or args.gate_metrics
    if args.prereg and (args.gate_baseline or bar_opts):
        raise UsageError(
            "--prereg FILE fixes the whole bar: drop --gate-baseline/--tolerance/--gate-metrics"
        )
    if bar_opts and not args.gate_baseline:
        raise UsageError("--tolerance and --gate-metrics pre-register a gate: add --gate-baseline")
    if not (args.prereg or args.gate_baseline):
        return None
    if args.resume:
        raise UsageError("a resumed run keeps the gate it was started with; drop the gate options")
    if args.gate_baseline:
        p = _build(args, args.gate_baseline, args.protocols)
    else:
        p = read_prereg(args.prereg)
        set_hash, items, _ = _protocol_items(args.suite, args.protocols)
        try:
            matches_run(p, set_hash, items)
        except BadPreregistration as exc:
            raise UsageError(f"{args.prereg}: {exc}") from None
    print(
        f"pre-registered gate {digest(p)[:16]}: {', '.join(p.metrics)} within {p.tolerance:g} "
        f"of {p.baseline_run} (root {p.baseline_root[:16]})",
        flush=True,
    )
    return p


def cmd_prereg_new(args: argparse.Namespace) -> int:
    """Write a pre-registration file to publish before the run."""
    from ledger.bundle import atomic_output
    from projections.prereg import digest, to_bytes

    p = _build(args, args.baseline, args.protocols)
    with atomic_output(args.output) as fh:
        fh.write(to_bytes(p))
    print(f"wrote {args.output}: digest {digest(p)}")
    print(
        f"publish it (or the digest) before the run, then: benchledger run --prereg {args.output}"
    )
    return EXIT_OK


def cmd_prereg_show(args: argparse.Namespace) -> int:
    """Print a pre-registration file's bar and digest."""
    from projections.prereg import digest

    p = read_prereg(args.file)
    print(f"digest        {digest(p)}")
    print(f"baseline      {p.baseline_run} root {p.baseline_root}")
    print(f"metrics       {', '.join(p.metrics)}")
    print(f"tolerance     {p.tolerance:g}{' (strict)' if p.strict else ''}")
    print(f"protocol set  {p.protocol_set_hash}")
    print(f"items         {len(p.items)} protocols by content hash")
    return EXIT_OK


# -- the gate's bar -------------------------------------------------------------------------


def gate_baseline(args: argparse.Namespace, candidate: RunEvents) -> str:
    """The baseline to gate against: --baseline, else the candidate's pre-registered one."""
    from projections.prereg import BadPreregistration, recorded

    try:
        p = recorded(candidate)  # first: a run that shows no run_started cannot be gated at all
    except BadPreregistration as exc:
        raise UsageError(f"cannot gate: {exc}") from None
    if args.baseline:
        return str(args.baseline)
    if p is None:
        raise UsageError(f"gate needs --baseline: run {candidate.run_id} pre-registered no gate")
    return p.baseline_run


def gate_bar(args: argparse.Namespace, candidate: RunEvents, baseline: RunEvents) -> Bar:
    """The bar ``gate`` applies: pre-registered, or given, or overridden (and reported)."""
    from ledger.redaction import WithheldEvent
    from projections.lifecycle import OUTCOME_KINDS
    from projections.prereg import BadPreregistration, recorded, resolve, run_started

    for run in (baseline, candidate):
        try:  # its record (k, agent, model...) and its bar live there: unreadable, no gate
            run_started(run)
        except BadPreregistration as exc:
            raise UsageError(f"cannot gate: {exc}") from None
        hidden = {
            e.stream
            for e, _ in run.events
            if isinstance(e, WithheldEvent) and e.withheld_kind in OUTCOME_KINDS
        }
        if hidden:
            raise UsageError(
                f"cannot gate: run {run.run_id} withholds the decisions of {len(hidden)} units "
                "(a redacted bundle); gate the full run"
            )
    try:
        return resolve(
            recorded(candidate),
            baseline_root=baseline.root,
            tolerance=args.tolerance,
            metrics=_metrics_option(args.gate_metrics),
            strict=args.strict,
            override=args.override,
            run_id=candidate.run_id,
        )
    except BadPreregistration as exc:
        raise UsageError(f"cannot gate: {exc}") from None


def register(sub: argparse._SubParsersAction) -> None:
    """Add keys, seal and prereg."""
    p = sub.add_parser("keys", help="Ed25519 keys that sign run seals")
    keys = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    k = keys.add_parser("new", help="make DIR/benchledger.key (0600) and DIR/benchledger.pub")
    k.add_argument(
        "--out",
        metavar="DIR",
        help="where to write them (default: $BENCHLEDGER_KEY_DIR or ~/.config/benchledger)",
    )
    k.set_defaults(func=cmd_keys_new)
    k = keys.add_parser("show", help="a key file's fingerprint and public line")
    k.add_argument("file", metavar="FILE", help="a .pub, a trusted-keys file or a private key")
    k.set_defaults(func=cmd_keys_show)

    p = sub.add_parser("seal", help="seal a finished run, signing it with --sign-key")
    p.add_argument("run", metavar="RUN")
    sign_key_arg(p)
    ledger_arg(p)
    p.set_defaults(func=cmd_seal)

    p = sub.add_parser("prereg", help="pre-register the gate a run will be judged by")
    pre = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    n = pre.add_parser("new", help="write a pre-registration file to publish before the run")
    n.add_argument("--baseline", required=True, metavar="RUN", help="sealed run id or bundle")
    n.add_argument("--protocols", metavar="PATH", help="default: the committed lifecycle set")
    n.add_argument("--suite", default="lifecycle", choices=["lifecycle"])
    gate_bar_args(n)
    n.add_argument("--strict", action="store_true", help="the gate will fail on inconclusive")
    n.add_argument("-o", "--output", required=True, metavar="FILE")
    ledger_arg(n)
    n.set_defaults(func=cmd_prereg_new)
    s = pre.add_parser("show", help="a pre-registration file's bar and digest")
    s.add_argument("file", metavar="FILE")
    s.set_defaults(func=cmd_prereg_show)


def sign_key_arg(p: argparse.ArgumentParser) -> None:
    """Add ``--sign-key PATH`` (default $BENCHLEDGER_SIGNING_KEY)."""
    p.add_argument(
        "--sign-key",
        metavar="PATH",
        help="sign the seal with this Ed25519 private key (or $BENCHLEDGER_SIGNING_KEY); "
        "the key itself is never recorded",
    )


def gate_bar_args(p: argparse._ActionsContainer) -> None:
    """Add ``--tolerance T`` and ``--gate-metrics M[,M]`` (a gate's bar)."""
    p.add_argument(
        "--tolerance",
        type=float,
        default=None,
        help="how much worse still counts as not worse (default 0.05: five points)",
    )
    p.add_argument(
        "--gate-metrics",
        metavar="M[,M]",
        help="the metrics that decide (default: every gated metric)",
    )


def gate_json(
    bar: Bar,
    rows: list[GateRow],
    baseline: RunEvents,
    candidate: RunEvents,
    verdict: str,
    status: int,
) -> str:
    """The gate's verdict as JSON: the bar (and any override), every row, the exit code."""
    import json

    return json.dumps(
        {
            "candidate": {"run": candidate.run_id, "root": candidate.root, **_stood(candidate)},
            "baseline": {"run": baseline.run_id, "root": baseline.root, **_stood(baseline)},
            "bar": bar.as_json(),
            "rows": [
                {
                    "metric": g.row.name,
                    "verdict": g.verdict,
                    "reason": g.reason,
                    "baseline": {"num": g.row.a_num, "den": g.row.a_den},
                    "candidate": {"num": g.row.b_num, "den": g.row.b_den},
                    "better_low": None if g.better is None else g.better.low,
                    "better_high": None if g.better is None else g.better.high,
                    "resolution": g.row.resolution,
                }
                for g in rows
            ],
            "verdict": verdict,
            "passed": status == EXIT_OK,
            "exit": status,
        },
        indent=2,
    )


def _stood(run: RunEvents) -> dict[str, object]:
    """A gated run's JSON ``authentication`` and ``origin`` (``open_run`` set them)."""
    if run.standing is None:
        return {}
    from ledger.verified import OWN, Origin

    origin = run.origin or Origin(OWN)
    return {"authentication": run.standing.as_json(), "origin": origin.as_json()}
