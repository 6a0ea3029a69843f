"""Statistics for rates: Wilson intervals, the unbiased pass^k, bootstrap, McNemar.

Pure functions over numbers; every random draw comes from an explicit seed.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from typing import Final, NamedTuple, TypeVar

G = TypeVar("G")

Z95: Final = 1.959963984540054
BOOTSTRAP_SEED: Final = 20251129  # documented in docs/metrics.md; change it and intervals move
BOOTSTRAP_REPS: Final = 2000


class Interval(NamedTuple):
    low: float
    high: float


def wilson(num: float, den: int, z: float = Z95) -> Interval:
    """The Wilson score interval for ``num`` successes of ``den`` (95% by default)."""
    if den <= 0:
        return Interval(0.0, 0.0)
    p = num / den
    z2 = z * z
    centre = (p + z2 / (2 * den)) / (1 + z2 / den)
    half = z * math.sqrt(p * (1 - p) / den + z2 / (4 * den * den)) / (1 + z2 / den)
    return Interval(max(0.0, centre - half), min(1.0, centre + half))


def pass_hat(c: int, n: int, k: int) -> float:
    """One protocol's unbiased pass^k: C(c, k) / C(n, k); 0 when it has fewer than k attempts."""
    return math.comb(c, k) / math.comb(n, k) if 0 < k <= n else 0.0


def pass_hat_k(counts: Sequence[tuple[int, int]], k: int) -> tuple[float, int]:
    """Unbiased pass^k: mean over protocols of C(c, k) / C(n, k), k capped at the smallest n.

    ``counts`` holds (passed c, attempts n) per protocol. Returns (value, k used).
    """
    usable = [(c, n) for c, n in counts if n > 0]
    if not usable:
        return 0.0, 0
    k_used = max(1, min(k, min(n for _, n in usable)))
    total = sum(pass_hat(c, n, k_used) for c, n in usable)
    return total / len(usable), k_used


def plug_in_pass_k(counts: Sequence[tuple[int, int]], k: int) -> float:
    """The biased plug-in estimate: mean over protocols of (c / n) ** k (for comparison only)."""
    usable = [(c, n) for c, n in counts if n > 0]
    return sum((c / n) ** k for c, n in usable) / len(usable) if usable else 0.0


def bootstrap(
    groups: Sequence[G],
    statistic: Callable[[Sequence[G]], float],
    *,
    seed: int = BOOTSTRAP_SEED,
    reps: int = BOOTSTRAP_REPS,
    level: float = 0.95,
) -> Interval:
    """Percentile bootstrap: resample ``groups`` with replacement, ``reps`` times."""
    if not groups:
        return Interval(0.0, 0.0)
    rng = random.Random(seed)
    n = len(groups)
    values = sorted(statistic([groups[rng.randrange(n)] for _ in range(n)]) for _ in range(reps))
    lo = values[math.floor((1 - level) / 2 * reps)]
    hi = values[min(reps - 1, math.ceil((1 + level) / 2 * reps) - 1)]
    return Interval(lo, hi)


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value for discordant pairs b (A only) and c (B only)."""
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(0, min(b, c) + 1)) / 2**n
    return min(1.0, 2 * tail)
