"""What every command group shares: exit codes, the usage error, the ledger option, output."""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any, ClassVar, TextIO

from benchledger.harness import settings
from benchledger.ledger import Ledger, open_store
from benchledger.ledger.bundle import atomic_output
from benchledger.ledger.command_line import command_line as command_line  # for every command
from benchledger.ledger.errors import BenchledgerError
from benchledger.ledger.inert import inert
from benchledger.ledgers import new_or_existing

EXIT_OK, EXIT_FAILED, EXIT_UNUSABLE, EXIT_INTERRUPTED = 0, 1, 2, 130


class UsageError(BenchledgerError):
    """Unusable command-line input: one line, exit 2."""

    exit_code: ClassVar[int] = EXIT_UNUSABLE


class CommandFailed(BenchledgerError):
    """A command failed for the reason it names (``main`` prints it as one line): exit 1."""

    exit_code: ClassVar[int] = EXIT_FAILED


def whole(option: str, *, at_least: int = 1) -> Callable[[str], int]:
    """An argparse ``type=``: the text as a whole number >= ``at_least``, else UsageError.

    UsageError, not argparse's own error, so the answer is the usual one line naming the
    option (``main`` parses inside its error map), not the usage text.
    """

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise UsageError(f"{option} must be a whole number, not {text!r}") from None
        if value < at_least:
            raise UsageError(f"{option} must be at least {at_least}, not {value}")
        return value

    return parse


def number(
    option: str, *, at_least: float = 0.0, at_most: float | None = None, above: bool = False
) -> Callable[[str], float]:
    """An argparse ``type=``: the text as a finite number in range, else UsageError (one line).

    ``above`` excludes ``at_least`` itself. NaN and infinity are refused: they pass every
    ``<`` test unnoticed, and a wait of ``inf`` seconds is a hang.
    """

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise UsageError(f"{option} must be a number, not {text!r}") from None
        if not math.isfinite(value):
            raise UsageError(f"{option} must be a finite number, not {text!r}")
        low = value <= at_least if above else value < at_least
        if low or (at_most is not None and value > at_most):
            if at_most is not None:
                bound = f"between {at_least:g} and {at_most:g}"
            else:
                bound = f"more than {at_least:g}" if above else f"at least {at_least:g}"
            raise UsageError(f"{option} must be {bound}, not {text}")
        return value

    return parse


def ledger_arg(p: argparse.ArgumentParser) -> None:
    """Add ``--ledger PATH|URL`` (default from settings) to a command."""
    p.add_argument(
        "--ledger",
        metavar="PATH|URL",
        default=None,
        help="SQLite file or postgresql:// URL (default: $BENCHLEDGER_LEDGER or "
        f"{settings.DEFAULT_LEDGER})",
    )


def open_ledger(args: argparse.Namespace, *, create: bool, read_only: bool | None = None) -> Ledger:
    """The ledger named by ``--ledger``, else by the settings (``args.settings``, ``main``'s).

    A ledger opened without ``create`` is read-only unless ``read_only=False`` says the
    command writes to an existing ledger: reading never needs write access.
    """
    location = args.ledger or args.settings.ledger
    ro = not create if read_only is None else read_only
    return Ledger(open_store(location, create=create, read_only=ro))


def new_or_existing_ledger(args: argparse.Namespace) -> contextlib.AbstractContextManager[Ledger]:
    """The ledger ``--ledger`` names (else the settings'), created if missing, for a command
    that adds a run; a ledger file this made is removed again when the command fails before
    any run is in it (nothing written)."""
    return new_or_existing(args.ledger or args.settings.ledger)


def check_output(path: str) -> None:
    """UsageError now, before any work, when ``path`` cannot be an output file."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise UsageError(f"{path}: is a directory; give the name of a file to write")
    if not os.path.isdir(folder):
        raise UsageError(f"{path}: directory {folder} does not exist")


def write_output(text: str, output: str | None) -> None:
    """Write ``text`` to stdout, or atomically to the file ``output`` and say so.

    A file gets inert text too (an HTML page opened in a terminal, a Markdown table pasted
    into one): escaping keeps HTML HTML and JSON JSON, its escapes decoding to the same text.
    """
    if not output:
        sys.stdout.write(text)
        return
    with atomic_output(output) as fh:
        fh.write(inert(text).encode())
    print(f"wrote {output}")


class InertStream:
    """stdout or stderr as every command writes to it: each string made inert first
    (ledger/inert.py), so no command can print a bundle's escape sequence raw. ``raw`` is
    the stream under it, for the few control sequences that are our own."""

    def __init__(self, raw: TextIO) -> None:
        self.raw = raw

    def write(self, text: str) -> int:
        self.raw.write(inert(text))
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:  # flush, isatty, encoding, fileno, ...
        return getattr(self.raw, name)


@contextlib.contextmanager
def inert_output() -> Iterator[None]:
    """Within it, sys.stdout and sys.stderr write only inert text (a nested call is a no-op)."""
    out, err = sys.stdout, sys.stderr
    if isinstance(out, InertStream):
        yield
        return
    sys.stdout, sys.stderr = InertStream(out), InertStream(err)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = out, err


def raw(stream: TextIO | InertStream) -> TextIO:
    """The stream under an ``InertStream`` (``stream`` itself otherwise): for our own
    terminal control only (clearing a watched screen, a progress bar), never for data."""
    return stream.raw if isinstance(stream, InertStream) else stream
