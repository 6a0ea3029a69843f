"""Shards: one run's units split over several processes (or machines) on one ledger.

``--shard i/n`` (1-based) takes the i-th of n parts. Units are partitioned by their
item's entity (the suite's ``entity(item)``), so every unit that promotes into one
entity runs in one shard, where the suite already serialises those promotions; no two
machines ever race on one entity. The partition is deterministic: entity groups, the
largest first (ties by name), each to the shard holding the fewest units so far (ties
to the lowest index), so every shard computes the same split from the same items.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

_SHARD = re.compile(r"^(\d+)/(\d+)$")


@dataclass(frozen=True)
class Shard:
    """Part ``index`` (1-based) of ``count``."""

    index: int
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def parse_shard(text: str) -> Shard:
    """``i/n`` with 1 <= i <= n; ValueError says what is accepted."""
    m = _SHARD.match(text.strip())
    if m is None or not 1 <= int(m.group(1)) <= int(m.group(2)):
        raise ValueError(f"--shard {text!r}: use i/n with 1 <= i <= n, e.g. --shard 1/2")
    return Shard(int(m.group(1)), int(m.group(2)))


def partition(items: list[Any], entity: Callable[[Any], str], count: int) -> list[list[Any]]:
    """``items`` in ``count`` parts, never splitting an entity; each part in item order."""
    groups: dict[str, list[int]] = {}
    for n, item in enumerate(items):
        groups.setdefault(entity(item), []).append(n)
    parts: list[list[int]] = [[] for _ in range(count)]
    for _, members in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        target = min(range(count), key=lambda i: (len(parts[i]), i))
        parts[target].extend(members)
    return [[items[n] for n in sorted(part)] for part in parts]


def shard_ids(items: list[Any], entity: Callable[[Any], str], shard: Shard) -> set[str]:
    """The ids of the items (protocols, cases) shard ``shard`` runs."""
    return {str(item.id) for item in partition(items, entity, shard.count)[shard.index - 1]}


def identity_blocks(start: int, per: int, shard: Shard | None) -> Iterator[tuple[int, ...]]:
    """Fresh identities for resumed units: blocks of ``per``, none below ``start``.

    Unsharded: consecutive from ``start``. Sharded: only the blocks of the fixed grid
    ``b*per+1 ..`` with ``b % n == i-1``, so shards resuming at the same time never take
    the same identity, whatever each saw as the highest one given so far.
    """
    if shard is None or shard.count == 1:
        first = start
        while True:
            yield tuple(range(first, first + per))
            first += per
    block = math.ceil((start - 1) / per)
    block += (shard.index - 1 - block) % shard.count
    while True:
        first = block * per + 1
        yield tuple(range(first, first + per))
        block += shard.count
