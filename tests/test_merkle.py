from __future__ import annotations

import random

import pytest

from benchledger.ledger.events import StreamHead
from benchledger.ledger.merkle import EMPTY_ROOT, inclusion_proof, merkle_root, verify_inclusion


def _heads(n: int) -> list[StreamHead]:
    return [StreamHead(f"r/s{i:04d}", i + 1, f"{i:064x}") for i in range(n)]


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 13, 64, 100], ids=lambda n: f"{n}-leaves")
def test_every_leaf_has_a_proof_that_verifies_and_only_there(n):
    heads = _heads(n)
    root = merkle_root(heads)
    for i, h in enumerate(heads):
        proof = inclusion_proof(heads, i)
        assert len(proof) <= max(1, (n - 1).bit_length())
        assert verify_inclusion(h, i, n, proof, root)
        if n > 1:
            assert not verify_inclusion(h, (i + 1) % n, n, proof, root)
        assert not verify_inclusion(StreamHead(h.stream, h.length + 1, h.head), i, n, proof, root)


def test_a_tampered_proof_fails():
    heads = _heads(9)
    root = merkle_root(heads)
    proof = inclusion_proof(heads, 4)
    rng = random.Random(1)
    j = rng.randrange(len(proof))
    bad = list(proof)
    bad[j] = ("0" if bad[j][0] != "0" else "1") + bad[j][1:]
    assert not verify_inclusion(heads[4], 4, 9, bad, root)
    assert not verify_inclusion(heads[4], 4, 9, ["zz"], root)


def test_root_changes_with_any_leaf_and_empty_has_a_fixed_root():
    heads = _heads(6)
    root = merkle_root(heads)
    for i in range(6):
        changed = list(heads)
        changed[i] = StreamHead(heads[i].stream, heads[i].length, "f" * 64)
        assert merkle_root(changed) != root
    assert merkle_root([]) == EMPTY_ROOT


def test_proof_index_out_of_range_is_refused():
    with pytest.raises(IndexError):
        inclusion_proof(_heads(3), 3)
