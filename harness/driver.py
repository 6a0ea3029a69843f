"""The suite-agnostic run driver: one ``execute`` of a run's plan (``harness.plan``).

A new run and a resume each become one ``RunPlan`` first, every option checked; then
``execute`` preflights the model and the platform, writes the run's start (or a resume's
abandonments), runs the units and seals the run if complete. Nothing is written before
the plan, the pool and the platform have been checked; a refused resume writes nothing.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Coroutine
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any, Final

import msgspec

from benchledger.harness import agents
from benchledger.harness.agents.base import Agent
from benchledger.harness.errors import HarnessError, InfraError
from benchledger.harness.logging import FailureLog
from benchledger.harness.models.errors import PreflightFailed
from benchledger.harness.plan import MAX_POOL, RunPlan, plan_run, pool_needed
from benchledger.harness.platforms.base import Clock, Description, PlatformClient
from benchledger.harness.platforms.provision import PlatformSpec, Provisioner, provisioner
from benchledger.harness.platforms.vocabulary import vocabulary_of
from benchledger.harness.probe import Probed, not_probed, probe
from benchledger.harness.record import RunConfig, RunRefused
from benchledger.harness.settings import Settings
from benchledger.harness.suites import run_config
from benchledger.harness.unit import UnitOutcome, UnitPlan, run_unit
from benchledger.ledger import Ledger
from benchledger.ledger.errors import UnitsMissing
from benchledger.ledger.events import RunStartedBody, UnitAbandonedBody, probe_stream
from benchledger.ledger.ledger import StreamWriter
from benchledger.projections import suites as read_suites

TOOL_VERSION: Final = "benchledger 0.1.0"

EXIT_OK, EXIT_FAILED = 0, 1

__all__ = ["MAX_POOL", "Progress", "RunDriver", "RunPlan", "RunResult", "pool_needed"]


@dataclass
class Progress:
    """Callbacks the CLI renders (a bar on a terminal, one line per unit otherwise)."""

    started: Callable[[int], None] = lambda total: None
    unit_done: Callable[[UnitOutcome, int, int], None] = lambda outcome, done, total: None


@dataclass
class RunResult:
    """How a run ended: its id, root (empty if unsealed), outcomes and the exit status.

    ``missing``: the planned units that did not finish; ``infra``: when every planned
    unit finished, those (``unit/attempt``) that ended in infrastructure errors, which
    keep the run unsealed so they can be retried (``--resume --retry-infra``) or the run
    sealed as it is (``seal``); ``harness``: the run's units (``unit/attempt``, this
    process's or not) that ended in a bug of ours, which did not run (their tracebacks are
    in ``log``, the run's failure log).
    """

    run_id: str
    root: str
    outcomes: list[UnitOutcome] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    infra: list[str] = field(default_factory=list)
    suite: str = ""  # the run's suite, by name
    harness: list[str] = field(default_factory=list)
    log: str = ""  # the run's failure log (harness/logging.py FailureLog), where they are

    @property
    def failed(self) -> list[UnitOutcome]:
        return [o for o in self.outcomes if o.error]

    @property
    def status(self) -> int:
        """1 when units are missing (or the run is unsealed), any unit of the run is
        harness-failed (it did not run: the run is not green), or every unit this process
        ran failed, else 0."""
        unsealed = not self.root
        everyone = self.outcomes and len(self.failed) == len(self.outcomes)
        if self.missing or unsealed or self.harness or everyone:
            return EXIT_FAILED
        return EXIT_OK


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


def _reused(plan: RunPlan, prov: Provisioner, held: int) -> None:
    """A new run on a shared platform that holds earlier runs' memories: with a
    ``--reset-cmd`` it is reset before the first pass too; without, one warning line naming
    the reset (its agents may find those memories and score otherwise than on a fresh one)."""
    if plan.reset_cmd:
        plan.reset_first = True
        return
    print(
        f"benchledger: warning: the platform at {prov.spec.label} already holds {held} memories "
        "and changesets from earlier runs, which this run's agents may find: reset it first "
        f"(refplatform: benchledger platform reset {prov.spec.label}), or give --reset-cmd "
        "(docs/platforms.md)",
        file=sys.stderr,
    )


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


def _grading_available(plan: RunPlan) -> None:
    """RunRefused, nothing written, when a module the run's suite grades with is absent
    (``SuitePlugin.grading_needs``): every unit would fail on it, and the run would seal
    numbers over the few that did not."""
    missing = read_suites.plugin(plan.suite.name).missing_modules()
    if missing:
        names = ", ".join(missing)
        raise RunRefused(
            f"suite {plan.suite.name} cannot grade here: its grading needs the module(s) "
            f"{names}, not installed in this Python ({sys.executable}); install them "
            "(`python3 -m pip install benchledger` brings benchledger's own), then run again"
        )


async def _probed(
    prov: Provisioner, client: PlatformClient, writer: StreamWriter, described: Description
) -> Probed:
    """The probe of a fresh-state platform on its preflight runtime (harness/probe.py), its
    calls staged on ``writer``; RunRefused, nothing written, when it cannot be measured."""
    found = await probe(client, prov.spec.label, writer, sinks=described.sinks)
    if found.refused:
        raise RunRefused(
            f"platform {prov.spec.label} refused by the probe: {found.refused}; "
            "nothing was written (`benchledger platform check` shows what works)"
        )
    return Probed(vocabulary_of(client), found)


def _preflight_refused(prov: Provisioner, exc: HarnessError) -> RunRefused:
    """Why the platform preflight refuses the run, nothing written."""
    if isinstance(exc, InfraError):
        return RunRefused(
            f"platform preflight failed at {prov.spec.label}: {exc.message}; nothing was "
            "written (check --platform, --admin-key and --pool-base)"
        )
    return RunRefused(f"platform preflight failed: {exc}")


class RunDriver:
    """Plans and executes (or resumes) one run of a suite into a ledger."""

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
        self.probed: Probed | None = None  # what the preflight's probe found (None: not probed)
        # The probe's calls and findings, staged on the run's probe stream until the run
        # starts (None: not probed); a resume's probe is never written (the run has one).
        self.probe_stream: StreamWriter | None = None
        self.progress = progress or Progress()
        self.clock = clock
        self._agent = agent
        self.run_id = config.resume or config.run_id
        self.outcomes: list[UnitOutcome] = []
        self.failures: FailureLog | None = None  # the run's, once its id is known

    def failure_log(self, run_id: str) -> FailureLog:
        """Where the tracebacks of ``run_id``'s harness failures go (``harness.logging``):
        the settings' log folder, every secret the run knows scrubbed."""
        settings = self.cfg.settings or Settings()
        secrets = (
            self.cfg.admin_key,
            self.cfg.pool_base,
            settings.admin_key,
            settings.pool_base,
            settings.anthropic_api_key,
            settings.openai_api_key,
        )
        self.failures = FailureLog(settings.log_dir, run_id, secrets=secrets, debug=self.cfg.debug)
        return self.failures

    def plan(self) -> RunPlan:
        """The run the configuration asks for, new or resumed (RunRefused, nothing written)."""
        plan = plan_run(self.ledger, self.cfg, self._agent)
        self.run_id = plan.run_id
        return plan

    # -- running ----------------------------------------------------------------------------

    async def _unit(
        self, sem: asyncio.Semaphore, plan: RunPlan, client: PlatformClient, unit: UnitPlan
    ) -> None:
        async with sem:
            outcome = await run_unit(plan.suite, self.ledger, client, plan.agent, unit,
                                     clock=self.clock, failures=self.failures)  # fmt: skip
        self.outcomes.append(outcome)
        self.progress.unit_done(outcome, len(self.outcomes), len(plan.units))

    async def _run(
        self, plan: RunPlan, prov: Provisioner, stack: AsyncExitStack, shared: PlatformClient | None
    ) -> None:
        """Run the plan's units; a shared platform is reset between passes (and, with
        ``reset_first``, before the first: a resume after earlier units used it)."""
        sem = asyncio.Semaphore(max(1, plan.concurrency))
        passes = sorted({u.attempt for u in plan.units})
        if prov.fresh_state:
            # Fresh state per pass (or per unit): every scope gets its own platform.
            clients: dict[Any, PlatformClient] = {}

            async def client_for(key: Any) -> PlatformClient:
                if key not in clients:
                    clients[key] = await stack.enter_async_context(prov.runtime())
                return clients[key]

            tasks = []
            for u in plan.units:
                key = u.stream if plan.record.runtime_scope == "unit" else u.attempt
                tasks.append(self._unit(sem, plan, await client_for(key), u))
            await _together(tasks)
            return
        assert shared is not None  # a shared platform's client comes from the preflight
        for n, j in enumerate(passes):
            if n or plan.reset_first:
                prov.between_passes()
            await _together(
                [self._unit(sem, plan, shared, u) for u in plan.units if u.attempt == j]
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
                async with prov.runtime() as fresh:
                    described = await fresh.describe()
                    self.probe_stream = self.ledger.new_stream(probe_stream(self.run_id))
                    self.probed = await _probed(prov, fresh, self.probe_stream, described)
                    return None, described
            client = await stack.enter_async_context(prov.runtime())
            described = await client.describe()
            self.probed = Probed(vocabulary_of(client), not_probed(prov.spec.label, client))
            return client, described
        except HarnessError as exc:
            raise _preflight_refused(prov, exc) from None

    async def execute(self, plan: RunPlan | None = None) -> RunResult:
        """Execute ``plan`` (this configuration's, if none): preflight the model and the
        platform, start the run (or mark a resume's abandoned streams), run its units, and
        seal when every planned unit finished (and, unless ``seal_despite_infra``, none in
        an infrastructure error); the result says how it went."""
        plan = plan or self.plan()
        self.run_id = plan.run_id
        self.failure_log(plan.run_id)
        _grading_available(plan)
        await _model_preflight(plan.agent)
        async with AsyncExitStack() as stack:
            prov = self.provisioner(plan)
            first, described = await self._preflight(prov, stack)
            if described.held and not plan.resumed:
                _reused(plan, prov, described.held)
            if plan.resumed:
                self._continue(plan, described)
            else:
                self._start(plan, prov, described)
            self.progress.started(len(plan.units))
            await self._run(plan, prov, stack, first)
        result = self._seal(plan.run_id)
        result.suite = plan.suite.name
        return result

    def provisioner(self, plan: RunPlan, pool: int = 0) -> Provisioner:
        """The plan's platform provisioner (``pool``: a larger pool than the plan's)."""
        return _provisioner(
            plan.spec, pool_size=max(pool, plan.pool), admin_key=self.cfg.admin_key,
            pool_base=self.cfg.pool_base, reset_cmd=plan.reset_cmd, k=plan.record.k,
            pack=plan.pack, settings=self.cfg.settings, options=plan.platform_options,
        )  # fmt: skip

    async def start(self, plan: RunPlan) -> None:
        """A queued run's start: preflight the model and the platform, then write its
        ``run_started``; its units are run by queue workers (``harness.work``)."""
        self.run_id = plan.run_id
        _grading_available(plan)
        await _model_preflight(plan.agent)
        async with AsyncExitStack() as stack:
            prov = self.provisioner(plan)
            _, described = await self._preflight(prov, stack)
            if described.held:
                _reused(plan, prov, described.held)
            self._start(plan, prov, described)

    async def join(self, plan: RunPlan, prov: Provisioner, stack: AsyncExitStack) -> PlatformClient:
        """A queue worker taking up a started run: preflight the model and the platform
        (the pack checked against the record); the platform's client, kept in ``stack``
        (a fresh-state platform's: the runtime of the worker's first pass, described
        before any unit uses it, so no runtime is started only to be described). Writes
        nothing."""
        self.failure_log(plan.run_id)  # for the worker's units (``failures``)
        _grading_available(plan)
        await _model_preflight(plan.agent)
        try:
            client = await stack.enter_async_context(prov.runtime())
            described = await client.describe()
        except HarnessError as exc:
            raise _preflight_refused(prov, exc) from None
        self._check_pack(plan, described)
        return client

    def _start(self, plan: RunPlan, prov: Provisioner, described: Description) -> None:
        """Write a new run's ``run_started``, its record completed
        with what the platform said it is."""
        record = msgspec.structs.replace(
            plan.record, platform=prov.record(described), pack_hash=described.pack_hash,
            **(self.probed.recorded() if self.probed is not None else {}),
        )  # fmt: skip
        told = getattr(plan.suite, "described", None)  # a suite reading what the platform is
        if told is not None:
            told(record)
        body = RunStartedBody(
            suite=plan.suite.name,
            protocol_set_hash=record.protocol_set_hash,
            protocols=len(plan.items),
            k=record.k,
            agent=plan.agent.name,
            model=plan.agent.model,
            platform=prov.run_label(described),
            platform_version=described.version,
            coupled=prov.coupled,
            tool_version=TOOL_VERSION,
            config=run_config(plan.suite),
            record=record,
            prereg=self.cfg.prereg,
        )
        self.ledger.start_run(plan.run_id, body)
        if self.probe_stream is not None:  # the probe's calls, then its findings
            self.ledger.commit(self.probe_stream)

    def _continue(self, plan: RunPlan, described: Description) -> None:
        """A resume, its platform checked: mark the interrupted (and retried) streams."""
        self._check_pack(plan, described)
        # Every check passed: only now mark the interrupted (and retried) streams.
        for stream, new, why in plan.abandon:
            w = self.ledger.writer(stream)
            w.append(UnitAbandonedBody(reason=why, resumed_as=new))
            self.ledger.commit(w)

    @staticmethod
    def _check_pack(plan: RunPlan, described: Description) -> None:
        record = plan.record
        if record.pack_hash and described.pack_hash != record.pack_hash:
            raise RunRefused(
                f"the seed pack at {plan.pack or 'the default'} changed since run "
                f"{plan.run_id} started (hash {described.pack_hash[:12]}, recorded "
                f"{record.pack_hash[:12]})"
            )

    def _seal(self, run_id: str) -> RunResult:
        """Seal the run if every planned unit finished; otherwise name the missing ones
        (``missing``).

        A finished run with infra-failed units stays unsealed (naming them in ``infra``)
        unless ``seal_despite_infra``: a seal is final, and would leave them no retry.
        """
        infra, harness = self.ledger.failed(run_id)
        if self.cfg.seal_despite_infra:
            infra = []
        root, unfinished = "", []
        if infra:  # not sealed either way; units still missing are named first
            unfinished = self.ledger.unfinished(run_id)
        else:
            try:
                root = self.ledger.seal_complete(run_id)
            except UnitsMissing as exc:
                unfinished = exc.missing
        log = self.failures.path if self.failures is not None else ""
        return RunResult(run_id, root, list(self.outcomes), unfinished,
                         [] if unfinished else infra, harness=harness, log=log)  # fmt: skip
