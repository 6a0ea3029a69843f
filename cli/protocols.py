"""Protocol-set commands: validate, hash, list, generate."""

from __future__ import annotations

import argparse
import os

from benchledger import protocols
from benchledger.cli.common import EXIT_OK, UsageError, command_line
from benchledger.ledger.inert import inert
from benchledger.protocols import locomo, longmemeval
from benchledger.protocols.dataset import SEED
from benchledger.protocols.generate import PACK_DIR, VARIANTS, write
from benchledger.protocols.hashing import RECIPES
from benchledger.protocols.schema import Question


def _is_cases(path: str) -> bool:
    return path.lower().endswith(".jsonl") or os.path.isfile(os.path.join(path, "cases.jsonl"))


def _head(path: str) -> bytes:
    """The start of a ``.json`` file holding a JSON list (b"": not one; a protocol file
    is an object)."""
    if not (path.lower().endswith(".json") and os.path.isfile(path)):
        return b""
    with open(path, "rb") as fh:
        head = fh.read(4096)
    return head if head.lstrip()[:1] == b"[" else b""


def _is_longmemeval(path: str) -> bool:
    """A LongMemEval file: a JSON list whose questions carry ``question_id``."""
    return longmemeval.looks_like(_head(path))


def _is_locomo(path: str) -> bool:
    """A LoCoMo file: any other ``.json`` file holding a JSON list."""
    return bool(_head(path)) and not _is_longmemeval(path)


def _longmemeval_count(loaded: longmemeval.LongMemEvalSet) -> str:
    qs = loaded.questions
    abstention = sum(q.abstention for q in qs)
    sessions = sum(len(q.sessions) for q in qs)
    return (f"LongMemEval, {len(qs)} questions ({abstention} abstention), "
            f"{sessions} haystack sessions")  # fmt: skip


def cmd_protocols_validate(args: argparse.Namespace) -> int:
    """Load a protocol set, case file, LoCoMo or LongMemEval file; every problem raises
    InvalidInput (exit 2)."""
    if _is_longmemeval(args.path):
        found = longmemeval.load(args.path)
        print(f"ok {args.path}: {_longmemeval_count(found)}, sha256 {found.sha256}")
        return EXIT_OK
    if _is_locomo(args.path):
        loaded = locomo.load(args.path)
        n = sum(len(s.questions) for s in loaded.samples)
        print(f"ok {args.path}: LoCoMo, {len(loaded.samples)} samples, {n} questions, "
              f"sha256 {loaded.sha256}")  # fmt: skip
        for line in _locomo_notes(loaded):
            print(line)
        return EXIT_OK
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


def _locomo_notes(loaded: locomo.LocomoSet, most: int = 5) -> list[str]:
    """What of a valid LoCoMo file is not as LoCoMo meant it, and how each is graded: its
    malformed or dangling evidence (counted by kind, the first few named) and the lone
    surrogate escapes read as U+FFFD."""
    findings = locomo.evidence_findings(loaded.samples)
    total = sum(len(q.evidence) for s in loaded.samples for q in s.questions)
    lines = []
    if findings:
        lines.append(f"evidence: {len(findings)} of {total} evidence strings are kept as "
                     "written and graded as below")  # fmt: skip
    for kind, graded in locomo.GRADED.items():
        found = [f for f in findings if f.kind == kind]
        if found:
            named = ", ".join(f"{f.question} {f.evidence!r}" for f in found[:most])
            more = f", ... ({len(found)} in all)" if len(found) > most else ""
            lines.append(f"  {kind}: {len(found)} ({named}{more}); {graded}")
    if loaded.surrogates:
        lines.append(f"text: {loaded.surrogates} lone surrogate escape(s) (\\ud83d with no "
                     "pair) read as U+FFFD, the replacement character")  # fmt: skip
    return lines


def _locomo_count(loaded: locomo.LocomoSet) -> str:
    n = sum(len(s.questions) for s in loaded.samples)
    return f"LoCoMo, {len(loaded.samples)} samples, {n} questions"


def cmd_protocols_hash(args: argparse.Namespace) -> int:
    """Print the canonical protocol-set hash, alone on the last line (a LoCoMo file's: the
    sha256 of its bytes, what a locomo run records as its set hash; a LongMemEval file's too)."""
    if _is_longmemeval(args.path):
        if args.recipe != "benchledger":
            raise UsageError(f"--recipe {args.recipe}: a LongMemEval file's hash is the sha256 "
                             "of its bytes; recipes apply to protocol sets")  # fmt: skip
        found = longmemeval.load(args.path)
        print(f"{_longmemeval_count(found)}, file sha256")
        print(found.sha256)
        return EXIT_OK
    if _is_locomo(args.path):
        if args.recipe != "benchledger":
            raise UsageError(f"--recipe {args.recipe}: a LoCoMo file's hash is the sha256 of "
                             "its bytes; recipes apply to protocol sets")  # fmt: skip
        loaded = locomo.load(args.path)
        print(f"{_locomo_count(loaded)}, file sha256")
        print(loaded.sha256)
        return EXIT_OK
    pset = protocols.load(args.path)
    print(f"{len(pset.protocols)} protocols, recipe {args.recipe}")
    print(protocols.set_hash(pset.protocols, args.recipe))
    return EXIT_OK


def _expected(q: Question) -> str:
    g = q.grading
    return f"{g.value:g}" if g.kind == "numeric" and g.value is not None else "/".join(g.aliases)


def cmd_protocols_list(args: argparse.Namespace) -> int:
    """One line per protocol (stages, expected answers), per provenance case or per LoCoMo
    question (category, evidence, gold answer) or LongMemEval question (type, sessions,
    evidence sessions, gold answer)."""
    if _is_longmemeval(args.path):
        found = longmemeval.load(args.path)
        print(f"{'id':<16} {'question_type':<26} {'sessions':>8}  {'evidence':<8} answer")
        for lq in found.questions:
            gold = inert(lq.answer, value=True)  # the file's words
            print(f"{lq.id:<16} {lq.type:<26} {len(lq.sessions):>8}  "
                  f"{len(lq.answer_session_ids):<8} {gold}")  # fmt: skip
        return EXIT_OK
    if _is_locomo(args.path):
        loaded = locomo.load(args.path)
        print(f"{'id':<16} {'category':>8}  {'evidence':<24} answer")
        for s in loaded.samples:
            for q in s.questions:
                evidence = inert(",".join(q.evidence) or "-", value=True)  # the file's words
                print(f"{q.id:<16} {q.category:>8}  {evidence:<24} {inert(q.answer, value=True)}")
        return EXIT_OK
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


def _listing(names: list[str], most: int = 5) -> str:
    return ", ".join(names[:most]) + (f", ... ({len(names)} in all)" if len(names) > most else "")


def cmd_protocols_generate(args: argparse.Namespace) -> int:
    """Write benchledger's own protocol set and seed pack into ``--out``, nothing outside it."""
    out = args.out
    if os.path.exists(out) and not os.path.isdir(out):
        raise UsageError(f"--out {out} is a file; give the folder to write protocols into")
    present = sorted(os.listdir(out)) if os.path.isdir(out) else []
    folder = VARIANTS[args.variant]
    if present and not args.force:
        raise UsageError(
            f"--out {out} is not empty (it holds {_listing(present)}); generate writes "
            f"{folder}/ and {PACK_DIR}/ in it: give a new or empty folder, or --force "
            f"to make those two hold exactly the generated files (other entries stay)"
        )
    try:
        done = write(out, prune=bool(args.force), variant=args.variant)
    except OSError as exc:
        raise UsageError(f"--out {out}: cannot write: {exc.strerror or exc}") from None
    items, pack = os.path.join(out, folder), os.path.join(out, PACK_DIR)
    print(f"wrote {len(done.protocols)} protocols to {items} and the seed pack "
          f"({len(done.pack)} files, dataset seed {SEED}) to {pack}")  # fmt: skip
    if present:
        replaced = _listing(done.replaced) if done.replaced else "none"
        removed = _listing(done.removed) if done.removed else "none"
        print(f"--force: changed files: {replaced}; removed (not generated): {removed}")
    use = command_line("benchledger", "run", "--protocols", items, "--pack", pack)
    print(f"use them with: {use}")
    return EXIT_OK


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``protocols validate|hash|list|generate``."""
    group = sub.add_parser("protocols", help="validate, hash, list and generate protocol sets")
    psub = group.add_subparsers(dest="protocols", required=True, metavar="ACTION")
    path_help = (
        "a protocol file, a folder of them, a provenance cases .jsonl, a LoCoMo or LongMemEval "
        ".json "
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
    p = psub.add_parser("generate", help="write benchledger's own protocol set and seed pack")
    p.add_argument(
        "--out",
        required=True,
        metavar="DIR",
        help="writes DIR/lifecycle (the protocols) and DIR/pack (the seed pack), nothing "
        "else; DIR must be new or empty unless --force",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="a non-empty DIR: make DIR/lifecycle and DIR/pack hold exactly the generated "
        "files (others there are removed and named; other entries of DIR stay); "
        "--out protocols/data --force regenerates the committed set",
    )
    p.add_argument(
        "--variant",
        choices=[v for v in VARIANTS if v],
        default="",
        help="paraphrase: the same protocols with every recall, transfer and update_recall "
        "question in words the fact it is graded against never uses, written to "
        "DIR/lifecycle-paraphrase instead of DIR/lifecycle (docs/protocols.md)",
    )
    p.set_defaults(func=cmd_protocols_generate)
