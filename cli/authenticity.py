"""Authenticity: the keys a reader trusts (``--pubkey``) and who they say vouches for a run.

Every display takes ``--pubkey`` and refuses a run no named key signed; ``verify`` prints
who sealed the run (or that nobody vouches for its root). See docs/trust.md.
"""

from __future__ import annotations

import argparse

from benchledger import trust
from benchledger.cli.common import EXIT_FAILED, EXIT_OK, UsageError
from benchledger.ledger.bundle import REDACTED_FORMAT, verify_revealing
from benchledger.ledger.verified import VerifiedRun, seal_standing
from benchledger.reading import vouched
from benchledger.trust import Unauthenticated, require_trusted

__all__ = [
    "Unauthenticated",
    "after_bundle_verify",
    "authenticity",
    "pubkey_arg",
    "require_trusted",
    "trusted_keys",
    "verify_options",
]


def pubkey_arg(p: argparse.ArgumentParser, what: str = "") -> None:
    """Add ``--pubkey PATH`` (alias ``--trusted-key``, repeatable): the keys the reader trusts.

    ``what`` names whose seal a display checks (`` of both runs``); a display says
    UNAUTHENTICATED without the option.
    """
    shown = "; without it the display says UNAUTHENTICATED" if what else ""
    p.add_argument(
        "--pubkey",
        "--trusted-key",
        action="append",
        metavar="PATH",
        help=f"fail unless a key in this .pub or trusted-keys file signed the seal{what} "
        f"(repeatable){shown}",
    )


def trusted_keys(args: argparse.Namespace) -> list[bytes] | None:
    """The raw public keys named by ``--pubkey`` (None when none was given)."""
    return trust.trusted_keys(getattr(args, "pubkey", None))


def verify_options(args: argparse.Namespace, *, bundle: bool) -> list[bytes] | None:
    """Check ``verify``'s trust options before any work; return the trusted keys.

    A bad key file, or ``--reveal`` without a bundle, is one line and exit 2.
    """
    if getattr(args, "reveal", None) and not bundle:
        raise UsageError("--reveal checks a redacted bundle FILE's placeholders, not a run id")
    return trusted_keys(args)


def authenticity(
    run_id: str, run: VerifiedRun, trusted: list[bytes] | None, root_given: bool
) -> int:
    """Say who sealed the run (or that nobody vouches for its root); 1 if that fails.

    Read from the run's ``standing``: the door's judgement of the one seal it checked.
    """
    assert run.standing is not None
    ok, line = vouched(run.standing, run_id, keys_named=trusted is not None, root_given=root_given)
    if line:
        print(line)
    return EXIT_OK if ok else EXIT_FAILED


def after_bundle_verify(target: str, run: VerifiedRun, args: argparse.Namespace) -> int:
    """A bundle the door verified: withheld events, ``--reveal``, then who sealed it.

    Everything here is the door's one read of ``target`` (its summary, standing and, for
    ``--reveal``, its lines); only the full bundle named by ``--reveal`` is read again.
    """
    header = run.bundle
    assert header is not None and run.summary is not None
    run_id = run.run_id
    status = EXIT_OK
    unbound = 0
    if header.format == REDACTED_FORMAT:
        unbound = run.summary.unbound
        print(
            f"withheld: {run.summary.withheld} events ({', '.join(header.withheld)}), each by "
            "its digest, and the chain checks through every one"
            + ("" if unbound else " (each one's stream, seq, kind, time and refs proven)")
        )
        if unbound:
            print(
                f"UNBOUND: {unbound} withheld events are event format 1 placeholders: no hash "
                "binds their kind, time or refs, so those are the publisher's claim until "
                "--reveal FULL checks them"
            )
    reveal_path = getattr(args, "reveal", None)
    if reveal_path:
        if header.format != REDACTED_FORMAT:
            raise UsageError(f"--reveal checks a redacted bundle's placeholders; {target} is not")
        assert run.lines is not None  # kept by the door for this
        failure, full, mismatch, matched = verify_revealing(run.lines, reveal_path, header.root)
        if failure is None and full.run != run_id:
            raise UsageError(f"{reveal_path} is run {full.run}, not {run_id}")
        failure = failure or mismatch
        if failure is not None:
            print(f"FAILED reveal with {reveal_path}: {failure}")
            status = EXIT_FAILED
        else:
            print(f"revealed: all {matched} withheld events match their placeholders")
            # Every placeholder matched the full run: nothing is unbound, the seal decides.
            run = run._replace(standing=seal_standing(run, args.trusted))
    return max(status, authenticity(run_id, run, args.trusted, bool(args.root)))
