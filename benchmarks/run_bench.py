"""``benchledger bench run``: the default suite with a fake model, concurrency 1 vs N.

The fake model answers like the scripted agent but takes ``delay`` seconds per call,
standing in for a model API. The same suite runs at ``--concurrency 1`` and at
``--concurrency N`` (each into its own temporary ledger, each on fresh embedded
platforms), and the speed-up is the ratio of the wall times.
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import time
from typing import Any

from harness.driver import RunDriver
from harness.record import RunConfig
from ledger import Ledger, open_store
from projections.fold import fold
from projections.lifecycle import LifecycleFold, scorecard
from projections.source import from_ledger


def _one(protocols: str, delay: float, concurrency: int, folder: str) -> dict[str, Any]:
    ledger = Ledger(open_store(os.path.join(folder, f"c{concurrency}.sqlite")))
    cfg = RunConfig(
        protocols_path=protocols,
        agent=f"fake:{delay}",
        concurrency=concurrency,
        run_id=f"bench-c{concurrency}",
    )
    start = time.perf_counter()
    run_id = asyncio.run(RunDriver(ledger, cfg).execute()).run_id
    wall = time.perf_counter() - start
    card = scorecard([fold(LifecycleFold(), from_ledger(ledger, run_id).events)])
    calls = sum(1 for e, _ in from_ledger(ledger, run_id).events if type(e).__name__ == "ModelCall")
    ledger.store.close()
    return {
        "concurrency": concurrency,
        "wall_s": round(wall, 2),
        "model_calls": calls,
        "units": len(card.units),
        "full_lifecycle": card.metrics["full_lifecycle"].num,
    }


def run_bench(*, protocols: str, delay: float, concurrency: int, as_json: bool) -> int:
    """Run the suite at concurrency 1 and ``concurrency``; print wall times and speed-up."""
    from harness.logging import quiet_logs

    quiet_logs()
    with tempfile.TemporaryDirectory(prefix="benchledger-bench-") as folder:
        serial = _one(protocols, delay, 1, folder)
        parallel = _one(protocols, delay, concurrency, folder)
    speedup = serial["wall_s"] / parallel["wall_s"] if parallel["wall_s"] else 0.0
    report = {
        "delay_s": delay,
        "serial": serial,
        "parallel": parallel,
        "speedup": round(speedup, 2),
    }
    if as_json:
        print(json.dumps(report))
    else:
        print(
            f"fake model, {delay:g}s per call, {serial['units']} units, "
            f"{serial['model_calls']} model calls per run"
        )
        print(f"  --concurrency 1   {serial['wall_s']:>8.2f} s")
        print(f"  --concurrency {concurrency:<3} {parallel['wall_s']:>8.2f} s")
        print(f"  speed-up          {report['speedup']:>8.2f}x")
    return 0 if serial["full_lifecycle"] == parallel["full_lifecycle"] else 1
