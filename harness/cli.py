"""The ``benchledger`` command line."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from harness import settings
from ledger import Ledger, LedgerError, UnknownRun, UnusableInput, open_store
from ledger.bundle import (
    AUDIT_FORMAT,
    atomic_output,
    export_audit,
    export_run,
    import_bundle,
    read_header,
    verify_audit_bundle,
    verify_bundle,
)
from ledger.chain import Failure, Summary
from projections.lifecycle import Scorecard
from projections.source import RunEvents, is_bundle
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
    if target and is_bundle(target):
        if read_header(target).format == AUDIT_FORMAT:
            failure, proven, header = verify_audit_bundle(target, root=args.root)
            if failure:
                _print_failure(f"audit bundle {target} (run {header.run})", failure)
                return EXIT_FAILED
            root = (args.root or header.root).lower()
            print(f"ok audit bundle {target} (run {header.run}): {proven} streams in root {root}")
            return EXIT_OK
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


def cmd_bench_run(args: argparse.Namespace) -> int:
    import protocols
    from benchmarks.run_bench import run_bench

    if args.delay < 0 or args.concurrency < 2:
        raise UsageError("--delay must be >= 0 and --concurrency at least 2")
    path = args.protocols or protocols.LIFECYCLE_DIR
    return run_bench(
        protocols=path, delay=args.delay, concurrency=args.concurrency, as_json=args.json
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


def _run_events(target: str, args: argparse.Namespace) -> RunEvents:
    from projections.source import from_bundle, from_ledger

    if is_bundle(target):
        return from_bundle(target)
    return from_ledger(_open(args, create=False), target)


def _scorecard(targets: list[str], args: argparse.Namespace) -> Scorecard:
    from projections.compare import Incomparable, comparable
    from projections.fold import fold
    from projections.lifecycle import LifecycleFold, scorecard

    folds = [fold(LifecycleFold(), _run_events(t, args).events) for t in targets]
    try:
        comparable([m for m, _ in folds], what="passes")
    except Incomparable as exc:
        raise UsageError(f"cannot merge these runs: {exc}") from None
    return scorecard(folds, ci=getattr(args, "ci", "wilson"))


def _write(text: str, output: str | None) -> None:
    if not output:
        sys.stdout.write(text)
        return
    with atomic_output(output) as fh:
        fh.write(text.encode())
    print(f"wrote {output}")


def cmd_report(args: argparse.Namespace) -> int:
    from projections.report import render

    card = _scorecard(args.runs, args)
    _write(render(card, args.format), args.output)
    return EXIT_OK


def cmd_compare(args: argparse.Namespace) -> int:
    from projections.compare import Incomparable, compare
    from projections.report import compare_text

    a, b = _scorecard([args.run_a], args), _scorecard([args.run_b], args)
    try:
        rows = compare(a, b)
    except Incomparable as exc:
        raise UsageError(f"cannot compare: {exc}") from None
    _write(compare_text(rows, args.run_a, args.run_b, args.format), args.output)
    return EXIT_OK


def cmd_gate(args: argparse.Namespace) -> int:
    from projections.compare import INCONCLUSIVE, REGRESS, Incomparable, gate
    from projections.report import gate_text

    if not 0 <= args.tolerance < 1:
        raise UsageError("--tolerance must be in [0, 1)")
    base, cand = _scorecard([args.baseline], args), _scorecard([args.candidate], args)
    try:
        rows = gate(base, cand, args.tolerance)
    except Incomparable as exc:
        raise UsageError(f"cannot gate: {exc}") from None
    sys.stdout.write(gate_text(rows, args.tolerance))
    verdicts = {g.verdict for g in rows}
    if REGRESS in verdicts or (args.strict and INCONCLUSIVE in verdicts):
        print("gate: FAILED")
        return EXIT_FAILED
    print("gate: passed")
    return EXIT_OK


def cmd_audit(args: argparse.Namespace) -> int:
    from projections.audit import UnknownMetric, audit, render

    run = _run_events(args.run, args)
    try:
        result = audit(run, args.metric)
    except UnknownMetric as exc:
        raise UsageError(str(exc)) from None
    print(render(result))
    if args.bundle:
        if is_bundle(args.run):
            raise UsageError("--bundle needs the run in a ledger (import the bundle first)")
        n = export_audit(_open(args, create=False), run.run_id, result.streams, args.bundle)
        print(
            f"\nwrote audit bundle {args.bundle}: {n} events, {len(result.streams) + 1} streams "
            f"with inclusion proofs; check it offline with: benchledger verify {args.bundle} "
            f"--root {run.root}"
        )
    return EXIT_OK


def cmd_import_peer(args: argparse.Namespace) -> int:
    from harness.peer_import import import_peer

    transcripts = args.transcripts
    if transcripts is None and os.path.isdir(args.results + ".transcripts"):
        transcripts = [args.results + ".transcripts"]
    ledger = _open(args, create=True)
    run_id, root, shape = import_peer(
        ledger, args.results, transcripts=transcripts, run_id=args.run_id
    )
    print(f"imported {args.results} ({shape} shape) as run {run_id}, root {root}")
    print(f"see it with: benchledger report {run_id}")
    return EXIT_OK


def _progress() -> tuple[Any, Callable[[], None]]:
    """Progress callbacks: a rich bar on a terminal, one line per finished unit otherwise."""
    from harness.runner import Progress

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


def cmd_run(args: argparse.Namespace) -> int:
    import asyncio
    import signal

    import protocols
    from harness.runner import RunConfig, Runner, RunRefused
    from projections.fold import fold
    from projections.lifecycle import LifecycleFold, scorecard
    from projections.report import table
    from projections.source import from_ledger

    if args.suite != "lifecycle":
        raise UsageError(f"--suite {args.suite}: only the lifecycle suite runs in this version")
    if args.k < 1 or args.concurrency < 1:
        raise UsageError("--k and --concurrency must be at least 1")
    if args.shard:
        raise UsageError("--shard is not available in this version yet")
    if args.platform != "embedded" and not args.platform.startswith(("http://", "https://")):
        raise UsageError(f"--platform {args.platform!r}: use embedded or an http(s):// URL")
    conf = settings.load()
    admin_key = args.admin_key or conf.admin_key
    if args.platform != "embedded" and not (admin_key and args.pool_base and args.pool_size):
        raise UsageError(
            "an external --platform needs --admin-key (or $BENCHLEDGER_ADMIN_KEY), "
            "--pool-base and --pool-size"
        )
    cfg = RunConfig(
        protocols_path=args.protocols or protocols.LIFECYCLE_DIR,
        agent=args.agent,
        platform=args.platform,
        admin_key=admin_key,
        pool_base=args.pool_base or "",
        pool_size=args.pool_size or 0,
        k=args.k,
        concurrency=args.concurrency,
        run_id=args.run_id or "",
        reset_cmd=args.reset_cmd or "",
        resume=args.resume or "",
    )
    try:
        from harness.agents import from_spec

        from_spec(cfg.agent)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    from refplatform.server import quiet_logs

    quiet_logs()
    ledger_location = args.ledger or conf.ledger
    ledger = _open(args, create=True)
    progress, stop_bar = _progress()
    runner = Runner(ledger, cfg, progress)

    async def main_task() -> tuple[str, str]:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None
        loop.add_signal_handler(signal.SIGINT, task.cancel)
        try:
            return await runner.execute()
        finally:
            loop.remove_signal_handler(signal.SIGINT)

    try:
        run_id, root = asyncio.run(main_task())
    except RunRefused as exc:
        stop_bar()
        raise UsageError(str(exc)) from None
    except asyncio.CancelledError:
        stop_bar()
        started = ledger.store.run_ids()
        rid = cfg.resume or cfg.run_id or (started[-1] if started else "RUN_ID")
        print(
            f"\ninterrupted: every finished episode is in the ledger. Resume with:\n"
            f"  benchledger run --resume {rid} --ledger {ledger_location}",
            file=sys.stderr,
        )
        return 130
    stop_bar()
    card = scorecard([fold(LifecycleFold(), from_ledger(ledger, run_id).events)])
    print()
    print(table(card), end="")
    print(f"\nrun {run_id} sealed, root {root}")
    print(f"verify with: benchledger verify {run_id} --root {root} --ledger {ledger_location}")
    return EXIT_OK


def _projection_commands(sub: argparse._SubParsersAction) -> None:
    from projections.lifecycle import METRIC_NAMES
    from projections.report import FORMATS

    p = sub.add_parser("report", help="a run's scorecard (several runs merge as passes)")
    p.add_argument("runs", nargs="+", metavar="RUN", help="run id or bundle file")
    p.add_argument("--format", choices=FORMATS, default="table")
    p.add_argument("-o", "--output", metavar="FILE")
    p.add_argument(
        "--ci",
        choices=["wilson", "bootstrap"],
        default="wilson",
        help="interval for rates (bootstrap: percentile, fixed seed)",
    )
    _ledger_arg(p)
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("compare", help="two runs of one protocol set, paired by protocol")
    p.add_argument("run_a", metavar="RUN_A")
    p.add_argument("run_b", metavar="RUN_B")
    p.add_argument("--format", choices=["table", "markdown", "json"], default="table")
    p.add_argument("-o", "--output", metavar="FILE")
    _ledger_arg(p)
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("gate", help="fail CI when a candidate run regresses against a baseline")
    p.add_argument("candidate", metavar="CANDIDATE")
    p.add_argument("--baseline", required=True, metavar="BASELINE")
    p.add_argument("--tolerance", type=float, default=0.05)
    p.add_argument("--strict", action="store_true", help="also fail on inconclusive")
    _ledger_arg(p)
    p.set_defaults(func=cmd_gate)

    p = sub.add_parser("audit", help="trace a metric to its decision and evidence events")
    p.add_argument("run", metavar="RUN", help="run id or bundle file")
    p.add_argument("metric", metavar="METRIC", help=", ".join(METRIC_NAMES))
    p.add_argument("--bundle", metavar="OUT", help="write a self-contained audit bundle")
    _ledger_arg(p)
    p.set_defaults(func=cmd_audit)

    p = sub.add_parser("import-peer", help="a peer platform's results file as a sealed run")
    p.add_argument("platform", choices=["mcp-data-platform"])
    p.add_argument("results", metavar="RESULTS.json")
    p.add_argument(
        "--transcripts",
        action="append",
        metavar="DIR",
        help="transcript folder; repeat once per pass (attempt order) for merged files",
    )
    p.add_argument("--run-id", metavar="ID")
    _ledger_arg(p)
    p.set_defaults(func=cmd_import_peer)


def _run_command(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="run the benchmark; every call goes into the ledger")
    p.add_argument("--suite", default="lifecycle", choices=["lifecycle"])
    p.add_argument("--protocols", metavar="PATH", help="default: the committed lifecycle set")
    p.add_argument(
        "--agent",
        default="scripted",
        help="scripted (default) or fake[:DELAY_S]; model agents come later",
    )
    p.add_argument("--platform", default="embedded", metavar="embedded|URL")
    p.add_argument("--admin-key", metavar="K", help="external platform (or $BENCHLEDGER_ADMIN_KEY)")
    p.add_argument("--pool-base", metavar="B", help="external platform: keys are B-001..B-N")
    p.add_argument("--pool-size", type=int, metavar="N", help="external platform: pool size")
    p.add_argument("--reset-cmd", metavar="CMD", help="external platform: run between passes")
    p.add_argument("--k", type=int, default=1, help="passes; each is one attempt per protocol")
    p.add_argument("--concurrency", type=int, default=4, help="units in flight (4)")
    p.add_argument("--run-id", metavar="ID")
    p.add_argument("--shard", metavar="i/n", help="(later) run one shard of the units")
    p.add_argument("--resume", metavar="RUN_ID", help="finish an interrupted run")
    _ledger_arg(p)
    p.set_defaults(func=cmd_run)


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

    _run_command(sub)
    _protocol_commands(sub)
    _platform_commands(sub)
    _projection_commands(sub)

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
