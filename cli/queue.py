"""``worker`` and ``queue``: the units ``run --queue`` (``cli/run.py`` ``run_queued``) put
as jobs on a work queue in the PostgreSQL ledger's database, worked by any number of
worker processes on any machines (docs/scaling.md). The queue itself is
``harness.queue``; what a worker does with a job, ``harness.worker``."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from typing import TYPE_CHECKING, Any

from benchledger.cli.common import EXIT_OK, UsageError, ledger_arg, open_ledger, whole
from benchledger.cli.run import INFRA_RETRIES, postgres_ledger

if TYPE_CHECKING:
    from benchledger.harness.queue import Queue

# The worker's defaults: a silent worker's jobs go back to the queue after STALLED s.
HEARTBEAT_S = 5.0
STALLED_S = 30.0
RETRY_WAIT_S = 2


# -- worker ---------------------------------------------------------------------------------


def cmd_worker(args: argparse.Namespace) -> int:
    """Claim and run queued units until stopped (``--once``: until no job is left)."""
    import gc

    from benchledger.cli.run import _config, _warm_embedded

    location = postgres_ledger(args, "worker")
    # What the operator lets this worker run: each --platform (with its options) and each
    # --agent; none: the built-in, local ones (harness.needs). The rest of the options
    # are checked against each run's record.
    platforms, agents = tuple(args.platform or ()), tuple(args.agent or ())
    if args.allow:
        more_platforms, more_agents, embedder = allowance(args.allow)
        platforms, agents = platforms + more_platforms, agents + more_agents
        if embedder and args.embedder and embedder != args.embedder:
            raise UsageError(f"{args.allow}: embedder {embedder!r} is not the --embedder given")
        args.embedder = args.embedder or embedder or None
    args.platform = args.agent = None
    cfg = _config(args)
    from benchledger.harness.agents import check_spec
    from benchledger.harness.needs import given_labels
    from benchledger.harness.platforms.platform import owner_of, resolve

    try:  # each checked now, as `run` checks its options: one line, exit 2
        given_labels(platforms, cfg.platform_options)
        for spec in agents:
            check_spec(spec)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    named = {resolve(text)[0].name for text in platforms}
    for dest, value in sorted(cfg.platform_options.items()):
        found = owner_of(dest)
        if value and dest.endswith("_cmd") and found and found[0].name not in named:
            # A command that starts a platform is given with that platform, never alone.
            raise UsageError(f"{found[1].flag} {found[1].purpose or 'starts a platform'}: "
                             f"give it with --platform {found[0].name}")  # fmt: skip
    # As `run` does: no collection during the heavy imports (their objects live as long as
    # the process), and the embedded platform's SQL tables loading beside them.
    gc.disable()
    warming = _warm_embedded(args)
    from benchledger.harness.logging import quiet_logs
    from benchledger.harness.queue import Queue
    from benchledger.harness.record import RunRefused
    from benchledger.harness.worker import Worker

    gc.freeze()
    gc.enable()
    quiet_logs()
    if args.once and not Queue(location).exists():
        if warming is not None:
            warming.join()  # a process exiting under DuckDB's loading thread aborts
        print(f"no run was ever queued in {Queue(location).shown}: nothing to do")
        return EXIT_OK
    ledger = open_ledger(args, create=False, read_only=False)

    def unit_done(outcome: Any, run_id: str) -> None:
        print(f"{run_id} unit {outcome.unit_id}/{outcome.attempt} ({outcome.stream}): "
              f"{outcome.status}", flush=True)  # fmt: skip

    def declined(run_id: str, why: str) -> None:
        print(f"run {run_id}: not taken by this worker: {why}", flush=True)

    async def main() -> int:
        loop = asyncio.get_running_loop()
        async with Queue(location) as queue:
            worker = Worker(ledger, location, cfg, queue, infra_retries=args.infra_retries,
                            on_unit=unit_done, platforms=platforms, agents=agents,
                            on_declined=declined)  # fmt: skip
            stopping: list[int] = []

            def stop(signum: int) -> None:
                if stopping:  # a second signal: die; the queue gives our jobs to others
                    os._exit(128 + signum)
                stopping.append(signum)
                print("stopping: running units finish first (again to stop at once)",
                      file=sys.stderr, flush=True)  # fmt: skip
                queue.stop()

            for signum in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(signum, stop, signum)
            recovery = asyncio.ensure_future(_recover(queue, args.stalled_after))
            try:
                while True:
                    await queue.work(worker.handle, concurrency=args.concurrency or 4,
                                     wait=not args.once, heartbeat=args.heartbeat,
                                     stalled_after=args.stalled_after,
                                     retry_wait=RETRY_WAIT_S)  # fmt: skip
                    if stopping or not args.once:
                        break
                    # Jobs this worker declined wait for another: they keep it no longer.
                    counts: dict[str, int] = {}
                    for job in await queue.jobs():
                        if job.status == "todo" and job.run in worker.declined:
                            continue
                        counts[job.status] = counts.get(job.status, 0) + 1
                    if not counts.get("todo") and not counts.get("doing"):
                        break
                    # Jobs other workers run (they may die) or retries not due yet.
                    await asyncio.sleep(min(1.0, args.heartbeat))
            finally:
                recovery.cancel()
                await asyncio.gather(recovery, return_exceptions=True)
                await worker.close()
            return 128 + stopping[0] if stopping else EXIT_OK

    try:
        return asyncio.run(main())
    except RunRefused as exc:
        raise UsageError(str(exc)) from None


_ALLOW_KEYS = {"platforms": list, "agents": list, "embedder": str}


def allowance(path: str) -> tuple[tuple[str, ...], tuple[str, ...], str]:
    """A worker's allowance file (TOML): ``platforms`` and ``agents``, lists of
    ``--platform`` and ``--agent`` values (a platform started by a command in its recorded
    form, ``server-memory-cmd:CMD``), and ``embedder``; UsageError naming the file, the
    key and the problem."""
    import tomllib

    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    except OSError as exc:
        raise UsageError(f"{path}: cannot read the allowance: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: not TOML: {exc}") from None
    for key, value in data.items():
        kind = _ALLOW_KEYS.get(key)
        if kind is None:
            raise UsageError(f"{path}: {key}: unknown key (known: {', '.join(_ALLOW_KEYS)})")
        if not isinstance(value, kind) or (
            kind is list and not all(isinstance(v, str) and v for v in value)
        ):
            what = "a list of non-empty strings" if kind is list else "a string"
            raise UsageError(f"{path}: {key}: must be {what}")
    return tuple(data.get("platforms", ())), tuple(data.get("agents", ())), data.get("embedder", "")


async def _recover(queue: Queue, stalled_after: float) -> None:
    """Every few seconds, put back the jobs of workers that stopped sending heartbeats."""
    while True:
        for job_id in await queue.recover_stalled(stalled_after):
            print(f"job {job_id}: its worker went silent; back in the queue", flush=True)
        await asyncio.sleep(max(0.5, stalled_after / 4))


# -- queue ----------------------------------------------------------------------------------


def cmd_queue(args: argparse.Namespace) -> int:
    """``queue [RUN]``: the jobs and their states; ``queue cancel RUN``: stop a run's jobs."""
    from benchledger.harness.queue import Queue

    location = postgres_ledger(args, "queue")
    words = list(args.words)
    cancel = bool(words) and words[0] == "cancel"
    if (cancel and len(words) != 2) or (not cancel and len(words) > 1):
        raise UsageError("use: benchledger queue [RUN] or benchledger queue cancel RUN")
    run_id = words[-1] if words else None
    if not Queue(location).exists():
        print(f"no run was ever queued in {Queue(location).shown}")
        return EXIT_OK

    async def main() -> int:
        async with Queue(location, create=False) as queue:
            if cancel:
                assert run_id is not None
                cancelled, aborting = await queue.cancel(run_id)
                print(f"run {run_id}: {cancelled} waiting jobs cancelled, {aborting} running "
                      "stopped (their units stay unfinished: `benchledger run --resume "
                      f"{run_id}` finishes them in one process)")  # fmt: skip
                return EXIT_OK
            jobs = await queue.jobs(run_id)
            print(f"{'job':>6}  {'state':<9}  {'tries':>5}  {'run':<28}  {'unit':<28}  worker")
            for j in jobs:
                tries = j.attempts + (j.status == "doing")
                print(f"{j.id:>6}  {j.status:<9}  {tries:>5}  {j.run:<28}  {j.unit:<28}  "
                      f"{j.worker or '-'}")  # fmt: skip
                if j.why and j.status != "succeeded":  # why it waits or failed
                    print(f"{'':>6}  why: {j.why}")
            counts: dict[str, int] = {}
            for j in jobs:
                counts[j.status] = counts.get(j.status, 0) + 1
            print(", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "no jobs")
            return EXIT_OK

    return asyncio.run(main())


def _seconds(option: str) -> Any:
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{option} takes seconds, e.g. 30") from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"{option} must be above 0")
        return value

    return parse


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``worker`` and ``queue``."""
    from benchledger.cli.run_options import run_options

    p = sub.add_parser("worker", help="work queued runs' units, on any machine (run --queue)")
    run_options(p, worker=True)
    p.add_argument("--once", action="store_true", help="exit once no job is left")
    p.add_argument(
        "--allow",
        metavar="FILE",
        help="a TOML file naming more of what this worker may run: platforms = [...] and "
        "agents = [...] (--platform and --agent values; a command in its recorded form, "
        'server-memory-cmd:CMD), embedder = "..." (docs/scaling.md)',
    )
    p.add_argument(
        "--infra-retries",
        type=whole("--infra-retries", at_least=0),
        default=INFRA_RETRIES,
        metavar="N",
        help=f"re-run a unit that ended in an infrastructure error up to N times, with "
        f"back-off ({INFRA_RETRIES}); then it is left for `run --resume RUN --retry-infra`",
    )
    p.add_argument(
        "--stalled-after",
        type=_seconds("--stalled-after"),
        default=STALLED_S,
        metavar="S",
        help=f"a worker silent for S seconds is taken for dead and its units run again "
        f"elsewhere ({STALLED_S:g})",
    )
    p.add_argument(
        "--heartbeat",
        type=_seconds("--heartbeat"),
        default=HEARTBEAT_S,
        metavar="S",
        help=f"how often this worker says it is alive ({HEARTBEAT_S:g}; keep it well under "
        "--stalled-after)",
    )
    ledger_arg(p)
    p.set_defaults(func=cmd_worker)

    q = sub.add_parser("queue", help="queued runs' jobs, their states and workers; cancel a run's")
    q.add_argument("words", nargs="*", metavar="[cancel] RUN")
    ledger_arg(q)
    q.set_defaults(func=cmd_queue)
