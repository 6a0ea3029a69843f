"""The suite-agnostic run driver: preflight, start or resume, run units, seal if complete.

Units are (pass, item) pairs; pass j is attempt j. Unit i of pass j uses pool identities
``n*((j-1)*P + i) + 1 .. + n`` (n identities per unit); a resumed unit takes fresh ones
above the highest any unit of the run was ever given, so no unit inherits another's
memories. Nothing is written before the run's configuration, its pool and its platform
have been checked; a refused resume writes nothing either.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import math
import secrets
from collections.abc import Callable, Coroutine
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any, Final

from harness import agents
from harness.agents.base import Agent, UnitInfo
from harness.errors import HarnessError, InfraError
from harness.models.errors import PreflightFailed
from harness.platforms.base import Clock, Description, PlatformClient
from harness.platforms.provision import (
    PlatformSpec,
    Provisioner,
    parse_platform,
    provisioner,
)
from harness.record import (
    RunConfig,
    RunRefused,
    contradictions,
    highest_identity,
    platform_option,
    read_record,
    reset_record,
    resume_reset_cmd,
    shard_mismatch,
)
from harness.sharding import Shard, identity_blocks, shard_ids
from harness.suites import Suite, suite_for
from harness.unit import UnitContext, UnitFailed, UnitOutcome, UnitPlan, identity_label
from ledger import Ledger, LedgerError, RunSealed
from ledger.errors import ImportedRun, UnitsMissing
from ledger.events import (
    INTERNAL_ERROR,
    PlannedUnit,
    RunRecord,
    RunStartedBody,
    UnitAbandoned,
    UnitAbandonedBody,
    UnitFinished,
    UnitFinishedBody,
    UnitStarted,
    UnitStartedBody,
    infra_failure,
)
from ledger.ledger import check_run_id
from projections.trace import unit_trace_hash
from protocols.hashing import benchledger_hash

TOOL_VERSION: Final = "benchledger 0.1.0"
MAX_POOL: Final = 999

EXIT_OK, EXIT_FAILED = 0, 1
# The fault barrier starts a unit's error with INTERNAL_ERROR (ledger.events): a bug of
# ours, not the infrastructure's, so ``--retry-infra`` leaves it alone.
INTERRUPTED: Final = "interrupted; re-run on resume"
RETRIED: Final = "infra-failed; re-run by --retry-infra"


def pool_needed(units: int, per_unit: int = 2) -> tuple[int, int]:
    """(identities the run needs, retry margin): units x per_unit plus max(4, 10%)."""
    needed = units * per_unit
    return needed, max(4, math.ceil(needed * 0.1))


def new_run_id(suite: str = "lifecycle") -> str:
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%d-%H%M%S")
    prefix = "lc" if suite == "lifecycle" else suite[:4]
    return f"{prefix}-{stamp}-{secrets.token_hex(2)}"


@dataclass
class Progress:
    """Callbacks the CLI renders (a bar on a terminal, one line per unit otherwise)."""

    started: Callable[[int], None] = lambda total: None
    unit_done: Callable[[UnitOutcome, int, int], None] = lambda outcome, done, total: None


@dataclass
class RunResult:
    """How a run ended: its id, root (empty if unsealed), outcomes and the exit status.

    ``missing``: this process's planned units that did not finish; ``pending``: other
    shards' units not finished yet (so the run is not sealed, through no fault of ours);
    ``infra``: when every planned unit finished, those (``unit/attempt``) that ended in
    infrastructure errors, which keep the run unsealed so they can be retried
    (``--resume --retry-infra``) or the run sealed as it is (``seal``).
    """

    run_id: str
    root: str
    outcomes: list[UnitOutcome] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)
    infra: list[str] = field(default_factory=list)

    @property
    def failed(self) -> list[UnitOutcome]:
        return [o for o in self.outcomes if o.error]

    @property
    def status(self) -> int:
        """1 when own units are missing (or, unsharded, the run is unsealed) or every unit
        it ran failed for infra reasons, else 0."""
        unsealed = not self.root and not self.pending
        if self.missing or unsealed or (self.outcomes and len(self.failed) == len(self.outcomes)):
            return EXIT_FAILED
        return EXIT_OK


def _unit_states(ledger: Ledger, run_id: str) -> dict[str, dict[str, Any]]:
    """Per unit stream: its (item, attempt), whether it finished (with which error), was
    abandoned (interrupted, or retried after finishing) or ended at all."""
    units: dict[str, dict[str, Any]] = {}
    for event, _ in ledger.events(run_id):
        if isinstance(event, UnitStarted):
            b = event.body
            units[event.stream] = {"key": (b.protocol_id, b.attempt), "terminal": False,
                                   "finished": False, "abandoned": False, "error": ""}  # fmt: skip
        elif isinstance(event, UnitFinished) and event.stream in units:
            units[event.stream].update(terminal=True, finished=True, error=event.body.error)
        elif isinstance(event, UnitAbandoned) and event.stream in units:
            units[event.stream].update(terminal=True, abandoned=True)
    return units


def _infra_failed(state: dict[str, Any]) -> bool:
    """A finished unit stream that ended in an infrastructure error (not a bug of ours)."""
    return infra_failure(str(state["error"]))


def _select(items: list[Any], only: list[str], limit: int, what: str, path: str) -> list[Any]:
    """The items a subset run runs: those ``only`` names (all if none), in set order, then
    the first ``limit`` of them (all if 0); RunRefused naming an id the set lacks."""
    ids = [str(item.id) for item in items]
    for wanted in only:
        if wanted not in ids:
            has = ", ".join(ids[:5]) + (", ..." if len(ids) > 5 else "")
            raise RunRefused(f"--protocol {wanted}: no {what} with that id in {path} (it has "
                             f"{has})")  # fmt: skip
    chosen = [item for item in items if not only or str(item.id) in only]
    return chosen[:limit] if limit else chosen


def _agent_options(cfg: RunConfig, recorded: dict[str, Any] | None = None) -> dict[str, Any]:
    """``from_spec`` keywords: params (the recorded under the given), server, limits, time scale."""
    params = {**(recorded or {}), **cfg.agent_params}
    return {"params": params, "settings": cfg.settings, "base_url": cfg.base_url,
            "rpm": cfg.rpm, "tpm": cfg.tpm, "time_scale": cfg.time_scale}  # fmt: skip


async def _together(units: list[Coroutine[Any, Any, None]]) -> None:
    """Run ``units`` concurrently. When one fails (the ledger refused a write) or the run is
    cancelled, stop the others and wait for them, so none fails on its own later (at
    shutdown, where its error would be printed apart from the one line that says why)."""
    tasks = [asyncio.ensure_future(u) for u in units]
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


def _noun(suite: Suite) -> str:
    return "case" if suite.name == "provenance" else "protocol"


async def _model_preflight(agent: Agent) -> None:
    """One minimal model request (``agents.preflight``); RunRefused, with nothing written,
    when the endpoint cannot serve the run, so it fails in one line, not unit by unit."""
    try:
        await agents.preflight(agent)
    except PreflightFailed as exc:
        raise RunRefused(str(exc)) from None


def _provisioner(spec: PlatformSpec, **kw: Any) -> Provisioner:
    """``provisioner(...)``, with unusable options (a broken pack) refused as RunRefused."""
    try:
        return provisioner(spec, **kw)
    except ValueError as exc:
        raise RunRefused(str(exc)) from None


class RunDriver:
    """Runs (or resumes) one run of a suite into a ledger."""

    def __init__(
        self,
        ledger: Ledger,
        config: RunConfig,
        progress: Progress | None = None,
        *,
        clock: Clock | None = None,
        agent: Agent | None = None,
    ) -> None:
        self.ledger = ledger
        self.cfg = config
        self.progress = progress or Progress()
        self.clock = clock
        self._agent = agent
        self.run_id = config.resume or config.run_id
        self.outcomes: list[UnitOutcome] = []

    # -- planning ---------------------------------------------------------------------------

    def plan(self, suite: Suite, items: list[Any], k: int, run_id: str) -> list[UnitPlan]:
        """Every unit of the run, deterministically: pass by pass, item by item."""
        n, per = len(items), suite.identities_per_unit
        plans = []
        for j in range(1, k + 1):
            for i, item in enumerate(items):
                first = per * ((j - 1) * n + i) + 1
                ids = tuple(range(first, first + per))
                plans.append(UnitPlan(item, j, f"{run_id}/{item.id}/{j}", ids))
        return plans

    def _resume_plan(
        self,
        suite: Suite,
        items: list[Any],
        record: RunRecord,
        run_id: str,
        shard: Shard | None = None,
        retry_infra: bool = False,
    ) -> tuple[list[UnitPlan], list[tuple[str, str, str]]]:
        """Unfinished units as fresh streams and the (stream, new stream, why) to abandon.

        Reads only: the caller writes the abandonments once every check has passed. With a
        ``shard``, only its units, with identities no other shard can take. With
        ``retry_infra``, a unit whose every finished attempt ended in an infrastructure
        error runs again too, and those attempts are abandoned (kept, no longer counted).
        """
        mine = shard_ids(items, suite.entity, shard) if shard else None
        units = _unit_states(self.ledger, run_id)
        by_key: dict[tuple[str, int], list[str]] = {}
        for stream, info in units.items():
            by_key.setdefault(info["key"], []).append(stream)
        per = suite.identities_per_unit
        planned_top = len(items) * record.k * per
        next_identity = max(planned_top, highest_identity(self.ledger, run_id)) + 1
        fresh = identity_blocks(next_identity, per, shard)
        plans, abandon = [], []
        for plan in self.plan(suite, items, record.k, run_id):
            if mine is not None and plan.unit_id not in mine:
                continue
            streams = sorted(by_key.get((plan.unit_id, plan.attempt), []))
            done = [s for s in streams if units[s]["finished"] and not units[s]["abandoned"]]
            if done and not (retry_infra and all(_infra_failed(units[s]) for s in done)):
                continue
            if not streams:
                plans.append(plan)
                continue
            new = f"{plan.stream}-r{len(streams)}"
            abandon += [(s, new, INTERRUPTED) for s in streams if not units[s]["terminal"]]
            abandon += [(s, new, RETRIED) for s in done]
            resumes = (done or streams)[-1]
            plans.append(UnitPlan(plan.item, plan.attempt, new, next(fresh), resumes=resumes))
        return plans, abandon

    # -- pool -------------------------------------------------------------------------------

    def _pool_size(self, spec: PlatformSpec, units: int, per: int, k: int) -> int:
        needed, margin = pool_needed(units, per)
        if spec.kind != "external":
            if needed + margin > MAX_POOL:
                raise RunRefused(
                    f"the run needs {needed} identities plus a retry margin of {margin}; the "
                    f"embedded platform holds at most {MAX_POOL}: use fewer protocols or a "
                    "smaller --k"
                )
            return needed + margin
        available = self.cfg.pool_size
        if needed + margin > available:
            raise RunRefused(
                f"the run needs {needed} identities ({units // k} protocols x k={k} x {per}) "
                f"plus a retry margin of {margin}, but --pool-size is {available}"
            )
        return available

    # -- running ----------------------------------------------------------------------------

    async def _unit(
        self,
        sem: asyncio.Semaphore,
        suite: Suite,
        agent: Agent,
        client: PlatformClient,
        plan: UnitPlan,
        total: int,
    ) -> None:
        async with sem:
            outcome = await self._run_unit(suite, agent, client, plan)
        self.outcomes.append(outcome)
        self.progress.unit_done(outcome, len(self.outcomes), total)

    async def _run_unit(
        self, suite: Suite, agent: Agent, client: PlatformClient, plan: UnitPlan
    ) -> UnitOutcome:
        """One unit behind a fault barrier: whatever goes wrong ends it with an error."""
        labels = [identity_label(client, i) for i in plan.identities]
        unit_agent = agent.for_unit(
            UnitInfo(plan.stream, plan.unit_id, plan.attempt, labels[0], labels[-1])
        )
        ctx = UnitContext(self.ledger, client, unit_agent, plan, clock=self.clock)
        ctx.w.append(
            UnitStartedBody(
                protocol_id=plan.unit_id,
                attempt=plan.attempt,
                protocol_hash=benchledger_hash([plan.item]) if suite.name == "lifecycle" else "",
                teacher=labels[0],
                learner=labels[-1],
                resumes=plan.resumes,
            )
        )
        await ctx.commit()
        error = ""
        try:
            await suite.run_unit(ctx)
        except UnitFailed as exc:
            error = str(exc)
        except (LedgerError, asyncio.CancelledError):
            raise  # storage faults and Ctrl-C end the run; the unit resumes later
        except InfraError as exc:  # an adapter's failure outside its retries
            error = f"{ctx.stage}: {exc}"
        except Exception as exc:  # the fault barrier: one unit's bug never ends the run
            error = f"{INTERNAL_ERROR}{ctx.stage or 'the unit'}: {type(exc).__name__}: {exc}"
        trace = unit_trace_hash(body for _, body in ctx.log)
        ctx.w.append(UnitFinishedBody(outcome=dict(ctx.outcome), error=error, trace_hash=trace))
        await ctx.commit()
        return UnitOutcome(plan.stream, plan.unit_id, plan.attempt, dict(ctx.outcome), error)

    async def _run(
        self,
        suite: Suite,
        agent: Agent,
        prov: Provisioner,
        plans: list[UnitPlan],
        stack: AsyncExitStack,
        shared: PlatformClient | None,
        scope: str,
        reset_first: bool = False,
    ) -> None:
        """Run ``plans``; a shared platform is reset between passes (and, with
        ``reset_first``, before the first: a resume after earlier units used it)."""
        sem = asyncio.Semaphore(max(1, self.cfg.concurrency))
        total = len(plans)
        passes = sorted({p.attempt for p in plans})
        if prov.fresh_state:
            # Fresh state per pass (or per unit): every scope gets its own platform.
            clients: dict[Any, PlatformClient] = {}

            async def client_for(key: Any) -> PlatformClient:
                if key not in clients:
                    clients[key] = await stack.enter_async_context(prov.runtime())
                return clients[key]

            tasks = []
            for p in plans:
                key = p.stream if scope == "unit" else p.attempt
                tasks.append(self._unit(sem, suite, agent, await client_for(key), p, total))
            await _together(tasks)
            return
        assert shared is not None  # a shared platform's client comes from the preflight
        for n, j in enumerate(passes):
            if n or reset_first:
                prov.between_passes()
            await _together(
                [self._unit(sem, suite, agent, shared, p, total) for p in plans if p.attempt == j]
            )

    async def _preflight(
        self, prov: Provisioner, stack: AsyncExitStack
    ) -> tuple[PlatformClient | None, Description]:
        """What the platform says it is; RunRefused, with nothing written, if unreachable.

        A shared platform's client is kept for the run; a fresh-state platform is
        described on a runtime of its own and thrown away, so every unit's platform
        starts exactly as fresh as every other's.
        """
        try:
            if prov.fresh_state:
                async with prov.runtime() as probe:
                    return None, await probe.describe()
            client = await stack.enter_async_context(prov.runtime())
            return client, await client.describe()
        except InfraError as exc:
            raise RunRefused(
                f"platform preflight failed at {prov.spec.label}: {exc.message}; nothing was "
                "written (check --platform, --admin-key and --pool-base)"
            ) from None
        except HarnessError as exc:
            raise RunRefused(f"platform preflight failed: {exc}") from None

    async def execute(self) -> RunResult:
        """Run or resume; seal when every planned unit finished (and, unless
        ``seal_despite_infra``, none in an infrastructure error); the result says how it went."""
        cfg = self.cfg
        if cfg.resume:
            return await self._resume()
        suite = suite_for(cfg.suite)
        if hasattr(suite, "capture_timeout_s"):
            suite.capture_timeout_s = cfg.capture_timeout_s
        run_id = cfg.run_id or new_run_id(cfg.suite)
        try:
            check_run_id(run_id)
            spec = parse_platform(cfg.platform)
            agent = self._agent or agents.from_spec(cfg.agent, **_agent_options(cfg))
        except ValueError as exc:
            raise RunRefused(str(exc)) from None
        if cfg.runtime_scope not in ("pass", "unit"):
            raise RunRefused(f"runtime scope {cfg.runtime_scope!r}: use pass or unit")
        if cfg.runtime_scope == "unit" and spec.kind == "external":
            raise RunRefused("a fresh platform per unit needs an embedded platform")
        if cfg.pack and spec.kind == "external":
            raise RunRefused("--pack seeds the embedded platform; an external one has its own data")
        if cfg.reset_cmd and spec.kind != "external":
            raise RunRefused("--reset-cmd resets an external platform between passes; an "
                             "embedded one starts fresh for every pass")  # fmt: skip
        shard = cfg.shard if cfg.shard and cfg.shard.count > 1 else None
        if shard is not None and cfg.reset_cmd:
            raise RunRefused(
                "--reset-cmd resets the platform under every shard at once; sharded passes "
                "cannot be reset between: drop --reset-cmd (the run is then coupled at k > 1)"
            )
        if shard is None and self.ledger.store.head(run_id) is not None:
            raise RunRefused(f"run {run_id} already exists; resume it with --resume {run_id}")
        loaded = suite.load(cfg.protocols_path or suite.default_path())
        items = _select(loaded.items, cfg.protocol, cfg.limit, _noun(suite), loaded.path)
        subset = bool(cfg.protocol or cfg.limit)
        units = len(items) * cfg.k
        pool = self._pool_size(spec, units, suite.identities_per_unit, cfg.k)
        self.run_id = run_id
        plans = self.plan(suite, items, cfg.k, run_id)
        mine = plans
        if shard is not None:
            ids = shard_ids(items, suite.entity, shard)
            mine = [p for p in plans if p.unit_id in ids]
        await _model_preflight(agent)
        async with AsyncExitStack() as stack:
            prov = _provisioner(
                spec, pool_size=pool, admin_key=cfg.admin_key, pool_base=cfg.pool_base,
                reset_cmd=cfg.reset_cmd, k=cfg.k, pack=cfg.pack,
            )  # fmt: skip
            first, described = await self._preflight(prov, stack)
            reset = reset_record(cfg.reset_cmd, (cfg.admin_key, cfg.pool_base))
            record = RunRecord(
                suite=suite.name,
                platform=prov.record(described),
                protocols_path=loaded.path,
                protocol_set_hash=loaded.set_hash,
                units=[PlannedUnit(p.unit_id, p.attempt) for p in plans],
                k=cfg.k,
                agent=cfg.agent,
                # The effective params (defaults included), never a key: resume rebuilds from them.
                agent_params=dict(getattr(agent, "params", None) or {}),
                pool_size=pool if spec.kind == "external" else 0,
                reset_program=reset.program,  # never the command: it may carry secrets
                reset_digest=reset.digest,
                reset_salt=reset.salt,
                concurrency=cfg.concurrency,
                capture_timeout_s=cfg.capture_timeout_s,
                runtime_scope=cfg.runtime_scope,
                pack=cfg.pack,
                pack_hash=described.pack_hash,
                shards=shard.count if shard else 1,
                only=list(cfg.protocol),
                limit=cfg.limit,
                set_items=len(loaded.items) if subset else 0,
            )
            body = RunStartedBody(
                suite=suite.name,
                protocol_set_hash=loaded.set_hash,
                protocols=len(items),
                k=cfg.k,
                agent=agent.name,
                model=agent.model,
                platform=described.name
                + (" (embedded)" if spec.kind in ("embedded", "process") else ""),
                platform_version=described.version,
                coupled=prov.coupled,
                tool_version=TOOL_VERSION,
                record=record,
                prereg=cfg.prereg,
            )
            if shard is None:
                self.ledger.start_run(run_id, body)
            else:
                self._join(run_id, body, shard, mine)
            self.progress.started(len(mine))
            await self._run(suite, agent, prov, mine, stack, first, cfg.runtime_scope)
        return self._seal(run_id, mine)

    def _join(self, run_id: str, body: RunStartedBody, shard: Shard, mine: list[UnitPlan]) -> None:
        """Start the sharded run, or join it: RunRefused if its record differs from ours
        (naming every differing field) or if this shard's units were started already."""
        try:
            recorded = self.ledger.join_run(run_id, body)
        except RunSealed:
            raise RunRefused(
                f"run {run_id} is already sealed; shard {shard} has nothing to do"
            ) from None
        except ImportedRun as exc:  # another ledger's units: never joined as ours
            raise RunRefused(str(exc)) from None
        if recorded is None:
            return  # this shard started the run
        wrong = shard_mismatch(recorded, body)
        if wrong:
            raise RunRefused(
                f"shard {shard} cannot join run {run_id}: its configuration differs from the "
                f"run's record (recorded != this shard's): {'; '.join(wrong)}"
            )
        started = {info["key"] for info in _unit_states(self.ledger, run_id).values()}
        again = [f"{p.unit_id}/{p.attempt}" for p in mine if (p.unit_id, p.attempt) in started]
        if again:
            raise RunRefused(
                f"shard {shard} of run {run_id} has started before ({', '.join(again[:5])}): "
                f"resume it with --resume {run_id} --shard {shard}"
            )

    async def _resume(self) -> RunResult:
        cfg = self.cfg
        run_id = cfg.resume
        info = self.ledger.run_info(run_id)
        if info.root and cfg.retry_infra:
            raise RunRefused(self._sealed_retry(run_id, info.root))
        if info.root:
            raise RunRefused(
                f"run {run_id} is already sealed (root {info.root}); nothing to resume"
            )
        record = read_record(self.ledger, run_id)
        try:
            self.ledger.check_own(run_id)  # an imported run's units are another ledger's
        except ImportedRun as exc:
            raise RunRefused(str(exc)) from None
        shard = cfg.shard if cfg.shard and cfg.shard.count > 1 else None
        given = shard.count if shard else 1
        if given != record.shards:
            how = f"--shard i/{record.shards}" if record.shards > 1 else "no --shard"
            raise RunRefused(
                f"run {run_id} runs in {record.shards} shard(s), not {given} (shards: "
                f"{record.shards} != {given}): resume it with --resume {run_id} and {how}"
            )
        wrong = contradictions(cfg, record)
        if wrong:
            raise RunRefused(
                f"resuming run {run_id} with options that contradict its record: "
                + "; ".join(wrong)
            )
        if shard is None or "concurrency" not in cfg.given:  # a shard's own, if given
            cfg.concurrency = record.concurrency  # restored, as every recorded option is
        suite = suite_for(record.suite)
        if hasattr(suite, "capture_timeout_s"):
            suite.capture_timeout_s = record.capture_timeout_s
        # A shard may sit on another machine: its own paths, checked by hash below.
        local = shard is not None
        path = cfg.protocols_path if local and cfg.protocols_path else record.protocols_path
        pack = cfg.pack if local and cfg.pack else record.pack
        loaded = suite.load(path)
        if loaded.set_hash != record.protocol_set_hash:
            raise RunRefused(f"the protocol set at {path} changed since run {run_id} started")
        items = _select(loaded.items, record.only, record.limit, _noun(suite), path)
        spec = parse_platform(platform_option(record))
        if spec.kind == "external" and not (cfg.admin_key and cfg.pool_base):
            raise RunRefused(
                f"run {run_id} ran against {spec.url}: resuming needs --admin-key (or "
                "$BENCHLEDGER_ADMIN_KEY) and --pool-base again (keys are never recorded)"
            )
        reset_cmd = resume_reset_cmd(cfg, record, run_id)
        try:
            agent = self._agent or agents.from_spec(
                record.agent, **_agent_options(cfg, record.agent_params)
            )
        except ValueError as exc:
            raise RunRefused(str(exc)) from None
        plans, abandon = self._resume_plan(suite, items, record, run_id, shard, cfg.retry_infra)
        per = suite.identities_per_unit
        if spec.kind == "external":
            highest = max((max(p.identities) for p in plans), default=0)
            if highest > record.pool_size:
                raise RunRefused(
                    f"resuming needs pool identities up to {highest}, but the pool holds "
                    f"{record.pool_size}: start a new run with a larger --pool-size"
                )
            pool = record.pool_size
        else:
            top = max((max(p.identities) for p in plans), default=0)
            pool = max(top, len(items) * record.k * per)
            if pool > MAX_POOL:
                raise RunRefused(
                    f"resuming needs pool identities up to {pool}; the embedded platform "
                    f"holds at most {MAX_POOL}"
                )
        self.run_id = run_id
        await _model_preflight(agent)
        async with AsyncExitStack() as stack:
            prov = _provisioner(
                spec, pool_size=pool, admin_key=cfg.admin_key, pool_base=cfg.pool_base,
                reset_cmd=reset_cmd, k=record.k, pack=pack,
            )  # fmt: skip
            first, described = await self._preflight(prov, stack)
            if record.pack_hash and described.pack_hash != record.pack_hash:
                raise RunRefused(
                    f"the seed pack at {pack or 'the default'} changed since run {run_id} "
                    f"started (hash {described.pack_hash[:12]}, recorded {record.pack_hash[:12]})"
                )
            # Every check passed: only now mark the interrupted (and retried) streams.
            for stream, new, why in abandon:
                w = self.ledger.writer(stream)
                w.append(UnitAbandonedBody(reason=why, resumed_as=new))
                self.ledger.commit(w)
            self.progress.started(len(plans))
            used = highest_identity(self.ledger, run_id) > 0  # earlier units left state behind
            await self._run(suite, agent, prov, plans, stack, first, record.runtime_scope,
                            reset_first=used)  # fmt: skip
        return self._seal(run_id, plans)

    def _sealed_retry(self, run_id: str, root: str) -> str:
        """Why ``--retry-infra`` refuses a sealed run, and how to re-run its failed units."""
        failed = sorted({s["key"][0] for s in _unit_states(self.ledger, run_id).values()
                         if s["finished"] and not s["abandoned"] and _infra_failed(s)})  # fmt: skip
        why = (f"run {run_id} is sealed (root {root}) and a sealed run is final: --retry-infra "
               "cannot add attempts to it")  # fmt: skip
        if not failed:
            return why + " (it has no infra-failed units either)"
        again = " ".join(f"--protocol {p}" for p in failed[:5]) + (" ..." if failed[5:] else "")
        return (
            f"{why}; run its {len(failed)} infra-failed protocol(s) again as a new run: "
            f"benchledger run {again} (with the run's other options)"
        )

    def _seal(self, run_id: str, ran: list[UnitPlan]) -> RunResult:
        """Seal the run if every planned unit finished; otherwise name the missing ones:
        of the units this process ran in ``missing``, other shards' in ``pending``.

        A finished run with infra-failed units stays unsealed (naming them in ``infra``)
        unless ``seal_despite_infra``: a seal is final, and would leave them no retry.
        """
        infra = [] if self.cfg.seal_despite_infra else self.ledger.infra_failed(run_id)
        root, unfinished = "", []
        if infra:  # not sealed either way; units still missing are named first
            unfinished = self.ledger.unfinished(run_id)
        else:
            try:
                root = self.ledger.seal_complete(run_id)
            except UnitsMissing as exc:
                unfinished = exc.missing
        own = {f"{p.unit_id}/{p.attempt}" for p in ran}
        missing = [u for u in unfinished if u in own]
        pending = [u for u in unfinished if u not in own]
        return RunResult(run_id, root, list(self.outcomes), missing, pending,
                         [] if unfinished else infra)  # fmt: skip
