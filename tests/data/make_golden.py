"""Rebuild the golden run bundle: ``python -m tests.data.make_golden``.

Fixed run id, fixed seed and a counter clock, so the bytes (and every hash) only
change when the event encoding or hashing changes — which then shows up as a diff.
"""

from __future__ import annotations

import os
import sys
import tempfile

from ledger import Ledger, open_store
from ledger.bundle import export_run
from tests.sample import build_run, counter_clock

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN = os.path.join(HERE, "golden-run.jsonl")
RUN_ID = "golden-0001"


def build(path: str) -> str:
    """Write the golden bundle to ``path``; return its run root."""
    with tempfile.TemporaryDirectory() as d:
        led = Ledger(open_store(os.path.join(d, "l.sqlite")), clock=counter_clock())
        root = build_run(led, RUN_ID, units=3, episodes=1, seed=2026)
        export_run(led, RUN_ID, path)
        led.store.close()
    return root


if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else GOLDEN
    print(build(out))
