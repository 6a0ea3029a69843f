"""The provenance lane on the command line: its run options, its card, its log replay.

``run --suite provenance`` and ``report`` of a provenance run come here; ``compare`` and
``gate`` refuse a provenance run (they judge lifecycle runs against each other).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any, Final

from cli.common import EXIT_OK, UsageError, open_ledger, write_output
from ledger import Ledger, LedgerError, UnusableInput
from projections.source import RunEvents

SUITE: Final = "provenance"
DEFAULT_K: Final = 2  # each case twice: M1 compares the replicates


def suite_defaults(args: argparse.Namespace, value: dict[str, Any], external: bool) -> None:
    """Fill the options a provenance run needs and check those given (UsageError).

    Each case runs k=2 times, on a fresh platform per unit when the platform is embedded
    (an external one is shared; fresh identities keep each replicate's memories apart).
    ``--cases`` names the case file or folder; ``--protocols`` is the lifecycle's.
    """
    if args.suite != SUITE:
        if args.cases is not None:
            raise UsageError("--cases is the provenance lane's: use it with --suite provenance")
        return
    if args.protocols is not None:
        raise UsageError("--suite provenance reads cases: give them with --cases PATH")
    if args.k is None:
        value["k"] = DEFAULT_K
    elif args.k < 2:
        raise UsageError("--suite provenance needs --k 2 or more: M1 compares the replicates")
    if args.platform_scope is None and not external:
        value["platform_scope"] = "unit"


def unit_status(outcome: Any) -> str:
    """A finished provenance unit for the progress line: ok, or the checks that failed."""
    if outcome.error:
        return f"error: {outcome.error}"
    failed = [check for check, v in outcome.outcome.items() if v is False]
    return "ok" if not failed else "failed " + ", ".join(failed)


def suite_of(run: RunEvents) -> str:
    """The suite a run's ``run_started`` names ("" if it has none)."""
    from ledger.events import RunStarted

    first = next((e for e, _ in run.events if isinstance(e, RunStarted)), None)
    return first.body.suite if first is not None else ""


def refuse(target: str, suite: str, command: str) -> None:
    """UsageError when ``target`` is a provenance run: compare and gate judge lifecycle runs."""
    if suite == SUITE:
        raise UsageError(
            f"cannot {command}: {target} is a provenance run; its verdicts are in "
            f"`benchledger report {target}` (compare and gate judge lifecycle runs)"
        )


def log_replay(
    target: str, ledger: Callable[[], Ledger], run: RunEvents
) -> tuple[dict[str, bool] | None, str]:
    """Per unit stream of ``run``, whether the log-driven replay reproduced its scored turn.

    None, with why, when it cannot run (the run is unsealed or damaged, or its cases are
    not on this machine).
    """
    from projections.provenance_decisions import SCORED
    from protocols.errors import InvalidInput
    from replay.levels import replay

    try:  # the run the display read, replayed without reading ``target`` again
        report = replay(target, level="full", tools="log", ledger=ledger, opened=run)
    except (UnusableInput, InvalidInput, LedgerError) as exc:
        return None, f"log-driven replay not run: {exc}"
    if report.failure is not None:
        return None, f"log-driven replay not run: {report.failure}"
    units = {m.stream for m in report.mismatches}
    missed = {m.stream for m in report.mismatches if m.what == f"episode {SCORED}"}
    if report.first is not None and report.first.what == f"episode {SCORED}":
        missed.add(report.first.stream)
    note = ""
    if units - missed:
        note = (
            f"log-driven replay: {len(units - missed)} unit(s) differ outside the scored turn; "
            f"see `benchledger replay {target} --level full`"
        )
    streams = {e.stream for e, _ in run.events if e.stream != run.run_id}
    return {s: s not in missed for s in sorted(streams)}, note


def card(run: RunEvents, reproduced: dict[str, bool] | None) -> Any:
    """The provenance card of a run's events (with the log replay's M1 when given)."""
    from projections.fold import fold
    from projections.provenance import ProvenanceFold, scorecard

    return scorecard(fold(ProvenanceFold(), run.events), log_replay=reproduced)


def cmd_report(args: argparse.Namespace, run: RunEvents) -> int:
    """``report`` of a provenance run: its card in the chosen format (exit 0 either way)."""
    from projections.provenance_report import render

    if len(args.runs) > 1:
        raise UsageError("a provenance run is reported on its own: give one RUN")
    reproduced, note = log_replay(args.runs[0], lambda: open_ledger(args, create=False), run)
    found = card(run, reproduced)
    found.meta.standing, found.meta.origin = run.standing, run.origin  # open_run set them
    if note:
        found = found._replace(notes=(*found.notes, note))
    write_output(render(found, args.format), args.output)
    return EXIT_OK


def show(run: RunEvents, ledger: Ledger) -> bool:
    """Print a finished provenance run's card (log replay included once sealed); its verdict."""
    from projections.provenance_report import table

    reproduced, note = log_replay(run.run_id, lambda: ledger, run) if run.root else (None, "")
    found = card(run, reproduced)
    if note:
        found = found._replace(notes=(*found.notes, note))
    print()
    print(table(found), end="")
    return bool(found.overall_pass)
