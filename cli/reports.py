"""Commands over recorded runs: report, compare, gate, audit, and import-peer.

Each command reads a run through the door and asks the run's recorded suite
(``projections.suites.of_run``) for its card, renderer and audit; nothing here tests a
suite's name.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from benchledger.cli.authenticity import pubkey_arg, require_trusted, trusted_keys
from benchledger.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    UsageError,
    check_output,
    ledger_arg,
    new_or_existing_ledger,
    number,
    open_ledger,
    write_output,
)
from benchledger.cli.gate import gate_bar, gate_bar_args, gate_baseline, gate_json
from benchledger.cli.watch import watch
from benchledger.harness.peer.importer import import_peer
from benchledger.harness.peer.layout import find_transcripts
from benchledger.ledger import Ledger, LedgerError, UnusableInput
from benchledger.ledger.bundle import export_audit
from benchledger.ledger.events import RunStartedEvent
from benchledger.projections.audit import UnknownMetric, render
from benchledger.projections.audit_json import audit_json
from benchledger.projections.card import standing_lines
from benchledger.projections.fold import LiveView, fold
from benchledger.projections.prereg import item_problems
from benchledger.projections.prices import PriceTable, load_prices
from benchledger.projections.source import RunEvents, banner_of, is_bundle, open_run
from benchledger.projections.suites import ReadSuite, lookup, names, of_run
from benchledger.projections.suites.lifecycle.compare import (
    INCONCLUSIVE,
    REGRESS,
    Incomparable,
    comparable,
    gate,
)
from benchledger.projections.suites.lifecycle.report import gate_text
from benchledger.projections.suites.lifecycle.scorecard import Scorecard
from benchledger.protocols.errors import InvalidInput
from benchledger.replay.levels import replay


def refuse(
    target: str,
    suite: ReadSuite,
    command: str,
    can: Callable[[ReadSuite], bool] = lambda s: s.merges,
    judge: str = "compare and gate judge",
) -> None:
    """UsageError when ``target``'s suite cannot do ``command`` (``can``: by default, merge
    runs as passes, which the gate needs), naming the suites that can."""
    if not can(suite):
        judged = ", ".join(n for n in names() if can(lookup(n)))
        raise UsageError(
            f"cannot {command}: {target} is a {suite.name} run; its verdicts are in "
            f"`benchledger report {target}` ({judge} {judged} runs)"
        )


def log_replay(
    target: str, ledger: Callable[[], Ledger], run: RunEvents, stage: str
) -> tuple[dict[str, bool] | None, str]:
    """Per unit stream of ``run``, whether the log-driven replay reproduced its ``stage`` turn.

    None, with why, when it cannot run (the run is unsealed or damaged, or its items are
    not on this machine).
    """

    try:  # the run the display read, replayed without reading ``target`` again
        report = replay(target, level="full", tools="log", ledger=ledger, opened=run)
    except (UnusableInput, InvalidInput, LedgerError) as exc:
        return None, f"log-driven replay not run: {exc}"
    if report.failure is not None:
        return None, f"log-driven replay not run: {report.failure}"
    units = {m.stream for m in report.mismatches}
    missed = {m.stream for m in report.mismatches if m.what == f"episode {stage}"}
    if report.first is not None and report.first.what == f"episode {stage}":
        missed.add(report.first.stream)
    note = ""
    if units - missed:
        note = (
            f"log-driven replay: {len(units - missed)} unit(s) differ outside the scored turn; "
            f"see `benchledger replay {target} --level full`"
        )
    streams = {e.stream for e, _ in run.events if e.stream != run.run_id}
    return {s: s not in missed for s in sorted(streams)}, note


def _card_alone(
    run: RunEvents,
    suite: ReadSuite,
    target: str,
    ledger: Callable[[], Ledger],
    *,
    replay: bool = True,
    stood: bool = True,
    prices: PriceTable | None = None,
) -> Any:
    """The card of one run (``target``) of a suite that does not merge.

    With ``replay``, the log-driven replay the suite's card counts (if it counts one); with
    ``stood``, the card says who vouches for the run and where its units came from; with
    ``prices`` (``--prices``), a card that carries a price table (tasks) is priced at it.
    """
    reproduced, note = None, ""
    if suite.replayed_stage is not None and replay:
        reproduced, note = log_replay(target, ledger, run, suite.replayed_stage)
    found = suite.card([run], replayed=reproduced)
    if stood:
        found.meta.standing, found.meta.origin = run.standing, run.origin  # open_run set them
    if note:
        found = found._replace(notes=(*found.notes, note))
    if prices is not None and "prices" in getattr(found, "_fields", ()):
        found = found._replace(prices=prices)
    return found


def show(run: RunEvents, ledger: Ledger) -> bool | None:
    """Print a finished run's card as a table (after ``run``); its overall verdict, if any.

    The log-driven replay, when the card counts one, runs only once the run is sealed.
    """
    suite = of_run(run)
    found = _card_alone(run, suite, run.run_id, lambda: ledger, replay=bool(run.root), stood=False)
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
    """The run ``target`` names, verified while it is read (projections.source.open_run).

    With ``--pubkey`` (``args.trusted``, loaded by the command before any work) a run no
    named key vouches for is refused here, before anything from it is shown.
    """

    trusted = getattr(args, "trusted", None)
    run = open_run(target, lambda: open_ledger(args, create=False), require_seal=require_seal,
                   allow_partial=allow_partial, trusted=trusted)  # fmt: skip
    return require_trusted(run, trusted)


def _ci_choice(args: argparse.Namespace) -> str:
    choice = getattr(args, "ci", "auto")
    return "cluster" if choice == "bootstrap" else choice


def _scorecard(
    targets: list[str], args: argparse.Namespace, read: Sequence[RunEvents] = ()
) -> Scorecard:
    """The merged scorecard of ``targets``, each read once (``read``: the first ones, read)."""

    runs = [read[i] if i < len(read) else _run_events(t, args)
            for i, t in enumerate(targets)]  # fmt: skip
    seen: dict[tuple[str, str], str] = {}
    for target, run in zip(targets, runs, strict=True):
        first = seen.setdefault((run.run_id, run.root), target)
        if first != target or targets.count(target) > 1:
            raise UsageError(f"run {run.run_id} is given twice ({first}, {target}): merging a "
                             "run with itself would count its units twice")  # fmt: skip
    suites = [of_run(run) for run in runs]
    for target, suite in zip(targets, suites, strict=True):
        refuse(target, suite, "merge, compare or gate")
    folds = [fold(suites[0].fold(), run.events) for run in runs]
    for (meta, _), run in zip(folds, runs, strict=True):
        meta.verified = run.check.line() if run.check else ""
        meta.standing, meta.origin = run.standing, run.origin
    try:
        comparable([m for m, _ in folds], what="passes")
    except Incomparable as exc:
        raise UsageError(f"cannot merge these runs: {exc}") from None
    prices = getattr(args, "prices_table", None)  # --prices, loaded before any work
    card: Scorecard = suites[0].scorecard(folds, ci=_ci_choice(args), prices=prices)
    return card


def cmd_report(args: argparse.Namespace) -> int:
    """Render the scorecard of one run, or of several merged as passes."""

    if args.watch:
        return _watch(args)
    args.trusted = trusted_keys(args)  # a bad key file: one line, exit 2, first
    args.prices_table = load_prices(args.prices) if args.prices else None  # and a bad table
    # Routed on what the door read, not on a peek at the file first: a bundle is read
    # once (a FIFO, or a file that changes between reads, gives no second read to trust).
    first = _run_events(args.runs[0], args)
    suite = of_run(first)
    if suite.merges:
        card = _scorecard(args.runs, args, [first])
    elif len(args.runs) > 1:
        raise UsageError(f"a {suite.name} run is reported on its own: give one RUN")
    else:
        card = _card_alone(first, suite, args.runs[0], lambda: open_ledger(args, create=False),
                           prices=args.prices_table)  # fmt: skip
    write_output(suite.render(card, args.format), args.output)
    return EXIT_OK


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
    watch(view, suite, args.format, args.interval, ci=_ci_choice(args))
    return EXIT_OK


def _compare_targets(args: argparse.Namespace) -> list[str]:
    """The compared columns' targets, the baseline first (``--baseline``, else the first)."""
    targets = list(args.runs)
    if args.baseline:
        if args.baseline in targets:
            targets.remove(args.baseline)
        targets.insert(0, args.baseline)
    if len(targets) < 2:
        raise UsageError("compare needs at least two runs: RUN RUN [RUN ...] [--baseline RUN]")
    return targets


def _passes_of(target: str) -> list[str]:
    """``A+B+C``: runs merged as passes into one column (a file of that name is one run)."""
    if "+" not in target or os.path.exists(target):
        return [target]
    parts = target.split("+")
    if not all(parts):
        raise UsageError(f"{target!r}: join the passes of one column as RUN+RUN")
    return parts


def cmd_compare(args: argparse.Namespace) -> int:
    """Runs of one suite side by side, the baseline first, as that suite compares them."""
    args.trusted = trusted_keys(args)  # a bad key file: one line, exit 2, first
    args.prices_table = load_prices(args.prices) if args.prices else None  # and a bad table
    targets = _compare_targets(args)
    columns = [_passes_of(t) for t in targets]
    runs = [[_run_events(t, args) for t in parts] for parts in columns]
    suite = of_run(runs[0][0])
    for target, group in zip(targets, runs, strict=True):
        for run in group:
            other = of_run(run)
            if other.name != suite.name:
                raise UsageError(f"cannot compare: {targets[0]} is a {suite.name} run, "
                                 f"{target} a {other.name} run")  # fmt: skip
    refuse(targets[0], suite, "compare", lambda s: s.compare is not None, "compare judges")
    assert suite.compare is not None
    if suite.merges:
        cards = [_scorecard(parts, args, group)
                 for parts, group in zip(columns, runs, strict=True)]  # fmt: skip
    elif any(len(parts) > 1 for parts in columns):
        raise UsageError(f"a {suite.name} run is compared on its own: no RUN+RUN columns")
    else:
        # one run per column, read as ``report`` reads it: who vouches for it, and its origin
        def ledger() -> Ledger:
            return open_ledger(args, create=False)

        cards = [_card_alone(group[0], suite, t, ledger, replay=False, prices=args.prices_table)
                 for t, group in zip(targets, runs, strict=True)]  # fmt: skip
    try:
        text = suite.compare(cards, targets, args.format)
    except ValueError as exc:  # Incomparable: what differs that a comparison holds fixed
        raise UsageError(f"cannot compare: {exc}") from None
    write_output(text, args.output)
    return EXIT_OK


def _verified(target: str, args: argparse.Namespace) -> RunEvents:
    """A run's events for the gate, verified as they were read (else LedgerError).

    An unsealed run's chain is still checked here; the gate itself then refuses it with
    what is missing (how many planned units finished, and how to resume).
    """
    return _run_events(target, args, require_seal=False)


def cmd_gate(args: argparse.Namespace) -> int:
    """Gate a candidate against a baseline.

    Exit 2 (one line) when the gate cannot judge: a run that is damaged, unsealed,
    incomplete, all infra errors or coupled, or runs that differ in protocol set, k, agent,
    platform or model. Exit 1 on a regression (with --strict, also on inconclusive).
    """

    args.trusted = trusted_keys(args)  # a bad key file: one line, exit 2, first

    def verified(target: str) -> RunEvents:
        try:
            return _verified(target, args)
        except LedgerError as exc:  # damaged, unreadable or unknown: nothing to judge
            raise UsageError(f"cannot gate: {exc}") from None

    candidate = verified(args.candidate)
    refuse(args.candidate, of_run(candidate), "gate")
    baseline = verified(gate_baseline(args, candidate))
    refuse("the baseline", of_run(baseline), "gate")
    bar = gate_bar(args, candidate, baseline)  # the pre-registered bar, unless overridden
    cards = [of_run(run).card([run]) for run in (baseline, candidate)]
    try:
        rows = [g for g in gate(cards[0], cards[1], bar.tolerance) if g.row.name in bar.metrics]
    except Incomparable as exc:
        raise UsageError(f"cannot gate: {exc}") from None
    by: dict[str, list[str]] = {}
    for g in rows:
        by.setdefault(g.verdict, []).append(g.row.name)
    broken = item_problems(bar.prereg, candidate) if bar.prereg else []
    status = EXIT_FAILED
    if broken:
        verdict = f"gate: FAILED: the run broke its pre-registration: {'; '.join(broken)}"
    elif REGRESS in by:
        verdict = f"gate: FAILED: {', '.join(by[REGRESS])} regressed"
    elif bar.strict and INCONCLUSIVE in by:
        verdict = f"gate: FAILED (--strict): {', '.join(by[INCONCLUSIVE])} inconclusive"
    else:
        counts = ", ".join(f"{len(names)} {verdict}" for verdict, names in sorted(by.items()))
        hint = " (--strict fails on inconclusive)" if INCONCLUSIVE in by else ""
        verdict, status = f"gate: passed (no regression): {counts}{hint}", EXIT_OK
    if bar.note:  # not the candidate's pre-registered bar: overridden, or it had none
        verdict += f" [{bar.note}]"
    if args.format == "json":
        print(gate_json(bar, rows, baseline, candidate, verdict, status))
        return status
    print(bar.describe())  # the gate's first line: which bar judges (OVERRIDDEN says so)
    gated = (("baseline", baseline), ("candidate", candidate))
    for line in standing_lines([(f"{who} {r.run_id}", r.standing, r.origin) for who, r in gated],
                               named=True):  # fmt: skip
        print(line)
    for who, run in gated:
        if run.check is not None:
            print(f"verified {who}: {run.check.line()}")
    sys.stdout.write(gate_text(rows, bar.tolerance))
    print(verdict)
    return status


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
    if args.bundle:
        if is_bundle(args.run):
            raise UsageError("--bundle needs the run in a ledger (import the bundle first)")
        n = export_audit(open_ledger(args, create=False), run.run_id, result.streams, args.bundle)
        print(
            f"\nwrote audit bundle {args.bundle}: {n} events, {len(result.streams) + 1} streams "
            f"with inclusion proofs; check it offline with: benchledger verify {args.bundle} "
            f"--root {run.root}",
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
        raise UsageError(f"{path}: neither a results file, an arm folder (results.json and "
                         "arm-config.yaml) nor a family of arm folders")  # fmt: skip
    if not arm and args.run_id:
        raise UsageError(f"{path}: --run-id names one run; a family imports one run per arm")
    with new_or_existing_ledger(args) as ledger:  # a refused arm leaves no new ledger
        if arm:
            done = [import_arm(ledger, path, run_id=args.run_id)]
        else:
            done = import_family(ledger, path, progress=_arm_progress)
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
    transcripts = args.transcripts
    if transcripts is None:
        transcripts = find_transcripts(args.results)
    with new_or_existing_ledger(args) as ledger:  # a refused file leaves no new ledger
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


def register(sub: argparse._SubParsersAction) -> None:
    """Add report, compare, gate, audit and import-peer."""

    formats = tuple(dict.fromkeys(f for n in names() for f in lookup(n).formats))
    p = sub.add_parser("report", help="a run's scorecard (several runs merge as passes)")
    p.add_argument("runs", nargs="+", metavar="RUN", help="run id or bundle file")
    p.add_argument("--format", choices=formats, default="table")
    p.add_argument("-o", "--output", metavar="FILE")
    _prices_arg(p)
    p.add_argument(
        "--ci",
        choices=["auto", "wilson", "cluster", "bootstrap"],
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
        description="Exit 0: no regression; 1: a regression (with --strict, also an "
        "inconclusive metric); 2: the runs cannot be gated (damaged, unsealed, incomplete, "
        "all infra errors, coupled, or different protocol set, k, agent, platform or model). "
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
    ledger_arg(p)
    p.set_defaults(func=cmd_import_peer)
