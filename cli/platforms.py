"""``platforms``: the installed platforms, one line each, with where each came from."""

from __future__ import annotations

import argparse
import json

from benchledger.cli.common import EXIT_OK
from benchledger.harness.platforms.platform import PLATFORMS
from benchledger.ledger.registry import BrokenPlugin


def _row(name: str, origin: str, where: str) -> dict[str, str]:
    """One platform as listed: name, origin, module path, and what it is (or why it cannot
    be loaded: a plugin that is installed but broken is listed, with its problem)."""
    try:
        summary = PLATFORMS.lookup(name).summary
        problem = ""
    except BrokenPlugin as exc:
        summary, problem = "", str(exc)
    return {"name": name, "origin": origin, "where": where, "summary": summary,
            "problem": problem}  # fmt: skip


def cmd_platforms(args: argparse.Namespace) -> int:
    """List every platform ``--platform`` can name: benchledger's and installed plugins'."""
    rows = [_row(e.name, e.origin, e.where) for e in PLATFORMS.entries()]
    if args.json:
        print(json.dumps(rows, indent=2))
        return EXIT_OK
    width = max((len(r["name"]) for r in rows), default=0)
    origin = max((len(r["origin"]) for r in rows), default=0)
    for r in rows:
        said = f"cannot be loaded: {r['problem']}" if r["problem"] else r["summary"]
        print(f"{r['name']:<{width}}  {r['origin']:<{origin}}  {said}".rstrip())
    return EXIT_OK


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``platforms``."""
    p = sub.add_parser("platforms", help="list the installed platforms and where each came from")
    p.add_argument("--json", action="store_true", help="one JSON list of the platforms")
    p.set_defaults(func=cmd_platforms)
