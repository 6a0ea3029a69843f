"""Commands over recorded runs: report, compare, gate, audit, and import-peer."""

from __future__ import annotations

import argparse
import os
import sys

from cli.common import EXIT_FAILED, EXIT_OK, UsageError, ledger_arg, open_ledger, write_output
from ledger.bundle import export_audit
from projections.lifecycle import Scorecard
from projections.source import RunEvents, is_bundle


def _run_events(target: str, args: argparse.Namespace) -> RunEvents:
    from projections.source import from_bundle, from_ledger

    if is_bundle(target):
        return from_bundle(target)
    return from_ledger(open_ledger(args, create=False), target)


def _scorecard(targets: list[str], args: argparse.Namespace) -> Scorecard:
    from projections.compare import Incomparable, comparable
    from projections.fold import fold
    from projections.lifecycle import LifecycleFold, scorecard

    folds = [fold(LifecycleFold(), _run_events(t, args).events) for t in targets]
    try:
        comparable([m for m, _ in folds], what="passes")
    except Incomparable as exc:
        raise UsageError(f"cannot merge these runs: {exc}") from None
    return scorecard(folds, ci=getattr(args, "ci", "wilson"))


def cmd_report(args: argparse.Namespace) -> int:
    """Render the scorecard of one run, or of several merged as passes."""
    from projections.report import render

    card = _scorecard(args.runs, args)
    write_output(render(card, args.format), args.output)
    return EXIT_OK


def cmd_compare(args: argparse.Namespace) -> int:
    """Per-metric differences between two runs, paired by protocol."""
    from projections.compare import Incomparable, compare
    from projections.report import compare_text

    a, b = _scorecard([args.run_a], args), _scorecard([args.run_b], args)
    try:
        rows = compare(a, b)
    except Incomparable as exc:
        raise UsageError(f"cannot compare: {exc}") from None
    write_output(compare_text(rows, args.run_a, args.run_b, args.format), args.output)
    return EXIT_OK


def cmd_gate(args: argparse.Namespace) -> int:
    """Gate a candidate against a baseline: 1 on a regression (or, with --strict, inconclusive)."""
    from projections.compare import INCONCLUSIVE, REGRESS, Incomparable, gate
    from projections.report import gate_text

    if not 0 <= args.tolerance < 1:
        raise UsageError("--tolerance must be in [0, 1)")
    base, cand = _scorecard([args.baseline], args), _scorecard([args.candidate], args)
    try:
        rows = gate(base, cand, args.tolerance)
    except Incomparable as exc:
        raise UsageError(f"cannot gate: {exc}") from None
    sys.stdout.write(gate_text(rows, args.tolerance))
    verdicts = {g.verdict for g in rows}
    if REGRESS in verdicts or (args.strict and INCONCLUSIVE in verdicts):
        print("gate: FAILED")
        return EXIT_FAILED
    print("gate: passed")
    return EXIT_OK


def cmd_audit(args: argparse.Namespace) -> int:
    """Trace a metric to its decisions and evidence; optionally write an audit bundle."""
    from projections.audit import UnknownMetric, audit, render

    run = _run_events(args.run, args)
    try:
        result = audit(run, args.metric)
    except UnknownMetric as exc:
        raise UsageError(str(exc)) from None
    print(render(result))
    if args.bundle:
        if is_bundle(args.run):
            raise UsageError("--bundle needs the run in a ledger (import the bundle first)")
        n = export_audit(open_ledger(args, create=False), run.run_id, result.streams, args.bundle)
        print(
            f"\nwrote audit bundle {args.bundle}: {n} events, {len(result.streams) + 1} streams "
            f"with inclusion proofs; check it offline with: benchledger verify {args.bundle} "
            f"--root {run.root}"
        )
    return EXIT_OK


def cmd_import_peer(args: argparse.Namespace) -> int:
    """Import a peer platform's results file (and transcripts) as a sealed run."""
    from harness.peer_import import import_peer

    transcripts = args.transcripts
    if transcripts is None and os.path.isdir(args.results + ".transcripts"):
        transcripts = [args.results + ".transcripts"]
    ledger = open_ledger(args, create=True)
    run_id, root, shape = import_peer(
        ledger, args.results, transcripts=transcripts, run_id=args.run_id
    )
    print(f"imported {args.results} ({shape} shape) as run {run_id}, root {root}")
    print(f"see it with: benchledger report {run_id}")
    return EXIT_OK


def register(sub: argparse._SubParsersAction) -> None:
    """Add report, compare, gate, audit and import-peer."""
    from projections.lifecycle import METRIC_NAMES
    from projections.report import FORMATS

    p = sub.add_parser("report", help="a run's scorecard (several runs merge as passes)")
    p.add_argument("runs", nargs="+", metavar="RUN", help="run id or bundle file")
    p.add_argument("--format", choices=FORMATS, default="table")
    p.add_argument("-o", "--output", metavar="FILE")
    p.add_argument(
        "--ci",
        choices=["wilson", "bootstrap"],
        default="wilson",
        help="interval for rates (bootstrap: percentile, fixed seed)",
    )
    ledger_arg(p)
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("compare", help="two runs of one protocol set, paired by protocol")
    p.add_argument("run_a", metavar="RUN_A")
    p.add_argument("run_b", metavar="RUN_B")
    p.add_argument("--format", choices=["table", "markdown", "json"], default="table")
    p.add_argument("-o", "--output", metavar="FILE")
    ledger_arg(p)
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("gate", help="fail CI when a candidate run regresses against a baseline")
    p.add_argument("candidate", metavar="CANDIDATE")
    p.add_argument("--baseline", required=True, metavar="BASELINE")
    p.add_argument("--tolerance", type=float, default=0.05)
    p.add_argument("--strict", action="store_true", help="also fail on inconclusive")
    ledger_arg(p)
    p.set_defaults(func=cmd_gate)

    p = sub.add_parser("audit", help="trace a metric to its decision and evidence events")
    p.add_argument("run", metavar="RUN", help="run id or bundle file")
    p.add_argument("metric", metavar="METRIC", help=", ".join(METRIC_NAMES))
    p.add_argument("--bundle", metavar="OUT", help="write a self-contained audit bundle")
    ledger_arg(p)
    p.set_defaults(func=cmd_audit)

    p = sub.add_parser("import-peer", help="a peer platform's results file as a sealed run")
    p.add_argument("platform", choices=["mcp-data-platform"])
    p.add_argument("results", metavar="RESULTS.json")
    p.add_argument(
        "--transcripts",
        action="append",
        metavar="DIR",
        help="transcript folder; repeat once per pass (attempt order) for merged files",
    )
    p.add_argument("--run-id", metavar="ID")
    ledger_arg(p)
    p.set_defaults(func=cmd_import_peer)
