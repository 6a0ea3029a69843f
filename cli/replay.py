"""``benchledger replay RUN|BUNDLE --level rederive|full`` and ``benchledger replay check DIR``.

Exit codes: 0 everything matched; 1 a mismatch (the first one printed as a diff, with
the count of all) or an input that does not verify; 2 an input that cannot be used.
"""

from __future__ import annotations

import argparse
import json

from benchledger.cli.common import EXIT_FAILED, EXIT_OK, UsageError, ledger_arg, open_ledger
from benchledger.replay.check import check_dir
from benchledger.replay.findings import LEVELS, TOOLS
from benchledger.replay.levels import replay

CHECK = "check"


def cmd_replay(args: argparse.Namespace) -> int:
    """Replay one run or bundle at a level, or check every bundle of a folder."""
    if args.target == CHECK and args.dir is not None:
        return _check(args)
    if args.dir is not None:
        raise UsageError(f"replay takes one RUN or BUNDLE (got {args.target!r} and {args.dir!r})")
    if args.target == CHECK:
        raise UsageError("replay check needs a folder: benchledger replay check DIR")
    report = replay(
        args.target,
        level=args.level,
        tools=args.tools,
        protocols=args.protocols,
        ledger=lambda: open_ledger(args, create=False),
    )
    if args.format == "json":
        print(json.dumps(report.as_json(), indent=2, default=str))
    else:
        print("\n".join(report.lines()))
    return report.status


def _check(args: argparse.Namespace) -> int:
    checked = check_dir(args.dir, level=args.level, protocols=args.protocols)
    for c in checked:
        print(c.line())
    bad = sum(not c.ok for c in checked)
    print(f"{len(checked) - bad} of {len(checked)} bundles ok" + (f", {bad} failed" if bad else ""))
    return EXIT_FAILED if bad else EXIT_OK


def register(sub: argparse._SubParsersAction) -> None:
    """Add replay (and its ``check DIR`` form)."""
    p = sub.add_parser(
        "replay",
        help="re-derive or re-execute a recorded run and compare with the record",
        description="Verify a run, then re-derive its decisions, metrics and trace hashes "
        "(--level rederive) or re-execute its agent loop from the log (--level full). "
        "`benchledger replay check DIR` verifies and re-derives every bundle in DIR.",
    )
    p.add_argument("target", metavar="RUN|BUNDLE|check", help="a run id, a bundle file, or check")
    p.add_argument("dir", nargs="?", metavar="DIR", help="with check: the folder of bundles")
    p.add_argument("--level", choices=LEVELS, default="rederive", help="(default: rederive)")
    p.add_argument(
        "--tools",
        choices=TOOLS,
        default="log",
        help="full replay: tool results from the log (default) or a fresh embedded platform",
    )
    p.add_argument(
        "--protocols",
        metavar="PATH",
        help="the run's protocol folder (default: the recorded one, or the committed set "
        "when its hash matches)",
    )
    p.add_argument("--format", choices=["text", "json"], default="text")
    ledger_arg(p)
    p.set_defaults(func=cmd_replay)
