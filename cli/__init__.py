"""The ``benchledger`` command line: one parser built from the command groups, one error map.

Each command group (``cli.ledger``, ``cli.run``, ...) registers its own subcommands; this
module owns the only mapping from errors to one stderr line and an exit code.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from cli import bench, platform, protocols, replay, reports, run, selftest, trust
from cli import ledger as ledger_commands
from cli.common import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_UNUSABLE, UsageError
from ledger import LedgerError, UnknownRun, UnusableInput
from protocols.errors import InvalidInput

__all__ = ["build_parser", "main"]

# In the order ``--help`` lists them.
_GROUPS: tuple[Callable[[argparse._SubParsersAction], None], ...] = (
    ledger_commands.register,
    run.register,
    protocols.register,
    platform.register,
    reports.register,
    replay.register,
    bench.register,
    trust.register,
    selftest.register,
)


def version_line() -> str:
    """``benchledger --version``: the installed package's version and the formats it writes."""
    from importlib.metadata import PackageNotFoundError, version

    from ledger.bundle import FORMAT
    from ledger.chain import EVENT_DOMAIN

    try:
        package = version("benchledger")
    except PackageNotFoundError:  # a source tree on sys.path that was never installed
        package = "(not installed)"
    # The event hash domain names the ledger format version ("benchledger:event:v1").
    ledger_format = EVENT_DOMAIN.rstrip(b"\0").decode().rsplit(":", 1)[1]
    return f"benchledger {package} (ledger format {ledger_format}, bundles {FORMAT})"


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser (tests use it to check documented options exist)."""
    parser = argparse.ArgumentParser(
        prog="benchledger",
        description="Benchmark agent-memory platforms on a tamper-evident ledger.",
    )
    parser.add_argument("--version", action="version", version=version_line())
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for register in _GROUPS:
        register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: run one command, map errors to one line and an exit code."""
    parser = build_parser()
    try:
        # Inside the map: an option's ``type=`` check (cli.common.whole, number) raises
        # UsageError, one line like every other unusable input.
        args = parser.parse_args(argv)
        args.cli_main = main  # for commands that re-enter the command line (selftest)
        func: Callable[[argparse.Namespace], int] = args.func
        return func(args)
    except InvalidInput as exc:
        for problem in exc.problems:
            print(f"benchledger: error: {problem}", file=sys.stderr)
        return EXIT_UNUSABLE
    except (UnusableInput, UnknownRun, UsageError) as exc:
        print(f"benchledger: error: {exc}", file=sys.stderr)
        return EXIT_UNUSABLE
    except LedgerError as exc:
        print(f"benchledger: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print("benchledger: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return EXIT_OK
