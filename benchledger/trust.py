"""What a reader trusts: the keys it names (``--pubkey``) and the door read that refuses a
run none of them signed.

Both the reading and the scoring of a run start here, so neither imports the other for it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from benchledger.ledger import Ledger
from benchledger.ledger.errors import LedgerError
from benchledger.ledger.verified import RunEvents, VerifiedRun
from benchledger.ledger.verified import open_run as door

__all__ = ["PubKeys", "Unauthenticated", "read", "require_trusted", "trusted_keys"]

# The keys a reader trusts: paths of .pub or trusted-keys files (one path or several).
PubKeys = str | Sequence[str] | None


class Unauthenticated(LedgerError):
    """Keys were named as trusted, and none of them vouches for the run: nothing is shown
    (exit 1)."""

    def __init__(self, run_id: str, why: str) -> None:
        self.run_id = run_id
        super().__init__(f"run {run_id}: not authenticated by the given keys: {why}")


def trusted_keys(pubkey: PubKeys) -> list[bytes] | None:
    """The raw public keys in the files ``pubkey`` names (None when it names none)."""
    if not pubkey:
        return None
    paths = [pubkey] if isinstance(pubkey, str) else list(pubkey)
    # Imported only now: key files need cryptography, which a read without keys does not.
    from benchledger.ledger.keys import load_public_keys

    return load_public_keys(paths)


def require_trusted(run: RunEvents, trusted: list[bytes] | None) -> RunEvents:
    """``run`` when no key was named or a named key signed its seal; else Unauthenticated."""
    if trusted is None or run.standing is None or run.standing.authenticated:
        return run
    raise Unauthenticated(run.run_id, run.standing.line().removeprefix("UNAUTHENTICATED: "))


def read(
    target: str,
    ledger: Callable[[], Ledger],
    trusted: list[bytes] | None,
    *,
    require_seal: bool = False,
    allow_partial: bool = False,
) -> VerifiedRun:
    """The run ``target`` names, through the door; refused (Unauthenticated) when keys are
    named and none vouches for it."""
    run = door(target, ledger, require_seal=require_seal, allow_partial=allow_partial,
               trusted=trusted)  # fmt: skip
    require_trusted(run, trusted)
    return run
