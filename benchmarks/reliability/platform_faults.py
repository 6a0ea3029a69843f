"""Platform faults: a run through the fault proxy (benchmarks/fault_proxy.py) at 10%."""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import os
from typing import Final

from benchledger import protocols
from benchledger.benchmarks.fault_proxy import FaultProxy
from benchledger.benchmarks.reliability.scenario import (
    Config,
    Row,
    suite_options,
    units_of,
    verify_run,
)
from benchledger.harness.driver import Progress, RunDriver, pool_needed
from benchledger.harness.record import RunConfig
from benchledger.ledger import Ledger, open_store
from benchledger.ledger.events import InfraErrorEvent
from benchledger.projections.fold import fold
from benchledger.projections.suites.lifecycle.scorecard import LifecycleFold, scorecard

FAULT_RATE: Final = 0.1
FAULT_TIMEOUT_S: Final = 5.0  # the client's timeout while faults are injected

# How injected faults read in the infra_errors they must become: (faults, recorded kinds).
_SURFACES: Final = (
    (("http_5xx",), ("http_5xx",)),
    (("timeout",), ("timeout",)),
    (("drop", "truncate"), ("transport", "bad_answer")),
)


def platform_faults(cfg: Config) -> Row:
    """A run through the fault proxy at 10%: sealed, every fault one recorded infra error."""
    from benchledger.refplatform.server import RunningPlatform

    work = os.path.join(cfg.workdir, "faults")
    os.makedirs(work, exist_ok=True)
    suite_args, label = suite_options(cfg, work, 8)
    path = suite_args[1] if suite_args else protocols.LIFECYCLE_DIR
    n_units = len(protocols.load(path).protocols)
    pool = sum(pool_needed(n_units))
    platform = RunningPlatform(pool_size=pool)
    location = os.path.join(work, "faults.sqlite")
    problems: list[str] = []
    try:
        with (
            FaultProxy(
                platform.url,
                rate=FAULT_RATE,
                seed=cfg.seed,
                armed=False,
                hold_s=10 * FAULT_TIMEOUT_S,
                log=cfg.log,
            ) as proxy,
        ):
            ledger = Ledger(open_store(location))
            run = RunConfig(
                protocols_path=path,
                platform=proxy.url,
                admin_key=platform.admin_key,
                pool_base=platform.pool_base,
                pool_size=pool,
                run_id="faults",
                concurrency=4,
                # Units that exhaust their retries are the point here: seal with them.
                seal_despite_infra=True,
                # A short request timeout, so an injected hang is a timeout, not a wait.
                settings=dataclasses.replace(cfg.settings, platform_timeout_s=FAULT_TIMEOUT_S),
            )
            # The run's own start arms the proxy: the preflight sees a healthy platform.
            driver = RunDriver(ledger, run, Progress(started=lambda total: proxy.arm()))
            result = asyncio.run(driver.execute())
            ledger.store.close()
            tally = proxy.tally
    finally:
        platform.stop()
    verified, why = verify_run(location, "faults", sealed=True)
    if why:
        problems.append(f"the run does not verify: {why}")
        return Row(
            "platform faults", f"faults at {FAULT_RATE:.0%}", "not sealed", False, problems=problems
        )
    events = verified.events
    errors = [e.body for e, _ in events if isinstance(e, InfraErrorEvent)]
    units = units_of(events)
    problems += units.exactly_once()
    faults = tally.by_kind()
    seen = collections.Counter(b.error for b in errors)
    notes: list[str] = []
    if len(errors) < len(tally.faults):
        problems.append(
            f"{len(tally.faults)} faults injected, only {len(errors)} infra_error events "
            f"(by kind injected {faults}, recorded {dict(seen)})"
        )
    elif len(errors) > len(tally.faults):  # a slow machine: real timeouts besides ours
        notes.append(
            f"{len(errors) - len(tally.faults)} infra errors besides the injected "
            f"faults (recorded {dict(seen)})"
        )
    for injected, recorded_as in _SURFACES:
        n, recorded = sum(faults[k] for k in injected), sum(seen[k] for k in recorded_as)
        if recorded < n:
            problems.append(f"{n} {'/'.join(injected)} faults, only {recorded} recorded as such")
    card = scorecard([fold(LifecycleFold(), events)])
    failed = set(units.errors)
    if card.harness_failures != len(failed):
        problems.append(f"{len(failed)} units failed, the scorecard counts {card.harness_failures}")
    leaked = [m.name for m in card.metrics.values() if set(m.units) & failed]
    if leaked:
        problems.append(f"infra-failed units counted in the rates of {', '.join(leaked)}")
    listed = {o.stream for o in result.failed}
    if listed != failed:
        problems.append("the failed units listed at the end differ from the ledger's")
    notes += [
        f"infra-failed (excluded, listed): {s}: {e[:120]}" for s, e in sorted(units.errors.items())
    ]
    kinds = ", ".join(f"{n} {k}" for k, n in faults.items())
    return Row(
        "platform faults",
        f"{len(tally.faults)} faults ({kinds}) at {FAULT_RATE:.0%} of the {tally.eligible} MCP "
        f"and REST requests of a {n_units}-unit run of {label} (seed {cfg.seed})",
        f"sealed and verifies; {len(errors)} infra_error events for {len(tally.faults)} faults, "
        f"each a recorded retry; {len(failed)} unit(s) exhausted their retries: excluded from "
        "every rate and listed",
        not problems,
        problems=problems,
        notes=notes,
    )
