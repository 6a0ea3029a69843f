"""A queue worker: what it does with one job, i.e. one planned unit of a queued run.

A worker takes up a run the first time it meets one of its jobs, if it may: a run whose
platform, agent or embedder needs a command or a server the worker's operator did not name
(``harness.needs``) is declined, its jobs left waiting for a worker that may run them,
with the reason noted (``benchledger queue`` shows it). Then the run's plan, as
``run --resume`` plans it (``harness.plan``: the record's suite and items, the platform and
agent the operator named, or the built-in ones the record names; every option given
checked against the record), then the model's and the platform's preflight. A run it
cannot plan is declined too (its reason noted), and a job naming no run or no planned unit
fails with its reason: neither stops the worker. Each job then runs its
unit through the one unit runner (``harness.unit.run_unit``), as the driver does:

- a unit already counted (a finished attempt not in an infrastructure error) is left as
  it is: a job run twice (its worker died after the unit finished) counts nothing twice;
- a started attempt that never ended (its worker was killed) is marked ``unit_abandoned``
  (``interrupted; re-run on resume``, as ``--resume`` marks one) and the unit runs again as
  a new attempt ``STREAM-rN`` under fresh identities;
- an attempt that ended in an infrastructure error is retried (``--infra-retries``, with
  back-off by the queue) as a new attempt, the failed one marked abandoned as
  ``--retry-infra`` marks it; past the bound it is left for ``--resume --retry-infra``.

Fresh identities come from a fixed grid, so workers never need to agree on them: try r of
the unit with plan index i (of U planned units, n identities each) takes
``n*(U*r + i) + 1 .. + n`` (try 0 is the planned block).

The worker whose job finishes the run's last unit seals the run (or, with a unit left in
an infrastructure error, leaves it unsealed, as the driver does).
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

from benchledger.harness.driver import RunDriver
from benchledger.harness.needs import Given, given_labels, unmet
from benchledger.harness.plan import INTERRUPTED, MAX_POOL, RETRIED, RunPlan, plan_run
from benchledger.harness.platforms.base import PlatformClient
from benchledger.harness.platforms.platform import resolve
from benchledger.harness.platforms.provision import Provisioner
from benchledger.harness.queue import (
    Declined,
    InfraRetry,
    Queue,
    Unrunnable,
    entity_key,
    entity_lock,
)
from benchledger.harness.record import RunConfig, RunRefused, platform_option, read_record
from benchledger.harness.unit import UnitOutcome, UnitPlan, _writer, run_unit
from benchledger.ledger import Ledger
from benchledger.ledger.errors import AppendConflict, UnitsMissing, UnknownRun
from benchledger.ledger.events import (
    UnitAbandonedBody,
    UnitAbandonedEvent,
    UnitFinishedEvent,
    UnitStartedEvent,
    infra_failure,
)

T = TypeVar("T")

# Fresh-identity rounds an embedded platform is provisioned for (tries per unit).
ROUNDS: Final = 5


def queueable(plan: RunPlan) -> None:
    """RunRefused when ``plan``'s run cannot be spread over workers."""
    if getattr(plan.suite, "group_units", None) is not None:
        raise RunRefused(
            f"the {plan.suite.name} suite's units share identities within a process "
            "(group_units): it runs in one process, without --queue"
        )
    if plan.reset_cmd:
        raise RunRefused(
            "--reset-cmd resets the platform under every worker at once; a queued run cannot "
            "be reset between passes: drop --reset-cmd (the run is then coupled at k > 1)"
        )


@dataclass
class _Run:
    """A run this worker has taken up: its plan, platform and planned units by key."""

    driver: RunDriver
    plan: RunPlan
    prov: Provisioner
    shared: PlatformClient | None
    units: dict[tuple[str, int], tuple[int, UnitPlan]]
    clients: dict[int, PlatformClient] = field(default_factory=dict)
    # A fresh-state platform's runtime described when the run was taken up: the first
    # pass this worker runs a unit of gets it (then each pass its own, fresh).
    first_pass: PlatformClient | None = None
    opening: asyncio.Lock = field(default_factory=asyncio.Lock)


def unit_streams(ledger: Ledger, run_id: str, base: str) -> dict[str, dict[str, Any]]:
    """The attempts of one unit (``base``, then ``base-r1``, ``base-r2``, ...: a new attempt
    is named for how many there were): per stream, whether it started, finished (with which
    error) or was abandoned. Reads this unit's streams only, never the run's."""
    out: dict[str, dict[str, Any]] = {}
    for n in itertools.count():
        name = base if n == 0 else f"{base}-r{n}"
        if ledger.store.head(name) is None:
            break
        state = {"finished": False, "abandoned": False, "error": "", "started": False}
        for event, _ in ledger.events(run_id, name):
            if isinstance(event, UnitStartedEvent):
                state["started"] = True
            elif isinstance(event, UnitFinishedEvent):
                state.update(finished=True, error=event.body.error)
            elif isinstance(event, UnitAbandonedEvent):
                state["abandoned"] = True
        out[name] = state
    return out


class Worker:
    """Runs queued units of any run it can take up; one per process."""

    def __init__(
        self,
        ledger: Ledger,
        ledger_url: str,
        cfg: RunConfig,
        queue: Queue,
        *,
        infra_retries: int = 2,
        on_unit: Callable[[UnitOutcome, str], None] = lambda outcome, run: None,
        platforms: tuple[str, ...] = (),
        agents: tuple[str, ...] = (),
        on_declined: Callable[[str, str], None] = lambda run, why: None,
    ) -> None:
        """``platforms`` and ``agents``: the ``--platform`` and ``--agent`` values its
        operator gave (none: the built-in, local ones only); ValueError naming an unusable
        one."""
        self.ledger = ledger
        self.url = ledger_url
        self.cfg = cfg
        self.queue = queue
        self.platforms = {text: given_labels([text], cfg.platform_options) for text in platforms}
        self.given = Given(
            frozenset().union(*self.platforms.values()),
            frozenset(agents),
            cfg.platform_options.get("embedder", ""),
            mem0_llm=cfg.platform_options.get("mem0_llm", ""),
        )
        self.on_declined = on_declined
        # Runs this worker may not (Declined) or no worker can (Unrunnable) run, and why:
        # said once per run, then remembered.
        self.declined: dict[str, Declined | Unrunnable] = {}
        self.infra_retries = infra_retries
        self.on_unit = on_unit
        self._holders: list[tuple[asyncio.Future[None], asyncio.Event]] = []
        self.runs: dict[str, _Run] = {}
        self._taking: dict[str, asyncio.Lock] = {}
        self.sealed: dict[str, str] = {}

    def check(self, run_id: str) -> RunPlan:
        """The run's plan as this worker would run it (reads only): Unrunnable when the
        ledger holds no such run (or none with a record); Declined naming what the run
        needs that this worker's operator did not give, or what its options contradict
        in the run's record."""
        try:
            self.ledger.run_info(run_id)
            record = read_record(self.ledger, run_id)
        except UnknownRun:
            raise Unrunnable(f"no run {run_id} in this ledger") from None
        except RunRefused as exc:  # no record to run it by
            raise Unrunnable(str(exc)) from None
        missing = unmet(record, self.given)
        if missing:
            raise Declined(f"run {run_id} needs {'; '.join(missing)}: this worker's operator "
                           "did not name it (docs/scaling.md)")  # fmt: skip
        try:
            plan = plan_run(self.ledger, self._config(run_id, record))
            queueable(plan)
        except RunRefused as exc:
            raise Declined(f"worker refused for run {run_id}: {exc}") from None
        return plan

    def _config(self, run_id: str, record: Any) -> RunConfig:
        """This worker's configuration for one run: the platform and agent its operator
        named that the record matches (the operator's own command or URL), only that
        platform's options; the built-in ones the record names otherwise."""
        cfg = dataclasses.replace(self.cfg, resume=run_id, local=True, retry_infra=False)
        given = set(cfg.given)
        label = platform_option(record)
        for text, labels in self.platforms.items():
            if unmet(record, dataclasses.replace(self.given, platforms=labels)):
                continue
            own = {o.dest for o in resolve(text)[0].options}
            options = {k: v for k, v in cfg.platform_options.items() if k in own}
            cfg = dataclasses.replace(cfg, platform=text, platform_options=options)
            given.add("platform")
            break
        else:
            own = {o.dest for o in resolve(label)[0].options}
            options = {k: v for k, v in cfg.platform_options.items() if k in own}
            cfg = dataclasses.replace(cfg, platform=label, platform_options=options)
        if record.agent in self.given.agents:
            cfg = dataclasses.replace(cfg, agent=record.agent)
            given.add("agent")
        return dataclasses.replace(cfg, given=frozenset(given))

    async def _take_up(self, run_id: str) -> _Run:
        lock = self._taking.setdefault(run_id, asyncio.Lock())
        async with lock:
            if run_id in self.runs:
                return self.runs[run_id]
            plan = await asyncio.to_thread(self.check, run_id)
            per = plan.suite.identities_per_unit
            total = len(plan.record.units)
            driver = RunDriver(self.ledger, dataclasses.replace(self.cfg, resume=run_id))
            pool = min(MAX_POOL, per * total * ROUNDS)
            prov = driver.provisioner(plan, pool if plan.record.pool_size == 0 else 0)
            first = await self._hold(lambda stack: driver.join(plan, prov, stack))
            shared = None if prov.fresh_state else first
            if shared is not None and hasattr(plan.suite, "entity_lock"):
                url = self.url

                def lock_for(entity: str) -> Any:
                    return entity_lock(url, entity_key(run_id, entity))

                plan.suite.entity_lock = lock_for
            from benchledger.harness.plan import unit_plans

            planned = unit_plans(plan.suite, plan.items, plan.record.k, run_id)
            units = {(p.unit_id, p.attempt): (i, p) for i, p in enumerate(planned)}
            self.runs[run_id] = _Run(driver, plan, prov, shared, units, first_pass=first)
            return self.runs[run_id]

    async def _client(self, r: _Run, unit: UnitPlan, stack: AsyncExitStack) -> PlatformClient:
        """The platform a unit runs on: the shared one, its pass's, or (per-unit scope)
        its own, closed with ``stack``."""
        if not r.prov.fresh_state:
            assert r.shared is not None
            return r.shared
        if r.plan.record.runtime_scope == "unit":
            return await stack.enter_async_context(r.prov.runtime())
        async with r.opening:
            if unit.attempt not in r.clients and r.first_pass is not None:
                r.clients[unit.attempt], r.first_pass = r.first_pass, None
            if unit.attempt not in r.clients:
                prov = r.prov
                r.clients[unit.attempt] = await self._hold(
                    lambda stack: stack.enter_async_context(prov.runtime())
                )
            return r.clients[unit.attempt]

    async def _hold(self, enter: Callable[[AsyncExitStack], Awaitable[T]]) -> T:
        """``enter(stack)``'s result, its contexts held open by a task of their own until
        ``close`` (a platform's task groups must end in the task that began them, never in
        whichever job's task first needed them)."""
        ready: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        done = asyncio.Event()

        async def hold() -> None:
            try:
                async with AsyncExitStack() as stack:
                    ready.set_result(await enter(stack))
                    await done.wait()
            except BaseException as exc:
                if ready.done():
                    raise
                ready.set_exception(exc)

        self._holders.append((asyncio.ensure_future(hold()), done))
        return await ready

    async def handle(self, run_id: str, unit: str, job: Any) -> None:
        """One job: run ``unit`` (``PROTOCOL/ATTEMPT``) of ``run_id`` unless it is counted,
        as a new attempt if an earlier one was interrupted or infra-failed."""
        if run_id in self.declined:
            known = self.declined[run_id]
            raise type(known)(str(known))
        head = await asyncio.to_thread(self.ledger.store.head, run_id)
        if head is not None and head.kind == "run_sealed":
            return  # sealed meanwhile (a job run again after its unit counted)
        try:
            r = await self._take_up(run_id)
        except (Declined, Unrunnable) as exc:
            if run_id not in self.declined:
                self.declined[run_id] = exc
                self.on_declined(run_id, str(exc))
            raise
        protocol, _, attempt = unit.rpartition("/")
        try:
            index, planned = r.units[(protocol, int(attempt))]
        except (KeyError, ValueError):
            raise Unrunnable(f"run {run_id} plans no unit {unit}") from None
        states = await asyncio.to_thread(unit_streams, self.ledger, run_id, planned.stream)
        counted = [s for s, st in states.items() if st["finished"] and not st["abandoned"]]
        infra = [s for s, st in states.items() if st["finished"] and infra_failure(st["error"])]
        if counted and not all(infra_failure(states[s]["error"]) for s in counted):
            await self.seal(run_id)
            return
        if counted and len(infra) > self.infra_retries:
            await self.seal(run_id)  # left infra-failed: for --resume --retry-infra
            return
        try_n = len(states)
        stream = planned.stream if not try_n else f"{planned.stream}-r{try_n}"
        abandon = [(s, INTERRUPTED) for s, st in states.items()
                   if not st["finished"] and not st["abandoned"]]  # fmt: skip
        abandon += [(s, RETRIED) for s in counted]
        for s, why in sorted(abandon):
            w = self.ledger.writer(s)
            w.append(UnitAbandonedBody(reason=why, resumed_as=stream))
            await asyncio.wrap_future(_writer().submit(self.ledger.commit, w))
        per = len(planned.identities)
        first = per * (len(r.units) * try_n + index) + 1
        identities = tuple(range(first, first + per))
        top = r.plan.record.pool_size or min(MAX_POOL, per * len(r.units) * ROUNDS)
        if identities[-1] > top:
            raise RunRefused(
                f"unit {unit} of run {run_id} needs pool identities up to {identities[-1]} "
                f"for try {try_n + 1}, but the pool holds {top}"
            )
        resumes = sorted(counted or states)[-1] if states else ""
        plan = UnitPlan(planned.item, planned.attempt, stream, identities, resumes=resumes)
        try:
            async with AsyncExitStack() as stack:
                client = await self._client(r, plan, stack)
                outcome = await run_unit(r.plan.suite, self.ledger, client, r.plan.agent, plan,
                                         failures=r.driver.failures)  # fmt: skip
        except AppendConflict:
            # This worker went silent and the queue gave its unit to another, which wrote
            # the attempt's streams meanwhile: that one's attempt counts, not this one's.
            print(f"{run_id} unit {unit}: another worker took it over while this one was "
                  "silent; its attempt counts", flush=True)  # fmt: skip
            return
        self.on_unit(outcome, run_id)
        if infra_failure(outcome.error) and len(infra) + 1 <= self.infra_retries:
            raise InfraRetry(outcome.error)
        await self.seal(run_id)

    async def seal(self, run_id: str) -> str:
        """Seal the run once every planned unit has a counted attempt and none is left in an
        infrastructure error; its root, or "" while it cannot be."""
        if await self.queue.waiting(run_id):
            return ""  # a job still waits: this is not the last unit

        def go() -> str:
            if self.ledger.infra_failed(run_id):
                return ""
            try:
                return self.ledger.seal_complete(run_id)
            except UnitsMissing:
                return ""

        root = await asyncio.to_thread(go)
        if root and run_id not in self.sealed:
            self.sealed[run_id] = root
            print(f"run {run_id} sealed, root {root}", flush=True)
        return root

    async def close(self) -> None:
        """Close every platform this worker opened, each in the task that opened it."""
        for _, done in self._holders:
            done.set()
        await asyncio.gather(*(task for task, _ in self._holders), return_exceptions=True)
