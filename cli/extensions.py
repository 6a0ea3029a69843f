"""``platforms``, ``suites``, ``models``, ``ledgers``: what is installed of each kind, and
where it came from.

Each lists its registry (``harness.platforms.platform.PLATFORMS``,
``projections.suites.SUITES``, ``harness.agents.provider.MODELS``,
``ledger.store.LEDGERS``): benchledger's own and every installed distribution's entry
point, with its origin ("benchledger" or "DIST VERSION") and the object it names. An entry
that cannot be loaded is listed all the same, saying why; using it is refused in one line.
An entry point named like one of benchledger's own is listed as shadowed (never loaded).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from benchledger.cli.common import EXIT_OK
from benchledger.ledger.errors import UnusableInput
from benchledger.ledger.registry import Registry
from benchledger.projections.sheet import align


def _rows(registry: Registry[Any], about: Callable[[Any], str]) -> list[dict[str, str]]:
    """One row per registered name: name, origin, where, and what it is (or why it is broken)."""
    rows = []
    for entry in registry.entries():
        row = {"name": entry.name, "origin": entry.origin, "where": entry.where}
        try:
            row["about"] = about(registry.lookup(entry.name, quiet=True))
        except UnusableInput as exc:  # a broken plugin: listed, with why
            row["about"], row["error"] = "", exc.problem
        rows.append(row)
    for entry in registry.shadowed():  # never loaded: benchledger's own of its name wins
        rows.append({"name": entry.name, "origin": entry.origin, "where": entry.where,
                     "about": "", "shadowed": f"by benchledger's own {entry.name}"})  # fmt: skip
    return rows


def _show(rows: list[dict[str, str]], as_json: bool) -> int:
    if as_json:
        print(json.dumps(rows, indent=2))
        return EXIT_OK
    grid = [["NAME", "ORIGIN", "WHERE", "ABOUT"]]
    for r in rows:
        about = f"BROKEN: {r['error']}" if "error" in r else r["about"]
        about = f"SHADOWED {r['shadowed']}: not used" if "shadowed" in r else about
        grid.append([r["name"], r["origin"], r["where"], about])
    print("\n".join(align(grid)))
    return EXIT_OK


def cmd_platforms(args: argparse.Namespace) -> int:
    """List every platform ``--platform`` can name: benchledger's and installed plugins'."""
    from benchledger.harness.platforms.platform import PLATFORMS

    return _show(_rows(PLATFORMS, lambda p: p.summary), args.json)


def cmd_suites(args: argparse.Namespace) -> int:
    """List the installed suites."""
    from benchledger.projections.suites import SUITES

    def about(p: Any) -> str:
        option = f" [{p.items.flag} {p.items.metavar}]" if p.items is not None else ""
        return f"{p.summary}{option}".strip()

    return _show(_rows(SUITES, about), args.json)


def cmd_models(args: argparse.Namespace) -> int:
    """List the installed model providers (``--agent NAME[:MODEL]``)."""
    from benchledger.harness.agents.provider import MODELS

    def about(p: Any) -> str:
        return f"{p.usage}: {p.summary}" if p.usage else p.summary

    return _show(_rows(MODELS, about), args.json)


def cmd_ledgers(args: argparse.Namespace) -> int:
    """List the installed ledger backends (a path: sqlite; a URL: its scheme's)."""
    from benchledger.ledger.store import LEDGERS

    def about(backend: Any) -> str:
        doc = (backend.__doc__ or "").strip().splitlines()  # its contract line
        return doc[0] if doc else ""

    return _show(_rows(LEDGERS, about), args.json)


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``platforms``, ``suites``, ``models`` and ``ledgers``."""
    for name, func, what in (
        ("platforms", cmd_platforms, "the installed platforms, and where each came from"),
        ("suites", cmd_suites, "the installed suites, and where each came from"),
        ("models", cmd_models, "the installed model providers, and where each came from"),
        ("ledgers", cmd_ledgers, "the installed ledger backends, and where each came from"),
    ):
        p = sub.add_parser(name, help=what)
        p.add_argument("--json", action="store_true", help="as JSON: one object per entry")
        p.set_defaults(func=func)
