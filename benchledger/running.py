"""``run`` and ``run_async``: the benchmark run from Python, with the options of ``benchledger
run`` as keyword arguments.

The same code as the command runs it: the options become one ``RunConfig``, the harness
plans it (``harness.plan.plan_run``: every option checked, nothing written) and the driver
executes the plan (``RunDriver.execute``); the finished run is then read back through the
verified door and scored. Settings (keys, the default ledger) are a value passed in,
never read from the environment here.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Final, ParamSpec, TypeVar

from benchledger.harness.record import RESTORED, RunConfig, RunRefused
from benchledger.harness.settings import Settings
from benchledger.ledger.events import Preregistration
from benchledger.ledgers import location_of, new_or_existing
from benchledger.reading import open_run
from benchledger.scoring import Scorecard

if TYPE_CHECKING:  # the driver loads the run's heavy imports: only when a run starts
    from benchledger.harness.driver import Progress
    from benchledger.ledger.signing import Signer

__all__ = ["RunResult", "run", "run_async"]

P = ParamSpec("P")
T = TypeVar("T")

EXIT_OK, EXIT_FAILED = 0, 1


# `--shard i/n` (a static split by entity, one process each) was retired for the queue.
SHARD_RETIRED: Final = (
    "--shard i/n was retired: queue the run with `benchledger run --queue --ledger "
    "postgresql://...` and start `benchledger worker` processes on each machine "
    "(docs/scaling.md)"
)


@dataclass(frozen=True)
class RunResult:
    """How a run ended: its id, the sealed Merkle root (hex; "" when not sealed), its
    scorecard, and what kept it unsealed if anything did."""

    run_id: str
    root: str
    suite: str
    scorecard: Scorecard
    ledger: str  # where it was written (a path or URL; "" for a Ledger passed in)
    missing: tuple[str, ...] = ()  # the planned units that did not finish
    infra: tuple[str, ...] = ()  # units ended in infrastructure errors (run left unsealed)
    failed: tuple[str, ...] = ()  # ``stream: error`` of each unit of this call that failed
    exit_code: int = EXIT_OK  # what ``benchledger run`` would exit with
    # Units of the run that ended in a bug of ours (harness failures: they did not run, so
    # the run is not green, exit 1), and the local log holding their tracebacks.
    harness: tuple[str, ...] = ()
    log: str = ""

    @property
    def sealed(self) -> bool:
        return bool(self.root)


def _at_least_one(**values: int | None) -> None:
    """RunRefused naming the option when a count is below 1 (as the command's parser does)."""
    for name, value in values.items():
        if value is not None and value < 1:
            raise RunRefused(f"{name} must be at least 1, not {value}")


def config(
    *,
    suite: str = "lifecycle",
    protocols: str | None = None,
    agent: str | None = None,
    platform: str | None = None,
    k: int | None = None,
    limit: int | None = None,
    protocol: Sequence[str] | None = None,
    concurrency: int | None = None,
    run_id: str = "",
    resume: str = "",
    shard: str | None = None,
    pack: str | None = None,
    platform_scope: str | None = None,
    pool_size: int | None = None,
    reset_cmd: str | None = None,
    admin_key: str = "",
    pool_base: str = "",
    platform_options: Mapping[str, object] | None = None,
    items_options: Sequence[str] = (),
    base_url: str = "",
    rpm: int | None = None,
    tpm: int | None = None,
    max_tokens: int | None = None,
    temperature: float | None = None,
    top_p: float | None = None,
    top_k: int | None = None,
    time_scale: float | None = None,
    retry_infra: bool = False,
    seal_despite_infra: bool = False,
    prereg: Preregistration | None = None,
    settings: Settings | None = None,
    search_k: int | None = None,
    context_budget: int | None = None,
) -> RunConfig:
    """The run configuration these options ask for, as ``benchledger run`` builds it from
    its own (an option left None is not given: a resume takes it from the run's record)."""
    _at_least_one(k=k, limit=limit, concurrency=concurrency, pool_size=pool_size, rpm=rpm,
                   tpm=tpm, max_tokens=max_tokens, top_k=top_k, search_k=search_k,
                   context_budget=context_budget)  # fmt: skip
    conf = settings or Settings()
    # Options a resume takes from the run record (record.RESTORED, the one table): given
    # explicitly, they must agree with it.
    value: dict[str, object] = {
        "protocols": protocols, "agent": agent, "k": k, "concurrency": concurrency,
        "pool_size": pool_size, "platform": platform, "reset_cmd": reset_cmd,
        "platform_scope": platform_scope, "pack": pack, "protocol": protocol, "limit": limit,
        "search_k": search_k, "context_budget": context_budget,
    }  # fmt: skip
    given = {
        name for name, r in RESTORED.items() if any(value.get(o) is not None for o in r.options)
    }
    if items_options:
        given.add("protocols_path")
    sampling = {"max_tokens": max_tokens, "temperature": temperature, "top_p": top_p,
                "top_k": top_k}  # fmt: skip
    agent_params = {key: value for key, value in sampling.items() if value is not None}
    if agent_params:
        given.add("agent_params")
    if time_scale is not None:
        given.add("time_scale")
    if shard:
        raise RunRefused(SHARD_RETIRED)
    fields, options = platform_values(platform_options or {}, conf)
    return RunConfig(
        protocols_path=protocols or "",
        items_options=tuple(items_options),
        agent=agent or "scripted",
        platform=platform or "embedded",
        platform_options=options,
        admin_key=admin_key or str(fields.get("admin_key") or ""),
        pool_base=pool_base or str(fields.get("pool_base") or ""),
        pool_size=pool_size or 0,
        k=k or 1,
        concurrency=concurrency or 4,
        run_id=run_id,
        reset_cmd=reset_cmd or "",
        resume=resume,
        suite=suite,
        runtime_scope=platform_scope or "pass",
        pack=pack or "",
        given=frozenset(given),
        agent_params=agent_params,
        base_url=base_url,
        rpm=rpm or 0,
        tpm=tpm or 0,
        time_scale=1.0 if time_scale is None else float(time_scale),
        settings=conf,
        prereg=prereg,
        protocol=list(dict.fromkeys(protocol or ())),  # each id once, as given
        limit=limit or 0,
        retry_infra=retry_infra,
        seal_despite_infra=seal_despite_infra,
        search_k=search_k or 0,
        context_budget=context_budget or 0,
    )


def platform_values(
    given: Mapping[str, object], settings: Settings
) -> tuple[dict[str, object], dict[str, str]]:
    """The values of the options the installed platforms declare, by name (a ``setting``
    fills one not given): those named like a ``RunConfig`` field, and the rest, which
    become ``RunConfig.platform_options``."""
    from benchledger.harness.platforms.platform import declared_options

    own = {f.name for f in dataclasses.fields(RunConfig)}
    fields: dict[str, object] = {}
    options: dict[str, str] = {}
    for option in declared_options():
        value = given.get(option.dest)
        if value is None and option.setting:
            value = getattr(settings, option.setting, None) or None
        if value is not None:
            if option.dest in own:
                fields[option.dest] = value
            else:
                options[option.dest] = str(value)
    unknown = sorted(set(given) - {o.dest for o in declared_options()})
    if unknown:
        raise RunRefused(f"no installed platform declares the option(s) {', '.join(unknown)}")
    return fields, options


def signer_of(sign_key: str | None, settings: Settings) -> Signer | None:
    """The signer of ``sign_key`` (else the settings' signing key); None if neither."""
    path = sign_key or settings.signing_key
    if not path:
        return None
    from benchledger.ledger.keys import load_private_key
    from benchledger.ledger.signing import Signer

    try:
        tool = f"benchledger {version('benchledger')}"
    except PackageNotFoundError:
        tool = "benchledger"
    return Signer(load_private_key(path), tool)


def _scored(run_id: str, location: str, sealed: bool) -> Scorecard:
    """The finished run read back through the door, as every display reads it, and scored
    (with the log-driven replay its card may count, once the run is sealed)."""
    return open_run(run_id, ledger=location).scorecard(replay=sealed)


async def run_async(
    *,
    ledger: str | None = None,
    suite: str = "lifecycle",
    protocols: str | None = None,
    agent: str | None = None,
    platform: str | None = None,
    k: int | None = None,
    limit: int | None = None,
    protocol: Sequence[str] | None = None,
    concurrency: int | None = None,
    run_id: str = "",
    resume: str = "",
    shard: str | None = None,
    pack: str | None = None,
    platform_scope: str | None = None,
    pool_size: int | None = None,
    reset_cmd: str | None = None,
    admin_key: str = "",
    pool_base: str = "",
    platform_options: Mapping[str, object] | None = None,
    base_url: str = "",
    rpm: int | None = None,
    tpm: int | None = None,
    max_tokens: int | None = None,
    temperature: float | None = None,
    top_p: float | None = None,
    top_k: int | None = None,
    time_scale: float | None = None,
    retry_infra: bool = False,
    seal_despite_infra: bool = False,
    prereg: Preregistration | None = None,
    sign_key: str | None = None,
    settings: Settings | None = None,
    progress: Progress | None = None,
    debug: bool = False,
) -> RunResult:
    """``run``, awaited in the caller's event loop (see ``run`` for the options)."""
    conf = settings or Settings()
    cfg = config(
        suite=suite, protocols=protocols, agent=agent, platform=platform, k=k, limit=limit,
        protocol=protocol, concurrency=concurrency, run_id=run_id, resume=resume, shard=shard,
        pack=pack, platform_scope=platform_scope, pool_size=pool_size, reset_cmd=reset_cmd,
        admin_key=admin_key, pool_base=pool_base, platform_options=platform_options,
        base_url=base_url, rpm=rpm, tpm=tpm,
        max_tokens=max_tokens, temperature=temperature, top_p=top_p, top_k=top_k,
        time_scale=time_scale, retry_infra=retry_infra, seal_despite_infra=seal_despite_infra,
        prereg=prereg, settings=conf,
    )  # fmt: skip
    cfg.debug = debug
    from benchledger.harness.driver import RunDriver

    signer = signer_of(sign_key, conf)  # a bad key file: refused, nothing written
    location = location_of(ledger, conf)
    with new_or_existing(location) as led:  # refused before any run: no new ledger left
        led.signer = signer
        driver = RunDriver(led, cfg, progress)
        # Plan (every option checked, nothing written), then the one execute.
        done = await driver.execute(driver.plan())
    led.store.close()
    # Off the event loop: a card that counts a log-driven replay runs one, in a loop of its own.
    scorecard = await asyncio.to_thread(_scored, done.run_id, location, bool(done.root))
    status = done.status
    if done.missing or done.infra or (status == EXIT_OK and scorecard.verdict is False):
        status = EXIT_FAILED
    return RunResult(
        run_id=done.run_id,
        root=done.root,
        suite=done.suite,
        scorecard=scorecard,
        ledger=location,
        missing=tuple(done.missing),
        infra=tuple(done.infra),
        failed=tuple(f"{o.stream}: {o.error}" for o in done.failed),
        exit_code=status,
        harness=tuple(done.harness),
        log=done.log if done.harness else "",
    )


def _blocking(coroutine: Callable[P, Coroutine[object, object, T]]) -> Callable[P, T]:
    """``coroutine`` as a blocking call with the same (typed) signature: its own event loop."""

    @functools.wraps(coroutine)
    def call(*args: P.args, **kwargs: P.kwargs) -> T:
        return asyncio.run(coroutine(*args, **kwargs))

    return call


run = _blocking(run_async)
run.__doc__ = (
    "Run a suite into ``ledger`` (a path or ``postgresql://`` URL; default: the settings'), "
    "seal it when every planned unit finished, and score it: ``benchledger run`` with its "
    "options as keyword arguments (``protocols`` names the suite's items: a protocol set, a "
    "cases file or tasks). Raises RunRefused (exit 2, nothing written) when an option is "
    "unusable; a run stopped by the ledger or the platform keeps what it committed."
)
