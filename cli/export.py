"""Redacted export: ``export RUN --withhold ...``, and which shown events copy withheld text."""

from __future__ import annotations

import argparse
import sys

from benchledger.cli.common import EXIT_OK, UsageError
from benchledger.ledger import Ledger
from benchledger.ledger.bundle import export_redacted as write_redacted
from benchledger.ledger.bundle import find_copies
from benchledger.ledger.events import WITHHOLDABLE
from benchledger.ledger.redaction import COPY_MIN, Copy, Selection

COPIES_SHOWN = 20  # listed one a line; the rest as "and N more"


def export_redacted(ledger: Ledger, args: argparse.Namespace) -> int:
    """``export RUN --withhold KIND[,KIND] --withhold-stream GLOB``: a redacted bundle."""
    kinds = frozenset(k.strip() for spec in args.withhold or () for k in spec.split(",") if k)
    try:
        selection = Selection(kinds, tuple(args.withhold_stream or ()))
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    asked = selection
    selection, copies = find_copies(ledger, args.run, selection, args.withhold_copies)
    _name_copies(copies, asked, selection)  # before the file exists
    n, withheld = write_redacted(ledger, args.run, args.output, selection)
    root = ledger.run_info(args.run).root
    counts = ", ".join(f"{c} {k}" for k, c in sorted(withheld.items())) or "none matched"
    print(f"exported run {args.run}: {n} lines to {args.output} (root {root})")
    print(f"withheld {sum(withheld.values())} events ({counts}); each line keeps its digest")
    if ledger.event_format(args.run) == 1:
        print(
            f"note: run {args.run} is in event format 1: no hash binds a placeholder's kind, "
            "time or refs, so verify calls them UNBOUND; runs recorded now are format 2"
        )
    return EXIT_OK


def _name_copies(copies: list[Copy], asked: Selection, used: Selection) -> None:
    """Say on stderr which shown events hold copies of withheld text, and what to do."""
    added = len(used.streams) - len(asked.streams)
    if added:
        print(
            f"--withhold-copies: also withholding the evidence of {added} streams that held "
            "copies of withheld text (a stream rule each in the bundle header)",
            file=sys.stderr,
        )
    if not copies:
        return
    print(
        f"warning: {len(copies)} shown events hold copies of withheld text "
        f"(passages of at least {COPY_MIN} bytes):",
        file=sys.stderr,
    )
    for c in copies[:COPIES_SHOWN]:
        print(f"  {c.stream} seq {c.seq} {c.kind}: {c.passages} passages", file=sys.stderr)
    if len(copies) > COPIES_SHOWN:
        print(f"  and {len(copies) - COPIES_SHOWN} more", file=sys.stderr)
    movable = sum(c.kind in WITHHOLDABLE for c in copies)
    if movable:
        print(
            f"  {movable} of them are {'/'.join(WITHHOLDABLE)} events: add --withhold-copies "
            "to withhold them (their streams' evidence) as well",
            file=sys.stderr,
        )
    if movable < len(copies):
        print(
            f"  {len(copies) - movable} are of kinds never withheld (reports decide from them): "
            "the bundle shows that text; if it must stay private, do not publish this run",
            file=sys.stderr,
        )
