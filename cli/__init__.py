"""The ``benchledger`` command line: one parser built from the command groups, one error map.

Each command group (``cli.ledger``, ``cli.run``, ...) registers its own subcommands; a
group's module is imported only when one of its commands runs (``GROUPS``). This module
owns the only mapping from errors to one stderr line and an exit code: every refusal is a
``BenchledgerError`` and carries its own (``exit_code``).
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import sys
from collections.abc import Callable, Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import Final

from benchledger.cli.common import (
    EXIT_OK,
    EXIT_UNUSABLE,
    UsageError,
    inert_output,
)
from benchledger.harness import interrupt
from benchledger.harness import settings as settings_module
from benchledger.harness.settings import Settings
from benchledger.ledger.bundle import FORMAT
from benchledger.ledger.chain import EVENT_DOMAIN
from benchledger.ledger.errors import BenchledgerError
from benchledger.protocols.errors import InvalidInput

__all__ = ["GROUPS", "build_parser", "main", "parser_for"]

# Each command group's module and its commands, each with the line ``--help`` shows for
# it, in the order ``--help`` lists them. A group's module is imported only when one of
# its commands runs (its module-level imports are what that command needs): run, replay,
# bench, selftest and protocols load the harness, the MCP stack or DuckDB, keys
# cryptography, which the everyday commands never need (tests/test_startup.py).
GROUPS: Final[tuple[tuple[str, tuple[tuple[str, str], ...]], ...]] = (
    (
        "benchledger.cli.ledger",
        (
            ("verify", "check a run or bundle has not been altered"),
            ("export", "write a run as a bundle"),
            ("import", "add a bundle's run to a ledger that does not hold it"),
            ("runs", "list runs, newest first"),
            ("log", "print a run's events (after the run verified)"),
        ),
    ),
    ("benchledger.cli.run", (("run", "run the benchmark; every call goes into the ledger"),)),
    (
        "benchledger.cli.regrade",
        (
            (
                "regrade",
                "judge a run's recorded answers again, as a new run (no platform or agent call)",
            ),
            ("judge", "a judge's false accepts and rejects on a calibration set (judge calibrate)"),
        ),
    ),
    (
        "benchledger.cli.queue",
        (
            ("worker", "work queued runs' units, on any machine (run --queue)"),
            ("queue", "queued runs' jobs, their states and workers; cancel a run's"),
        ),
    ),
    (
        "benchledger.cli.protocols",
        (("protocols", "validate, hash, list and generate protocol sets"),),
    ),
    ("benchledger.cli.platform", (("platform", "the embedded reference memory platform"),)),
    (
        "benchledger.cli.reports",
        (
            ("report", "a run's scorecard (several runs merge as passes)"),
            ("compare", "runs of one protocol set side by side, paired with a baseline"),
            ("gate", "fail CI when a candidate run regresses against a baseline"),
            ("audit", "trace a metric to its decision and evidence events"),
            ("import-peer", "a peer platform's results as sealed runs"),
        ),
    ),
    (
        "benchledger.cli.study",
        (("study", "a peer study's published tables, re-derived from its arms"),),
    ),
    (
        "benchledger.cli.replay",
        (("replay", "re-derive or re-execute a recorded run and compare with the record"),),
    ),
    ("benchledger.cli.bench", (("bench", "performance benchmarks (ratios vs raw baselines)"),)),
    ("benchledger.cli.keys", (("keys", "Ed25519 keys that sign run seals"),)),
    ("benchledger.cli.seal", (("seal", "seal a finished run, signing it with --sign-key"),)),
    ("benchledger.cli.prereg", (("prereg", "pre-register the gate a run will be judged by"),)),
    ("benchledger.cli.selftest", (("selftest", "prove what benchledger survives"),)),
    (
        "benchledger.cli.extensions",
        (
            ("platforms", "the installed platforms, and where each came from"),
            ("suites", "the installed suites, and where each came from"),
            ("models", "the installed model providers, and where each came from"),
            ("ledgers", "the installed ledger backends, and where each came from"),
        ),
    ),
)


def version_line() -> str:
    """``benchledger --version``: the installed package's version and the formats it writes."""
    try:
        package = version("benchledger")
    except PackageNotFoundError:  # a source tree on sys.path that was never installed
        package = "(not installed)"
    # The event hash domain names the ledger format version ("benchledger:event:v1").
    ledger_format = EVENT_DOMAIN.rstrip(b"\0").decode().rsplit(":", 1)[1]
    return f"benchledger {package} (ledger format {ledger_format}, bundles {FORMAT})"


def _register(module: str, sub: argparse._SubParsersAction) -> None:
    """Import a command group's module and add its subcommands to ``sub``."""
    register: Callable[[argparse._SubParsersAction], None] = importlib.import_module(
        module
    ).register
    register(sub)


def command_of(argv: Sequence[str]) -> str | None:
    """The command ``argv`` names: its first word that is not an option (the top-level
    options, ``--help`` and ``--version``, take no value)."""
    return next((a for a in argv if not a.startswith("-")), None)


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser, every group's options (tests check documented options exist)."""
    return _parser(None, full=True)


def parser_for(command: str | None) -> argparse.ArgumentParser:
    """The parser ``benchledger COMMAND ...`` needs: only COMMAND's group is imported and adds
    its options; every other command is there by name and help line, which is all
    ``--help``, ``--version`` and an unknown command's usage error show."""
    return _parser(command, full=False)


class _Parser(argparse.ArgumentParser):
    """argparse's parser with two things users expect: options may come between a
    command's positionals (``log RUN --ledger L STREAM``), and a command's unknown option
    is one line naming the command, the closest option (difflib) and the command's usage,
    not the top-level usage."""

    _intermixing = False

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        if self._intermixing or self._subparsers is not None:  # commands of commands: as is
            return super().parse_known_args(args, namespace)
        self._intermixing = True  # the intermixed parse calls this method again
        try:
            ns, extras = super().parse_known_intermixed_args(args, namespace)
        finally:
            self._intermixing = False
        if extras and self.prog != _PROG:
            raise UsageError(self._unrecognized(extras))
        return ns, extras

    def _unrecognized(self, extras: list[str]) -> str:
        word = next((w for w in extras if w.startswith("-")), extras[0])
        known = [o for o in self._option_string_actions if o.startswith("--")]
        close = difflib.get_close_matches(word.split("=", 1)[0], known, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        what = "option" if word.startswith("-") else "argument"
        fmt = self._get_formatter()
        words = [f"{fmt._format_args(a, a.dest)}" for a in self._get_positional_actions()]
        usage = " ".join([self.prog, "[options]", *words])
        command = self.prog.removeprefix(_PROG + " ")
        return f"{command}: unrecognized {what} {word!r}{hint}; usage: {usage} (--help for more)"


_PROG: Final = "benchledger"


def _parser(command: str | None, *, full: bool) -> argparse.ArgumentParser:
    parser = _Parser(
        prog=_PROG,
        description="Benchmark agent-memory platforms on a tamper-evident ledger.",
    )
    parser.add_argument("--version", action="version", version=version_line())
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module, commands in GROUPS:
        if full or any(command == name for name, _ in commands):
            _register(module, sub)
        else:
            for name, line in commands:
                sub.add_parser(name, help=line)
    return parser


def main(argv: Sequence[str] | None = None, settings: Settings | None = None) -> int:
    """Entry point: run one command, map errors to one line and an exit code.

    ``settings`` are the command's (default: read from the environment, here, once); a
    caller running commands in-process (the reliability selftest) passes its own.
    """
    # Every line any command prints, its errors' included, goes out inert (ledger/inert.py).
    with inert_output():
        return _main(argv, settings)


def _main(argv: Sequence[str] | None, settings: Settings | None) -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    try:
        # Inside the map: an option's ``type=`` check (cli.common.whole, number) raises
        # UsageError, one line like every other unusable input; and Ctrl-C while a heavy
        # group imports is "interrupted" too.
        parser = parser_for(command_of(words))
        args = parser.parse_args(words)
        args.cli_main = main  # for commands that re-enter the command line (selftest)
        # The only read of the settings: every command takes them from ``args.settings``.
        args.settings = settings if settings is not None else settings_module.load()
        func: Callable[[argparse.Namespace], int] = args.func
        return func(args)
    except InvalidInput as exc:
        for problem in exc.problems:
            print(f"benchledger: error: {problem}", file=sys.stderr)
        return EXIT_UNUSABLE
    except BenchledgerError as exc:
        # Every refusal of every layer carries its exit code: unusable input (2) is an
        # "error:", a failed check (1) says what failed.
        if exc.exit_code == EXIT_UNUSABLE:
            print(f"benchledger: error: {exc}", file=sys.stderr)
        else:
            print(f"benchledger: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("benchledger: interrupted", file=sys.stderr)
        code = interrupt.exit_code()  # 130 after Ctrl-C, 143 after a SIGTERM a handler saw
        interrupt.clear()
        return code
    except BrokenPipeError:
        return EXIT_OK
