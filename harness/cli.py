"""The ``benchledger`` command line."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence

from harness import settings
from ledger import Ledger, LedgerError, UnknownRun, UnusableInput, open_store
from ledger.bundle import export_run, import_bundle, verify_bundle
from ledger.chain import Failure, Summary
from protocols.errors import InvalidInput

EXIT_OK, EXIT_FAILED, EXIT_UNUSABLE = 0, 1, 2


class UsageError(Exception):
    """Unusable command-line input: one line, exit 2."""


def _ledger_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--ledger",
        metavar="PATH|URL",
        default=None,
        help="SQLite file or postgresql:// URL (default: $BENCHLEDGER_LEDGER or "
        f"{settings.DEFAULT_LEDGER})",
    )


def _open(args: argparse.Namespace, *, create: bool) -> Ledger:
    location = args.ledger or settings.load().ledger
    return Ledger(open_store(location, create=create))


def _looks_like_bundle(target: str) -> bool:
    return target.endswith((".jsonl", ".jsonl.gz", ".gz")) or os.path.isfile(target)


def _print_failure(what: str, failure: Failure) -> None:
    print(f"FAILED {what}: {failure}")
    if failure.expected or failure.found:
        print(f"  expected: {failure.expected}")
        print(f"  found:    {failure.found}")


def _print_ok(what: str, s: Summary) -> None:
    root = s.sealed_root or f"(unsealed; heads root {s.computed_root})"
    print(f"ok {what}: {s.streams} streams, {s.events} events, root {root}")


def cmd_verify(args: argparse.Namespace) -> int:
    target = args.target
    if target and _looks_like_bundle(target):
        failure, summary, header = verify_bundle(target, root=args.root)
        if failure:
            _print_failure(f"bundle {target} (run {header.run})", failure)
            return EXIT_FAILED
        _print_ok(f"bundle {target} (run {header.run})", summary)
        return EXIT_OK
    ledger = _open(args, create=False)
    run_ids = [target] if target else ledger.store.run_ids()
    if not run_ids:
        print("ok: the ledger holds no runs")
        return EXIT_OK
    status = EXIT_OK
    for run_id in run_ids:
        failure, summary = ledger.verify(run_id, require_seal=bool(args.root))
        if failure is None and args.root and summary.sealed_root != args.root.lower():
            failure = Failure(
                run_id,
                -1,
                "root mismatch",
                "sealed root is not the one expected",
                expected=args.root.lower(),
                found=summary.sealed_root,
            )
        if failure:
            _print_failure(f"run {run_id}", failure)
            status = EXIT_FAILED
        else:
            _print_ok(f"run {run_id}", summary)
    for stream in ledger.orphans() if not target else []:
        print(f"FAILED stream {stream!r}: its run header stream is missing")
        status = EXIT_FAILED
    return status


def cmd_export(args: argparse.Namespace) -> int:
    ledger = _open(args, create=False)
    n = export_run(ledger, args.run, args.output)
    info = ledger.run_info(args.run)
    print(f"exported run {args.run}: {n} events to {args.output} (root {info.root or 'unsealed'})")
    return EXIT_OK


def cmd_import(args: argparse.Namespace) -> int:
    ledger = _open(args, create=True)
    added = import_bundle(ledger, args.file)
    print(f"imported {args.file}: {added} new events")
    return EXIT_OK


def cmd_runs(args: argparse.Namespace) -> int:
    ledger = _open(args, create=False)
    runs = ledger.runs()
    if not runs:
        print("no runs")
        return EXIT_OK
    print(f"{'run':<40} {'streams':>8} {'events':>9}  root")
    for r in runs:
        print(f"{r.run_id:<40} {r.streams:>8} {r.events:>9}  {r.root or '(unsealed)'}")
    return EXIT_OK


def _one_line(value: object, width: int = 100) -> str:
    from ledger.codec import canonical_json

    text = canonical_json(value).decode()
    return text if len(text) <= width else text[: width - 1] + "…"


def cmd_log(args: argparse.Namespace) -> int:
    ledger = _open(args, create=False)
    stream = args.stream
    if stream is not None and stream != args.run and not stream.startswith(args.run + "/"):
        stream = f"{args.run}/{stream}"
    ledger.run_info(args.run)
    current = None
    for event, h in ledger.events(args.run, stream):
        if event.stream != current:
            current = event.stream
            print(f"== {current}")
        refs = ",".join(map(str, event.refs)) or "-"
        kind = type(event).__struct_config__.tag
        print(f"{event.seq:>5}  {kind:<17} {h[:12]}  refs={refs:<8} {_one_line(event.body)}")  # type: ignore[attr-defined]
    if current is None:
        print(f"no events in {stream or args.run}")
    return EXIT_OK


def cmd_bench_ledger(args: argparse.Namespace) -> int:
    from benchmarks.ledger_bench import run_bench

    if args.events < 100:
        raise UsageError("--events must be at least 100")
    return run_bench(
        events=args.events, backend=args.backend, ledger=args.ledger, as_json=args.json
    )


def _is_cases(path: str) -> bool:
    return path.lower().endswith(".jsonl") or os.path.isfile(os.path.join(path, "cases.jsonl"))


def cmd_protocols_validate(args: argparse.Namespace) -> int:
    import protocols

    if _is_cases(args.path):
        cases = protocols.load_cases(args.path)
        kinds = sorted({k for c in cases.cases for k in c.expected_sources})
        print(f"ok {cases.file}: {len(cases.cases)} cases, source kinds {', '.join(kinds)}")
        return EXIT_OK
    pset = protocols.load(args.path)
    for skipped in pset.skipped:
        print(f"skipped {skipped}: not a protocol file")
    promote = sum(p.promotes for p in pset.protocols)
    update = sum(p.update is not None for p in pset.protocols)
    print(
        f"ok {args.path}: {len(pset.protocols)} protocols ({promote} promote, {update} update) "
        f"from {len(pset.files) - len(pset.skipped)} files"
    )
    return EXIT_OK


def cmd_protocols_hash(args: argparse.Namespace) -> int:
    import protocols

    pset = protocols.load(args.path)
    print(f"{len(pset.protocols)} protocols, recipe {args.recipe}")
    print(protocols.set_hash(pset.protocols, args.recipe))
    return EXIT_OK


def _expected(q: object) -> str:
    from protocols.schema import Question

    assert isinstance(q, Question)
    g = q.grading
    return f"{g.value:g}" if g.kind == "numeric" and g.value is not None else "/".join(g.aliases)


def cmd_protocols_list(args: argparse.Namespace) -> int:
    import protocols

    if _is_cases(args.path):
        cases = protocols.load_cases(args.path)
        print(f"{'id':<16} {'category':<13} {'prime':>5}  sources")
        for c in cases.cases:
            print(f"{c.id:<16} {c.category:<13} {len(c.prime):>5}  {','.join(c.expected_sources)}")
        return EXIT_OK
    pset = protocols.load(args.path)
    print(f"{'id':<28} {'sink':<15} {'stages':<38} answer")
    for p in pset.protocols:
        stages = ["teach", "recall"]
        stages += ["promote", "transfer"] if p.promotes else []
        stages += ["update"] if p.update else []
        stages += ["abstain"] if p.abstain else []
        answer = _expected(p.recall)
        if p.update is not None:
            answer += f" -> {_expected(p.update.recall)}"
        print(f"{p.id:<28} {p.sink:<15} {','.join(stages):<38} {answer}")
    return EXIT_OK


def cmd_protocols_generate(args: argparse.Namespace) -> int:
    from protocols.generate import write

    paths = write(args.out)
    print(f"wrote {len(paths)} protocols to {args.out}")
    return EXIT_OK


def _protocol_commands(sub: argparse._SubParsersAction) -> None:
    import protocols
    from protocols.hashing import RECIPES

    group = sub.add_parser("protocols", help="validate, hash, list and generate protocol sets")
    psub = group.add_subparsers(dest="protocols", required=True, metavar="ACTION")
    path_help = (
        "a protocol file, a folder of them, or a provenance cases .jsonl "
        f"(default: the committed set, {os.path.relpath(protocols.LIFECYCLE_DIR)})"
    )
    p = psub.add_parser("validate", help="report every problem, with file and line (exit 2)")
    p.add_argument("path", nargs="?", default=protocols.LIFECYCLE_DIR, help=path_help)
    p.set_defaults(func=cmd_protocols_validate)
    p = psub.add_parser("hash", help="the canonical protocol-set hash (alone on the last line)")
    p.add_argument("path", nargs="?", default=protocols.LIFECYCLE_DIR, help=path_help)
    p.add_argument("--recipe", choices=RECIPES, default="benchledger")
    p.set_defaults(func=cmd_protocols_hash)
    p = psub.add_parser("list", help="one line per protocol (or case)")
    p.add_argument("path", nargs="?", default=protocols.LIFECYCLE_DIR, help=path_help)
    p.set_defaults(func=cmd_protocols_list)
    p = psub.add_parser("generate", help="write benchledger's own protocol set")
    p.add_argument("--out", required=True, metavar="DIR")
    p.set_defaults(func=cmd_protocols_generate)


def cmd_platform_serve(args: argparse.Namespace) -> int:
    from refplatform.embedder import parse_spec
    from refplatform.errors import PlatformError
    from refplatform.platform import Platform
    from refplatform.server import RunningPlatform

    if not 1 <= args.pool <= 999:
        raise UsageError("--pool must be 1..999")
    try:
        embedder = parse_spec(args.embedder)
    except ValueError as exc:
        raise UsageError(f"--embedder: {exc}") from None
    try:
        if args.db:
            os.makedirs(os.path.dirname(os.path.abspath(args.db)), exist_ok=True)
        platform = Platform(args.db or ":memory:", embedder=embedder)
        running = RunningPlatform(
            platform,
            pool_size=args.pool,
            admin_key=args.admin_key or settings.load().admin_key or None,
            pool_base=args.pool_base,
            host=args.host,
            port=args.port,
            background=False,
        )
    except PlatformError as exc:
        raise UsageError(exc.message) from None
    except OSError as exc:
        raise UsageError(f"--db {args.db}: {exc.strerror}") from None
    last = running.key(args.pool)
    print(f"refplatform serving {running.mcp_url} (admin REST under {running.url}/api/v1)")
    print(f"  admin key: {running.admin_key}")
    print(
        f"  pool keys: {running.key(1)} .. {last} (bench-agent-001..{args.pool:03d}@apikey.local)"
    )
    print(f"  state:     {args.db or 'in memory (pass --db PATH to keep it)'}")
    print(f"  embedder:  {embedder.name}")
    print("Ctrl-C stops it.", flush=True)
    try:
        running.server.serve_forever()
    except KeyboardInterrupt:  # uvicorn re-raises the Ctrl-C it handled: a normal stop
        pass
    finally:
        platform.close()
    print("refplatform stopped", flush=True)
    return EXIT_OK


def cmd_bench_platform(args: argparse.Namespace) -> int:
    from benchmarks.platform_bench import run_bench

    if args.sessions < 1 or args.calls < 1:
        raise UsageError("--sessions and --calls must be at least 1")
    return run_bench(
        sessions=args.sessions, calls=args.calls, as_json=args.json, in_process=args.in_process
    )


def _platform_commands(sub: argparse._SubParsersAction) -> None:
    group = sub.add_parser("platform", help="the embedded reference memory platform")
    psub = group.add_subparsers(dest="platform", required=True, metavar="ACTION")
    p = psub.add_parser("serve", help="serve refplatform in the foreground")
    p.add_argument("--host", default="127.0.0.1", help="default: loopback only")
    p.add_argument("--port", type=int, default=8098, help="0 picks a free port")
    p.add_argument("--db", metavar="PATH", help="SQLite state file (default: in memory)")
    p.add_argument("--pool", type=int, default=64, metavar="N", help="pool identities (64)")
    p.add_argument("--admin-key", metavar="K", help="default: $BENCHLEDGER_ADMIN_KEY or random")
    p.add_argument("--pool-base", metavar="B", help="pool keys are B-001..B-N (default random)")
    p.add_argument("--embedder", default="lexical", metavar="lexical|ollama:MODEL@URL")
    p.set_defaults(func=cmd_platform_serve)


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser (tests use it to check documented options exist)."""
    parser = argparse.ArgumentParser(
        prog="benchledger",
        description="Benchmark agent-memory platforms on a tamper-evident ledger.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("verify", help="check a run or bundle has not been altered")
    p.add_argument("target", nargs="?", help="run id, or a bundle FILE.jsonl[.gz]")
    p.add_argument("--root", metavar="HEX", help="the run root you expect (published root)")
    _ledger_arg(p)
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser("export", help="write a run as a bundle")
    p.add_argument("run")
    p.add_argument("-o", "--output", required=True, metavar="FILE.jsonl[.gz]")
    _ledger_arg(p)
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("import", help="add a bundle's events to a ledger (idempotent)")
    p.add_argument("file")
    _ledger_arg(p)
    p.set_defaults(func=cmd_import)

    p = sub.add_parser("runs", help="list runs")
    _ledger_arg(p)
    p.set_defaults(func=cmd_runs)

    p = sub.add_parser("log", help="print a run's events")
    p.add_argument("run")
    p.add_argument("stream", nargs="?", help="one stream (full name or the part after RUN/)")
    _ledger_arg(p)
    p.set_defaults(func=cmd_log)

    _protocol_commands(sub)
    _platform_commands(sub)

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
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: run one command, map errors to one line and an exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        return func(args)
    except InvalidInput as exc:
        for problem in exc.problems:
            print(f"benchledger: error: {problem}", file=sys.stderr)
        return EXIT_UNUSABLE
    except (UnusableInput, UnknownRun, UsageError) as exc:
        print(f"benchledger: error: {exc}", file=sys.stderr)
        return EXIT_UNUSABLE
    except LedgerError as exc:
        print(f"benchledger: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print("benchledger: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
