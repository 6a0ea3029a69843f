"""Commands over recorded runs: report, compare, gate, audit, and import-peer."""

from __future__ import annotations

import argparse
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


def _ci_choice(args: argparse.Namespace) -> str:
    choice = getattr(args, "ci", "auto")
    return "cluster" if choice == "bootstrap" else choice


def _scorecard(targets: list[str], args: argparse.Namespace) -> Scorecard:
    from projections.compare import Incomparable, comparable
    from projections.fold import fold
    from projections.lifecycle import LifecycleFold, scorecard

    folds = [fold(LifecycleFold(), _run_events(t, args).events) for t in targets]
    try:
        comparable([m for m, _ in folds], what="passes")
    except Incomparable as exc:
        raise UsageError(f"cannot merge these runs: {exc}") from None
    return scorecard(folds, ci=_ci_choice(args))


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


def _verified(target: str, args: argparse.Namespace) -> RunEvents:
    """A run's events for the gate, after its hash chain checked out (else LedgerError)."""
    from ledger import LedgerError
    from ledger.bundle import verify_bundle

    run = _run_events(target, args)
    if is_bundle(target):
        failure = verify_bundle(target)[0]
    else:
        failure = open_ledger(args, create=False).verify(run.run_id)[0]
    if failure is not None:
        raise LedgerError(
            f"run {run.run_id} does not verify: {failure}; see `benchledger verify {target}`"
        )
    return run


def cmd_gate(args: argparse.Namespace) -> int:
    """Gate a candidate against a baseline.

    Exit 2 (one line) when the gate cannot judge: a run that is damaged, unsealed,
    incomplete, all infra errors or coupled, or runs that differ in protocol set, k, agent,
    platform or model. Exit 1 on a regression (with --strict, also on inconclusive).
    """
    from ledger import LedgerError
    from projections.compare import INCONCLUSIVE, REGRESS, Incomparable, gate
    from projections.fold import fold
    from projections.lifecycle import LifecycleFold, scorecard
    from projections.report import gate_text

    if not 0 < args.tolerance < 1:
        raise UsageError("--tolerance must be in (0, 1), e.g. 0.05 for five points")
    cards = []
    for target in (args.baseline, args.candidate):
        try:
            run = _verified(target, args)
        except LedgerError as exc:  # damaged, unreadable or unknown: nothing to judge
            raise UsageError(f"cannot gate: {exc}") from None
        cards.append(scorecard([fold(LifecycleFold(), run.events)]))
    try:
        rows = gate(cards[0], cards[1], args.tolerance)
    except Incomparable as exc:
        raise UsageError(f"cannot gate: {exc}") from None
    sys.stdout.write(gate_text(rows, args.tolerance))
    by: dict[str, list[str]] = {}
    for g in rows:
        by.setdefault(g.verdict, []).append(g.row.name)
    if REGRESS in by:
        print(f"gate: FAILED: {', '.join(by[REGRESS])} regressed")
        return EXIT_FAILED
    if args.strict and INCONCLUSIVE in by:
        print(f"gate: FAILED (--strict): {', '.join(by[INCONCLUSIVE])} inconclusive")
        return EXIT_FAILED
    counts = ", ".join(f"{len(names)} {verdict}" for verdict, names in sorted(by.items()))
    hint = " (--strict fails on inconclusive)" if INCONCLUSIVE in by else ""
    print(f"gate: passed (no regression): {counts}{hint}")
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
    from harness.peer_import import find_transcripts, import_peer

    transcripts = args.transcripts
    if transcripts is None:
        transcripts = find_transcripts(args.results)
    ledger = open_ledger(args, create=True)
    run_id, root, shape = import_peer(
        ledger, args.results, transcripts=transcripts, run_id=args.run_id
    )
    print(f"imported {args.results} ({shape} shape) as run {run_id}, root {root}")
    if transcripts:
        print(f"transcripts: {', '.join(transcripts)}")
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
        choices=["auto", "wilson", "cluster", "bootstrap"],
        default="auto",
        help="95%% intervals: auto (Wilson at k=1, protocol-cluster bootstrap at k>1), "
        "wilson (attempts as independent), cluster (alias bootstrap: resample protocols, "
        "fixed seed)",
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

    p = sub.add_parser(
        "gate",
        help="fail CI when a candidate run regresses against a baseline",
        description="Exit 0: no regression; 1: a regression (with --strict, also an "
        "inconclusive metric); 2: the runs cannot be gated (damaged, unsealed, incomplete, "
        "all infra errors, coupled, or different protocol set, k, agent, platform or model).",
    )
    p.add_argument("candidate", metavar="CANDIDATE", help="run id or bundle file")
    p.add_argument("--baseline", required=True, metavar="BASELINE", help="run id or bundle file")
    p.add_argument(
        "--tolerance",
        type=float,
        default=0.05,
        help="how much worse still counts as not worse (default 0.05: five points)",
    )
    p.add_argument(
        "--strict", action="store_true", help="also fail on inconclusive (too small to decide)"
    )
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
