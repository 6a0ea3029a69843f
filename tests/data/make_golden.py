"""Rebuild the golden run bundles: ``python -m tests.data.make_golden``.

Fixed run id, fixed seed and a counter clock, so the bytes (and every hash) only
change when the event encoding or hashing changes — which then shows up as a diff.
``golden-run.jsonl`` is the run in event format 1 (written before format 2 existed and
still verifiable as it is); ``golden-run-v2.jsonl`` is the same run in format 2, the
format new runs are written in.
"""

from __future__ import annotations

import os
import sys
import tempfile

from benchledger.ledger import Ledger, open_store
from benchledger.ledger.bundle import export_redacted, export_run
from benchledger.ledger.redaction import Selection
from tests.sample import build_run, counter_clock

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN = os.path.join(HERE, "golden-run.jsonl")
GOLDEN_V2 = os.path.join(HERE, "golden-run-v2.jsonl")
RUN_ID = "golden-0001"


def build(path: str, fmt: int = 1, *, withhold: Selection | None = None) -> str:
    """Write the golden bundle in event format ``fmt`` to ``path`` (redacted by
    ``withhold`` when given); return its run root."""
    with tempfile.TemporaryDirectory() as d:
        led = Ledger(
            open_store(os.path.join(d, "l.sqlite")), clock=counter_clock(), event_format=fmt
        )
        root = build_run(led, RUN_ID, units=3, episodes=1, seed=2026)
        if withhold is None:
            export_run(led, RUN_ID, path)
        else:
            export_redacted(led, RUN_ID, path, withhold)
        led.store.close()
    return root


if __name__ == "__main__":
    if len(sys.argv) > 1:
        print(build(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 2))
    else:
        print(build(GOLDEN, 1), build(GOLDEN_V2, 2))
