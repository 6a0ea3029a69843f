"""``run``: translate the options into a runner configuration, drive it, show progress."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from cli.common import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    UsageError,
    ledger_arg,
    open_ledger,
)
from harness import settings


def _progress() -> tuple[Any, Callable[[], None]]:
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
        print(
            f"unit {n}/{total} {outcome.protocol_id} attempt {outcome.attempt}: {status}",
            flush=True,
        )

    return Progress(started_plain, done_plain), lambda: None


# Options a resume takes from the run record; given explicitly they must agree with it.
_RESTORABLE = {
    "protocols": "protocols_path",
    "agent": "agent",
    "k": "k",
    "concurrency": "concurrency",
    "pool_size": "pool_size",
    "platform": "platform",
    "reset_cmd": "reset_cmd",
    "platform_scope": "runtime_scope",
    "pack": "pack",
}
_DEFAULTS = {"agent": "scripted", "platform": "embedded", "k": 1, "concurrency": 4,
             "platform_scope": "pass"}  # fmt: skip
# Sampling options -> the request parameter each sets (recorded in every model request).
_SAMPLING = {"max_tokens": "max_tokens", "temperature": "temperature", "top_p": "top_p",
             "top_k": "top_k"}  # fmt: skip


def _agent_params(args: argparse.Namespace) -> dict[str, Any]:
    """The sampling parameters the options set (UsageError on an impossible value)."""
    params = {key: getattr(args, opt) for opt, key in _SAMPLING.items()
              if getattr(args, opt) is not None}  # fmt: skip
    for name in ("max_tokens", "top_k", "rpm", "tpm"):
        value = params.get(name, getattr(args, name, None))
        if value is not None and value < 1:
            raise UsageError(f"--{name.replace('_', '-')} must be at least 1")
    if params.get("temperature", 0) < 0 or not 0 <= params.get("top_p", 0) <= 1:
        raise UsageError("--temperature must be at least 0 and --top-p between 0 and 1")
    return params


def _time_scale(args: argparse.Namespace, agent: str) -> float:
    """``--time-scale`` (1.0 unless given); UsageError unless >= 0 and the agent is recorded."""
    if args.time_scale is None:
        return 1.0
    if not agent.startswith("recorded:"):
        raise UsageError(
            "--time-scale scales a recorded agent's latencies: use --agent recorded:DIR"
        )
    if args.time_scale < 0:
        raise UsageError("--time-scale must be at least 0 (0 = no waiting)")
    return float(args.time_scale)


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
    if value["k"] < 1 or value["concurrency"] < 1:
        raise UsageError("--k and --concurrency must be at least 1")
    if args.shard:
        raise UsageError("--shard is not available in this version yet")
    try:
        spec = parse_platform(value["platform"])
    except ValueError as exc:
        raise UsageError(str(exc)) from None
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
        protocols_path=value["protocols"] or "",
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
    )


def cmd_run(args: argparse.Namespace) -> int:
    """Run the suite into the ledger, seal it and print the scorecard; 130 on Ctrl-C."""
    import asyncio
    import signal

    from harness.agents import from_spec
    from harness.driver import RunDriver, RunResult
    from harness.logging import quiet_logs
    from harness.record import RunRefused
    from projections.fold import fold
    from projections.lifecycle import LifecycleFold, scorecard
    from projections.report import table
    from projections.source import from_ledger

    cfg = _config(args)
    if not cfg.resume:
        try:
            from_spec(cfg.agent, params=cfg.agent_params, settings=cfg.settings,
                      base_url=cfg.base_url, rpm=cfg.rpm, tpm=cfg.tpm,
                      time_scale=cfg.time_scale)  # fmt: skip
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    quiet_logs()
    ledger_location = args.ledger or settings.load().ledger
    ledger = open_ledger(args, create=True)
    progress, stop_bar = _progress()
    driver = RunDriver(ledger, cfg, progress)

    async def main_task() -> RunResult:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None
        loop.add_signal_handler(signal.SIGINT, task.cancel)
        try:
            return await driver.execute()
        finally:
            loop.remove_signal_handler(signal.SIGINT)

    try:
        result = asyncio.run(main_task())
    except RunRefused as exc:
        stop_bar()
        raise UsageError(str(exc)) from None
    except asyncio.CancelledError:
        stop_bar()
        print(
            f"\ninterrupted: every finished episode is in the ledger. Resume with:\n"
            f"  benchledger run --resume {driver.run_id or 'RUN_ID'} --ledger {ledger_location}",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    stop_bar()
    card = scorecard([fold(LifecycleFold(), from_ledger(ledger, result.run_id).events)])
    print()
    print(table(card), end="")
    for failed in result.failed:
        print(f"infra-failed: {failed.stream}: {failed.error}")
    if result.missing:
        print(
            f"\nrun {result.run_id} is NOT sealed: {len(result.missing)} planned units did not "
            f"finish ({', '.join(result.missing[:5])}); resume with: benchledger run --resume "
            f"{result.run_id} --ledger {ledger_location}"
        )
        return EXIT_FAILED
    print(f"\nrun {result.run_id} sealed, root {result.root}")
    print(
        f"verify with: benchledger verify {result.run_id} --root {result.root} "
        f"--ledger {ledger_location}"
    )
    if result.status != EXIT_OK:
        print(f"run FAILED: every one of its {len(result.outcomes)} units infra-failed")
    return result.status


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``run``."""
    p = sub.add_parser("run", help="run the benchmark; every call goes into the ledger")
    p.add_argument("--suite", default="lifecycle", choices=["lifecycle"])
    p.add_argument("--protocols", metavar="PATH", help="default: the committed lifecycle set")
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
    m.add_argument("--rpm", type=int, metavar="N", help="at most N model requests per minute")
    m.add_argument("--tpm", type=int, metavar="N", help="at most N model tokens per minute")
    m.add_argument(
        "--max-tokens", type=int, metavar="N", help="reply token limit (anthropic default 4096)"
    )
    m.add_argument("--temperature", type=float, metavar="F")
    m.add_argument("--top-p", type=float, metavar="F")
    m.add_argument("--top-k", type=int, metavar="N")
    m.add_argument(
        "--time-scale",
        type=float,
        metavar="F",
        help="recorded agents: spend the recorded latencies times F (1.0; 0 = no waiting)",
    )
    p.add_argument(
        "--platform",
        metavar="embedded|embedded:process|URL",
        help="embedded (default: in this process), embedded:process (a child process) "
        "or the URL of a running mcp-data-platform",
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
    p.add_argument("--pool-size", type=int, metavar="N", help="external platform: pool size")
    p.add_argument("--reset-cmd", metavar="CMD", help="external platform: run between passes")
    p.add_argument("--k", type=int, help="passes; each is one attempt per protocol (1)")
    p.add_argument("--concurrency", type=int, help="units in flight (4)")
    p.add_argument("--run-id", metavar="ID")
    p.add_argument("--shard", metavar="i/n", help="(later) run one shard of the units")
    p.add_argument("--resume", metavar="RUN_ID", help="finish an interrupted run")
    ledger_arg(p)
    p.set_defaults(func=cmd_run)
