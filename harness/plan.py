"""A run's plan: everything a new run or a resume will do, decided before anything is written.

``plan_run`` checks every option rule once (RunRefused, naming the option) and turns a
``RunConfig`` into one ``RunPlan``: the suite, its items, the units this process runs,
the pool, the platform, the run record and (resuming) the streams to abandon. The
driver's one ``execute`` then provisions, preflights, writes, runs and seals it.

Units are (pass, item) pairs; pass j is attempt j. Unit i of pass j uses pool identities
``n*((j-1)*P + i) + 1 .. + n`` (n identities per unit); a resumed unit takes fresh ones
above the highest any unit of the run was ever given, so no unit inherits another's
memories.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import itertools
import math
import os
import re
import secrets
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any, Final

import msgspec

from benchledger.harness import agents
from benchledger.harness.agents.answering import PROMPT_HASH
from benchledger.harness.agents.base import Agent
from benchledger.harness.judge import JudgeRefused, make_judge, recorded_judge
from benchledger.harness.needs import Given, unmet
from benchledger.harness.platforms.embedded import MAX_POOL
from benchledger.harness.platforms.platform import (
    Platform,
    PlatformSpec,
    of_record,
    owner_of,
    resolve,
)
from benchledger.harness.record import (
    RunConfig,
    RunRefused,
    contradictions,
    highest_identity,
    platform_option,
    read_record,
    reset_record,
    resume_reset_cmd,
)
from benchledger.harness.suites import Suite, check_items_options, suite_for
from benchledger.harness.unit import UnitPlan
from benchledger.ledger import Ledger
from benchledger.ledger.errors import ImportedRun, UnusableInput
from benchledger.ledger.events import (
    PlannedUnit,
    PlatformRecord,
    RunRecord,
    UnitAbandonedEvent,
    UnitFinishedEvent,
    UnitStartedEvent,
    failed_units,
    infra_failure,
)
from benchledger.ledger.ledger import check_run_id
from benchledger.projections.suites.locomo.controls import (
    DEFAULT_CONTEXT_BUDGET,
    FULL_CONTEXT,
    control,
)
from benchledger.protocols.errors import InvalidInput, Problem
from benchledger.protocols.judges import PER_TYPE

INTERRUPTED: Final = "interrupted; re-run on resume"
RETRIED: Final = "infra-failed; re-run by --retry-infra"


@dataclass
class RunPlan:
    """One run as it will execute, new or resumed: nothing in it has been written yet.

    ``units``: the units this process runs; ``record``: the run's record
    (a new run's gets its platform and pack hash from the preflight); ``abandon``: the
    (stream, resumed as, why) a resume marks before it runs; ``reset_first``: a resume
    whose earlier units left state on a shared platform resets it before the first pass.
    """

    run_id: str
    suite: Suite
    items: list[Any]
    units: list[UnitPlan]
    pool: int
    spec: PlatformSpec
    record: RunRecord
    agent: Agent
    resumed: bool = False
    abandon: list[tuple[str, str, str]] = field(default_factory=list)
    reset_cmd: str = ""
    pack: str = ""  # the seed pack to provision (a queue worker's own copy, by hash)
    reset_first: bool = False
    concurrency: int = 1
    platform_options: dict[str, str] = field(default_factory=dict)  # what provisions it


def pool_needed(units: int, per_unit: int = 2) -> tuple[int, int]:
    """(identities the run needs, retry margin): units x per_unit plus max(4, 10%)."""
    needed = units * per_unit
    return needed, max(4, math.ceil(needed * 0.1))


def new_run_id(suite: Suite) -> str:
    """A fresh run id: the suite's prefix, the UTC time, four random hex digits."""
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%d-%H%M%S")
    return f"{suite.run_prefix}-{stamp}-{secrets.token_hex(2)}"


def unit_plans(suite: Suite, items: list[Any], k: int, run_id: str) -> list[UnitPlan]:
    """Every unit of the run, deterministically: pass by pass, item by item."""
    n, per = len(items), suite.identities_per_unit
    plans = []
    for j in range(1, k + 1):
        for i, item in enumerate(items):
            first = per * ((j - 1) * n + i) + 1
            plans.append(
                UnitPlan(item, j, f"{run_id}/{item.id}/{j}", tuple(range(first, first + per)))
            )
    return plans


def unit_states(ledger: Ledger, run_id: str) -> dict[str, dict[str, Any]]:
    """Per unit stream: its (item, attempt), whether it finished (with which error), was
    abandoned (interrupted, or retried after finishing) or ended at all."""
    units: dict[str, dict[str, Any]] = {}
    for event, _ in ledger.events(run_id):
        if isinstance(event, UnitStartedEvent):
            b = event.body
            units[event.stream] = {"key": (b.protocol_id, b.attempt), "terminal": False,
                                   "finished": False, "abandoned": False, "error": ""}  # fmt: skip
        elif isinstance(event, UnitFinishedEvent) and event.stream in units:
            units[event.stream].update(terminal=True, finished=True, error=event.body.error)
        elif isinstance(event, UnitAbandonedEvent) and event.stream in units:
            units[event.stream].update(terminal=True, abandoned=True)
    return units


def infra_failed(state: dict[str, Any]) -> bool:
    """A finished unit stream that ended in an infrastructure error (not a bug of ours)."""
    return infra_failure(str(state["error"]))


def _select(items: list[Any], only: list[str], limit: int, what: str, path: str) -> list[Any]:
    """The items a subset run runs: those ``only`` names (all if none), in set order, then
    the first ``limit`` of them (all if 0). Each of ``only`` is an id or a shell glob
    (``conv-26/*``, fnmatch's rules, case-sensitive); RunRefused naming one that matches
    no item of the set."""
    ids = [str(item.id) for item in items]
    for wanted in only:
        if not any(_matches(i, wanted) for i in ids):
            has = ", ".join(ids[:5]) + (", ..." if len(ids) > 5 else "")
            kind = "matching that pattern" if _GLOB.search(wanted) else "with that id"
            raise RunRefused(f"--protocol {wanted}: no {what} {kind} in {path} (it has "
                             f"{has})")  # fmt: skip
    chosen = [item for item in items if not only or any(_matches(str(item.id), w) for w in only)]
    return chosen[:limit] if limit else chosen


_GLOB: Final = re.compile(r"[*?\[]")


def _matches(item_id: str, wanted: str) -> bool:
    """Whether ``wanted`` (an id, or a glob when it holds ``*``, ``?`` or ``[``) names it."""
    return item_id == wanted or (bool(_GLOB.search(wanted)) and fnmatchcase(item_id, wanted))


def _grouped(suite: Suite, plans: list[UnitPlan]) -> list[UnitPlan]:
    """``plans`` as the suite groups their identities (its optional ``group_units``: the
    locomo suite's units of a sample share one), else as they are."""
    group = getattr(suite, "group_units", None)
    return list(group(plans)) if group is not None else plans


def _suite(name: str) -> Suite:
    try:
        return suite_for(name)
    except UnusableInput as exc:  # no such suite, or one that cannot be loaded
        raise RunRefused(str(exc)) from None


def _agent(cfg: RunConfig, spec: str, recorded: dict[str, Any] | None = None) -> Agent:
    """The run's agent from its spec: params (the recorded under the given), server,
    limits, time scale; RunRefused on an unusable spec."""
    params = {**(recorded or {}), **cfg.agent_params}
    try:
        return agents.from_spec(spec, params=params, settings=cfg.settings, base_url=cfg.base_url,
                                rpm=cfg.rpm, tpm=cfg.tpm, time_scale=cfg.time_scale)  # fmt: skip
    except ValueError as exc:
        raise RunRefused(str(exc)) from None


def _answering(cfg: RunConfig, suite: Any, agent: Agent) -> dict[str, Any]:
    """The run record's search depth, answer prompt hash and full-context budget (a suite
    that searches for its agents declares ``default_search_k``: locomo); RunRefused for
    ``--search-k`` or ``--context-budget`` where they do nothing."""
    depth = getattr(suite, "default_search_k", 0)
    kind = control(cfg.agent)
    if (cfg.search_k or cfg.context_budget) and not depth:
        raise RunRefused(f"--search-k and --context-budget apply to --suite locomo, not "
                         f"--suite {suite.name}")  # fmt: skip
    if cfg.search_k and kind:
        raise RunRefused(f"--search-k: --agent {cfg.agent} is a control that does not search")
    if cfg.context_budget and kind != FULL_CONTEXT:
        raise RunRefused("--context-budget is the budget of --agent full-context:SPEC")
    if not depth:
        return {}
    return {
        "search_k": 0 if kind else cfg.search_k or depth,
        "answer_prompt_hash": PROMPT_HASH if getattr(agent, "answers", False) else "",
        "control": kind,
        "context_budget": cfg.context_budget or DEFAULT_CONTEXT_BUDGET
        if kind == FULL_CONTEXT
        else 0,
    }


def _judge(cfg: RunConfig, suite: Suite, recorded: dict[str, Any] | None = None) -> Any:
    """The run's judge (``--judge``, or a resumed run's recorded one), handed to the suite;
    None without one. RunRefused when it cannot be made or the suite has no judge."""
    if not cfg.judge and not recorded:
        for option, given in (("--judge-prompt", cfg.judge_prompt or cfg.judge_prompt_path),
                              ("--judge-samples", cfg.judge_samples != 1)):  # fmt: skip
            if given:
                raise RunRefused(f"{option} sets up a judge: name it with --judge SPEC")
        return None
    use = getattr(suite, "use_judge", None)
    if use is None:
        raise RunRefused(f"--judge grades answers to questions; the {suite.name} suite has none "
                         "(use --suite locomo or --suite longmemeval)")  # fmt: skip
    try:
        if recorded:
            judge = recorded_judge(recorded, settings=cfg.settings)
        else:
            judge = make_judge(
                cfg.judge, prompt=cfg.judge_prompt, prompt_path=cfg.judge_prompt_path,
                samples=cfg.judge_samples, temperature=cfg.judge_temperature,
                seed=cfg.judge_seed, settings=cfg.settings,
                default_prompt=getattr(suite, "default_judge_prompt", ""),
            )  # fmt: skip
    except JudgeRefused as exc:
        raise RunRefused(str(exc)) from None
    if judge.prompt.name == PER_TYPE and suite.name != "longmemeval":
        raise RunRefused(f"--judge-prompt {PER_TYPE} picks LongMemEval's prompt by question "
                         f"type; the {suite.name} suite's questions have none")  # fmt: skip
    use(judge)
    return judge


def _agent_fits(agent: Agent, items: list[Any], path: str) -> None:
    """RunRefused when the agent cannot serve these items (a recording of another protocol
    set): checked before anything is written, never found unit by unit."""
    check = getattr(agent, "check_items", None)  # an agent bound to particular items has it
    if check is None:
        return
    try:
        check(items, path)
    except ValueError as exc:
        raise RunRefused(str(exc)) from None


def _foreign_options(cfg: RunConfig, platform: Platform) -> None:
    """RunRefused naming an option given that belongs to another platform than the run's."""
    own = {option.dest for option in platform.options}
    for name, value in sorted(cfg.platform_options.items()):
        if not value or name in own:
            continue
        found = owner_of(name)
        if found is None:
            raise RunRefused(f"platform option {name!r}: no installed platform takes it")
        owner, option = found
        does = f" {option.purpose}" if option.purpose else f" is {owner.name}'s option"
        raise RunRefused(f"{option.flag}{does}: use it with --platform {owner.name}")


def _platform_of(spec: PlatformSpec) -> Platform:
    """The registered platform that writes ``spec``'s kind (RunRefused if none is installed)."""
    try:
        return of_record(spec.kind)
    except LookupError as exc:
        raise RunRefused(str(exc)) from None


def _shared(spec: PlatformSpec) -> bool:
    """Whether the platform of ``spec`` is one running platform every pass shares."""
    return _platform_of(spec).shared


def settle(cfg: RunConfig) -> PlatformSpec:
    """The option rules every run (new or resumed) obeys, checked once: RunRefused naming the
    option; fills the defaults (the suite's among them) into ``cfg``; its platform."""
    if cfg.retry_infra and not cfg.resume:
        raise RunRefused("--retry-infra re-runs an unsealed run's infra-failed units: use it "
                         "with --resume RUN_ID")  # fmt: skip
    try:
        platform, spec = resolve(cfg.platform)
        _foreign_options(cfg, platform)
        settled = platform.settle(spec, cfg.platform_options)
    except ValueError as exc:
        raise RunRefused(str(exc)) from None
    external = platform.shared
    if settled != spec or external:  # as the platform normalised it: URL/mcp names URL
        cfg.platform, spec = settled.url, settled
    suite = _suite(cfg.suite)
    check_items_options(cfg.suite, cfg.items_options)
    suite.settle(cfg, external)
    if external and not cfg.resume and not (cfg.admin_key and cfg.pool_base and cfg.pool_size):
        raise RunRefused(
            "an external --platform needs --admin-key (or $BENCHLEDGER_ADMIN_KEY), "
            "--pool-base (or $BENCHLEDGER_POOL_BASE) and --pool-size"
        )
    # On resume the agent comes from the run record, which the plan checks.
    if "time_scale" in cfg.given and not cfg.agent.startswith("recorded:") and not cfg.resume:
        raise RunRefused(
            "--time-scale scales a recorded agent's latencies: use --agent recorded:DIR"
        )
    return spec


def _new_run_rules(cfg: RunConfig, spec: PlatformSpec) -> None:
    """The rules a new run's options obey among themselves (RunRefused naming the option)."""
    if cfg.runtime_scope not in ("pass", "unit"):
        raise RunRefused(f"runtime scope {cfg.runtime_scope!r}: use pass or unit")
    external = _shared(spec)
    if cfg.runtime_scope == "unit" and external:
        raise RunRefused("a fresh platform per unit needs an embedded platform")
    if cfg.pack and external:
        raise RunRefused("--pack seeds the embedded platform; an external one has its own data")
    if cfg.pack and not _platform_of(spec).seeded:
        raise RunRefused(f"--pack seeds the embedded platform; {_platform_of(spec).name} starts "
                         "empty")  # fmt: skip
    if cfg.reset_cmd and not external:
        raise RunRefused("--reset-cmd resets an external platform between passes; an "
                         "embedded one starts fresh for every pass")  # fmt: skip


def check_options(cfg: RunConfig) -> None:
    """Every option rule that needs neither the ledger nor the run's heavy modules (the
    MCP stack, a model SDK), checked on a copy of ``cfg``: what ``benchledger run`` checks
    before it imports them. RunRefused or InvalidInput (a missing file), in one line."""
    cfg = dataclasses.replace(cfg)  # settle fills in defaults; the plan settles its own
    spec = settle(cfg)
    if cfg.resume:
        return  # the rest comes from the run's record, which the plan reads
    try:
        if cfg.run_id:
            check_run_id(cfg.run_id)
        agents.check_spec(cfg.agent)
    except ValueError as exc:
        raise RunRefused(str(exc)) from None
    _new_run_rules(cfg, spec)  # the platform's own options were checked as it settled
    if cfg.pack:
        from benchledger.harness.platforms import embedded  # the refplatform door

        try:
            embedded.check_pack(cfg.pack)  # loaded once: the provisioner's is this one
        except ValueError as exc:
            raise RunRefused(str(exc)) from None
    # A suite whose own items live in files takes a file or folder: one that is missing
    # is refused now (another suite's items option may name anything; its load says).
    path = cfg.protocols_path
    if path and not os.path.exists(path) and os.path.exists(_suite(cfg.suite).default_path()):
        raise InvalidInput([Problem(path, None, "", "no such file or folder")])


def plan_run(ledger: Ledger, cfg: RunConfig, agent: Agent | None = None) -> RunPlan:
    """The plan of the run ``cfg`` asks for (a resume when ``cfg.resume``); RunRefused, with
    nothing written, when an option is unusable or contradicts the ledger."""
    spec = settle(cfg)
    if cfg.resume:
        return _plan_resume(ledger, cfg, agent)
    return _plan_new(ledger, cfg, spec, agent)


def _free_id(ledger: Ledger, run_id: str) -> str:
    """``RUN-2``, ``RUN-3``, ...: the first such id the ledger does not hold."""
    n = 2
    while ledger.store.head(f"{run_id}-{n}") is not None:
        n += 1
    return f"{run_id}-{n}"


def _plan_new(ledger: Ledger, cfg: RunConfig, spec: PlatformSpec, given: Agent | None) -> RunPlan:
    suite = _suite(cfg.suite)
    run_id = cfg.run_id or new_run_id(suite)
    try:
        check_run_id(run_id)
    except ValueError as exc:
        raise RunRefused(str(exc)) from None
    agent = given or _agent(cfg, cfg.agent)
    _new_run_rules(cfg, spec)
    external = _shared(spec)
    head = ledger.store.head(run_id)
    if head is not None and head.kind == "run_sealed":  # final: --resume would refuse it
        raise RunRefused(f"run {run_id} already exists and is sealed (final); give a new "
                         f"--run-id, such as {_free_id(ledger, run_id)}")  # fmt: skip
    if head is not None:
        raise RunRefused(f"run {run_id} already exists; resume it with --resume {run_id}")
    loaded = suite.load(cfg.protocols_path or suite.default_path())
    items = _select(loaded.items, cfg.protocol, cfg.limit, suite.item_noun, loaded.path)
    _agent_fits(agent, items, loaded.path)
    fits_pack = getattr(suite, "check_pack", None)  # a suite whose items need a seed pack
    if fits_pack is not None and not external and _platform_of(spec).seeded:
        fits_pack(loaded, items, cfg.pack)  # InvalidInput naming the protocol file and field
    subset = bool(cfg.protocol or cfg.limit)
    pool = _new_pool(spec, len(items) * cfg.k, suite.identities_per_unit, cfg.k, cfg.pool_size)
    plans = unit_plans(suite, items, cfg.k, run_id)
    mine = _grouped(suite, plans)
    reset = reset_record(cfg.reset_cmd, (cfg.admin_key, cfg.pool_base))
    record = RunRecord(
        suite=suite.name,
        platform=PlatformRecord(kind=spec.kind),  # what the platform says: at its preflight
        protocols_path=loaded.path,
        protocol_set_hash=loaded.set_hash,
        units=[PlannedUnit(p.unit_id, p.attempt) for p in plans],
        k=cfg.k,
        agent=cfg.agent,
        # The effective params (defaults included), never a key: resume rebuilds from them.
        agent_params=dict(getattr(agent, "params", None) or {}),
        pool_size=pool if external else 0,
        reset_program=reset.program,  # never the command: it may carry secrets
        reset_digest=reset.digest,
        reset_salt=reset.salt,
        concurrency=cfg.concurrency,
        capture_timeout_s=cfg.capture_timeout_s,
        runtime_scope=cfg.runtime_scope,
        pack=cfg.pack,
        only=list(cfg.protocol),
        limit=cfg.limit,
        set_items=len(loaded.items) if subset else 0,
        platform_options=_recorded_options(_platform_of(spec), cfg.platform_options),
        **_answering(cfg, suite, agent),
    )
    judge = _judge(cfg, suite)
    if judge is not None:  # its settings in the header: a new field, absent without one
        record = msgspec.structs.replace(record, judge=judge.record())
    suite.configure(record)
    return RunPlan(run_id, suite, items, mine, pool, spec, record, agent,
                   reset_cmd=cfg.reset_cmd, pack=cfg.pack, concurrency=cfg.concurrency,
                   platform_options=dict(cfg.platform_options))  # fmt: skip


def _recorded_options(platform: Platform, given: dict[str, str]) -> dict[str, str]:
    """The options given that ``platform`` marks ``recorded``, as the run record keeps them."""
    keep = {option.dest for option in platform.options if option.recorded}
    return {name: value for name, value in sorted(given.items()) if name in keep and value}


def _restored_options(cfg: RunConfig, record: RunRecord, run_id: str) -> dict[str, str]:
    """A resume's platform options: the recorded ones, with those given again (RunRefused
    when a given one contradicts the record: half a run must not search differently)."""
    for name, recorded in sorted(record.platform_options.items()):
        given = cfg.platform_options.get(name)
        if given and given != recorded:
            flag = "--" + name.replace("_", "-")
            raise RunRefused(f"resuming run {run_id} with options that contradict its record: "
                             f"{flag} {given} (the run recorded {recorded})")  # fmt: skip
    return {**cfg.platform_options, **record.platform_options}


def _new_pool(spec: PlatformSpec, units: int, per: int, k: int, available: int) -> int:
    needed, margin = pool_needed(units, per)
    if not _shared(spec):
        if needed + margin > MAX_POOL:
            raise RunRefused(
                f"the run needs {needed} identities plus a retry margin of {margin}; the "
                f"embedded platform holds at most {MAX_POOL}: use fewer protocols or a "
                "smaller --k"
            )
        return needed + margin
    if needed + margin > available:
        raise RunRefused(
            f"the run needs {needed} identities ({units // k} protocols x k={k} x {per}) "
            f"plus a retry margin of {margin}, but --pool-size is {available}"
        )
    return available


def _plan_resume(ledger: Ledger, cfg: RunConfig, given_agent: Agent | None) -> RunPlan:
    run_id = cfg.resume
    info = ledger.run_info(run_id)
    if info.root and cfg.retry_infra:
        raise RunRefused(_sealed_retry(ledger, run_id, info.root))
    if info.root:
        raise RunRefused(f"run {run_id} is already sealed (root {info.root}); nothing to resume")
    record = read_record(ledger, run_id)
    try:
        ledger.check_own(run_id)  # an imported run's units are another ledger's
    except ImportedRun as exc:
        raise RunRefused(str(exc)) from None
    wrong = contradictions(cfg, record)
    if wrong:
        raise RunRefused(
            f"resuming run {run_id} with options that contradict its record: " + "; ".join(wrong)
        )
    # Restored, as every recorded option is; a queue worker's own, if given.
    local = cfg.local
    concurrency = cfg.concurrency if local and "concurrency" in cfg.given else record.concurrency
    suite = _suite(record.suite)
    suite.configure(record)
    _judge(cfg, suite, dict(record.judge) or None)  # the recorded judge, asked again
    # A queue worker may sit on another machine: its own paths, checked by hash below.
    path = cfg.protocols_path if local and cfg.protocols_path else record.protocols_path
    pack = cfg.pack if local and cfg.pack else record.pack
    loaded = suite.load(path)
    if loaded.set_hash != record.protocol_set_hash:
        raise RunRefused(f"the protocol set at {path} changed since run {run_id} started")
    items = _select(loaded.items, record.only, record.limit, suite.item_noun, path)
    try:
        # The platform as given again (the same, by contradictions), else as recorded: a
        # command or URL only the record names is refused below, never started or sent to.
        given_platform = "platform" in cfg.given
        platform, spec = resolve(cfg.platform if given_platform else platform_option(record))
        platform.check_record(record.platform)
    except ValueError as exc:
        raise RunRefused(f"run {run_id}: {exc}") from None
    if not local:
        _needs_given(cfg, record, run_id)
    external = _shared(spec)
    if external and not (cfg.admin_key and cfg.pool_base):
        raise RunRefused(
            f"run {run_id} ran against {spec.url}: resuming needs --admin-key (or "
            "$BENCHLEDGER_ADMIN_KEY) and --pool-base again (keys are never recorded)"
        )
    reset_cmd = resume_reset_cmd(cfg, record, run_id)
    agent = given_agent or _agent(cfg, record.agent, record.agent_params)
    _agent_fits(agent, items, path)
    plans, abandon = _resume_units(ledger, suite, items, record, run_id, cfg.retry_infra)
    plans = _grouped(suite, plans)
    top = max((max(p.identities) for p in plans), default=0)
    if external:
        if top > record.pool_size:
            raise RunRefused(
                f"resuming needs pool identities up to {top}, but the pool holds "
                f"{record.pool_size}: start a new run with a larger --pool-size"
            )
        pool = record.pool_size
    else:
        pool = max(top, len(items) * record.k * suite.identities_per_unit)
        if pool > MAX_POOL:
            raise RunRefused(
                f"resuming needs pool identities up to {pool}; the embedded platform "
                f"holds at most {MAX_POOL}"
            )
    used = highest_identity(ledger, run_id) > 0  # earlier units left state behind
    return RunPlan(run_id, suite, items, plans, pool, spec, record, agent, resumed=True,
                   abandon=abandon, reset_cmd=reset_cmd, pack=pack,
                   reset_first=used, concurrency=concurrency,
                   platform_options=_restored_options(cfg, record, run_id))  # fmt: skip


def _needs_given(cfg: RunConfig, record: RunRecord, run_id: str) -> None:
    """RunRefused naming each command or server the run's record names that this resume
    was not given again (harness.needs): whoever wrote the ledger wrote the record."""
    try:  # cfg.platform is settled: its options are folded in (settle)
        platforms = frozenset({resolve(cfg.platform)[1].label})
    except ValueError as exc:
        raise RunRefused(str(exc)) from None
    # Named: given on the command line, or set by a library caller (not the default).
    default = RunConfig()
    platform_named = "platform" in cfg.given or cfg.platform != default.platform
    agent_named = "agent" in cfg.given or cfg.agent != default.agent
    given = Given(platforms if platform_named else frozenset(),
                  frozenset({cfg.agent}) if agent_named else frozenset(),
                  cfg.platform_options.get("embedder", ""),
                  mem0_llm=cfg.platform_options.get("mem0_llm", ""))  # fmt: skip
    missing = unmet(record, given)
    if missing:
        raise RunRefused(f"run {run_id} needs {'; '.join(missing)}: a resume runs no command "
                         "and contacts no server that only the run's record names")  # fmt: skip


def _resume_units(
    ledger: Ledger,
    suite: Suite,
    items: list[Any],
    record: RunRecord,
    run_id: str,
    retry_infra: bool = False,
) -> tuple[list[UnitPlan], list[tuple[str, str, str]]]:
    """Unfinished units as fresh streams and the (stream, new stream, why) to abandon.

    Reads only: execute writes the abandonments once every check has passed. Each
    re-run unit takes a fresh block of identities above the highest the run ever gave.
    With ``retry_infra``, a unit whose every finished attempt ended in an infrastructure
    error runs again too, and those attempts are abandoned (kept, no longer counted).
    """
    units = unit_states(ledger, run_id)
    by_key: dict[tuple[str, int], list[str]] = {}
    for stream, info in units.items():
        by_key.setdefault(info["key"], []).append(stream)
    per = suite.identities_per_unit
    planned_top = len(items) * record.k * per
    next_identity = max(planned_top, highest_identity(ledger, run_id)) + 1
    fresh = (tuple(range(first, first + per)) for first in itertools.count(next_identity, per))
    plans, abandon = [], []
    for plan in unit_plans(suite, items, record.k, run_id):
        streams = sorted(by_key.get((plan.unit_id, plan.attempt), []))
        done = [s for s in streams if units[s]["finished"] and not units[s]["abandoned"]]
        if done and not (retry_infra and all(infra_failed(units[s]) for s in done)):
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


def _sealed_retry(ledger: Ledger, run_id: str, root: str) -> str:
    """Why ``--retry-infra`` refuses a sealed run, and how to re-run its failed units."""
    # Per attempt (protocol/attempt), as the scorecard counts them; named by protocol.
    ends = [("/".join(map(str, s["key"])), str(s["error"] or ""))
            for s in unit_states(ledger, run_id).values()
            if s["finished"] and not s["abandoned"]]  # fmt: skip
    infra, harness = failed_units(ends)
    failed = sorted({unit.split("/")[0] for unit in infra})
    ours = sorted({unit.split("/")[0] for unit in harness})
    why = (f"run {run_id} is sealed (root {root}) and a sealed run is final: --retry-infra "
           "cannot add attempts to it")  # fmt: skip
    if not failed:
        if not ours:
            return why + " (it has no infra-failed units either)"
        named = ", ".join(ours[:5]) + (", ..." if ours[5:] else "")
        return (f"{why} (it has no infra-failed units; its {len(ours)} harness-failed "
                f"unit{'s' if len(ours) > 1 else ''} ({named}) failed in benchledger, not the "
                "infrastructure, and are never retried)")  # fmt: skip
    again = " ".join(f"--protocol {p}" for p in failed[:5]) + (" ..." if failed[5:] else "")
    return (
        f"{why}; run its {len(failed)} infra-failed protocol(s) again as a new run: "
        f"benchledger run {again} (with the run's other options)"
    )
