"""Load: the suite at ``--concurrency 32`` (k=3 in full mode): no errors, the ledger
verifies; units/s and the p99 episode latency are reported."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterator, Sequence
from typing import Any

from benchledger.benchmarks.reliability.scenario import (
    Config,
    Row,
    cli,
    finish,
    suite_options,
    units_of,
    verify_run,
)
from benchledger.ledger.events import (
    EpisodeFinishedEvent,
    EpisodeStartedEvent,
    UnitFinishedEvent,
    UnitStartedEvent,
)


def load(cfg: Config) -> Row:
    """The whole suite at --concurrency 32 (k=3 in full mode): no errors, verifies; speed."""
    work = os.path.join(cfg.workdir, "load")
    os.makedirs(work, exist_ok=True)
    k = 1 if cfg.quick else 3
    suite_args, label = suite_options(cfg, work, 0)
    location = os.path.join(work, "load.sqlite")
    args = [
        "run",
        "--run-id",
        "load",
        "--k",
        str(k),
        "--concurrency",
        "32",
        "--ledger",
        location,
        *suite_args,
    ]
    started = time.perf_counter()
    code, _, err = finish(cli(cfg, args, work))
    wall = time.perf_counter() - started
    problems = [] if code == 0 else [f"exit {code}: {err.strip()[-300:]}"]
    run, why = verify_run(location, "load", sealed=True)
    if why:
        problems.append(why)
        return Row("load", f"k={k}, --concurrency 32", "did not verify", False, problems=problems)
    units = units_of(run.events)
    problems += units.exactly_once()
    problems += [f"{s}: {e[:160]}" for s, e in units.errors.items()]
    starts = [e.at for e, _ in run.events if isinstance(e, UnitStartedEvent)]
    ends = [e.at for e, _ in run.events if isinstance(e, UnitFinishedEvent)]
    span = (max(ends) - min(starts)) / 1e9 if starts and ends else wall
    latencies = sorted(_episode_latencies(run.events))
    p99 = latencies[max(0, math.ceil(0.99 * len(latencies)) - 1)] if latencies else 0.0
    n = sum(units.finished.values())
    return Row(
        "load",
        f"{label}, k={k}, --concurrency 32: {n} units, {len(latencies)} episodes",
        f"no errors; the ledger verifies; {n / span:.2f} units/s over {span:.1f} s of units "
        f"({wall:.1f} s with start-up); p99 episode latency {p99:.2f} s",
        not problems,
        problems=problems,
    )


def _episode_latencies(events: Sequence[tuple[Any, str]]) -> Iterator[float]:
    opened: dict[str, int] = {}
    for event, _ in events:
        if isinstance(event, EpisodeStartedEvent):
            opened[event.stream] = event.at
        elif isinstance(event, EpisodeFinishedEvent) and event.stream in opened:
            yield (event.at - opened.pop(event.stream)) / 1e9
