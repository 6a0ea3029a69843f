"""Ledger commands: verify, export, import, runs, log."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
from typing import Any

from benchledger.cli.authenticity import (
    after_bundle_verify,
    pubkey_arg,
    require_trusted,
    trusted_keys,
    verify_options,
)
from benchledger.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    UsageError,
    check_output,
    command_line,
    ledger_arg,
    new_or_existing_ledger,
    open_ledger,
)
from benchledger.cli.export import exported_redacted
from benchledger.ledger.codec import canonical_json
from benchledger.ledger.completeness import Completeness
from benchledger.ledger.errors import BenchledgerError
from benchledger.ledger.verdict import Failure, Summary
from benchledger.ledger.verified import (
    RunUnverified,
    VerifiedRun,
    import_bundle,
    is_bundle,
    open_run,
)
from benchledger.projections.card import standing_lines
from benchledger.projections.runs import run_rows
from benchledger.projections.source import banner_of
from benchledger.reading import check, export


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


ATTESTATION_SUFFIX = ".intoto.jsonl"


def cmd_verify(args: argparse.Namespace) -> int:
    """Verify a bundle, an audit bundle, one run or every run; 1 on the first bad one."""
    target = args.target
    if target and target.endswith(ATTESTATION_SUFFIX):
        return _verify_attestation(target, args)
    if getattr(args, "bundle", None):
        raise UsageError("--bundle names the bundle an attestation (FILE.intoto.jsonl) is about")
    args.root = _checked_root(args.root)
    bundle = bool(target and is_bundle(target))
    if target and os.path.isdir(target) and (bundle or not _holds(args, target)):
        check_all = command_line("benchledger", "replay", "check", target)
        raise UsageError(
            f"{target}: is a directory; verify takes a run id or a bundle file "
            f"(FILE.jsonl[.gz]); for every bundle in a folder: {check_all}"
        )
    args.trusted = verify_options(args, bundle=bundle)
    if bundle:
        return _verify_bundle(target, args)
    ledger = open_ledger(args, create=False)
    run_ids = [target] if target else ledger.store.run_ids()
    if not run_ids:
        print("ok: the ledger holds no runs")
        return EXIT_OK
    status = EXIT_OK
    for run_id in run_ids:
        # Through the door, events not kept: one scan, constant memory per run.
        checked = check(run_id, lambda: ledger, args.trusted, root=args.root,
                        allow_unsealed=args.allow_unsealed)  # fmt: skip
        if checked.run is None:
            assert checked.failure is not None
            _print_failure(f"run {run_id}", checked.failure)
            status = EXIT_FAILED
            continue
        summary, done = _checked(checked.run.opened)
        if summary.seal is None:
            if not _accept_unsealed(f"run {run_id}", summary, done, args.allow_unsealed):
                status = EXIT_FAILED
                continue
        else:
            _print_ok(f"run {run_id}", summary)
        if checked.authenticity:  # who sealed it, or that nobody vouches for its root
            print(checked.authenticity)
        status = max(status, EXIT_OK if checked.ok else EXIT_FAILED)
    for stream in ledger.orphans() if not target else []:
        print(f"FAILED stream {stream!r}: its run header stream is missing")
        status = EXIT_FAILED
    return status


def _verify_attestation(target: str, args: argparse.Namespace) -> int:
    """``verify FILE.intoto.jsonl --pubkey KEY.pub [--bundle FILE]``: the signed statements,
    the bundle's sha256 and the run it holds, each checked (docs/trust.md, "Attestations")."""
    from benchledger.attesting import AttestationFailed, verify_attestation

    if args.root or args.reveal or args.allow_unsealed:
        raise UsageError("--root, --reveal and --allow-unsealed check runs and bundles; an "
                         "attestation names its root and needs a sealed run")  # fmt: skip
    try:
        done = verify_attestation(target, pubkey=args.pubkey, bundle=args.bundle,
                                  settings=args.settings)  # fmt: skip
    except AttestationFailed as exc:
        print(exc)
        return EXIT_FAILED
    print(f"ok attestation {target}: bundle {done.bundle} (run {done.run_id}) at root "
          f"{done.root}; test-result {done.result}; {len(done.predicates)} statements signed "
          f"by key {done.key[:16]} (trusted)")  # fmt: skip
    return EXIT_OK


def _checked_root(root: str | None) -> str | None:
    """``--root`` as a whole run root, 64 hex digits (lower case, as roots are printed);
    UsageError for anything else (a shorter one matches nothing, and would read as a
    failed check)."""
    if root is None or re.fullmatch(r"[0-9a-fA-F]{64}", root):
        return root and root.lower()
    if re.fullmatch(r"[0-9a-fA-F]{6,63}", root):
        raise UsageError(f"--root {root}: an abbreviated root ({len(root)} hex digits, as "
                         "compare shows it); give the full root, 64 hex digits, as "
                         "`benchledger runs` or the run's seal line prints it")  # fmt: skip
    raise UsageError(f"--root {root!r}: not a run root; give the full root, 64 hex digits")


def _holds(args: argparse.Namespace, run_id: str) -> bool:
    """Whether the ledger (``--ledger`` or the settings') is there and holds ``run_id``."""
    try:
        with contextlib.closing(open_ledger(args, create=False).store) as store:
            return store.head(run_id) is not None
    except BenchledgerError:
        return False


def _checked(run: VerifiedRun) -> tuple[Summary, Completeness]:
    """What the door's one pass saw of ``run``: the checker's summary, the plan's count."""
    assert run.summary is not None and run.completeness is not None
    return run.summary, run.completeness


def _verify_bundle(target: str, args: argparse.Namespace) -> int:
    """``verify FILE``: the bundle read once, through the door; then what stands behind it."""
    try:
        run = open_run(target, require_seal=False, allow_partial=True, trusted=args.trusted,
                       root=args.root, keep_events=False,
                       keep_lines=bool(getattr(args, "reveal", None)))  # fmt: skip
    except RunUnverified as exc:
        what = "audit bundle" if exc.source == "audit bundle" else "bundle"
        _print_failure(f"{what} {target} (run {exc.run_id})", exc.failure)
        return EXIT_FAILED
    summary, done = _checked(run)
    if run.verification.partial:
        v = run.verification  # what it lacks is named: the seal lists every stream
        print(f"ok audit bundle {target} (run {run.run_id}): {v.streams} of {v.total_streams} "
              f"streams in root {run.root}{v.missing_text()}")  # fmt: skip
        return after_bundle_verify(target, run, args)
    what = f"bundle {target} (run {run.run_id})"
    if not summary.sealed_root:
        if not _accept_unsealed(what, summary, done, args.allow_unsealed):
            return EXIT_FAILED
    else:
        _print_ok(what, summary)
    return after_bundle_verify(target, run, args)


def cmd_export(args: argparse.Namespace) -> int:
    """Write a run as a bundle, or (``--format inspect``) as an Inspect AI eval log."""
    redacting = bool(args.withhold or args.withhold_stream or args.withhold_copies)
    if args.sign_key and args.format != "attestation":
        raise UsageError("--sign-key signs an attestation: add --format attestation")
    if args.format == "eee":
        if redacting:
            raise UsageError("--format eee writes the whole run's record: drop --withhold*")
        return _export_eee(args)
    if args.format == "attestation":
        if redacting:
            raise UsageError("--format attestation attests a bundle as it is: drop --withhold*")
        return _export_attestation(args)
    if args.format == "inspect":
        if redacting:
            raise UsageError(
                "--withhold, --withhold-stream and --withhold-copies make a redacted bundle; "
                "--format inspect writes an eval log: drop one"
            )
        return _export_inspect(args)
    done = export(args.run, args.output, ledger=args.ledger, withhold=args.withhold or (),
                  withhold_streams=args.withhold_stream or (),
                  withhold_copies=args.withhold_copies, settings=args.settings)  # fmt: skip
    if redacting:  # copies alone: "nothing to withhold"
        return exported_redacted(done)
    root = done.root or "unsealed"
    print(f"exported run {args.run}: {done.written} events to {args.output} (root {root})")
    return EXIT_OK


def _export_inspect(args: argparse.Namespace) -> int:
    """``export RUN --format inspect -o FILE.eval|FILE.json``: the run, verified while it is
    read (a ledger run id or a bundle), as Inspect AI's eval log (docs/inspect.md)."""
    # Imported here: it loads the suites' readers, which verify, import and log never need.
    from benchledger.projections.inspect_log import SUFFIXES

    if not args.output.endswith(SUFFIXES):
        raise UsageError(f"{args.output}: --format inspect writes FILE.eval (Inspect's zip) "
                         "or FILE.json (one EvalLog document)")  # fmt: skip
    check_output(args.output)
    done = export(args.run, args.output, ledger=args.ledger, format="inspect",
                  settings=args.settings)  # fmt: skip
    root = done.root or f"unsealed; heads root {done.heads_root}"
    print(f"exported run {done.run_id}: {done.written} samples to {args.output} as an Inspect "
          f"AI eval log (root {root})")  # fmt: skip
    return EXIT_OK


def _export_eee(args: argparse.Namespace) -> int:
    """``export RUN --format eee -o DIR``: the run as an Every Eval Ever aggregate record and
    instance sidecar under DIR (docs/eee.md)."""
    from benchledger.exporting import export_eee

    done = export_eee(args.run, args.output, ledger=args.ledger, settings=args.settings)
    print(f"exported run {done.run_id} (root {done.root or 'unsealed'}) as an Every Eval Ever "
          f"record: {done.results} results to {done.aggregate}")  # fmt: skip
    if done.samples:
        print(f"instance lines: {done.rows} to {done.samples}")
    if done.not_measured:
        print(f"not measured (no denominator; named in the record, never scored): "
              f"{', '.join(done.not_measured)}")  # fmt: skip
    return EXIT_OK


def _export_attestation(args: argparse.Namespace) -> int:
    """``export BUNDLE --format attestation -o FILE.intoto.jsonl``: the bundle's signed
    in-toto statements (docs/trust.md, "Attestations")."""
    from benchledger.attesting import attest

    if not args.output.endswith(ATTESTATION_SUFFIX):
        raise UsageError(f"{args.output}: --format attestation writes FILE{ATTESTATION_SUFFIX}")
    check_output(args.output)
    done = attest(args.run, args.output, sign_key=args.sign_key, ledger=args.ledger,
                  settings=args.settings)  # fmt: skip
    print(f"attested run {done.run_id} (root {done.root}): bundle {args.run} sha256 "
          f"{done.bundle_sha256}, test-result {done.result}, signed by key {done.key[:16]}, "
          f"to {args.output}")  # fmt: skip
    print(
        f"verify with: {command_line('benchledger', 'verify', args.output, '--pubkey', 'KEY.pub')}"
    )
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
    rows = run_rows(open_ledger(args, create=False))
    queued = _queued(args)
    if args.json:
        out = [r.as_json() for r in rows]
        for row in out:
            if row["run_id"] in queued:
                state = queued[row["run_id"]]
                row["queue"] = {"queued": state.queued, "running": state.running,
                                "done": state.done, "failed_or_cancelled": state.other,
                                "workers": list(state.workers)}  # fmt: skip
        print(json.dumps(out, indent=2))
        return EXIT_OK
    if not rows:
        print("no runs")
        return EXIT_OK
    head = ("run", "started (UTC)", "agent", "platform", "units", "seal", "streams", "events",
            "root", "subset")  # fmt: skip
    table = [head] + [
        (r.run_id, r.started, r.agent or "-", r.platform or "-",
         f"{r.units_finished}/{r.units_planned}",
         _seal_cell(r.sealed, r.signed, r.infra_failed),
         str(r.streams), str(r.events), r.root or "-", f"SUBSET: {r.subset}" if r.subset else "-")
        for r in rows
    ]  # fmt: skip
    widths = [max(len(line[i]) for line in table) for i in range(len(head))]
    numbers = {head.index("streams"), head.index("events")}
    for line in table:
        cells = [c.rjust(w) if i in numbers else c.ljust(w)
                 for i, (c, w) in enumerate(zip(line, widths, strict=True))]  # fmt: skip
        print("  ".join(cells).rstrip())
    for r in rows:
        if r.run_id in queued and (queued[r.run_id].queued or queued[r.run_id].running):
            print(f"queue: {r.run_id}: {queued[r.run_id].line()}")
    return EXIT_OK


def _queued(args: argparse.Namespace) -> dict[str, Any]:
    """The queued runs' job states and workers ({} for a SQLite ledger or no queue)."""
    location = str(args.ledger or args.settings.ledger)
    if not location.startswith(("postgresql://", "postgres://")):
        return {}
    from benchledger.harness.queue import queue_states

    return dict(queue_states(location))


def _seal_cell(sealed: bool, signed: bool, infra_failed: tuple[str, ...]) -> str:
    """The seal column: sealed (and whether signed), or UNSEALED, naming the units that
    ended in infrastructure errors if any did (what keeps a finished run unsealed)."""
    if sealed:
        return "sealed, signed" if signed else "sealed, unsigned"
    n = len(infra_failed)
    if not n:
        return "UNSEALED"
    names = ", ".join(infra_failed[:3]) + (", ..." if n > 3 else "")
    return f"UNSEALED: {n} infra-failed ({names})"


def _one_line(value: object, width: int = 100) -> str:
    text = canonical_json(value).decode()
    return text if len(text) <= width else text[: width - 1] + "…"


def cmd_log(args: argparse.Namespace) -> int:
    """Print a run's (or one stream's) events, one line each, once the whole run verified."""
    trusted = trusted_keys(args)  # a bad key file: one line, exit 2, first
    run = open_run(args.run, lambda: open_ledger(args, create=False), require_seal=False,
                   allow_partial=True, trusted=trusted)  # fmt: skip
    require_trusted(run, trusted)
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
    for line in standing_lines([(run.run_id, run.standing, run.origin)]):
        print(line)
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
    p.add_argument(
        "target",
        nargs="?",
        help="run id, a bundle FILE.jsonl[.gz], or an attestation FILE.intoto.jsonl",
    )
    p.add_argument("--root", metavar="HEX", help="the run root you expect (published root)")
    pubkey_arg(p)
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
    p.add_argument(
        "--bundle",
        metavar="FILE",
        help="an attestation's bundle (default: the file it names, beside it)",
    )
    ledger_arg(p)
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser("export", help="write a run as a bundle")
    p.add_argument("run", help="run id (with --format inspect also a bundle file; with "
                   "--format attestation a sealed run's bundle file)")  # fmt: skip
    p.add_argument("-o", "--output", required=True,
                   metavar="FILE.jsonl[.gz]|FILE.eval|FILE.json|FILE.intoto.jsonl|DIR")  # fmt: skip
    p.add_argument(
        "--format",
        choices=("bundle", "inspect", "eee", "attestation"),
        default="bundle",
        help="bundle (default): the run's events; inspect: Inspect AI's eval log, FILE.eval "
        "or FILE.json, readable by `inspect view` (docs/inspect.md); eee: an Every Eval Ever "
        "record under the folder DIR (docs/eee.md); attestation: signed in-toto statements of "
        "a bundle, FILE.intoto.jsonl (docs/trust.md)",
    )
    p.add_argument(  # not cli.keys' flag: that loads cryptography for every command line
        "--sign-key",
        metavar="PATH",
        help="--format attestation: sign with this Ed25519 private key, the one that signed "
        "the run's seal (or $BENCHLEDGER_SIGNING_KEY); the key itself is never written",
    )
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
    p.add_argument(
        "--withhold-copies",
        action="store_true",
        help="also withhold the evidence of streams whose shown session_call, model_call or "
        "read_back events copy withheld text (without it they are listed on stderr)",
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
    pubkey_arg(p, " of the run")
    ledger_arg(p)
    p.set_defaults(func=cmd_log)
