"""``benchledger run``: plan the units, start platforms, run units concurrently, seal.

Units are (pass, protocol) pairs; pass j is attempt j. On the embedded platform every
pass gets its own fresh refplatform, so attempt j never sees what attempt i promoted;
on an external platform ``--reset-cmd`` runs between passes, or the run is recorded
as coupled. Identities are unique across the run: unit i of pass j uses pool
identities 2*((j-1)*P + i) + 1 and + 2; resumed units take fresh ones after those.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import math
import secrets
import subprocess
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any, Final

from harness import agents
from harness.platforms.mcp_data_platform import McpDataPlatform
from harness.unit import UnitOutcome, UnitPlan, UnitRunner
from ledger import Ledger, LedgerError
from ledger.events import (
    RunStarted,
    RunStartedBody,
    UnitAbandoned,
    UnitAbandonedBody,
    UnitFinished,
    UnitStarted,
)
from ledger.ledger import check_run_id
from protocols import load
from protocols.hashing import benchledger_hash
from protocols.schema import Protocol

TOOL_VERSION: Final = "benchledger 0.1.0"
MAX_POOL: Final = 999


class RunRefused(LedgerError):
    """The run cannot start as asked (pool too small, bad resume target, ...): exit 2."""


@dataclass
class RunConfig:
    protocols_path: str
    agent: str = "scripted"
    platform: str = "embedded"
    admin_key: str = ""
    pool_base: str = ""
    pool_size: int = 0
    k: int = 1
    concurrency: int = 4
    run_id: str = ""
    reset_cmd: str = ""
    capture_timeout_s: float = 10.0
    resume: str = ""


def pool_needed(protocols: int, k: int) -> tuple[int, int]:
    """(identities the run needs, retry margin): protocols x k x 2 plus max(4, 10%)."""
    needed = protocols * k * 2
    return needed, max(4, math.ceil(needed * 0.1))


def new_run_id() -> str:
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%d-%H%M%S")
    return f"lc-{stamp}-{secrets.token_hex(2)}"


@dataclass
class Progress:
    """Callbacks the CLI renders (a bar on a terminal, one line per unit otherwise)."""

    started: Callable[[int], None] = lambda total: None
    unit_done: Callable[[UnitOutcome, int, int], None] = lambda outcome, done, total: None


@dataclass
class _State:
    done: int = 0
    total: int = 0
    failures: int = 0
    outcomes: list[UnitOutcome] = field(default_factory=list)


def _existing(ledger: Ledger, run_id: str) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """The run's config and, per unit stream: protocol, attempt, finished, identities."""
    config: dict[str, Any] = {}
    units: dict[str, dict[str, Any]] = {}
    for event, _ in ledger.events(run_id):
        if isinstance(event, RunStarted):
            config = dict(event.body.config) | {
                "k": event.body.k,
                "agent": event.body.agent,
                "set_hash": event.body.protocol_set_hash,
            }
        elif isinstance(event, UnitStarted):
            b = event.body
            units[event.stream] = {
                "protocol_id": b.protocol_id,
                "attempt": b.attempt,
                "terminal": False,
                "finished": False,
                "identities": [b.teacher, b.learner],
            }
        elif isinstance(event, UnitFinished) and event.stream in units:
            units[event.stream].update(terminal=True, finished=True)
        elif isinstance(event, UnitAbandoned) and event.stream in units:
            units[event.stream]["terminal"] = True
    return config, units


class Runner:
    """Runs (or resumes) one lifecycle run into a ledger."""

    def __init__(self, ledger: Ledger, config: RunConfig, progress: Progress | None = None) -> None:
        self.ledger = ledger
        self.cfg = config
        self.progress = progress or Progress()
        self.agent = agents.from_spec(config.agent)
        self.state = _State()
        self._locks: dict[int, dict[str, asyncio.Lock]] = {}

    # -- planning ---------------------------------------------------------------------------

    def plan(self, protocols: list[Protocol], run_id: str) -> list[UnitPlan]:
        n = len(protocols)
        plans = []
        for j in range(1, self.cfg.k + 1):
            for i, p in enumerate(protocols):
                base = 2 * ((j - 1) * n + i) + 1
                plans.append(UnitPlan(p, j, f"{run_id}/{p.id}/{j}", base, base + 1))
        return plans

    def resume_plan(
        self, protocols: list[Protocol], run_id: str
    ) -> tuple[list[UnitPlan], list[tuple[str, str]]]:
        """Unfinished units of ``run_id`` as fresh streams, and the (stream, new) to abandon."""
        _, units = _existing(self.ledger, run_id)
        by_key: dict[tuple[str, int], list[str]] = {}
        for stream, info in units.items():
            by_key.setdefault((info["protocol_id"], info["attempt"]), []).append(stream)
        next_identity = len(protocols) * self.cfg.k * 2 + 1
        plans = []
        abandon: list[tuple[str, str]] = []
        for plan in self.plan(protocols, run_id):
            streams = sorted(by_key.get((plan.protocol.id, plan.attempt), []))
            if any(units[s]["finished"] for s in streams):
                continue
            if not streams:
                plans.append(plan)
                continue
            new = f"{plan.stream}-r{len(streams)}"
            for s in streams:
                if not units[s]["terminal"]:
                    w = self.ledger.writer(s)
                    w.append(
                        UnitAbandonedBody(reason="interrupted; re-run on resume", resumed_as=new)
                    )
                    self.ledger.commit(w)
            plans.append(
                UnitPlan(
                    plan.protocol,
                    plan.attempt,
                    new,
                    next_identity,
                    next_identity + 1,
                    resumes=streams[-1],
                )
            )
            next_identity += 2
        return plans, abandon

    # -- platforms -------------------------------------------------------------------------

    def _pool_size(self, protocols: int) -> int:
        needed, margin = pool_needed(protocols, self.cfg.k)
        if self.cfg.platform == "embedded":
            size = needed + margin
            if size > MAX_POOL:
                raise RunRefused(
                    f"the run needs {needed} identities plus a retry margin of {margin}; the "
                    f"embedded platform holds at most {MAX_POOL}: use fewer protocols or a "
                    "smaller --k"
                )
            return size
        available = self.cfg.pool_size
        if needed + margin > available:
            raise RunRefused(
                f"the run needs {needed} identities ({protocols} protocols x k={self.cfg.k} x 2) "
                f"plus a retry margin of {margin}, but --pool-size is {available}"
            )
        return available

    # -- running ---------------------------------------------------------------------------

    async def _unit(self, sem: asyncio.Semaphore, client: McpDataPlatform, plan: UnitPlan) -> None:
        locks = self._locks.setdefault(id(client), {})
        async with sem:
            runner = UnitRunner(
                self.ledger,
                client,
                self.agent,
                plan,
                capture_timeout_s=self.cfg.capture_timeout_s,
                entity_locks=locks,
            )
            outcome = await runner.run()
        st = self.state
        st.done += 1
        st.failures += bool(outcome.error)
        st.outcomes.append(outcome)
        self.progress.unit_done(outcome, st.done, st.total)

    async def _run_passes(self, plans: list[UnitPlan], pool_size: int) -> None:
        sem = asyncio.Semaphore(max(1, self.cfg.concurrency))
        passes = sorted({p.attempt for p in plans})
        async with AsyncExitStack() as stack:
            if self.cfg.platform == "embedded":
                from refplatform.server import RunningPlatform

                tasks = []
                for j in passes:
                    running = RunningPlatform(  # fresh state for every pass
                        pool_size=pool_size,
                        admin_key=self.cfg.admin_key or None,
                        pool_base=self.cfg.pool_base or None,
                    )
                    stack.callback(running.stop)
                    client = McpDataPlatform(
                        running.url,
                        admin_key=running.admin_key,
                        pool_base=running.pool_base,
                        pool_size=pool_size,
                    )
                    stack.push_async_callback(client.aclose)
                    tasks += [self._unit(sem, client, p) for p in plans if p.attempt == j]
                await asyncio.gather(*tasks)
                return
            client = McpDataPlatform(
                self.cfg.platform,
                admin_key=self.cfg.admin_key,
                pool_base=self.cfg.pool_base,
                pool_size=pool_size,
            )
            stack.push_async_callback(client.aclose)
            for n, j in enumerate(passes):
                if n and self.cfg.reset_cmd:
                    self._reset()
                await asyncio.gather(*(self._unit(sem, client, p) for p in plans if p.attempt == j))

    def _reset(self) -> None:
        done = subprocess.run(self.cfg.reset_cmd, shell=True, capture_output=True, text=True)
        if done.returncode != 0:
            raise RunRefused(f"--reset-cmd exited {done.returncode}: {done.stderr.strip()[:200]}")

    def _start(self, protocols: list[Protocol], run_id: str, pool_size: int) -> None:
        coupled = self.cfg.platform != "embedded" and self.cfg.k > 1 and not self.cfg.reset_cmd
        platform = (
            "refplatform (embedded)" if self.cfg.platform == "embedded" else "mcp-data-platform"
        )
        self.ledger.start_run(
            run_id,
            RunStartedBody(
                suite="lifecycle",
                protocol_set_hash=benchledger_hash(protocols),
                protocols=len(protocols),
                k=self.cfg.k,
                agent=self.agent.name,
                model=self.agent.model,
                platform=platform,
                platform_version="refplatform-1.0" if self.cfg.platform == "embedded" else "",
                coupled=coupled,
                tool_version=TOOL_VERSION,
                config={
                    "protocols": self.cfg.protocols_path,
                    "platform": self.cfg.platform,  # a URL or "embedded"; never a key
                    "concurrency": self.cfg.concurrency,
                    "pool_size": pool_size,
                    "reset_cmd": self.cfg.reset_cmd,
                    "capture_timeout_s": self.cfg.capture_timeout_s,
                    "agent_spec": self.cfg.agent,
                },
            ),
        )

    async def execute(self) -> tuple[str, str]:
        """Run or resume; seal; return (run id, run root)."""
        cfg = self.cfg
        if cfg.resume:
            run_id = cfg.resume
            info = self.ledger.run_info(run_id)
            if info.root:
                raise RunRefused(
                    f"run {run_id} is already sealed (root {info.root}); nothing to resume"
                )
            config, _ = _existing(self.ledger, run_id)
            cfg.protocols_path = str(config.get("protocols", cfg.protocols_path))
            cfg.k = int(config.get("k", cfg.k))
            cfg.platform = str(config.get("platform", cfg.platform))
            cfg.agent = str(config.get("agent_spec", cfg.agent))
            self.agent = agents.from_spec(cfg.agent)
            protocols = list(load(cfg.protocols_path).protocols)
            if benchledger_hash(protocols) != config.get("set_hash"):
                raise RunRefused(
                    f"the protocol set at {cfg.protocols_path} changed since run {run_id} started"
                )
            pool_size = self._pool_size(len(protocols))
            if cfg.platform == "embedded":
                pool_size = MAX_POOL  # fresh platforms: room for the resumed units' identities
            plans, abandon = self.resume_plan(protocols, run_id)
            highest = max((p.learner for p in plans), default=0)
            if highest > pool_size:
                raise RunRefused(
                    f"resuming needs pool identities up to {highest}, but the pool holds "
                    f"{pool_size}: raise --pool-size"
                )
            for stream, new in abandon:
                w = self.ledger.writer(stream)
                w.append(UnitAbandonedBody(reason="interrupted; re-run on resume", resumed_as=new))
                self.ledger.commit(w)
        else:
            run_id = cfg.run_id or new_run_id()
            try:
                check_run_id(run_id)
            except ValueError as exc:
                raise RunRefused(str(exc)) from None
            protocols = list(load(cfg.protocols_path).protocols)
            pool_size = self._pool_size(len(protocols))
            self._start(protocols, run_id, pool_size)
            plans = self.plan(protocols, run_id)
        self.state.total = len(plans)
        self.progress.started(len(plans))
        await self._run_passes(plans, pool_size)
        root = self.ledger.seal(run_id)
        return run_id, root
