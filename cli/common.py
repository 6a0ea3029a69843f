"""What every command group shares: exit codes, the usage error, the ledger option, output."""

from __future__ import annotations

import argparse
import sys

from harness import settings
from ledger import Ledger, open_store
from ledger.bundle import atomic_output

EXIT_OK, EXIT_FAILED, EXIT_UNUSABLE, EXIT_INTERRUPTED = 0, 1, 2, 130


class UsageError(Exception):
    """Unusable command-line input: one line, exit 2."""


def ledger_arg(p: argparse.ArgumentParser) -> None:
    """Add ``--ledger PATH|URL`` (default from settings) to a command."""
    p.add_argument(
        "--ledger",
        metavar="PATH|URL",
        default=None,
        help="SQLite file or postgresql:// URL (default: $BENCHLEDGER_LEDGER or "
        f"{settings.DEFAULT_LEDGER})",
    )


def open_ledger(args: argparse.Namespace, *, create: bool) -> Ledger:
    """The ledger named by ``--ledger``, else by the settings."""
    location = args.ledger or settings.load().ledger
    return Ledger(open_store(location, create=create))


def write_output(text: str, output: str | None) -> None:
    """Write ``text`` to stdout, or atomically to the file ``output`` and say so."""
    if not output:
        sys.stdout.write(text)
        return
    with atomic_output(output) as fh:
        fh.write(text.encode())
    print(f"wrote {output}")
