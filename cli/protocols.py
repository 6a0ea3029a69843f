"""Protocol-set commands: validate, hash, list, generate."""

from __future__ import annotations

import argparse
import os

from cli.common import EXIT_OK, UsageError


def _is_cases(path: str) -> bool:
    return path.lower().endswith(".jsonl") or os.path.isfile(os.path.join(path, "cases.jsonl"))


def cmd_protocols_validate(args: argparse.Namespace) -> int:
    """Load a protocol set or case file; every problem raises InvalidInput (exit 2)."""
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
    """Print the canonical protocol-set hash, alone on the last line."""
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
    """One line per protocol (stages, expected answers) or per provenance case."""
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
    """Write benchledger's own protocol set into ``--out``."""
    from protocols.generate import write

    if os.path.exists(args.out) and not os.path.isdir(args.out):
        raise UsageError(f"--out {args.out} is a file; give the folder to write protocols into")
    try:
        paths = write(args.out)
    except OSError as exc:
        raise UsageError(f"--out {args.out}: cannot write: {exc.strerror or exc}") from None
    print(f"wrote {len(paths)} protocols to {args.out}")
    return EXIT_OK


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``protocols validate|hash|list|generate``."""
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
