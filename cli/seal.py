"""``seal``: seal a run whose planned units all finished, signed when given a key."""

from __future__ import annotations

import argparse

from benchledger.cli.common import EXIT_OK, UsageError, ledger_arg, open_ledger
from benchledger.cli.keys import sign_key_arg, signer_from


def cmd_seal(args: argparse.Namespace) -> int:
    """Seal a run whose planned units all finished, signing the seal when given a key."""
    signer = signer_from(args.sign_key, args.settings)
    ledger = open_ledger(args, create=False, read_only=False)  # sealing writes
    info = ledger.run_info(args.run)
    if info.root:
        raise UsageError(
            f"run {args.run} is already sealed (root {info.root}); a seal is written once, so "
            "sign runs when they are sealed (`run --sign-key`, `seal --sign-key`)"
        )
    # Unfinished planned units: UnitsMissing names them, exit 1 (issue 17); a worker
    # sealing at the same moment is no error (its root is the root).
    root = ledger.seal_complete(args.run, signer=signer)
    signed = f", signed by key {signer.key_id[:16]}" if signer else " (unsigned)"
    print(f"run {args.run} sealed, root {root}{signed}")
    return EXIT_OK


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``seal``."""
    p = sub.add_parser("seal", help="seal a finished run, signing it with --sign-key")
    p.add_argument("run", metavar="RUN")
    sign_key_arg(p)
    ledger_arg(p)
    p.set_defaults(func=cmd_seal)
