"""``bench``: the performance benchmarks (ledger, platform, run), each vs a raw baseline."""

from __future__ import annotations

import argparse

from cli.common import UsageError


def cmd_bench_ledger(args: argparse.Namespace) -> int:
    """Append and verify throughput against raw SQLite."""
    from benchmarks.ledger_bench import run_bench

    if args.events < 100:
        raise UsageError("--events must be at least 100")
    return run_bench(
        events=args.events, backend=args.backend, ledger=args.ledger, as_json=args.json
    )


def cmd_bench_platform(args: argparse.Namespace) -> int:
    """refplatform's MCP throughput and latency against raw HTTP."""
    from benchmarks.platform_bench import run_bench

    if args.sessions < 1 or args.calls < 1:
        raise UsageError("--sessions and --calls must be at least 1")
    return run_bench(
        sessions=args.sessions, calls=args.calls, as_json=args.json, in_process=args.in_process
    )


def cmd_bench_run(args: argparse.Namespace) -> int:
    """The suite with a fake slow model at concurrency 1 and N."""
    import protocols
    from benchmarks.run_bench import run_bench

    if args.delay < 0 or args.concurrency < 2:
        raise UsageError("--delay must be >= 0 and --concurrency at least 2")
    path = args.protocols or protocols.LIFECYCLE_DIR
    return run_bench(
        protocols=path, delay=args.delay, concurrency=args.concurrency, as_json=args.json
    )


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``bench ledger|platform|run``."""
    bench = sub.add_parser("bench", help="performance benchmarks (ratios vs raw baselines)")
    bsub = bench.add_subparsers(dest="bench", required=True, metavar="BENCH")
    p = bsub.add_parser("ledger", help="append and verify throughput vs raw SQLite")
    p.add_argument("--events", type=int, default=100_000)
    p.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    p.add_argument("--ledger", metavar="PATH|URL", help="keep the ledger here")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_bench_ledger)
    p = bsub.add_parser("platform", help="refplatform MCP throughput and latency vs raw HTTP")
    p.add_argument("--sessions", type=int, default=32, help="concurrent sessions (32)")
    p.add_argument("--calls", type=int, default=50, help="tool calls per session (50)")
    p.add_argument("--in-process", action="store_true", help="serve in a thread, not a child")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_bench_platform)
    p = bsub.add_parser("run", help="the suite with a fake 300 ms model, concurrency 1 vs 8")
    p.add_argument("--delay", type=float, default=0.3, help="seconds per model call (0.3)")
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--protocols", metavar="PATH", help="default: the committed set")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_bench_run)
