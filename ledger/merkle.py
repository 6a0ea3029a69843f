"""Run roots: an RFC 9162-shaped Merkle tree over stream heads, with inclusion proofs.

leaf hash = blake3(0x00 || leaf data), node hash = blake3(0x01 || left || right),
where leaf data is the canonical JSON array ``[stream, length, head]``. Pure, no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence

import blake3
import msgspec

from benchledger.ledger.events import StreamHead

_encoder = msgspec.json.Encoder(order="sorted")
EMPTY_ROOT = blake3.blake3(b"").hexdigest()


def leaf_data(head: StreamHead) -> bytes:
    """The bytes a leaf commits to: canonical JSON ``["stream",length,"head"]``."""
    return _encoder.encode(head)


def leaf_hash(head: StreamHead) -> bytes:
    """RFC 9162 leaf hash of one stream head."""
    return blake3.blake3(b"\x00" + leaf_data(head)).digest()


def _node(left: bytes, right: bytes) -> bytes:
    return blake3.blake3(b"\x01" + left + right).digest()


def _split(n: int) -> int:
    """Largest power of two strictly less than n (n >= 2)."""
    k = 1
    while k << 1 < n:
        k <<= 1
    return k


def _root(leaves: Sequence[bytes]) -> bytes:
    """The root over ``leaves`` (at least one), level by level.

    Pairing neighbours and carrying an odd last node up unchanged builds the same tree
    as RFC 9162's split at the largest power of two below n, without the recursion.
    """
    level = list(leaves)
    node = blake3.blake3
    while len(level) > 1:
        pairs = zip(level[::2], level[1::2], strict=False)  # an odd last node has no pair
        up = [node(b"\x01" + left + right).digest() for left, right in pairs]
        if len(level) & 1:
            up.append(level[-1])
        level = up
    return level[0]


def merkle_root(heads: Sequence[StreamHead]) -> str:
    """Hex root over ``heads`` (which must already be sorted by stream name)."""
    if not heads:
        return EMPTY_ROOT
    return _root([leaf_hash(h) for h in heads]).hex()


def _path(index: int, leaves: Sequence[bytes]) -> list[bytes]:
    n = len(leaves)
    if n == 1:
        return []
    k = _split(n)
    if index < k:
        return [*_path(index, leaves[:k]), _root(leaves[k:])]
    return [*_path(index - k, leaves[k:]), _root(leaves[:k])]


def inclusion_proof(heads: Sequence[StreamHead], index: int) -> list[str]:
    """Audit path (hex, leaf to root) proving ``heads[index]`` is in ``merkle_root(heads)``."""
    if not 0 <= index < len(heads):
        raise IndexError(f"leaf index {index} outside 0..{len(heads) - 1}")
    return [h.hex() for h in _path(index, [leaf_hash(h) for h in heads])]


def verify_inclusion(
    head: StreamHead, index: int, size: int, proof: Sequence[str], root: str
) -> bool:
    """True when ``proof`` shows ``head`` is leaf ``index`` of a ``size``-leaf tree with ``root``.

    RFC 9162 section 2.1.3.2, with blake3 in place of SHA-256.
    """
    if not 0 <= index < size:
        return False
    fn, sn = index, size - 1
    r = leaf_hash(head)
    try:
        path = [bytes.fromhex(p) for p in proof]
    except ValueError:
        return False
    for p in path:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            r = _node(p, r)
            if not fn & 1:
                while fn and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        else:
            r = _node(r, p)
        fn >>= 1
        sn >>= 1
    return sn == 0 and r.hex() == root
