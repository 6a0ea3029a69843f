"""``run``: translate the options into a runner configuration, drive it, show progress."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Callable
from typing import Any

from cli import provenance, trust
from cli.common import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    UsageError,
    ledger_arg,
    number,
    open_ledger,
    whole,
)
from harness import settings
from harness.errors import HarnessError
from ledger import LedgerError, UnknownRun


def _progress(suite: str = "lifecycle") -> tuple[Any, Callable[[], None]]:
    """Progress callbacks: a rich bar on a terminal, one line per finished unit otherwise."""
    from harness.driver import Progress

    if sys.stdout.isatty():
        from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
        from rich.progress import Progress as Bar

        bar = Bar(
            TextColumn("units"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[failures]} failed"),
            TimeElapsedColumn(),
        )
        task = bar.add_task("run", total=None, failures=0)

        def started(total: int) -> None:
            bar.start()
            bar.update(task, total=total)

        def done(outcome: Any, n: int, total: int) -> None:
            failed = int(bar.tasks[0].fields["failures"]) + bool(outcome.error)
            bar.update(task, completed=n, failures=failed)

        return Progress(started, done), bar.stop

    def started_plain(total: int) -> None:
        print(f"running {total} units", flush=True)

    def done_plain(outcome: Any, n: int, total: int) -> None:
        status = (
            f"error: {outcome.error}" if outcome.error else ("pass" if outcome.passed else "fail")
        )
        if suite == provenance.SUITE:
            status = provenance.unit_status(outcome)
        print(
            f"unit {n}/{total} {outcome.protocol_id} attempt {outcome.attempt}: {status}",
            flush=True,
        )

    return Progress(started_plain, done_plain), lambda: None


# Options a resume takes from the run record; given explicitly they must agree with it.
_RESTORABLE = {
    "protocols": "protocols_path",
    "cases": "protocols_path",
    "agent": "agent",
    "k": "k",
    "concurrency": "concurrency",
    "pool_size": "pool_size",
    "platform": "platform",
    "reset_cmd": "reset_cmd",
    "platform_scope": "runtime_scope",
    "pack": "pack",
    "protocol": "protocol",
    "limit": "limit",
}
_DEFAULTS = {"agent": "scripted", "platform": "embedded", "k": 1, "concurrency": 4,
             "platform_scope": "pass"}  # fmt: skip
# Sampling options -> the request parameter each sets (recorded in every model request).
_SAMPLING = {"max_tokens": "max_tokens", "temperature": "temperature", "top_p": "top_p",
             "top_k": "top_k"}  # fmt: skip


def _agent_params(args: argparse.Namespace) -> dict[str, Any]:
    """The sampling parameters the options set (their ranges are checked as they parse)."""
    return {key: getattr(args, opt) for opt, key in _SAMPLING.items()
            if getattr(args, opt) is not None}  # fmt: skip


def _time_scale(args: argparse.Namespace, agent: str) -> float:
    """``--time-scale`` (1.0 unless given; >= 0 as it parses); UsageError unless recorded."""
    if args.time_scale is None:
        return 1.0
    # On resume the agent comes from the run record, which the driver checks.
    if not agent.startswith("recorded:") and not args.resume:
        raise UsageError(
            "--time-scale scales a recorded agent's latencies: use --agent recorded:DIR"
        )
    return float(args.time_scale)


def _with_command(platform: str, cmd: str | None) -> str:
    """``--platform server-memory --server-memory-cmd CMD`` as the one platform it names."""
    from harness.platforms.provision import SERVER_MEMORY_CMD

    if cmd is None:
        return platform
    if platform != "server-memory":
        raise UsageError(
            "--server-memory-cmd starts server-memory with the given command: use it with "
            "--platform server-memory (no @VERSION: the command decides the version)"
        )
    return SERVER_MEMORY_CMD + cmd


def _config(args: argparse.Namespace) -> Any:
    """The run configuration the options ask for (secrets resolved from the settings)."""
    from harness.platforms.provision import parse_platform
    from harness.record import RunConfig

    given = frozenset(_RESTORABLE[o] for o in _RESTORABLE if getattr(args, o) is not None)
    agent_params = _agent_params(args)
    if agent_params:
        given |= {"agent_params"}
    value: dict[str, Any] = {
        o: getattr(args, o) if getattr(args, o) is not None else _DEFAULTS.get(o)
        for o in _RESTORABLE
    }
    if args.retry_infra and not args.resume:
        raise UsageError("--retry-infra re-runs an unsealed run's infra-failed units: use it "
                         "with --resume RUN_ID")  # fmt: skip
    shard = _shard(args)
    value["platform"] = _with_command(value["platform"], args.server_memory_cmd)
    try:
        spec = parse_platform(value["platform"])
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if spec.kind == "external":  # as parse_platform normalised it: URL/mcp names URL
        value["platform"] = spec.url
    provenance.suite_defaults(args, value, spec.kind == "external")
    conf = settings.load()
    admin_key = args.admin_key or conf.admin_key
    pool_base = args.pool_base or conf.pool_base
    if (
        spec.kind == "external"
        and not args.resume
        and not (admin_key and pool_base and args.pool_size)
    ):
        raise UsageError(
            "an external --platform needs --admin-key (or $BENCHLEDGER_ADMIN_KEY), "
            "--pool-base (or $BENCHLEDGER_POOL_BASE) and --pool-size"
        )
    return RunConfig(
        protocols_path=value["cases"] or value["protocols"] or "",
        agent=value["agent"],
        platform=value["platform"],
        admin_key=admin_key,
        pool_base=pool_base,
        pool_size=value["pool_size"] or 0,
        k=value["k"],
        concurrency=value["concurrency"],
        run_id=args.run_id or "",
        reset_cmd=value["reset_cmd"] or "",
        resume=args.resume or "",
        suite=args.suite,
        runtime_scope=value["platform_scope"],
        pack=value["pack"] or "",
        given=given,
        agent_params=agent_params,
        base_url=args.base_url or "",
        rpm=args.rpm or 0,
        tpm=args.tpm or 0,
        time_scale=_time_scale(args, value["agent"]),
        settings=conf,
        prereg=trust.prereg_for_run(args),
        shard=shard,
        protocol=list(dict.fromkeys(value["protocol"] or ())),  # each id once, as given
        limit=value["limit"] or 0,
        retry_infra=args.retry_infra,
        seal_despite_infra=args.seal_despite_infra,
    )


def _shard(args: argparse.Namespace) -> Any:
    """``--shard i/n`` parsed (None without it); every shard must name the run."""
    from harness.sharding import parse_shard

    if not args.shard:
        return None
    try:
        shard = parse_shard(args.shard)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if not (args.run_id or args.resume):
        raise UsageError("--shard needs --run-id ID (every shard names the same run) or --resume")
    return shard


def ledger_has_runs(ledger: Any) -> bool:
    """Whether the ledger holds any run (True when it cannot even say: keep it)."""
    try:
        return bool(ledger.store.run_ids())
    except Exception:
        return True


def ledger_has(ledger: Any, run_id: str) -> bool:
    """Whether ``run_id`` was written (False when the store cannot even say)."""
    try:
        return ledger.store.head(run_id) is not None
    except Exception:
        return False


def cmd_run(args: argparse.Namespace) -> int:
    """Run the suite into the ledger, seal it and print the scorecard; 130 on Ctrl-C."""
    import asyncio
    import gc
    import signal

    # What these imports make (~1M objects: the MCP SDK's models, the pack) lives as long as
    # the process: no collection during them, and none walks them again afterwards.
    gc.disable()
    from harness.agents import from_spec
    from harness.driver import RunDriver, RunResult
    from harness.logging import quiet_logs
    from harness.record import RunRefused
    from projections.fold import fold
    from projections.lifecycle import LifecycleFold, scorecard
    from projections.provenance import is_provenance
    from projections.report import table
    from projections.source import open_run

    gc.freeze()
    gc.enable()

    cfg = _config(args)
    if not cfg.resume:
        try:
            from_spec(cfg.agent, params=cfg.agent_params, settings=cfg.settings,
                      base_url=cfg.base_url, rpm=cfg.rpm, tpm=cfg.tpm,
                      time_scale=cfg.time_scale)  # fmt: skip
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    quiet_logs()
    signer = trust.signer_from(args.sign_key)  # a bad key file: exit 2, nothing written
    ledger_location = args.ledger or settings.load().ledger
    fresh_file = "://" not in ledger_location and not os.path.exists(ledger_location)
    ledger = open_ledger(args, create=True)
    ledger.signer = signer
    progress, stop_bar = _progress(cfg.suite)
    driver = RunDriver(ledger, cfg, progress)
    shard_opt = f" --shard {cfg.shard}" if cfg.shard else ""

    async def main_task() -> RunResult:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None
        loop.add_signal_handler(signal.SIGINT, task.cancel)
        try:
            return await driver.execute()
        finally:
            loop.remove_signal_handler(signal.SIGINT)

    def discard() -> None:
        """Refused before any run was written: leave no new, empty ledger file behind."""
        if fresh_file and not ledger_has_runs(ledger):
            ledger.store.close()
            for suffix in ("", "-wal", "-shm"):
                with contextlib.suppress(OSError):
                    os.unlink(ledger_location + suffix)

    try:
        result = asyncio.run(main_task())
    except RunRefused as exc:
        stop_bar()
        discard()
        raise UsageError(str(exc)) from None
    except (LedgerError, HarnessError) as exc:
        # The ledger stopped taking writes (disk full, database gone) or the platform broke
        # between passes: stop in one line; what was committed stays and verifies.
        stop_bar()
        started = driver.run_id and (cfg.resume or ledger_has(ledger, driver.run_id))
        if not started or isinstance(exc, UnknownRun):
            discard()
            raise
        print(
            f"benchledger: run {driver.run_id} stopped: {exc}; every committed episode is kept "
            f"and verifies; resume with: benchledger run --resume {driver.run_id}{shard_opt} "
            f"--ledger {ledger_location}",
            file=sys.stderr,
        )
        return EXIT_FAILED
    except asyncio.CancelledError:
        stop_bar()
        print(
            f"\ninterrupted: every finished episode is in the ledger. Resume with:\n"
            f"  benchledger run --resume {driver.run_id or 'RUN_ID'}{shard_opt} "
            f"--ledger {ledger_location}",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    except Exception:  # unusable input found on the way (a protocol or case file): exit 2
        stop_bar()
        discard()
        raise
    stop_bar()
    # Through the door, as every display: the scorecard shows what verified.
    run_events = open_run(result.run_id, ledger, require_seal=False, allow_partial=False)
    lane = is_provenance(run_events.events)
    lane_passed = True
    if lane:  # the provenance lane's card, with its overall verdict
        lane_passed = provenance.show(run_events, ledger)
    else:
        card = scorecard([fold(LifecycleFold(), run_events.events)])
        print()
        print(table(card), end="")
    for failed in result.failed:
        print(f"infra-failed: {failed.stream}: {failed.error}")
    if result.missing:
        print(
            f"\nrun {result.run_id} is NOT sealed: {len(result.missing)} planned units did not "
            f"finish ({', '.join(result.missing[:5])}); resume with: benchledger run --resume "
            f"{result.run_id}{shard_opt} --ledger {ledger_location}"
        )
        return EXIT_FAILED
    if result.pending:
        print(
            f"\nshard {cfg.shard} of run {result.run_id} is done; the run is not sealed yet: "
            f"{len(result.pending)} units of other shards have not finished "
            f"({', '.join(result.pending[:5])}). The last shard to finish seals it; or, once "
            f"all have: benchledger seal {result.run_id} --ledger {ledger_location}"
        )
        return result.status
    if result.infra:
        _not_sealed_for_infra(result.run_id, result.infra, shard_opt, ledger_location)
        return EXIT_FAILED
    signed = f", signed by key {signer.key_id[:16]}" if signer else ""
    print(f"\nrun {result.run_id} sealed, root {result.root}{signed}")
    print(
        f"verify with: benchledger verify {result.run_id} --root {result.root} "
        f"--ledger {ledger_location}"
    )
    if result.status != EXIT_OK:
        print(f"run FAILED: every one of its {len(result.outcomes)} units infra-failed")
    elif lane and not lane_passed:
        print("run FAILED: the provenance lane's overall verdict did not pass")
        return EXIT_FAILED
    return result.status


def _not_sealed_for_infra(run_id: str, units: list[str], shard: str, location: str) -> None:
    """The one line saying a finished run was left unsealed for its infra-failed units."""
    names = ", ".join(units[:5]) + (", ..." if len(units) > 5 else "")
    noun = "unit" if len(units) == 1 else "units"
    each = " (each shard with its own --shard i/n)" if shard else ""
    print(
        f"run {run_id}: {len(units)} {noun} ended in infrastructure errors ({names}); not "
        f"sealed. Retry them with `benchledger run --resume {run_id} --retry-infra{shard} "
        f"--ledger {location}`{each}, or seal the run as it is with `benchledger seal "
        f"{run_id} --ledger {location}`",
        file=sys.stderr,
    )


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``run``."""
    p = sub.add_parser("run", help="run the benchmark; every call goes into the ledger")
    p.add_argument(
        "--suite",
        default="lifecycle",
        choices=["lifecycle", "provenance"],
        help="lifecycle (default) or provenance (the provenance lane: each case twice, "
        "on fresh platforms; docs/provenance.md)",
    )
    p.add_argument("--protocols", metavar="PATH", help="default: the committed lifecycle set")
    p.add_argument(
        "--cases",
        metavar="PATH",
        help="provenance: a cases .jsonl file or a folder holding cases.jsonl, anywhere "
        "(default: the committed public/v1 split); keeps holdout sets out of the repository",
    )
    p.add_argument(
        "--agent",
        help="scripted (default), fake[:DELAY_S], anthropic:MODEL (key: $ANTHROPIC_API_KEY), "
        "openai:MODEL@BASE_URL (key, if the server needs one: $OPENAI_API_KEY) or "
        "recorded:RUN_DIR (re-enacts a recorded peer run, e.g. "
        "../shared/peers/mcp-data-platform/bench/results/s5-anthropic-k5)",
    )
    m = p.add_argument_group("model agents")
    m.add_argument(
        "--base-url",
        metavar="URL",
        help="the model server: anthropic (default $ANTHROPIC_BASE_URL, else the API's own); "
        "openai, when the spec has no @BASE_URL",
    )
    m.add_argument(
        "--rpm", type=whole("--rpm"), metavar="N", help="at most N model requests per minute"
    )
    m.add_argument(
        "--tpm", type=whole("--tpm"), metavar="N", help="at most N model tokens per minute"
    )
    m.add_argument(
        "--max-tokens",
        type=whole("--max-tokens"),
        metavar="N",
        help="reply token limit (anthropic default 4096)",
    )
    m.add_argument("--temperature", type=number("--temperature"), metavar="F")
    m.add_argument("--top-p", type=number("--top-p", at_most=1), metavar="F")
    m.add_argument("--top-k", type=whole("--top-k"), metavar="N")
    m.add_argument(
        "--time-scale",
        type=number("--time-scale"),
        metavar="F",
        help="recorded agents: spend the recorded latencies times F (1.0; 0 = no waiting)",
    )
    p.add_argument(
        "--platform",
        metavar="embedded|embedded:process|server-memory[@VERSION]|URL",
        help="embedded (default: in this process), embedded:process (a child process), "
        "server-memory (@modelcontextprotocol/server-memory over stdio, npm-installed on "
        "first use; default version 2026.8.31) or the URL of a running mcp-data-platform",
    )
    p.add_argument(
        "--server-memory-cmd",
        metavar="CMD",
        help="server-memory: start the server with CMD instead of the npm install "
        "(e.g. 'node /path/to/server-memory/dist/index.js')",
    )
    p.add_argument(
        "--pack",
        metavar="PATH",
        help="embedded: the seed pack (a folder in the peer's seed layout, e.g. "
        "../shared/peers/mcp-data-platform/bench/seed); default: benchledger's own",
    )
    p.add_argument(
        "--platform-scope",
        choices=["pass", "unit"],
        help="embedded: a fresh platform per pass (default) or per unit",
    )
    p.add_argument("--admin-key", metavar="K", help="external platform (or $BENCHLEDGER_ADMIN_KEY)")
    p.add_argument(
        "--pool-base", metavar="B", help="external: keys are B-001..B-N (or $BENCHLEDGER_POOL_BASE)"
    )
    p.add_argument(
        "--pool-size", type=whole("--pool-size"), metavar="N", help="external platform: pool size"
    )
    p.add_argument("--reset-cmd", metavar="CMD", help="external platform: run between passes")
    p.add_argument("--k", type=whole("--k"), help="passes; each is one attempt per protocol (1)")
    p.add_argument("--concurrency", type=whole("--concurrency"), help="units in flight (4)")
    p.add_argument("--run-id", metavar="ID")
    p.add_argument(
        "--shard",
        metavar="i/n",
        help="run part i of n of the units (by entity) into a shared ledger; needs --run-id "
        "(docs/scaling.md)",
    )
    p.add_argument(
        "--protocol",
        action="append",
        metavar="ID",
        help="run only this protocol (provenance: case) of the set; repeatable. The run is "
        "recorded and labelled as a subset, and the gate will not compare it with a full run",
    )
    p.add_argument(
        "--limit",
        type=whole("--limit"),
        metavar="N",
        help="run only the first N protocols (or cases) of those selected",
    )
    p.add_argument(
        "--resume", metavar="RUN_ID", help="finish an interrupted (or otherwise unsealed) run"
    )
    p.add_argument(
        "--retry-infra",
        action="store_true",
        help="with --resume: also re-run the units whose every attempt ended in an "
        "infrastructure error, as new attempts (the failed ones stay in the log)",
    )
    p.add_argument(
        "--seal-despite-infra",
        action="store_true",
        help="seal the run even when units ended in infrastructure errors (they then count "
        "as harness failures for good); without it such a run is left unsealed, to be "
        "retried with --resume RUN_ID --retry-infra or sealed with `benchledger seal`",
    )
    trust.sign_key_arg(p)
    g = p.add_argument_group("pre-registered gate (recorded in run_started before any unit runs)")
    g.add_argument("--gate-baseline", metavar="RUN", help="the sealed baseline run (id or bundle)")
    trust.gate_bar_args(g)
    g.add_argument("--prereg", metavar="FILE", help="a file from `benchledger prereg new`")
    ledger_arg(p)
    p.set_defaults(func=cmd_run)
