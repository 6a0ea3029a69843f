"""Redacted export: ``export RUN --withhold ...``, and which shown events copy withheld text."""

from __future__ import annotations

import sys

from benchledger.cli.common import EXIT_OK
from benchledger.ledger.events import WITHHOLDABLE
from benchledger.ledger.redaction import COPY_MIN, Copy, Selection
from benchledger.reading import Exported

COPIES_SHOWN = 20  # listed one a line; the rest as "and N more"


def exported_redacted(done: Exported) -> int:
    """``export RUN --withhold KIND[,KIND] --withhold-stream GLOB``: what the redacted
    bundle holds, and (on stderr) which shown events copy withheld text."""
    assert done.asked is not None and done.selection is not None
    _name_copies(list(done.copies), done.asked, done.selection)
    counts = ", ".join(f"{c} {k}" for k, c in sorted(done.withheld.items())) or "none matched"
    print(f"exported run {done.run_id}: {done.written} lines to {done.path} (root {done.root})")
    print(f"withheld {sum(done.withheld.values())} events ({counts}); each line keeps its digest")
    if done.event_format == 1:
        print(
            f"note: run {done.run_id} is in event format 1: no hash binds a placeholder's kind, "
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
