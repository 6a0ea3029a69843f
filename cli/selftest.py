"""``selftest reliability``: kill sweep, platform and storage faults, bad inputs, load."""

from __future__ import annotations

import argparse
import os
import secrets
import sys

from benchledger.benchmarks.reliability import SCENARIOS, Config, run, table
from benchledger.cli.common import EXIT_FAILED, EXIT_OK, UsageError
from benchledger.harness.logging import quiet_logs


def cmd_selftest_reliability(args: argparse.Namespace) -> int:
    """Run the reliability scenarios and print what was tried and what survived."""
    only = frozenset(args.only or ())
    unknown = sorted(only - set(SCENARIOS))
    if unknown:
        raise UsageError(f"--only {', '.join(unknown)}: the scenarios are {', '.join(SCENARIOS)}")
    if args.kill_points is not None and args.kill_points < 1:
        raise UsageError("--kill-points must be at least 1")
    if args.interrupt_points is not None and args.interrupt_points < 1:
        raise UsageError("--interrupt-points must be at least 1")
    seed = args.seed if args.seed is not None else secrets.randbits(31)
    mode = "quick" if args.quick else "full"
    print(f"selftest reliability ({mode}): seed {seed} (repeat with --seed {seed})", flush=True)

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    quiet_logs()
    cfg = Config(
        quick=args.quick,
        seed=seed,
        workdir=args.keep or "",
        postgres=args.postgres if args.postgres is not None else args.settings.test_postgres,
        only=only,
        main=args.cli_main,  # the caller's entry point: importing it here would be a cycle
        log=log,
        kill_points=args.kill_points or 0,
        interrupt_points=args.interrupt_points or 0,
        settings=args.settings,
        # What the scenarios' child commands start with: this command's environment.
        environ=dict(os.environ),
    )
    rows = run(cfg)
    sys.stdout.write(table(rows))
    failed = [r.scenario for r in rows if r.ok is False]
    if failed:
        print(f"selftest reliability: FAILED: {', '.join(failed)}")
        return EXIT_FAILED
    skipped = [r.scenario for r in rows if r.ok is None]
    note = f" ({', '.join(skipped)} skipped)" if skipped else ""
    print(f"selftest reliability: passed{note}")
    return EXIT_OK


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``selftest reliability``."""
    group = sub.add_parser("selftest", help="prove what benchledger survives")
    gsub = group.add_subparsers(dest="selftest", required=True, metavar="SUITE")
    p = gsub.add_parser(
        "reliability",
        help="kill and interrupt sweeps, platform faults, disk full, PostgreSQL killed, bad "
        "inputs, resource bounds, load",
        description="Exit 0 when every scenario passed (a skipped one, e.g. PostgreSQL when "
        "none is named, does not fail), 1 otherwise. docs/reliability.md has the full table.",
    )
    p.add_argument(
        "--quick", action="store_true", help="small runs (CI: a few minutes); default: full"
    )
    p.add_argument("--seed", type=int, help="fault-proxy seed (printed; default: random)")
    p.add_argument(
        "--only", action="append", metavar="SCENARIO", help="run only this scenario (repeatable)"
    )
    p.add_argument(
        "--kill-points", type=int, metavar="N", help="kill sweep points (3 quick, 20 full)"
    )
    p.add_argument(
        "--interrupt-points",
        type=int,
        metavar="N",
        help="interrupt sweep points, SIGINT and SIGTERM alternately (4 quick, 30 full)",
    )
    p.add_argument(
        "--postgres",
        metavar="URL",
        help="the PostgreSQL server for the killed-connection scenario "
        "(default $BENCHLEDGER_TEST_POSTGRES; empty: skipped)",
    )
    p.add_argument("--keep", metavar="DIR", help="work in DIR and keep it (default: a temp dir)")
    p.set_defaults(func=cmd_selftest_reliability)
