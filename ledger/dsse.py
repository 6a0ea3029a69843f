"""DSSE envelopes (Dead Simple Signing Envelope, v1): sign a payload, open a signed one.

An envelope is ``{"payloadType", "payload" (base64), "signatures": [{"keyid", "sig"}]}``;
each signature is over the pre-authentication encoding ``PAE(type, body) = "DSSEv1" SP
LEN(type) SP type SP LEN(body) SP body`` (lengths in ASCII decimal), so a signature binds
the payload's type as well as its bytes. benchledger signs with the Ed25519 key that signs
its seals (``ledger.signing.Signer``); a PAE always begins ``DSSEv1 ``, a seal statement
``benchledger:seal:v1\\0``, so a signature of one can never be taken for the other.

Envelopes are checked with ``open_envelope``: the payload is returned only when a trusted
key signed it. Standard tooling (securesystemslib's ``Envelope.verify``, in-toto,
cosign) checks the same bytes; docs/trust.md says how.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from typing import Any, Final, NamedTuple

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from benchledger.ledger.signing import Signer, fingerprint

PREFIX: Final = b"DSSEv1"
_MAX_SIGNATURES: Final = 16


class EnvelopeProblem(ValueError):
    """An envelope that is not one, or that no trusted key signed: what is wrong, in words."""


class Opened(NamedTuple):
    """A checked envelope: its payload type and bytes, and the key that signed it."""

    payload_type: str
    payload: bytes
    key: str  # the fingerprint of the trusted key whose signature verified


def pae(payload_type: str, payload: bytes) -> bytes:
    """The bytes a DSSE signature is over."""
    kind = payload_type.encode("utf-8")
    return b"%s %d %s %d %s" % (PREFIX, len(kind), kind, len(payload), payload)


def envelope(payload_type: str, payload: bytes, signer: Signer) -> dict[str, Any]:
    """``payload`` of ``payload_type`` in an envelope signed by ``signer`` (keyid: its
    fingerprint)."""
    sig = signer.sign_bytes(pae(payload_type, payload))
    return {
        "payloadType": payload_type,
        "payload": base64.b64encode(payload).decode("ascii"),
        "signatures": [{"keyid": signer.key_id, "sig": base64.b64encode(sig).decode("ascii")}],
    }


def _b64(value: object, what: str) -> bytes:
    if not isinstance(value, str):
        raise EnvelopeProblem(f"{what} is not base64 text")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise EnvelopeProblem(f"{what} is not base64 text") from None


def open_envelope(document: object, trusted: Sequence[bytes]) -> Opened:
    """The payload of ``document`` (a parsed envelope) if one of its signatures is a
    trusted key's (raw Ed25519 public keys); EnvelopeProblem saying why not otherwise."""
    if not isinstance(document, dict):
        raise EnvelopeProblem("not a DSSE envelope (a JSON object)")
    kind = document.get("payloadType")
    if not isinstance(kind, str) or not kind:
        raise EnvelopeProblem("field 'payloadType' must be non-empty text")
    payload = _b64(document.get("payload"), "field 'payload'")
    signatures = document.get("signatures")
    if not isinstance(signatures, list) or not signatures:
        raise EnvelopeProblem("field 'signatures' must be a non-empty list")
    if len(signatures) > _MAX_SIGNATURES:
        raise EnvelopeProblem(f"more than {_MAX_SIGNATURES} signatures")
    signed = pae(kind, payload)
    for i, entry in enumerate(signatures):
        if not isinstance(entry, dict):
            raise EnvelopeProblem(f"signatures[{i}] is not an object")
        sig = _b64(entry.get("sig"), f"signatures[{i}].sig")
        for raw in trusted:
            try:
                Ed25519PublicKey.from_public_bytes(raw).verify(sig, signed)
            except InvalidSignature:
                continue
            return Opened(kind, payload, fingerprint(raw))
    raise EnvelopeProblem("no signature verifies with a trusted key (--pubkey)")


def encode_line(document: dict[str, Any]) -> bytes:
    """One envelope as one line of a ``.intoto.jsonl`` file."""
    return json.dumps(document, sort_keys=True, separators=(",", ":")).encode() + b"\n"


__all__ = ["EnvelopeProblem", "Opened", "encode_line", "envelope", "open_envelope", "pae"]
