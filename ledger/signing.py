"""Signed seals: an Ed25519 signature that says who sealed a run. Pure, no I/O.

A hash chain proves a run is internally consistent, not who wrote it: anyone who can
write a ledger can rebuild every link and the root. A seal signature binds the run id,
its root and its counts to a key the reader trusts. The signed bytes are

    b"benchledger:seal:v1\\x00" + canonical JSON of
    {"events": E, "key": FINGERPRINT, "root": ROOT, "run": RUN, "signed_at": NS,
     "streams": S, "tool_version": TOOL}

(keys sorted, no whitespace), and the fingerprint of a public key is
``blake3(b"benchledger:key:v1\\x00" + raw 32 bytes)`` in hex. Key files live in
``ledger/keys.py``; the private key is held only by a ``Signer`` and never encoded.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import blake3

from benchledger.ledger.codec import canonical_json
from benchledger.ledger.events import RunSealedBody, SealSignature

# cryptography takes ~0.15 s to import; it is loaded where a key is used, so verifying an
# unsigned seal (and every command that never signs) starts without it.
if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )

STATEMENT_DOMAIN = b"benchledger:seal:v1\x00"
KEY_DOMAIN = b"benchledger:key:v1\x00"
ALGORITHM = "ed25519"


def public_bytes(key: Ed25519PublicKey) -> bytes:
    """The 32 raw bytes of a public key."""
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    return key.public_bytes(Encoding.Raw, PublicFormat.Raw)


def fingerprint(raw_public: bytes) -> str:
    """A public key's fingerprint: hex blake3 of its raw bytes under the key domain."""
    return blake3.blake3(KEY_DOMAIN + raw_public).hexdigest()


def statement(
    run_id: str, body: RunSealedBody, *, key: str, signed_at: int, tool_version: str
) -> bytes:
    """The exact bytes a seal signature covers."""
    fields = {
        "events": body.events,
        "key": key,
        "root": body.root,
        "run": run_id,
        "signed_at": signed_at,
        "streams": body.streams,
        "tool_version": tool_version,
    }
    return STATEMENT_DOMAIN + canonical_json(fields)


class Signer:
    """Holds a private key and signs seals with it; its repr shows only the fingerprint."""

    __slots__ = ("_key", "key_id", "public_key", "tool_version")

    def __init__(self, private_key: Ed25519PrivateKey, tool_version: str = "") -> None:
        self._key = private_key
        self.public_key = public_bytes(private_key.public_key())
        self.key_id = fingerprint(self.public_key)
        self.tool_version = tool_version

    def sign(self, run_id: str, body: RunSealedBody, signed_at: int) -> SealSignature:
        """The signature of ``body``'s statement for ``run_id``, made at ``signed_at`` (ns)."""
        data = statement(
            run_id, body, key=self.key_id, signed_at=signed_at, tool_version=self.tool_version
        )
        return SealSignature(
            key=self.key_id,
            public_key=self.public_key.hex(),
            signature=self._key.sign(data).hex(),
            signed_at=signed_at,
            tool_version=self.tool_version,
        )

    def sign_bytes(self, data: bytes) -> bytes:
        """The raw Ed25519 signature of ``data``: for DSSE envelopes (``ledger.dsse``), whose
        signed bytes begin ``DSSEv1 `` and so never read as a seal statement."""
        if not data.startswith(b"DSSEv1 "):
            raise ValueError("sign_bytes signs DSSE pre-authentication encodings only")
        return self._key.sign(data)

    def __repr__(self) -> str:
        return f"Signer(key={self.key_id[:16]})"

    def __reduce__(self) -> tuple[object, ...]:
        raise TypeError("a Signer holds a private key and is never serialized")


@dataclass(frozen=True)
class Authentication:
    """What a seal's signature says about who sealed the run.

    ``signed``: the seal carries a signature; ``valid``: it verifies over this run's
    statement with the public key it names; ``trusted``: that key is one the reader
    trusts. ``problem`` says what is wrong when the run is not authenticated.
    """

    signed: bool
    valid: bool
    key: str = ""
    trusted: bool = False
    problem: str = ""
    signed_at: int = 0
    tool_version: str = ""

    @property
    def authenticated(self) -> bool:
        return self.signed and self.valid and self.trusted


def _check(run_id: str, body: RunSealedBody) -> tuple[bool, str]:
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    sig = body.signature
    assert sig is not None
    if sig.algorithm != ALGORITHM:
        return False, f"unsupported signature algorithm {sig.algorithm!r} (want {ALGORITHM})"
    try:
        raw = bytes.fromhex(sig.public_key)
        signature = bytes.fromhex(sig.signature)
        public = Ed25519PublicKey.from_public_bytes(raw)
    except ValueError:
        return False, "the signature or its public key is not well-formed hex of the right size"
    if raw.hex() != sig.public_key or signature.hex() != sig.signature:
        # One spelling only: nothing links to the seal, so its bytes must be its own.
        return False, "the signature or its public key is not lowercase hex"
    if fingerprint(raw) != sig.key:
        return False, "the signature's key fingerprint does not match its public key"
    data = statement(
        run_id, body, key=sig.key, signed_at=sig.signed_at, tool_version=sig.tool_version
    )
    try:
        public.verify(signature, data)
    except InvalidSignature:
        return False, (
            "the signature does not verify over this run's id, root and counts: "
            "the run was altered after signing, or the signature was copied from another run"
        )
    return True, ""


def authenticate(
    run_id: str, body: RunSealedBody, trusted: Iterable[bytes] | None = None
) -> Authentication:
    """Check the seal's signature, and (given ``trusted`` raw public keys) who made it."""
    sig = body.signature
    if sig is None:
        return Authentication(False, False, problem="the seal carries no signature")
    valid, problem = _check(run_id, body)
    trusted_ids = {fingerprint(k) for k in trusted or ()}
    is_trusted = valid and sig.key in trusted_ids
    if valid and trusted is None:
        problem = "no key was named as trusted, so nothing says who holds this one"
    elif valid and not is_trusted:
        problem = f"signed by key {sig.key[:16]}, which is not among the trusted keys"
    return Authentication(
        True, valid, sig.key, is_trusted, problem, sig.signed_at, sig.tool_version
    )
