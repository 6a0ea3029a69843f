"""``run``: translate the options into a runner configuration, drive it, show progress."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from benchledger.cli import reports
from benchledger.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    UsageError,
    command_line,
    ledger_arg,
    open_ledger,
    raw,
)
from benchledger.cli.keys import signer_from
from benchledger.cli.prereg import prereg_for_run
from benchledger.cli.run_options import item_options, judge_config, run_options
from benchledger.harness import interrupt
from benchledger.harness.errors import HarnessError
from benchledger.harness.record import RunConfig
from benchledger.ledger import Ledger, LedgerError, UnknownRun
from benchledger.ledger.completeness import Completeness
from benchledger.ledger.events import infra_failure
from benchledger.ledger.signing import Signer
from benchledger.projections.source import open_run
from benchledger.running import config

if TYPE_CHECKING:  # the driver loads with the run's other heavy imports, in cmd_run
    from benchledger.harness.driver import RunResult
    from benchledger.harness.queue import Queue


def _progress() -> tuple[Any, Callable[[], None]]:
    """Progress callbacks: a rich bar on a terminal, one line per finished unit otherwise
    (each unit's status in its suite's words)."""
    from benchledger.harness.driver import Progress

    if sys.stdout.isatty():
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
        from rich.progress import Progress as Bar

        bar = Bar(
            TextColumn("units"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[failures]} failed"),
            TimeElapsedColumn(),
            console=Console(file=raw(sys.stdout)),  # the bar's own ESC codes; it shows counts only
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
        print(
            f"unit {n}/{total} {outcome.protocol_id} attempt {outcome.attempt}: {outcome.status}",
            flush=True,
        )

    return Progress(started_plain, done_plain), lambda: None


def _opt(args: argparse.Namespace, name: str) -> Any:
    """An option's value (None when not given, or when no installed platform declares it)."""
    return getattr(args, name, None)


# Passed to ``config`` by name; every other option a platform declares is one of its own.
_RUN_LEVEL = ("admin_key", "pool_base", "pool_size", "reset_cmd")


def _items(args: argparse.Namespace) -> tuple[str, tuple[str, ...]]:
    """The items path an item option gave ("" for none) and the item options given; the
    harness refuses one that is not the run's suite's (``harness.suites``)."""
    given = [(o.flag, str(path)) for o in item_options()
             if (path := getattr(args, o.dest, None)) is not None]  # fmt: skip
    return (given[0][1] if given else ""), tuple(flag for flag, _ in given)


def _config(args: argparse.Namespace) -> RunConfig:
    """The run configuration the options ask for, built by the library's one builder
    (``benchledger.running.config``; secrets resolved from the settings); the harness checks
    it (``harness.plan.settle``)."""
    from benchledger.harness.platforms.platform import declared_options

    items_path, items_options = _items(args)
    own = {
        o.dest: _opt(args, o.dest)
        for o in declared_options()
        if o.dest not in _RUN_LEVEL and _opt(args, o.dest) is not None
    }
    cfg = config(
        suite=args.suite, protocols=items_path or None, items_options=items_options,
        agent=args.agent, platform=_opt(args, "platform"), k=args.k, limit=args.limit,
        protocol=args.protocol, concurrency=args.concurrency, run_id=args.run_id or "",
        resume=args.resume or "", shard=args.shard, pack=args.pack,
        platform_scope=args.platform_scope, pool_size=_opt(args, "pool_size"),
        reset_cmd=_opt(args, "reset_cmd"), admin_key=_opt(args, "admin_key") or "",
        pool_base=_opt(args, "pool_base") or "", platform_options=own,
        base_url=args.base_url or "", rpm=args.rpm, tpm=args.tpm, max_tokens=args.max_tokens,
        temperature=args.temperature, top_p=args.top_p, top_k=args.top_k,
        time_scale=args.time_scale, retry_infra=args.retry_infra,
        seal_despite_infra=args.seal_despite_infra, prereg=prereg_for_run(args, items_path),
        settings=args.settings, search_k=getattr(args, "search_k", None),
        context_budget=getattr(args, "context_budget", None),
    )  # fmt: skip
    cfg.debug = bool(args.debug)
    judge_config(cfg, args)
    return cfg


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


def _warm_embedded(args: argparse.Namespace) -> threading.Thread | None:
    """For a new run on the in-process platform with benchledger's own pack, start its SQL
    worker and tables loading now, beside the ~1 s of imports that follow (the engine picks
    them up when made); the thread doing it. Another pack is loaded once, by the
    provisioner, and warmed there."""
    if (args.platform or "embedded") != "embedded" or args.resume or args.pack:
        return None
    from benchledger.refplatform.packs import default_pack  # loaded once per process (cached)
    from benchledger.refplatform.toolkits.sql import warm
    from benchledger.refplatform.toolkits.sql_database import loaded

    def go() -> None:
        with contextlib.suppress(Exception):  # a broken install is the provisioner's to report
            warm(default_pack())
            loaded(default_pack())  # returns once the tables are in: joining this thread waits

    thread = threading.Thread(target=go, name="sql-warm", daemon=True)
    thread.start()
    return thread


def cmd_run(args: argparse.Namespace) -> int:
    """Run the suite into the ledger, seal it and print the scorecard; 130 on Ctrl-C (143 on
    SIGTERM, with ``cmd_run_interruptible``)."""
    import asyncio
    import gc

    from benchledger.harness.plan import check_options

    # Every option checked before the slow imports below (a bad one answers in ~0.5 s, not
    # after them): the plan checks them again, with the ledger, before it writes anything.
    cfg = _config(args)
    check_options(cfg)
    if args.wait and not args.queue:
        raise UsageError("--wait waits for a queued run's workers: add --queue")
    if args.queue:
        return run_queued(args, cfg)
    if cfg.resume:
        _not_in_workers_hands(args.ledger or args.settings.ledger, cfg.resume)
    signer = signer_from(args.sign_key, args.settings)  # a bad key file: exit 2, nothing written
    # What these imports make (~1M objects: the MCP SDK's models, the pack) lives as long as
    # the process: no collection during them, and none walks them again afterwards.
    gc.disable()
    warming = _warm_embedded(args)
    from benchledger.harness.driver import RunDriver
    from benchledger.harness.logging import quiet_logs
    from benchledger.harness.record import RunRefused

    gc.freeze()
    gc.enable()

    quiet_logs()
    ledger_location = args.ledger or args.settings.ledger
    fresh_file = "://" not in ledger_location and not os.path.exists(ledger_location)
    ledger = open_ledger(args, create=True)
    ledger.signer = signer
    progress, stop_bar = _progress()
    driver = RunDriver(ledger, cfg, progress)

    async def main_task() -> RunResult:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None

        def stop(signum: int) -> None:
            interrupt.request(signum)  # first, so what the cancellation unwinds is no error
            task.cancel()

        for signum in INTERRUPTS:
            loop.add_signal_handler(signum, stop, signum)
        try:
            # Plan (every option checked, nothing written), then the one execute.
            return await driver.execute(driver.plan())
        except (Exception, BaseExceptionGroup) as exc:
            if interrupt.requested():  # whatever the interrupt's unwinding raised
                raise asyncio.CancelledError from exc
            raise
        finally:
            for signum in INTERRUPTS:
                loop.remove_signal_handler(signum)
            signal.signal(signal.SIGTERM, _terminated)  # the loop's removal left the default

    def discard() -> None:
        """Refused before any run was written: leave no new, empty ledger file behind (and
        let the SQL warm-up end: a process exiting under DuckDB's loading thread aborts)."""
        if warming is not None:
            warming.join()
        if fresh_file and not ledger_has_runs(ledger):
            ledger.store.close()
            for suffix in ("", "-wal", "-shm"):
                with contextlib.suppress(OSError):
                    os.unlink(ledger_location + suffix)

    def started() -> bool:
        """Whether the run exists in the ledger (resumed, or its run_started written)."""
        return bool(driver.run_id) and (bool(cfg.resume) or ledger_has(ledger, driver.run_id))

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
        if not started() or isinstance(exc, UnknownRun):
            discard()
            raise
        resume = _resume_line(str(driver.run_id), ledger_location)
        print(
            f"benchledger: run {driver.run_id} stopped: {exc}; every committed episode is kept "
            f"and verifies; resume with: {resume}",
            file=sys.stderr,
        )
        return EXIT_FAILED
    except asyncio.CancelledError:
        stop_bar()
        if not started():  # interrupted in the preflight: there is nothing to resume
            discard()
            print("\ninterrupted before the run started: nothing was written", file=sys.stderr)
            return interrupt.exit_code()
        resume = _resume_line(str(driver.run_id), ledger_location)
        print(
            f"\ninterrupted: every finished episode is in the ledger. Resume with:\n  {resume}",
            file=sys.stderr,
        )
        return interrupt.exit_code()
    except Exception:  # unusable input found on the way (a protocol or case file): exit 2
        stop_bar()
        discard()
        raise
    stop_bar()
    return _finished(result, ledger, signer, ledger_location)


def _not_in_workers_hands(location: str, run_id: str) -> None:
    """Refuse to resume here a queued run whose jobs workers still hold or will claim: both
    would run its units (one line, exit 2, nothing written)."""
    if not location.startswith(("postgresql://", "postgres://")):
        return  # a SQLite ledger has no queue
    from benchledger.harness.queue import queue_states

    found = queue_states(location, run_id).get(run_id)
    if found is not None and (found.queued or found.running):
        cancel = command_line("benchledger", "queue", "cancel", run_id)
        raise UsageError(
            f"run {run_id} is in the queue ({found.line()}): its workers finish it; to "
            f"finish it here instead, first stop them with {cancel}"
        )


def _resume_line(run_id: str, ledger_location: str) -> str:
    """The command that resumes ``run_id``, quoted to be copied."""
    return command_line("benchledger", "run", "--resume", run_id, "--ledger", ledger_location)


# The signals that interrupt a run: each leaves it resumable and prints the resume line.
INTERRUPTS = (signal.SIGINT, signal.SIGTERM)


def _terminated(signum: int, frame: Any) -> None:
    """SIGTERM outside the run's event loop (start-up, the card): Ctrl-C's KeyboardInterrupt."""
    interrupt.request(signum)
    raise KeyboardInterrupt


def cmd_run_interruptible(args: argparse.Namespace) -> int:
    """``cmd_run`` with SIGTERM taken as Ctrl-C for the whole command (docs/reliability.md,
    "Interrupts"); the process's own SIGTERM handling is restored after it."""
    interrupt.clear()
    on_main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _terminated) if on_main else None
    try:
        return cmd_run(args)
    except KeyboardInterrupt:
        if interrupt.requested() != signal.SIGTERM:
            raise  # Ctrl-C: the command line's own "interrupted"
        print("benchledger: interrupted", file=sys.stderr)
        return interrupt.exit_code()
    finally:
        if on_main:  # None: a handler not set from Python, which cannot be put back
            signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)
        interrupt.clear()


def _finished(
    result: RunResult,
    ledger: Ledger,
    signer: Signer | None,
    ledger_location: str,
) -> int:
    """The finished run's card and how it ended (sealed, partial, infra-failed),
    with the command that goes on from there; the exit code."""
    # Through the door, as every display: the scorecard shows what verified.
    run_events = open_run(result.run_id, ledger, require_seal=False, allow_partial=False)
    verdict = reports.show(run_events, ledger)  # the suite's card; its overall verdict, if any
    for failed in result.failed:
        kind = "infra-failed" if infra_failure(failed.error) else "harness-failed"
        print(f"{kind}: {failed.stream}: {failed.error}")
    ledger_words = ("--ledger", ledger_location)
    not_run = _did_not_run(result, run_events.completeness)
    if result.missing:
        resume = _resume_line(result.run_id, ledger_location)
        print(
            f"\nrun {result.run_id} is NOT sealed: {len(result.missing)} planned units did not "
            f"finish ({', '.join(result.missing[:5])}); resume with: {resume}"
        )
        if not_run:
            print(f"run FAILED: {not_run}")
        return EXIT_FAILED
    if result.infra:
        _not_sealed_for_infra(result.run_id, result.infra, ledger_location)
        if not_run:
            print(f"run FAILED: {not_run}")
        return EXIT_FAILED
    signed = f", signed by key {signer.key_id[:16]}" if signer else ""
    print(f"\nrun {result.run_id} sealed, root {result.root}{signed}")
    verify = command_line("benchledger", "verify", result.run_id, "--root", result.root,
                          *ledger_words)  # fmt: skip
    print(f"verify with: {verify}")
    if not_run:  # a unit that did not run is no result: the run is not green
        print(f"run FAILED: {not_run}")
        return EXIT_FAILED
    if result.status != EXIT_OK:  # none harness-failed: every one ended in an infra error
        print(f"run FAILED: every one of its {len(result.outcomes)} units infra-failed")
    elif verdict is False:
        print(f"run FAILED: the {result.suite} lane's overall verdict did not pass")
        return EXIT_FAILED
    return result.status


def _did_not_run(result: RunResult, done: Completeness | None) -> str:
    """``2 of 30 units did not run (harness failure); their tracebacks are in LOG``, for a
    run with harness-failed units ("" for one without)."""
    if not result.harness:
        return ""
    counted = (done.did_not_run(infra=False) if done is not None and done.harness_failed
               else f"{len(result.harness)} units did not run (harness failure)")  # fmt: skip
    where = (f"their tracebacks are in {result.log}" if result.log
             else "each unit's error names the log holding its traceback")  # fmt: skip
    return f"{counted}; {where}"


def _not_sealed_for_infra(run_id: str, units: list[str], location: str) -> None:
    """The one line saying a finished run was left unsealed for its infra-failed units."""
    names = ", ".join(units[:5]) + (", ..." if len(units) > 5 else "")
    noun = "unit" if len(units) == 1 else "units"
    retry = command_line("benchledger", "run", "--resume", run_id, "--retry-infra",
                         "--ledger", location)  # fmt: skip
    seal = command_line("benchledger", "seal", run_id, "--ledger", location)
    print(
        f"run {run_id}: {len(units)} {noun} ended in infrastructure errors ({names}); not "
        f"sealed. Retry them with `{retry}`, or seal the run as it is with `{seal}`",
        file=sys.stderr,
    )


# -- run --queue (the queue itself: harness/queue.py; its workers: cli/queue.py) --------


def postgres_ledger(args: argparse.Namespace, what: str) -> str:
    """The ledger location, which must be PostgreSQL (UsageError naming ``what`` otherwise)."""
    location = str(args.ledger or args.settings.ledger)
    if not location.startswith(("postgresql://", "postgres://")):
        raise UsageError(
            f"{what} needs a PostgreSQL ledger (--ledger postgresql://...), where the queue "
            "lives; a run on a SQLite ledger runs in one process: drop --queue"
        )
    return location


def check_run_options(args: argparse.Namespace) -> None:
    """Refuse what ``run --queue`` cannot do, before anything is read or written."""
    for given, flag, why in (
        (args.resume, "--resume", "a queued run's units are finished by workers"),
        (args.retry_infra, "--retry-infra", "workers retry infra-failed units themselves"),
        (args.seal_despite_infra, "--seal-despite-infra", "the last worker seals the run"),
        (args.sign_key, "--sign-key", "the run is sealed by its last worker, unsigned"),
    ):
        if given:
            raise UsageError(f"{flag} cannot be used with --queue: {why} (docs/scaling.md)")


def run_queued(args: argparse.Namespace, cfg: RunConfig) -> int:
    """``run --queue``: write the run's header, queue one job per planned unit and return
    (with ``--wait``, report progress until no job is left, then the card)."""
    import asyncio

    from benchledger.harness.driver import RunDriver
    from benchledger.harness.logging import quiet_logs
    from benchledger.harness.needs import worker_words
    from benchledger.harness.queue import Queue
    from benchledger.harness.record import RunRefused, read_record
    from benchledger.harness.worker import queueable

    check_run_options(args)
    location = postgres_ledger(args, "--queue")
    quiet_logs()
    ledger = open_ledger(args, create=True)
    driver = RunDriver(ledger, cfg)

    async def main() -> tuple[str, int]:
        plan = driver.plan()
        queueable(plan)
        async with Queue(location) as queue:  # the queue first: a header never waits alone
            await driver.start(plan)
            units = [f"{u.unit_id}/{u.attempt}" for u in plan.units]
            await queue.enqueue(plan.run_id, units)
            print(f"run {plan.run_id} queued: {len(units)} units ({queue.schema})", flush=True)
            # The options a worker's operator must give to run it (harness.needs).
            needs = worker_words(read_record(ledger, plan.run_id))  # as written: its platform
            work = command_line("benchledger", "worker", *needs, "--ledger", location)
            print(f"work it on any machine, as many as you like: {work} [--once]", flush=True)
            _pool_note(plan.record.pool_size, plan.suite.identities_per_unit, len(units))
            if args.wait:
                await _wait(queue, plan.run_id, len(units))
            return plan.run_id, len(units)

    try:
        run_id, _ = asyncio.run(main())
    except RunRefused as exc:
        raise UsageError(str(exc)) from None
    if not args.wait:
        return EXIT_OK
    return _queued_finished(ledger, run_id, location)


# A worker's retries of an infra-failed unit by default (``worker --infra-retries``): here,
# beside ``run --queue``, which says when a pool cannot hold them (cli.queue imports this).
INFRA_RETRIES = 2


def _pool_note(pool: int, per: int, units: int) -> None:
    """On an external platform, say when its pool cannot hold every try a worker may make:
    a unit's try t takes identities ``per * (units * t + i) + 1 ..`` of the run's grid."""
    wanted = 1 + INFRA_RETRIES
    tries = pool // (per * units) if pool else wanted
    if tries < wanted:
        print(f"note: the pool's {pool} identities hold {tries} tr{'y' if tries == 1 else 'ies'}"
              f" of every unit (each try takes {per} fresh identities); a unit interrupted or "
              f"infra-failed past that is left for `benchledger run --resume`. For "
              f"{wanted} tries give --pool-size {per * units * wanted}",
              file=sys.stderr, flush=True)  # fmt: skip


async def _wait(queue: Queue, run_id: str, total: int) -> None:
    """Print the run's job states whenever they change, until none waits or runs."""
    import asyncio

    last: dict[str, int] = {}
    while True:
        counts = await queue.counts(run_id)
        if counts != last:
            last = counts
            print(_states(counts, total), flush=True)
        if not counts.get("todo") and not counts.get("doing"):
            return
        await asyncio.sleep(1.0)


def _states(counts: dict[str, int], total: int) -> str:
    done = counts.get("succeeded", 0)
    others = ", ".join(f"{n} {s}" for s, n in sorted(counts.items())
                       if s not in ("todo", "doing", "succeeded"))  # fmt: skip
    tail = f", {others}" if others else ""
    return (f"jobs: {counts.get('todo', 0)} queued, {counts.get('doing', 0)} running, "
            f"{done}/{total} done{tail}")  # fmt: skip


def _queued_finished(ledger: Ledger, run_id: str, location: str) -> int:
    """The card of a queued run every job of which ended, and how it ended."""
    from benchledger.harness.driver import RunResult
    from benchledger.harness.record import read_record

    info = ledger.run_info(run_id)
    missing = [] if info.root else ledger.unfinished(run_id)
    infra, harness = ledger.failed(run_id)
    if info.root or missing:
        infra = []
    # The workers wrote the tracebacks, each to its own machine's log: the errors name them.
    result = RunResult(run_id, info.root, [], missing, infra, harness=harness)
    result.suite = read_record(ledger, run_id).suite
    return _finished(result, ledger, None, location)


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``run``."""
    p = sub.add_parser("run", help="run the benchmark; every call goes into the ledger")
    run_options(p)
    ledger_arg(p)
    p.set_defaults(func=cmd_run_interruptible)
