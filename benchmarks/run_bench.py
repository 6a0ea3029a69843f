"""``benchledger bench run``: the suite with a slow model agent, concurrency 1 vs N.

Two model agents stand in for a model API:

- ``fake`` (default): answers like the scripted agent but takes ``delay`` seconds per
  call, on the given protocols (default the committed set, N = 8);
- ``recorded:RUN_DIR``: re-enacts a recorded peer run (the peer's k=5 run: 150 units)
  at its recorded latencies times ``time_scale``, on the peer's protocols and seed pack
  (N = 16). The capture check's poll timeout is scaled alike. Its wall times are also
  given at full scale (wall / scale): an upper bound, since the harness's and the
  platform's own work, which does not shrink with the scale, is divided by it too.

The same suite runs at ``--concurrency 1`` and at ``--concurrency N``, each into its
own temporary ledger, each on fresh embedded platforms; the speed-up is the ratio of
the wall times. The recorded re-enactment runs the platform in a child process.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Any, Final

from benchledger.harness.driver import Progress, RunDriver
from benchledger.harness.record import RunConfig
from benchledger.harness.unit import UnitOutcome
from benchledger.ledger import Ledger, open_store
from benchledger.ledger.events import UnitFinishedEvent
from benchledger.projections.fold import fold
from benchledger.projections.source import from_ledger
from benchledger.projections.suites.lifecycle.scorecard import LifecycleFold, scorecard

# The recorded latencies x 0.25: at smaller scales, this 2-core machine's own work for
# the 150 units (about 60 s of runner and 50 s of platform CPU) outweighs the scaled
# latencies, and the ratio measures the CPU, not the concurrency.
DEFAULT_TIME_SCALE: Final = 0.25
TARGET_FULL_SCALE_S: Final = 15 * 60  # the peer's 2 h 02 min run in at most 15 minutes
TARGET_SPEEDUP: Final = 8.0


@dataclass(frozen=True)
class Workload:
    """What one bench run drives: the agent, protocols, passes, pack and time scale."""

    agent: str
    protocols: str
    k: int = 1
    pack: str = ""
    time_scale: float = 1.0
    capture_timeout_s: float = RunConfig.capture_timeout_s
    platform: str = "embedded"


def timed_run(cfg: RunConfig, ledger_path: str) -> tuple[float, float]:
    """Wall and CPU seconds (this process's, every thread) of one whole run of ``cfg``
    (plan, provision, every unit, seal) into a fresh SQLite ledger at ``ledger_path``;
    RuntimeError when it did not seal. The suites' benchmarks (locomo, longmemeval, judge)
    each time their runs by it."""
    ledger = Ledger(open_store(ledger_path))
    started, cpu = time.perf_counter(), time.process_time()
    try:
        result = asyncio.run(RunDriver(ledger, cfg).execute())
    finally:
        ledger.store.close()
    took, cpu = time.perf_counter() - started, time.process_time() - cpu
    if not result.root:
        data = f" of {cfg.protocols_path}" if cfg.protocols_path else ""
        raise RuntimeError(f"the benchmark run{data} did not seal")
    return took, cpu


def _one(work: Workload, concurrency: int, folder: str) -> dict[str, Any]:
    ledger = Ledger(open_store(os.path.join(folder, f"c{concurrency}.sqlite")))
    cfg = RunConfig(
        protocols_path=work.protocols,
        agent=work.agent,
        k=work.k,
        pack=work.pack,
        time_scale=work.time_scale,
        capture_timeout_s=work.capture_timeout_s,
        platform=work.platform,
        concurrency=concurrency,
        run_id=f"bench-c{concurrency}",
    )
    start = time.perf_counter()
    progress = _progress(f"--concurrency {concurrency}", start)
    run_id = asyncio.run(RunDriver(ledger, cfg, progress).execute()).run_id
    wall = time.perf_counter() - start
    pairs = from_ledger(ledger, run_id).events
    card = scorecard([fold(LifecycleFold(), pairs)])
    events = [e for e, _ in pairs]
    ledger.store.close()
    return {
        "concurrency": concurrency,
        "wall_s": round(wall, 2),
        "model_calls": sum(1 for e in events if type(e).__name__ == "ModelCallEvent"),
        "units": len(card.units),
        "infra_failed": sum(1 for e in events if isinstance(e, UnitFinishedEvent) and e.body.error),
        "full_lifecycle": card.metrics["full_lifecycle"].num,
    }


def _progress(label: str, start: float) -> Progress:
    """A line on stderr at every tenth of the units: long runs show they are moving."""

    def done(_outcome: UnitOutcome, n: int, total: int) -> None:
        if n == total or n * 10 // total != (n - 1) * 10 // total:
            took = time.perf_counter() - start
            print(f"  {label}: {n}/{total} units, {took:.0f} s", file=sys.stderr, flush=True)

    return Progress(unit_done=done)


def _both(work: Workload, concurrency: int) -> tuple[dict[str, Any], dict[str, Any]]:
    from benchledger.harness.logging import quiet_logs

    quiet_logs()
    with tempfile.TemporaryDirectory(prefix="benchledger-bench-") as folder:
        return _one(work, 1, folder), _one(work, concurrency, folder)


def run_bench(*, protocols: str, delay: float, concurrency: int, as_json: bool) -> int:
    """Run the suite with the fake model at concurrency 1 and ``concurrency``; print both."""
    serial, parallel = _both(Workload(f"fake:{delay}", protocols), concurrency)
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


def recorded_workload(
    spec: str, *, protocols: str = "", pack: str = "", k: int = 5, time_scale: float
) -> Workload:
    """The workload re-enacting ``recorded:RUN_DIR``; ValueError naming what is missing.

    The protocols default to ``RUN_DIR/../../protocols`` and the pack to
    ``RUN_DIR/../../seed`` (the peer's layout); they must be protocols the run recorded
    (by id) and, when they are the whole set, the set its manifests name by hash.
    """
    from benchledger.harness.peer.recorded_run import RecordedRun
    from benchledger.protocols import load
    from benchledger.protocols.errors import ProtocolError
    from benchledger.protocols.hashing import peer_hash

    run_dir = spec.partition(":")[2]
    run = RecordedRun(run_dir)
    bench = os.path.normpath(os.path.join(run_dir, "..", ".."))
    protocols = protocols or os.path.join(bench, "protocols")
    pack = pack or os.path.join(bench, "seed")
    if not os.path.isdir(protocols):
        raise ValueError(
            f"no protocols folder at {protocols}: pass the recorded run's protocols "
            "with --protocols PATH"
        )
    if not os.path.isdir(pack):
        raise ValueError(f"no seed pack at {pack}: pass the recorded run's pack with --pack PATH")
    try:
        loaded = load(protocols).protocols
    except ProtocolError as exc:
        raise ValueError(f"the protocols at {protocols} do not load: {exc}") from None
    unknown = sorted(p.id for p in loaded if p.id not in run.attempts)
    if unknown:
        raise ValueError(
            f"the recorded run has no attempts of {', '.join(unknown[:5])} (from {protocols}): "
            "pass the recorded run's protocols (or a subset) with --protocols PATH"
        )
    whole = {p.id for p in loaded} == set(run.attempts)
    if whole and run.protocol_set_hash and peer_hash(loaded) != run.protocol_set_hash:
        raise ValueError(
            f"the protocols at {protocols} (set hash {peer_hash(loaded)[:12]}) changed since "
            f"the recorded run ({run.protocol_set_hash[:12]}): pass the ones it used"
        )
    # The capture check's poll is the run's one other wait: on the embedded platform a
    # capture is visible at once, so it only waits out captures that never land.
    poll = RunConfig.capture_timeout_s * time_scale
    # The platform in a process of its own: the runner and the platform (SQL, search) each
    # get a core. At time scale 0 this re-enactment is CPU-bound, 85 s against 115 s here.
    return Workload(spec, protocols, k, pack, time_scale, poll, "embedded:process")


def _hms(seconds: float) -> str:
    """``2 h 02 min`` or ``14 min 05 s``."""
    s = round(seconds)
    if s >= 3600:
        return f"{s // 3600} h {s % 3600 // 60:02d} min"
    return f"{s // 60} min {s % 60:02d} s"


def run_recorded_bench(work: Workload, *, concurrency: int, as_json: bool) -> int:
    """Re-enact a recorded run at concurrency 1 and ``concurrency``; 1 on any infra error."""
    from benchledger.harness.peer.recorded_run import RecordedRun

    run = RecordedRun(work.agent.partition(":")[2])
    serial, parallel = _both(work, concurrency)
    scale = work.time_scale
    for r in (serial, parallel):
        r["full_scale_s"] = round(r["wall_s"] / scale, 1) if scale else None
    speedup = serial["wall_s"] / parallel["wall_s"] if parallel["wall_s"] else 0.0
    report = {
        "agent": work.agent,
        "model": run.model,
        "k": work.k,
        "time_scale": scale,
        "recorded_run_s": round(run.span_s, 1),
        "recorded_episodes_s": round(run.episode_wall_s(), 1),
        "serial": serial,
        "parallel": parallel,
        "speedup": round(speedup, 2),
    }
    if as_json:
        print(json.dumps(report))
    else:
        print(
            f"recorded run {work.agent} ({run.model}), {serial['units']} units, "
            f"{serial['model_calls']} model calls per run"
        )
        print(
            f"  recorded: {_hms(run.span_s)} ({run.episode_wall_s():.0f} s of episodes); "
            f"time scale {scale:g}"
        )
        for r in (serial, parallel):
            full = f"{r['full_scale_s']:>8.0f} s ({_hms(r['full_scale_s'])})" if scale else "n/a"
            print(
                f"  --concurrency {r['concurrency']:<3} {r['wall_s']:>8.2f} s   "
                f"full scale (wall / {scale:g}): {full}   infra errors {r['infra_failed']}"
            )
        print(f"  speed-up          {report['speedup']:>8.2f}x")
        whole = serial["units"] == sum(len(a) for a in run.attempts.values())
        if whole and parallel["full_scale_s"] is not None:
            met = parallel["full_scale_s"] <= TARGET_FULL_SCALE_S and speedup >= TARGET_SPEEDUP
            print(
                f"  target: at most {_hms(TARGET_FULL_SCALE_S)} at full scale and "
                f">= {TARGET_SPEEDUP:g}x: {'met' if met else 'not met'} at this scale"
            )
    return 0 if serial["infra_failed"] == parallel["infra_failed"] == 0 else 1
