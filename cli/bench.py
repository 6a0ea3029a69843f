"""``bench``: the performance benchmarks (ledger, platform, run), each vs a raw baseline."""

from __future__ import annotations

import argparse
import tempfile

from benchledger import protocols
from benchledger.benchmarks import embedder_bench, platform_bench, run_bench
from benchledger.benchmarks.ledger_bench import BenchFailed, check_room
from benchledger.benchmarks.ledger_bench import run_bench as run_ledger_bench
from benchledger.cli.common import CommandFailed, UsageError, number, whole
from benchledger.ledger.postgres import reach_postgres

POSTGRES_DEFAULT = "postgresql://postgres@127.0.0.1:5432/test"


def cmd_bench_ledger(args: argparse.Namespace) -> int:
    """Append and verify throughput against the raw database (SQLite or PostgreSQL)."""
    if args.events < 100:
        raise UsageError("--events must be at least 100")
    if args.writers < 1 or (args.writers > 1 and args.backend != "postgres"):
        raise UsageError("--writers N (N > 1) needs --backend postgres; N must be at least 1")
    if args.events // 50 < args.writers:
        raise UsageError("--events must give every writer at least one 50-event stream")
    location = args.ledger
    if args.backend == "postgres":
        location = location or POSTGRES_DEFAULT
        reach_postgres(location)  # a malformed URL or a server that is not there: one line
    workdir = args.workdir or tempfile.gettempdir()
    try:  # the cap, the workdir and its free space, before anything is written
        check_room(events=args.events, backend=args.backend, workdir=workdir, ledger=location)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    try:
        return run_ledger_bench(
            events=args.events,
            backend=args.backend,
            ledger=location,
            as_json=args.json,
            writers=args.writers,
            workdir=workdir,
            event_format=args.event_format,
            baseline_format=args.baseline_format,
        )
    except BenchFailed as exc:
        raise CommandFailed(f"bench ledger: {exc}; its data was removed") from None


def cmd_bench_platform(args: argparse.Namespace) -> int:
    """refplatform's MCP throughput and latency against raw HTTP."""
    if args.sessions < 1 or args.calls < 1:
        raise UsageError("--sessions and --calls must be at least 1")
    return platform_bench.run_bench(
        sessions=args.sessions, calls=args.calls, as_json=args.json, in_process=args.in_process
    )


def cmd_bench_embedder(args: argparse.Namespace) -> int:
    """An embedder's load, throughput, latency and cosine cost beside the lexical one's."""
    if args.texts < 1:
        raise UsageError("--texts must be at least 1")
    try:
        return embedder_bench.run_bench(spec=args.embedder, texts=args.texts, as_json=args.json)
    except ValueError as exc:
        raise UsageError(f"--embedder: {exc}") from None


def cmd_bench_locomo(args: argparse.Namespace) -> int:
    """The locomo suite's wall time (shipped set, one full-size conversation) vs no ledger."""
    if args.repeat < 1:
        raise UsageError("--repeat must be at least 1")
    from benchledger.benchmarks import locomo_bench  # the harness: only when asked for

    return locomo_bench.run_bench(repeat=args.repeat, as_json=args.json)


def cmd_bench_judge(args: argparse.Namespace) -> int:
    """What a judge at a fixed delay adds to a locomo run at --concurrency N."""
    if args.repeat < 1 or args.concurrency < 1 or not args.delay > 0:
        raise UsageError("--repeat and --concurrency must be at least 1, --delay above 0")
    from benchledger.benchmarks import judge_bench  # the harness: only when asked for

    return judge_bench.run_bench(repeat=args.repeat, concurrency=args.concurrency,
                                 delay_s=args.delay, as_json=args.json)  # fmt: skip


def cmd_bench_longmemeval(args: argparse.Namespace) -> int:
    """The longmemeval suite at LongMemEval_S's shape scaled down: time and memory."""
    for flag, value in (("--questions", args.questions), ("--sessions", args.sessions),
                        ("--turns", args.turns), ("--concurrency", args.concurrency)):  # fmt: skip
        if value < 1:
            raise UsageError(f"{flag} must be at least 1")
    from benchledger.benchmarks import longmemeval_bench  # the harness: only when asked for

    return longmemeval_bench.run_bench(questions=args.questions, sessions=args.sessions,
                                       turns=args.turns, concurrency=args.concurrency,
                                       as_json=args.json)  # fmt: skip


def cmd_bench_run(args: argparse.Namespace) -> int:
    """The suite with a slow model (fake, or a recorded run re-enacted) at concurrency 1 and N."""
    agent = args.agent or "fake"
    if agent.startswith("recorded:"):
        scale = run_bench.DEFAULT_TIME_SCALE if args.time_scale is None else args.time_scale
        concurrency = args.concurrency or 16
        k = 5 if args.k is None else args.k
        if scale < 0 or concurrency < 2 or k < 1:
            raise UsageError(
                "--time-scale must be >= 0, --concurrency at least 2 and --k at least 1"
            )
        try:
            work = run_bench.recorded_workload(
                agent, protocols=args.protocols or "", pack=args.pack or "", k=k,
                time_scale=scale,
            )  # fmt: skip
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        print(f"time scale {scale:g}: recorded latencies x {scale:g}", flush=True)
        return run_bench.run_recorded_bench(work, concurrency=concurrency, as_json=args.json)
    if agent != "fake" or args.time_scale is not None or args.pack or args.k is not None:
        raise UsageError(
            "bench run takes --agent fake (the default; --delay sets its latency) or "
            "--agent recorded:RUN_DIR (with --k, --pack, --time-scale)"
        )
    concurrency = args.concurrency or 8
    if args.delay < 0 or concurrency < 2:
        raise UsageError("--delay must be >= 0 and --concurrency at least 2")
    path = args.protocols or protocols.LIFECYCLE_DIR
    return run_bench.run_bench(
        protocols=path, delay=args.delay, concurrency=concurrency, as_json=args.json
    )


def cmd_bench_queue(args: argparse.Namespace) -> int:
    """One queued run worked by 1 worker process vs by N; the queue's claim rate."""
    if args.workers < 2 or args.repeat < 1 or args.claims < 0:
        raise UsageError("--workers must be at least 2, --repeat at least 1, --claims >= 0")
    url = args.ledger or POSTGRES_DEFAULT
    reach_postgres(url)  # a malformed URL or a server that is not there: one line
    from benchledger.benchmarks import queue_bench

    run_args = ["--agent", f"fake:{args.delay:g}", "--k", str(args.k)]
    if args.limit:
        run_args += ["--limit", str(args.limit)]
    if args.protocols:
        run_args += ["--protocols", args.protocols]
    try:
        return queue_bench.run_bench(url=url, workers=args.workers, concurrency=args.concurrency,
                                     run_args=run_args, repeat=args.repeat, claims=args.claims,
                                     as_json=args.json)  # fmt: skip
    except RuntimeError as exc:
        raise CommandFailed(f"bench queue: {exc}") from None


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``bench ledger|platform|embedder|locomo|longmemeval|judge|run|queue``."""
    bench = sub.add_parser("bench", help="performance benchmarks (ratios vs raw baselines)")
    bsub = bench.add_subparsers(dest="bench", required=True, metavar="BENCH")
    p = bsub.add_parser("ledger", help="append and verify throughput vs the raw database")
    p.add_argument(
        "--events",
        type=int,
        default=100_000,
        help="events in the synthetic run (100000; at most 5000000, ~0.9 KB of disk per "
        "event and side on SQLite)",
    )
    p.add_argument(
        "--workdir",
        metavar="DIR",
        help="write the run's databases in a folder of its own under DIR (default: the system "
        "temp folder); it is removed on every exit, Ctrl-C and SIGTERM included",
    )
    p.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    p.add_argument(
        "--ledger",
        metavar="PATH|URL",
        help="sqlite: keep the ledger in this file; postgres: the server and database "
        f"(default {POSTGRES_DEFAULT}; a fresh schema, dropped after)",
    )
    p.add_argument(
        "--writers", type=int, default=1, help="postgres: concurrent writer processes (1)"
    )
    p.add_argument(
        "--event-format",
        type=int,
        choices=[1, 2],
        default=2,
        help="the event format of the synthetic run (2, what runs write)",
    )
    p.add_argument(
        "--baseline-format",
        type=int,
        choices=[1, 2],
        help="the hashing the raw baseline does: 1 one hash per row, 2 format 2's body "
        "digests too (default: the run's event format; docs/performance.md says why)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_bench_ledger)
    p = bsub.add_parser("queue", help="a queued run worked by 1 worker process vs by N")
    p.add_argument(
        "--ledger",
        metavar="URL",
        help=f"the PostgreSQL server and database (default {POSTGRES_DEFAULT}; fresh schemas, "
        "dropped after)",
    )
    p.add_argument("--workers", type=int, default=4, help="worker processes to compare with 1 (4)")
    p.add_argument(
        "--concurrency", type=whole("--concurrency"), default=1, help="units per worker (1)"
    )
    p.add_argument("--delay", type=number("--delay"), default=0.3, help="s per model call (0.3)")
    p.add_argument("--k", type=whole("--k"), default=2, help="passes (2)")
    p.add_argument("--limit", type=int, default=12, help="the first N protocols; 0 = all (12)")
    p.add_argument("--protocols", metavar="PATH", help="the protocol set (the committed one)")
    p.add_argument("--repeat", type=int, default=1, help="measurements; the median (1)")
    p.add_argument("--claims", type=int, default=1000, help="no-op jobs for the claim rate")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_bench_queue)
    p = bsub.add_parser("platform", help="refplatform MCP throughput and latency vs raw HTTP")
    p.add_argument("--sessions", type=int, default=32, help="concurrent sessions (32)")
    p.add_argument("--calls", type=int, default=50, help="tool calls per session (50)")
    p.add_argument("--in-process", action="store_true", help="serve in a thread, not a child")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_bench_platform)

    p = bsub.add_parser("embedder", help="an embedder's throughput and latency vs lexical")
    p.add_argument("--embedder", default="wordllama", metavar="SPEC", help="(wordllama)")
    p.add_argument("--texts", type=int, default=2000, help="texts embedded (2000)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_bench_embedder)
    p = bsub.add_parser(
        "locomo",
        help="the locomo suite's wall time (shipped set, a full conversation) vs no ledger",
    )
    p.add_argument("--repeat", type=int, default=3, help="runs per case; the median (3)")
    p.add_argument("--json", action="store_true", help="print one JSON array")
    p.set_defaults(func=cmd_bench_locomo)
    p = bsub.add_parser("judge", help="what a judge adds to a locomo run at --concurrency N")
    p.add_argument("--repeat", type=int, default=3, help="runs of each; the median (3)")
    p.add_argument("--concurrency", type=int, default=4, help="units in flight (4)")
    p.add_argument("--delay", type=float, default=1.0, help="the fake judge's seconds (1.0)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_bench_judge)
    p = bsub.add_parser(
        "longmemeval",
        help="the longmemeval suite at LongMemEval_S's shape (scaled by --questions, "
        "--sessions): wall time, ms per ingested turn at three haystack sizes, peak memory",
    )
    p.add_argument("--questions", type=int, default=500, help="questions (500, as _s)")
    p.add_argument("--sessions", type=int, default=40, help="sessions per haystack (40, as _s)")
    p.add_argument("--turns", type=int, default=10, help="turns per filler session (10)")
    p.add_argument("--concurrency", type=int, default=4, help="units at once (4)")
    p.add_argument("--json", action="store_true", help="print one JSON array")
    p.set_defaults(func=cmd_bench_longmemeval)
    p = bsub.add_parser(
        "run", help="the suite with a slow model at concurrency 1 vs N (fake, or a recorded run)"
    )
    p.add_argument(
        "--agent",
        metavar="fake|recorded:RUN_DIR",
        help="fake (default: the scripted agent's decisions at --delay per call) or "
        "recorded:RUN_DIR (re-enact a recorded peer run at its recorded latencies)",
    )
    p.add_argument(
        "--delay", type=number("--delay"), default=0.3, help="fake: seconds per model call (0.3)"
    )
    p.add_argument(
        "--concurrency",
        type=whole("--concurrency"),
        help="units in flight (fake 8, recorded 16)",
    )
    p.add_argument(
        "--protocols",
        metavar="PATH",
        help="default: the committed set (fake); RUN_DIR/../../protocols (recorded)",
    )
    p.add_argument("--k", type=whole("--k"), help="recorded: passes (5)")
    p.add_argument("--pack", metavar="PATH", help="recorded: seed pack (RUN_DIR/../../seed)")
    p.add_argument(
        "--time-scale",
        type=number("--time-scale"),
        metavar="F",
        help="recorded: spend the recorded latencies times F (0.25; 1 = as recorded)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_bench_run)
