"""``benchledger study``: a peer study's published tables, re-derived from its imported arms.

Every run is read through the door (verified as it is read); the tables are the
projection in ``projections.suites.tasks.study`` over the analysed arms among them.
"""

from __future__ import annotations

import argparse
import sys

from benchledger.cli.authenticity import pubkey_arg, require_trusted, trusted_keys
from benchledger.cli.common import (
    EXIT_OK,
    UsageError,
    check_output,
    ledger_arg,
    open_ledger,
    raw,
    write_output,
)
from benchledger.ledger import Ledger
from benchledger.ledger.events import RunStartedEvent
from benchledger.projections.source import open_run
from benchledger.projections.suites.tasks.study import study_of
from benchledger.projections.suites.tasks.study_render import FORMATS, render

STUDY_SHAPE = "tasks"  # harness.peer.tasks_import.SHAPE: the suite its arms record


def _study_runs(ledger: Ledger) -> list[str]:
    """The ledger's tasks runs, by their headers alone (their events are read verified later)."""
    found = []
    for run_id in sorted(ledger.store.run_ids()):
        header = next((e for e, _ in ledger.events(run_id, run_id)), None)
        if isinstance(header, RunStartedEvent) and header.body.suite == STUDY_SHAPE:
            found.append(run_id)
    return found


def cmd_study(args: argparse.Namespace) -> int:
    """Print the study's tables over the named runs (default: every tasks run in the ledger)."""
    trusted = trusted_keys(args)  # a bad key file: one line, exit 2, first
    if args.output:
        check_output(args.output)
    ledger = open_ledger(args, create=False)
    targets = list(args.runs) or _study_runs(ledger)
    if not targets:
        raise UsageError("the ledger holds no tasks runs: import a study family first "
                         "(benchledger import-peer mcp-data-platform FAMILY)")  # fmt: skip
    runs = []
    for n, target in enumerate(targets, 1):
        run = open_run(target, ledger, require_seal=True, allow_partial=False, trusted=trusted)
        runs.append((run.run_id, require_trusted(run, trusted).events))
        if sys.stderr.isatty():
            # Our own carriage return: written under the inert stream (cli.common.raw).
            print(f"\rread {n}/{len(targets)} runs", end="", file=raw(sys.stderr), flush=True)
    if sys.stderr.isatty():
        print(file=sys.stderr)
    study = study_of(runs)
    if not study.arms:
        raise UsageError(f"none of the {len(targets)} runs is an analysed arm of a study "
                         "family (an arm imported by import-peer, not excluded)")  # fmt: skip
    write_output(render(study, args.format), args.output)
    return EXIT_OK


def register(sub: argparse._SubParsersAction) -> None:
    """Add study."""
    p = sub.add_parser(
        "study",
        help="a peer study's published tables, re-derived from its arms",
        description="The knowledge-pollution report's tables (adoption, controls, mechanism, "
        "delivery, directive contrast, exposure, evaluator writes, contrasts, budget and "
        "harness failures) over the analysed arms among RUN (default: every tasks run in "
        "the ledger); excluded attempt folders are never counted.",
    )
    p.add_argument("runs", nargs="*", metavar="RUN", help="run id or bundle file")
    p.add_argument("--format", choices=FORMATS, default="table")
    p.add_argument("-o", "--output", metavar="FILE")
    pubkey_arg(p, " of every run")
    ledger_arg(p)
    p.set_defaults(func=cmd_study)
