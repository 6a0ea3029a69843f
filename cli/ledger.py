"""Ledger commands: verify, export, import, runs, log."""

from __future__ import annotations

import argparse

from cli import trust
from cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    UsageError,
    ledger_arg,
    new_or_existing_ledger,
    open_ledger,
)
from ledger.bundle import (
    AUDIT_FORMAT,
    export_run,
    import_bundle,
    read_header,
    verify_audit_bundle,
    verify_bundle,
)
from ledger.chain import Failure, Summary
from projections.source import Completeness, completeness_of, from_bundle, from_ledger, is_bundle


def _print_failure(what: str, failure: Failure) -> None:
    print(f"FAILED {what}: {failure}")
    if failure.expected or failure.found:
        print(f"  expected: {failure.expected}")
        print(f"  found:    {failure.found}")


def _print_ok(what: str, s: Summary) -> None:
    root = s.sealed_root or f"(unsealed; heads root {s.computed_root})"
    print(f"ok {what}: {s.streams} streams, {s.events} events, root {root}")


def _accept_unsealed(what: str, s: Summary, done: Completeness, allowed: bool) -> bool:
    """An intact but unsealed run is partial: say what is missing; accepted only if allowed."""
    missing = done.missing_text()
    if not done.short:
        missing += f" (seal it: benchledger seal {done.run_id})"
    if allowed:
        _print_ok(what, s)
        print(f"UNSEALED: {done.counts()}; {missing} (accepted as partial: --allow-unsealed)")
        return True
    print(
        f"FAILED {what}: UNSEALED: {done.counts()}; {missing}; the chain is intact ({s.streams} "
        f"streams, {s.events} events) but an unsealed run is partial: pass --allow-unsealed "
        "to accept it as such"
    )
    return False


def cmd_verify(args: argparse.Namespace) -> int:
    """Verify a bundle, an audit bundle, one run or every run; 1 on the first bad one."""
    target = args.target
    args.trusted = trust.verify_options(args, bundle=bool(target and is_bundle(target)))
    if target and is_bundle(target):
        if read_header(target).format == AUDIT_FORMAT:
            failure, proven, header = verify_audit_bundle(target, root=args.root)
            if failure:
                _print_failure(f"audit bundle {target} (run {header.run})", failure)
                return EXIT_FAILED
            root = (args.root or header.root).lower()
            print(f"ok audit bundle {target} (run {header.run}): {proven} streams in root {root}")
            return trust.after_bundle_verify(target, header.run, args)
        failure, summary, header = verify_bundle(target, root=args.root)
        if failure:
            _print_failure(f"bundle {target} (run {header.run})", failure)
            return EXIT_FAILED
        what = f"bundle {target} (run {header.run})"
        if not summary.sealed_root:
            done = completeness_of(from_bundle(target))
            if not _accept_unsealed(what, summary, done, args.allow_unsealed):
                return EXIT_FAILED
        else:
            _print_ok(what, summary)
        return trust.after_bundle_verify(target, header.run, args)
    ledger = open_ledger(args, create=False)
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
            continue
        sealed = ledger.sealed(run_id)
        if sealed is None:
            done = completeness_of(from_ledger(ledger, run_id))
            if not _accept_unsealed(f"run {run_id}", summary, done, args.allow_unsealed):
                status = EXIT_FAILED
                continue
        else:
            _print_ok(f"run {run_id}", summary)
        status = max(status, trust.authenticity(run_id, sealed, args.trusted, bool(args.root)))
    for stream in ledger.orphans() if not target else []:
        print(f"FAILED stream {stream!r}: its run header stream is missing")
        status = EXIT_FAILED
    return status


def cmd_export(args: argparse.Namespace) -> int:
    """Write a run as a bundle."""
    ledger = open_ledger(args, create=False)
    if args.withhold or args.withhold_stream:
        return trust.export_redacted(ledger, args)
    n = export_run(ledger, args.run, args.output)
    info = ledger.run_info(args.run)
    print(f"exported run {args.run}: {n} events to {args.output} (root {info.root or 'unsealed'})")
    return EXIT_OK


def cmd_import(args: argparse.Namespace) -> int:
    """Add a bundle's run to the ledger, which must not hold it (unless as that sealed whole,
    then nothing is done); an unsealed one only with --allow-unsealed, marked imported."""
    with new_or_existing_ledger(args) as ledger:  # a refused bundle leaves no new file
        done = import_bundle(ledger, args.file, allow_unsealed=args.allow_unsealed)
    if done.already:
        print(f"imported {args.file}: 0 new events: run {done.run_id} is already here, sealed "
              f"with the same root {done.root}; nothing to import")  # fmt: skip
    elif done.root:
        print(f"imported {args.file}: {done.added} new events: run {done.run_id}, sealed, root "
              f"{done.root}")  # fmt: skip
    else:
        print(f"imported {args.file}: {done.added} new events: run {done.run_id}, UNSEALED, "
              "marked as imported: it cannot be resumed, joined or sealed here")  # fmt: skip
    return EXIT_OK


def cmd_runs(args: argparse.Namespace) -> int:
    """List the ledger's runs, newest first: start, agent, platform, units, seal, subset."""
    import json

    from projections.runs import run_rows

    rows = run_rows(open_ledger(args, create=False))
    if args.json:
        print(json.dumps([r.as_json() for r in rows], indent=2))
        return EXIT_OK
    if not rows:
        print("no runs")
        return EXIT_OK
    head = ("run", "started (UTC)", "agent", "platform", "units", "seal", "streams", "events",
            "root", "subset")  # fmt: skip
    table = [head] + [
        (r.run_id, r.started, r.agent or "-", r.platform or "-",
         f"{r.units_finished}/{r.units_planned}",
         ("sealed, signed" if r.signed else "sealed, unsigned") if r.sealed else "UNSEALED",
         str(r.streams), str(r.events), r.root or "-", f"SUBSET: {r.subset}" if r.subset else "-")
        for r in rows
    ]  # fmt: skip
    widths = [max(len(line[i]) for line in table) for i in range(len(head))]
    numbers = {head.index("streams"), head.index("events")}
    for line in table:
        cells = [c.rjust(w) if i in numbers else c.ljust(w)
                 for i, (c, w) in enumerate(zip(line, widths, strict=True))]  # fmt: skip
        print("  ".join(cells).rstrip())
    return EXIT_OK


def _one_line(value: object, width: int = 100) -> str:
    from ledger.codec import canonical_json

    text = canonical_json(value).decode()
    return text if len(text) <= width else text[: width - 1] + "…"


def cmd_log(args: argparse.Namespace) -> int:
    """Print a run's (or one stream's) events, one line each, once the whole run verified."""
    from projections.source import banner_of, open_run

    run = open_run(args.run, lambda: open_ledger(args, create=False), require_seal=False,
                   allow_partial=True)  # fmt: skip
    stream = args.stream
    if stream is not None and stream != run.run_id and not stream.startswith(run.run_id + "/"):
        stream = f"{run.run_id}/{stream}"
    shown = [(e, h) for e, h in run.events if stream is None or e.stream == stream]
    if not shown:
        names = sorted({e.stream.removeprefix(run.run_id + "/") for e, _ in run.events})
        raise UsageError(f"run {run.run_id} has no stream {stream!r}; it has: "
                         f"{', '.join(names[:8])}{', ...' if len(names) > 8 else ''}")  # fmt: skip
    banner = banner_of(run)  # an unsealed or incomplete run says so first
    if banner:
        print(banner)
    print(f"verified: {run.verification.line()}")
    current = None
    for event, h in shown:
        if event.stream != current:
            current = event.stream
            print(f"== {current}")
        refs = ",".join(map(str, event.refs)) or "-"
        kind = type(event).__struct_config__.tag
        body = _one_line(getattr(event, "body", None))
        print(f"{event.seq:>5}  {kind:<17} {h[:12]}  refs={refs:<8} {body}")
    return EXIT_OK


def register(sub: argparse._SubParsersAction) -> None:
    """Add verify, export, import, runs and log."""
    p = sub.add_parser("verify", help="check a run or bundle has not been altered")
    p.add_argument("target", nargs="?", help="run id, or a bundle FILE.jsonl[.gz]")
    p.add_argument("--root", metavar="HEX", help="the run root you expect (published root)")
    p.add_argument(
        "--pubkey",
        "--trusted-key",
        action="append",
        metavar="PATH",
        help="fail unless a key in this .pub or trusted-keys file signed the seal (repeatable)",
    )
    p.add_argument(
        "--reveal",
        metavar="FULL_BUNDLE",
        help="redacted bundle: prove every placeholder matches the full run's event",
    )
    p.add_argument(
        "--allow-unsealed",
        action="store_true",
        help="accept an intact but unsealed (partial) run, saying how many planned units are "
        "missing; without it an unsealed run fails (exit 1)",
    )
    ledger_arg(p)
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser("export", help="write a run as a bundle")
    p.add_argument("run")
    p.add_argument("-o", "--output", required=True, metavar="FILE.jsonl[.gz]")
    p.add_argument(
        "--withhold",
        action="append",
        metavar="KIND[,KIND]",
        help="publish these event kinds as placeholders (kind and digest, no body)",
    )
    p.add_argument(
        "--withhold-stream",
        action="append",
        metavar="GLOB",
        help="withhold every event of matching streams (full name or the part after RUN/)",
    )
    ledger_arg(p)
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("import", help="add a bundle's run to a ledger that does not hold it")
    p.add_argument("file")
    p.add_argument(
        "--allow-unsealed",
        action="store_true",
        help="import an unsealed run too, marked as imported: it is never resumed, joined or "
        "sealed here",
    )
    ledger_arg(p)
    p.set_defaults(func=cmd_import)

    p = sub.add_parser("runs", help="list runs, newest first")
    p.add_argument("--json", action="store_true", help="a JSON list, one object per run")
    ledger_arg(p)
    p.set_defaults(func=cmd_runs)

    p = sub.add_parser("log", help="print a run's events (after the run verified)")
    p.add_argument("run", help="run id, or a bundle file")
    p.add_argument("stream", nargs="?", help="one stream (full name or the part after RUN/)")
    ledger_arg(p)
    p.set_defaults(func=cmd_log)
