"""Commands over recorded runs: report, compare, gate, audit, and import-peer.

Each command reads a run through the door and asks the run's recorded suite
(``projections.suites.of_run``) for its card, renderer and audit; nothing here tests a
suite's name.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

from benchledger.cli.authenticity import pubkey_arg, trusted_keys
from benchledger.cli.common import (
    EXIT_OK,
    UsageError,
    check_output,
    command_line,
    ledger_arg,
    new_or_existing_ledger,
    number,
    open_ledger,
    write_output,
)
from benchledger.cli.gate import gate_bar_args, metrics_option
from benchledger.cli.watch import watch
from benchledger.harness.peer.files import peer_root
from benchledger.harness.peer.importer import import_peer
from benchledger.harness.peer.layout import find_transcripts
from benchledger.judging import compare, gate
from benchledger.ledger import Ledger
from benchledger.ledger.bundle import export_audit
from benchledger.ledger.errors import UnusableInput
from benchledger.ledger.events import RunStartedEvent
from benchledger.ledgers import reader
from benchledger.projections.audit import UnknownMetric, abandoned_lines, render
from benchledger.projections.audit_json import audit_json
from benchledger.projections.card import FORMATS, standing_lines
from benchledger.projections.fold import LiveView
from benchledger.projections.passes import CI_CHOICES, ci_method
from benchledger.projections.source import RunEvents, banner_of, is_bundle
from benchledger.projections.suites import installed, lookup, of_run
from benchledger.scoring import card_alone, report
from benchledger.trust import read


def show(run: RunEvents, ledger: Ledger) -> bool | None:
    """Print a finished run's card as a table (after ``run``); its overall verdict, if any.

    The log-driven replay, when the card counts one, runs only once the run is sealed.
    """
    suite = of_run(run)
    found = card_alone(run, suite, run.run_id, lambda: ledger, replay=bool(run.root), stood=False)
    print()
    print(suite.render(found, "table"), end="")
    return suite.passed(found)


def _run_events(
    target: str,
    args: argparse.Namespace,
    *,
    require_seal: bool = False,
    allow_partial: bool = False,
) -> RunEvents:
    """The run ``target`` names, verified while it is read (the library's door).

    With ``--pubkey`` (``args.trusted``, loaded by the command before any work) a run no
    named key vouches for is refused here, before anything from it is shown.
    """
    return read(target, reader(args.ledger, args.settings), getattr(args, "trusted", None),
                require_seal=require_seal, allow_partial=allow_partial)  # fmt: skip


def cmd_report(args: argparse.Namespace) -> int:
    """Render the scorecard of one run, or of several merged as passes."""

    if args.watch:
        return _watch(args)
    card = report(args.runs, ledger=args.ledger, pubkey=args.pubkey, ci=args.ci,
                  prices=args.prices, settings=args.settings)  # fmt: skip
    write_output(card.render(args.format), args.output)
    return EXIT_OK


def _queue_line(args: argparse.Namespace, run_id: str) -> Callable[[], str]:
    """For a run in a PostgreSQL ledger: its queue's jobs and workers, as a watch line."""
    location = str(args.ledger or args.settings.ledger)
    if not location.startswith(("postgresql://", "postgres://")):
        return lambda: ""
    from benchledger.harness.queue import queue_states

    def line() -> str:
        state = queue_states(location, run_id).get(run_id)
        return f"queue: {state.line()}" if state else ""

    return line


def _watch(args: argparse.Namespace) -> int:
    """``report RUN --watch``: follow one run in a ledger until it is sealed (cli/watch.py)."""

    if len(args.runs) != 1 or is_bundle(args.runs[0]) or args.output:
        raise UsageError("--watch follows one run in a ledger (not a bundle; no -o)")
    if args.pubkey:
        raise UsageError(
            "--watch follows a run before its seal, which no key vouches for yet: drop "
            "--pubkey, and check the sealed run without --watch"
        )
    ledger = open_ledger(args, create=False)
    ledger.run_info(args.runs[0])  # an unknown run: exit 2 now, not a silent wait
    header = next(ledger.events(args.runs[0], stream=args.runs[0]))[0]  # run_started
    suite = lookup(header.body.suite if isinstance(header, RunStartedEvent) else "")
    if suite.live is None:
        raise UsageError(f"--watch: a {suite.name} run has no live view; report it once it "
                         "is sealed")  # fmt: skip
    view = LiveView(ledger.store, suite.fold(), run_id=args.runs[0])
    watch(view, suite, args.format, args.interval, ci=ci_method(args.ci),
          extra=_queue_line(args, args.runs[0]))  # fmt: skip
    return EXIT_OK


def cmd_compare(args: argparse.Namespace) -> int:
    """Runs of one suite side by side, the baseline first, as that suite compares them."""
    compared = compare(args.runs, baseline=args.baseline, format=args.format,
                       ledger=args.ledger, pubkey=args.pubkey, prices=args.prices,
                       settings=args.settings)  # fmt: skip
    write_output(compared.text, args.output)
    return EXIT_OK


def cmd_gate(args: argparse.Namespace) -> int:
    """Gate a candidate against a baseline.

    Exit 2 (one line) when the gate cannot judge: a run that is damaged, unsealed,
    incomplete, all infra errors or coupled, or runs that differ in protocol set, k, agent,
    platform or model. Exit 1 on a regression (with --strict, also on inconclusive); 3
    when undecided (not every gated metric resolved) unless --allow-undecided.
    """
    verdict = gate(args.candidate, args.baseline, tolerance=args.tolerance,
                   metrics=metrics_option(args.gate_metrics), strict=args.strict,
                   override=args.override, allow_undecided=args.allow_undecided,
                   ledger=args.ledger, pubkey=args.pubkey, settings=args.settings)  # fmt: skip
    if args.format == "json":
        print(verdict.json())
    else:
        sys.stdout.write(verdict.text())
    return verdict.exit_code


def cmd_audit(args: argparse.Namespace) -> int:
    """Trace a metric to its decisions and evidence; optionally write an audit bundle."""

    args.trusted = trusted_keys(args)  # a bad key file: one line, exit 2, first
    if args.bundle:
        check_output(args.bundle)
    run = _run_events(args.run, args, allow_partial=True)  # an audit bundle, labelled partial
    try:  # each suite audits its own metrics
        result = of_run(run).audit(run, args.metric)
    except UnknownMetric as exc:
        raise UsageError(str(exc)) from None
    if args.format == "json":  # the same audit, values whole, with authentication and origin
        print(audit_json(result, run))
    else:
        banner = banner_of(run)  # an unsealed or incomplete run says so first
        if banner:
            print(banner)
        for line in standing_lines([(run.run_id, run.standing, run.origin)]):
            print(line)
        if run.check is not None:
            print(f"verified: {run.check.line()}")
        print(render(result, full=args.full, origin=run.origin))
        for line in abandoned_lines(run.events):
            print(line)
    if args.bundle:
        if is_bundle(args.run):
            raise UsageError("--bundle needs the run in a ledger (import the bundle first)")
        n = export_audit(open_ledger(args, create=False), run.run_id, result.streams, args.bundle)
        print(
            f"\nwrote audit bundle {args.bundle}: {n} events, {len(result.streams) + 1} streams "
            "with inclusion proofs; check it offline with: "
            + command_line("benchledger", "verify", args.bundle, "--root", run.root),
            file=sys.stderr if args.format == "json" else sys.stdout,  # stdout stays JSON
        )
    return EXIT_OK


def _arm_progress(done: int, total: int) -> None:
    print(f"import-peer: {done}/{total} arms written", file=sys.stderr, flush=True)


def _import_arms(args: argparse.Namespace) -> int:
    """``import-peer`` of a tasks-bench arm folder, or of a family of them: a sealed run each."""
    from benchledger.harness.peer.arms import is_arm, is_family
    from benchledger.harness.peer.tasks_import import import_arm, import_family

    path = args.results.rstrip("/") or args.results
    if args.transcripts or args.protocols:
        raise UsageError(f"{path}: an arm folder carries its own transcripts and tasks; drop "
                         "--transcripts and --protocols")  # fmt: skip
    arm = is_arm(path)
    if not arm and not is_family(path):
        raise UsageError(f"{path}: neither a results file, an arm folder (results.json or "
                         "results/results.json) nor a family of arm folders")  # fmt: skip
    if not arm and args.run_id:
        raise UsageError(f"{path}: --run-id names one run; a family imports one run per arm")
    invalid: dict[str, str] = {}
    for given in args.invalid or ():
        folder, _, reason = given.partition("=")
        if not folder.strip() or not reason.strip():
            raise UsageError(f"--invalid {given!r}: give ARM_FOLDER=REASON (the reason is "
                             "recorded as the arm's exclusion)")  # fmt: skip
        invalid[folder.strip().rstrip("/")] = reason.strip()
    with new_or_existing_ledger(args) as ledger:  # a refused arm leaves no new ledger
        if arm:
            done = [import_arm(ledger, path, run_id=args.run_id, invalid=invalid)]
        else:
            done = import_family(ledger, path, progress=_arm_progress, invalid=invalid)
    for run_id, root, label in done:
        excluded = f" (EXCLUDED: {label})" if label else ""
        print(f"imported run {run_id}{excluded}, root {root}")
    print(f"imported {len(done)} run(s) from {path}; see one with: benchledger report "
          f"{done[0][0]}")  # fmt: skip
    return EXIT_OK


def cmd_import_peer(args: argparse.Namespace) -> int:
    """Import a peer platform's results file (and transcripts) as a sealed run, or a tasks
    arm folder or family of them as one sealed run per arm."""

    if os.path.isdir(args.results):
        return _import_arms(args)
    if args.invalid:
        raise UsageError(f"{args.results}: --invalid marks a tasks arm folder, not a results file")
    transcripts = args.transcripts
    if transcripts is None:
        transcripts = find_transcripts(args.results)
    given = (args.results, *(args.transcripts or ()))  # found transcripts must be real folders
    with peer_root(*given), new_or_existing_ledger(args) as ledger:  # refused: no new ledger
        run_id, root, shape = import_peer(
            ledger,
            args.results,
            transcripts=transcripts,
            run_id=args.run_id,
            protocols=args.protocols,
            note=lambda text: print(f"note: {text}"),
        )
    print(f"imported {args.results} ({shape} shape) as run {run_id}, root {root}")
    if transcripts:
        print(f"transcripts: {', '.join(transcripts)}")
    print(f"see it with: benchledger report {run_id}")
    return EXIT_OK


def _prices_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--prices",
        metavar="FILE",
        help="the model price table cost is computed at (TOML, as the packaged "
        'projections/data/prices.toml; docs/metrics.md, "Cost and latency")',
    )


def report_formats() -> tuple[str, ...]:
    """``--format``'s choices: every format a suite that loads can render. A suite plugin
    that cannot load adds none: it is refused where a run names it, not here, for every run."""
    found: dict[str, None] = dict.fromkeys(FORMATS)
    for p in installed():
        try:
            found.update(dict.fromkeys(lookup(p.name).formats))
        except UnusableInput:
            continue
    return tuple(found)


def register(sub: argparse._SubParsersAction) -> None:
    """Add report, compare, gate, audit and import-peer."""

    formats = report_formats()
    p = sub.add_parser("report", help="a run's scorecard (several runs merge as passes)")
    p.add_argument("runs", nargs="+", metavar="RUN", help="run id or bundle file")
    p.add_argument("--format", choices=formats, default="table")
    p.add_argument("-o", "--output", metavar="FILE")
    _prices_arg(p)
    p.add_argument(
        "--ci",
        choices=list(CI_CHOICES),
        default="auto",
        help="95%% intervals: auto (Wilson at k=1, protocol-cluster bootstrap at k>1), "
        "wilson (attempts as independent), cluster (alias bootstrap: resample protocols, "
        "fixed seed)",
    )
    p.add_argument(
        "--watch",
        action="store_true",
        help="re-render as units land (labelled LIVE, unsealed) until the run is sealed",
    )
    p.add_argument(
        "--interval",
        type=number("--interval", above=True),
        default=2.0,
        metavar="S",
        help="--watch: seconds between polls",
    )
    pubkey_arg(p, " of every run")
    ledger_arg(p)
    p.set_defaults(func=cmd_report)

    p = sub.add_parser(
        "compare",
        help="runs of one protocol set side by side, paired with a baseline",
        description="Runs as columns (agent, model, sampling and platform may differ; the "
        "first lines name what does), metrics as rows, each cell a rate with its interval "
        "and its paired difference against the baseline. RUN+RUN merges passes into one "
        "column.",
    )
    p.add_argument("runs", nargs="+", metavar="RUN", help="run id, bundle file, or RUN+RUN")
    p.add_argument("--baseline", metavar="RUN", help="the column the others are paired with "
                   "(default: the first RUN)")  # fmt: skip
    p.add_argument("--format", choices=formats, default="table")
    p.add_argument("-o", "--output", metavar="FILE")
    _prices_arg(p)
    pubkey_arg(p, " of every run")
    ledger_arg(p)
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser(
        "gate",
        help="fail CI when a candidate run regresses against a baseline",
        description="Exit 0: passed, every gated metric resolved and none regressed; 1: a "
        "regression (with --strict, also an inconclusive metric); 2: the runs cannot be "
        "gated (damaged, unsealed, incomplete, all infra errors, coupled, or different "
        "protocol set, k, agent, platform or model); 3: undecided, a gated metric the runs "
        "are too small to resolve (the verdict names the k or protocols that would), unless "
        "--allow-undecided. "
        "A run that pre-registered its gate (run --gate-baseline) is judged by that bar only; "
        "another is refused (exit 2) unless --override, which the output reports; a run "
        "whose items differ from its pre-registration fails (exit 1).",
    )
    p.add_argument("candidate", metavar="CANDIDATE", help="run id or bundle file")
    p.add_argument(
        "--baseline",
        metavar="BASELINE",
        help="run id or bundle file (default: the candidate's pre-registered baseline)",
    )
    gate_bar_args(p)
    p.add_argument(
        "--strict", action="store_true", help="also fail on inconclusive (too small to decide)"
    )
    p.add_argument(
        "--allow-undecided",
        action="store_true",
        help="exit 0 when the gate cannot decide (still reported as undecided, never passed)",
    )
    p.add_argument(
        "--override",
        action="store_true",
        help="judge a pre-registered run by the bar given here instead (reported as such)",
    )
    p.add_argument("--format", choices=["table", "json"], default="table")
    pubkey_arg(p, " of both the candidate and the baseline")
    ledger_arg(p)
    p.set_defaults(func=cmd_gate)

    p = sub.add_parser("audit", help="trace a metric to its decision and evidence events")
    p.add_argument("run", metavar="RUN", help="run id or bundle file")
    p.add_argument("metric", metavar="METRIC", help=", ".join(lookup("").metric_names))
    p.add_argument(
        "--full",
        action="store_true",
        help="print each recorded value whole (tool results, arguments, answers); by default "
        "long ones are shortened, marked '… (+N chars)'",
    )
    p.add_argument("--bundle", metavar="OUT", help="write a self-contained audit bundle")
    p.add_argument("--format", choices=["table", "json"], default="table")
    pubkey_arg(p, " of the run")
    ledger_arg(p)
    p.set_defaults(func=cmd_audit)

    p = sub.add_parser("import-peer", help="a peer platform's results as sealed runs")
    p.add_argument("platform", choices=["mcp-data-platform"])
    p.add_argument(
        "results",
        metavar="RESULTS.json|ARM|FAMILY",
        help="a lifecycle results file; or a tasks-bench arm folder (results.json, "
        "arm-config.yaml, transcripts), or a folder of them: one sealed run per arm",
    )
    p.add_argument(
        "--transcripts",
        action="append",
        metavar="DIR",
        help="transcript folder; repeat once per pass for merged files, in attempt order or "
        "each named for its pass (its passes.txt entry, or pass-N)",
    )
    p.add_argument(
        "--protocols",
        metavar="DIR",
        help="the protocol set the run was made with; its peer hash must be the manifest's "
        "(default: the peer's bench/protocols beside bench/results, when it matches)",
    )
    p.add_argument("--run-id", metavar="ID")
    p.add_argument(
        "--invalid",
        action="append",
        metavar="ARM_FOLDER=REASON",
        help="import that arm folder as excluded, REASON recorded as its exclusion: an arm "
        "the peer declared invalid only in prose, under no -LABEL (repeatable)",
    )
    ledger_arg(p)
    p.set_defaults(func=cmd_import_peer)
