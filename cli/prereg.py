"""Pre-registration: ``prereg new|show``, and the bar ``run`` records before any unit runs.

Loaded only by ``prereg`` and ``run``: the bar names the protocol set a run would load,
which takes the harness's suites.
"""

from __future__ import annotations

import argparse

from benchledger.cli.common import EXIT_OK, UsageError, command_line, ledger_arg, open_ledger
from benchledger.cli.gate import gate_bar_args, metrics_option
from benchledger.harness.suites import suite_for
from benchledger.ledger.bundle import atomic_output
from benchledger.ledger.errors import LedgerError
from benchledger.ledger.events import Preregistration
from benchledger.ledger.verified import RunEvents, RunUnverified, open_run
from benchledger.projections import suites
from benchledger.projections.prereg import (
    BadPreregistration,
    build,
    digest,
    matches_run,
    parse,
    to_bytes,
)


def _protocol_items(suite_name: str, path: str | None) -> tuple[str, list[str], str]:
    """(protocol set hash, item content hashes, path) of the protocols a run would load."""
    suite = suite_for(suite_name)
    loaded = suite.load(path or suite.default_path())
    item_hash = suites.lookup(suite.name).item_hash
    items = [item_hash(item) for item in loaded.items] if item_hash else []
    return loaded.set_hash, items, loaded.path


def _events(target: str, args: argparse.Namespace) -> RunEvents:
    """A run (id in the ledger, or a bundle) whose chain checked out; UsageError otherwise."""
    try:
        return open_run(target, lambda: open_ledger(args, create=False), require_seal=False,
                        allow_partial=False)  # fmt: skip
    except RunUnverified as exc:
        raise UsageError(f"baseline {target} does not verify: {exc.failure}") from None
    except LedgerError as exc:
        raise UsageError(f"baseline {target}: {exc}") from None


def _build(args: argparse.Namespace, baseline: str, protocols: str | None) -> Preregistration:
    set_hash, items, _ = _protocol_items(args.suite, protocols)
    try:
        return build(
            _events(baseline, args),
            protocol_set_hash=set_hash,
            items=items,
            metrics=metrics_option(args.gate_metrics),
            tolerance=args.tolerance,
            strict=getattr(args, "strict", False),
        )
    except BadPreregistration as exc:
        raise UsageError(str(exc)) from None


def read_prereg(path: str) -> Preregistration:
    """A pre-registration file, checked; UsageError (exit 2) when it cannot be used."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(1 << 20)
    except OSError as exc:
        raise UsageError(f"{path}: cannot read the pre-registration ({exc.strerror})") from None
    try:
        return parse(data, path)
    except BadPreregistration as exc:
        raise UsageError(str(exc)) from None


def prereg_for_run(args: argparse.Namespace, items: str = "") -> Preregistration | None:
    """The bar ``run`` records in run_started (--prereg FILE or --gate-baseline RUN), for
    the items at ``items`` (the suite's item option; "": its committed set)."""
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
        p = _build(args, args.gate_baseline, items or None)
    else:
        p = read_prereg(args.prereg)
        set_hash, hashes, _ = _protocol_items(args.suite, items or None)
        try:
            matches_run(p, set_hash, hashes)
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
    if suites.lookup(args.suite).item_hash is None:  # checked where named, not as choices
        raise UsageError(f"--suite {args.suite}: its runs have no items a pre-registration "
                         "can pin")  # fmt: skip
    p = _build(args, args.baseline, args.protocols)
    with atomic_output(args.output) as fh:
        fh.write(to_bytes(p))
    print(f"wrote {args.output}: digest {digest(p)}")
    run = command_line("benchledger", "run", "--prereg", args.output)
    print(f"publish it (or the digest) before the run, then: {run}")
    return EXIT_OK


def cmd_prereg_show(args: argparse.Namespace) -> int:
    """Print a pre-registration file's bar and digest."""
    p = read_prereg(args.file)
    print(f"digest        {digest(p)}")
    print(f"baseline      {p.baseline_run} root {p.baseline_root}")
    print(f"metrics       {', '.join(p.metrics)}")
    print(f"tolerance     {p.tolerance:g}{' (strict)' if p.strict else ''}")
    print(f"protocol set  {p.protocol_set_hash}")
    print(f"items         {len(p.items)} protocols by content hash")
    return EXIT_OK


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``prereg new|show``."""
    p = sub.add_parser("prereg", help="pre-register the gate a run will be judged by")
    pre = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    n = pre.add_parser("new", help="write a pre-registration file to publish before the run")
    n.add_argument("--baseline", required=True, metavar="RUN", help="sealed run id or bundle")
    n.add_argument(
        "--protocols",
        metavar="PATH",
        help="the items the run will load (default: the suite's committed set)",
    )
    # No choices: listing them would load every installed suite, and one that cannot load
    # would refuse every command built with this group. The suite is resolved where named.
    n.add_argument("--suite", default=suites.DEFAULT_SUITE, metavar="SUITE")
    gate_bar_args(n)
    n.add_argument("--strict", action="store_true", help="the gate will fail on inconclusive")
    n.add_argument("-o", "--output", required=True, metavar="FILE")
    ledger_arg(n)
    n.set_defaults(func=cmd_prereg_new)
    s = pre.add_parser("show", help="a pre-registration file's bar and digest")
    s.add_argument("file", metavar="FILE")
    s.set_defaults(func=cmd_prereg_show)
