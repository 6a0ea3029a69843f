"""Statistics for rates and paired differences: pure functions over numbers.

- ``wilson``: the score interval for one rate; ``None`` for an empty denominator.
- ``tango`` (Tango 1998) and ``newcombe_paired`` (Newcombe 1998, method 10): intervals
  for the difference of two paired rates (one unit per protocol on each side).
- ``newcombe`` (Newcombe 1998, method 10): the hybrid score interval for the difference
  of two independent rates (runs of different arms, nothing paired).
- ``bootstrap``: a percentile bootstrap over clusters (protocols) whose resamples with an
  empty denominator are drawn again; its only source of randomness is
  ``random.Random(seed).random()``, whose sequence Python promises to keep.
- ``stratified_means``: percentile intervals of several means at once from one bootstrap
  that resamples items within their strata (LoCoMo's questions within conversations), drawn
  the same way.
- ``resolution`` and ``pairs_needed``: how small a regression a suite of a given size
  can tell apart from "no change", and how big a suite a tolerance needs.
- ``pass_hat_k``: the unbiased pass^k over protocols with at least k attempts.
- ``mcnemar_exact``: the exact two-sided McNemar p-value, summed in log space.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Hashable, Sequence
from statistics import NormalDist
from typing import Final, NamedTuple, TypeVar

G = TypeVar("G")

Z95: Final = 1.959963984540054
BOOTSTRAP_SEED: Final = 20251129  # documented in docs/metrics.md; change it and intervals move
BOOTSTRAP_REPS: Final = 2000
# A bootstrap gives up (returns None) after this many draws per wanted resample: the
# clusters with a denominator are then too few to resample.
MAX_DRAWS_PER_REP: Final = 50


class Interval(NamedTuple):
    low: float
    high: float

    @property
    def width(self) -> float:
        return self.high - self.low


# -- one rate --------------------------------------------------------------------------


def wilson(num: float, den: int, z: float = Z95) -> Interval | None:
    """The Wilson score interval for ``num`` successes of ``den``; None when ``den`` is 0."""
    if den <= 0:
        return None
    p = num / den
    z2 = z * z
    centre = (p + z2 / (2 * den)) / (1 + z2 / den)
    half = z * math.sqrt(max(0.0, p * (1 - p) / den + z2 / (4 * den * den))) / (1 + z2 / den)
    low = 0.0 if num <= 0 else max(0.0, centre - half)
    high = 1.0 if num >= den else min(1.0, centre + half)
    return Interval(low, high)


# -- independent differences ------------------------------------------------------------


def newcombe(x1: float, n1: int, x2: float, n2: int, z: float = Z95) -> Interval | None:
    """Newcombe's hybrid score interval (method 10) for p1 - p2 of two independent rates.

    p1 = x1 / n1, p2 = x2 / n2; it squares and adds the distances from each rate to its
    own Wilson bounds. Newcombe, R.G. (1998) "Interval estimation for the difference
    between independent proportions: comparison of eleven methods", Stat Med 17:873-890.
    None when either side has no observations.
    """
    w1, w2 = wilson(x1, n1, z), wilson(x2, n2, z)
    if w1 is None or w2 is None:
        return None
    p1, p2 = x1 / n1, x2 / n2
    estimate = p1 - p2
    low = estimate - math.sqrt((p1 - w1.low) ** 2 + (w2.high - p2) ** 2)
    high = estimate + math.sqrt((w1.high - p1) ** 2 + (p2 - w2.low) ** 2)
    return Interval(max(-1.0, low), min(1.0, high))


# -- paired differences, one pair per protocol -------------------------------------------


def _tango_statistic(n12: int, n21: int, n: int, delta: float) -> float:
    """Tango's score statistic for H0: p1+ - p+1 = ``delta`` (Tango 1998, eq. 5 and 6)."""
    a = 2 * n
    b = -n12 - n21 + (2 * n - n12 + n21) * delta
    c = -n21 * delta * (1 - delta)
    p21 = (math.sqrt(max(0.0, b * b - 4 * a * c)) - b) / (2 * a)  # restricted MLE of p21
    numerator = n12 - n21 - n * delta
    variance = n * (2 * p21 + delta * (1 - delta))
    if variance <= 0:
        return 0.0 if numerator == 0 else math.copysign(math.inf, numerator)
    return numerator / math.sqrt(variance)


def _solve_decreasing(f: Callable[[float], float], target: float, lo: float, hi: float) -> float:
    """The point in (lo, hi) where the decreasing ``f`` crosses ``target`` (bisection)."""
    for _ in range(200):
        mid = (lo + hi) / 2
        if mid in (lo, hi):
            break
        if f(mid) > target:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def tango(n12: int, n21: int, n: int, z: float = Z95) -> Interval | None:
    """Tango's score interval for the difference of paired rates, (n12 - n21) / n.

    ``n12`` pairs succeed on the first side only, ``n21`` on the second side only, ``n``
    pairs in all. Tango, T. (1998) "Equivalence test and confidence interval for the
    difference in proportions for the paired-sample design", Stat Med 17:891-908.
    None when there are no pairs.
    """
    if n <= 0:
        return None
    if min(n12, n21) < 0 or n12 + n21 > n:
        raise ValueError(f"discordant pairs {n12} + {n21} must fit in {n} pairs")
    estimate = (n12 - n21) / n

    def stat(d: float) -> float:
        return _tango_statistic(n12, n21, n, d)

    low = -1.0 if estimate == -1 else _solve_decreasing(stat, z, -1.0, estimate)
    high = 1.0 if estimate == 1 else _solve_decreasing(stat, -z, estimate, 1.0)
    return Interval(low, high)


def newcombe_paired(a: int, b: int, c: int, d: int, z: float = Z95) -> Interval | None:
    """Newcombe's square-and-add interval (method 10) for p1 - p2 of paired rates.

    ``a`` pairs succeed on both sides, ``b`` on the first only, ``c`` on the second only,
    ``d`` on neither; p1 = (a + b) / n, p2 = (a + c) / n. It reuses the Wilson interval of
    each side and the continuity-corrected phi of Newcombe, R.G. (1998) "Improved
    confidence intervals for the difference between binomial proportions based on
    paired data", Stat Med 17:2635-2650. None when there are no pairs.
    """
    n = a + b + c + d
    if n <= 0:
        return None
    p1, p2 = (a + b) / n, (a + c) / n
    w1, w2 = wilson(a + b, n, z), wilson(a + c, n, z)
    assert w1 is not None and w2 is not None
    margins = (a + b) * (c + d) * (a + c) * (b + d)
    phi = 0.0
    if margins:
        cross = a * d - b * c
        if cross > n / 2:
            phi = (cross - n / 2) / math.sqrt(margins)
        elif cross < 0:
            phi = cross / math.sqrt(margins)
    down1, up1 = p1 - w1.low, w1.high - p1
    down2, up2 = p2 - w2.low, w2.high - p2
    estimate = p1 - p2
    low = estimate - math.sqrt(max(0.0, down1**2 - 2 * phi * down1 * up2 + up2**2))
    high = estimate + math.sqrt(max(0.0, up1**2 - 2 * phi * up1 * down2 + down2**2))
    return Interval(max(-1.0, low), min(1.0, high))


# -- how big a suite has to be -----------------------------------------------------------


def resolution(pairs: float, z: float = Z95) -> float | None:
    """The smallest regression ``pairs`` independent pairs can tell apart from no change.

    It is the half-width of Tango's interval when no pair changed (its lower end is
    exactly ``-z² / (pairs + z²)``): two identical runs can at best show "not worse by
    this much". None without pairs.
    """
    return z * z / (pairs + z * z) if pairs > 0 else None


def pairs_needed(tolerance: float, z: float = Z95) -> int:
    """Independent pairs needed before identical runs can show "not worse by tolerance"."""
    if not 0 < tolerance < 1:
        raise ValueError("tolerance must be in (0, 1)")
    return math.ceil(z * z * (1 - tolerance) / tolerance - 1e-9)


class Size(NamedTuple):
    """A run size that would resolve a tolerance, from the size a metric has now.

    ``attempts``: k on the same ``protocols`` (None: no k does, their attempts agree too
    much); ``protocols``: protocols in the metric's denominator at the run's ``k``.
    ``icc_assumed``: a k = 1 run shows nothing of how a protocol's attempts agree, so
    ``attempts`` assumes they are independent (ICC 0), the fewest that could do.
    """

    k: int
    attempts: int | None
    protocols: int
    icc_assumed: bool

    def text(self) -> str:
        """``k=3 on these protocols if attempts are independent, or 73 protocols at k=1``."""
        if self.attempts is None:
            on = "no k on these protocols (their attempts agree)"
        else:
            on = f"k={self.attempts} on these protocols"
            on += " if attempts are independent" if self.icc_assumed else ""
        return f"{on}, or {self.protocols} protocols at k={self.k}"


def size_to_resolve(tolerance: float, protocols: int, k: int, icc: float | None) -> Size:
    """What resolves ``tolerance`` (``pairs_needed`` effective pairs) for ``protocols`` at ``k``.

    A protocol's k attempts count as k / (1 + (k − 1)·ICC) pairs (``design_effect``);
    ``icc`` None (a k = 1 run) is taken as 0 for the attempts and 1 for the protocols.
    """
    need = pairs_needed(tolerance)
    rho = 0.0 if icc is None else min(1.0, max(0.0, icc))
    room = protocols - need * rho  # protocols·k' / (1 + (k'−1)·ρ) ≥ need ⇔ k'·room ≥ need·(1−ρ)
    attempts = max(1, math.ceil(need * (1 - rho) / room - 1e-9)) if room > 0 else None
    deff = design_effect(k, 1.0 if icc is None else rho)
    return Size(k, attempts, math.ceil(need * deff / k - 1e-9), icc is None)


def pass_probability(
    n: int, a_only: float, b_only: float, tolerance: float, z: float = Z95
) -> float:
    """Exact chance that Tango's interval on B - A clears -tolerance with n pairs.

    ``a_only`` and ``b_only`` are the true shares of pairs where only A, resp. only B,
    succeeds. The interval's lower end is at or above -tolerance exactly when Tango's
    statistic at -tolerance is at least z; for a given count of A-only pairs that holds
    from some count of B-only pairs on (the statistic rises with it), found by bisection.
    Outcomes beyond 9 standard deviations (probability below 1e-18) are skipped.
    """
    log_fact = [math.lgamma(i + 1) for i in range(n + 1)]
    logs = [math.log(p) if p > 0 else -math.inf for p in (a_only, b_only, 1 - a_only - b_only)]

    def window(p: float) -> range:
        spread = math.ceil(9 * math.sqrt(n * p * (1 - p))) + 1
        return range(max(0, math.floor(n * p) - spread), min(n, math.ceil(n * p) + spread) + 1)

    cs = window(b_only)
    total = 0.0
    for b in window(a_only):
        last = min(cs.stop - 1, n - b)
        if last < cs.start:
            continue
        # Tango's statistic rises with the B-only count: find where it reaches z.
        lo, hi = cs.start, last + 1
        while lo < hi:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if _tango_statistic(mid, b, n, -tolerance) >= z else (mid + 1, hi)
        for c in range(lo, last + 1):
            counts = (b, c, n - b - c)
            log_p = log_fact[n] - sum(log_fact[x] for x in counts)
            total += math.exp(log_p + sum(x * lg for x, lg in zip(counts, logs, strict=True) if x))
    return min(1.0, total)


def pairs_for_power(
    tolerance: float, discordance: float, power: float = 0.8, z: float = Z95
) -> int:
    """Pairs giving ``power`` to pass "not worse by tolerance" when nothing really changed.

    ``discordance`` is the share of pairs whose outcome differs between two runs of the
    same agent (half each way): a noisy agent needs more pairs than ``pairs_needed``.
    Exact enumeration (``pass_probability``), searched by bisection from the normal
    approximation (z + z_power)² · discordance / tolerance².
    """
    least = pairs_needed(tolerance, z)
    if discordance <= 0:
        return least

    def enough(n: int) -> bool:
        return pass_probability(n, discordance / 2, discordance / 2, tolerance, z) >= power

    normal = (z + NormalDist().inv_cdf(power)) ** 2 * discordance / tolerance**2
    guess = max(least, math.ceil(normal))
    lo, hi = least - 1, guess
    while not enough(hi):
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if enough(mid) else (mid, hi)
    return hi


def design_effect(cluster_size: float, icc: float) -> float:
    """How many times more pairs clustered attempts need: 1 + (m - 1)·ICC."""
    return 1 + max(0.0, cluster_size - 1) * min(1.0, max(0.0, icc))


def icc_oneway(groups: Sequence[Sequence[float]]) -> float | None:
    """The one-way ANOVA intraclass correlation of outcomes grouped by protocol.

    Clipped to [0, 1]; None when it is undefined (no variation at all, or fewer than two
    groups), which callers read as "assume attempts of a protocol are identical" (1).
    """
    groups = [g for g in groups if g]
    total = sum(len(g) for g in groups)
    if len(groups) < 2 or total <= len(groups):
        return None
    mean = sum(sum(g) for g in groups) / total
    between = sum(len(g) * (sum(g) / len(g) - mean) ** 2 for g in groups)
    within = sum((x - sum(g) / len(g)) ** 2 for g in groups for x in g)
    msb = between / (len(groups) - 1)
    msw = within / (total - len(groups))
    m0 = (total - sum(len(g) ** 2 for g in groups) / total) / (len(groups) - 1)
    denominator = msb + (m0 - 1) * msw
    if denominator <= 0:
        return None
    return min(1.0, max(0.0, (msb - msw) / denominator))


# -- pass^k --------------------------------------------------------------------------------


def pass_hat(c: int, n: int, k: int) -> float:
    """One protocol's unbiased pass^k: C(c, k) / C(n, k); 0 when it has fewer than k attempts."""
    return math.comb(c, k) / math.comb(n, k) if 0 < k <= n else 0.0


class PassK(NamedTuple):
    """pass^k over the protocols with at least k attempts, and which ones had fewer."""

    value: float | None  # None when no protocol has k attempts
    k: int
    used: int
    short: tuple[int, ...]  # indices (into the counts) of protocols with fewer than k


def pass_hat_k(counts: Sequence[tuple[int, int]], k: int) -> PassK:
    """Unbiased pass^k: mean over protocols of C(c, k) / C(n, k).

    ``counts`` holds (passed c, attempts n) per protocol. Protocols with fewer than k
    attempts cannot be estimated at k: they are left out and named in ``short``, never
    folded in at a smaller k.
    """
    if k < 1:
        raise ValueError(f"pass^k needs k >= 1, not {k}")
    used = [(c, n) for c, n in counts if n >= k]
    short = tuple(i for i, (_, n) in enumerate(counts) if n < k)
    value = sum(pass_hat(c, n, k) for c, n in used) / len(used) if used else None
    return PassK(value, k, len(used), short)


def plug_in_pass_k(counts: Sequence[tuple[int, int]], k: int) -> float:
    """The biased plug-in estimate: mean over protocols of (c / n) ** k (for comparison only)."""
    usable = [(c, n) for c, n in counts if n > 0]
    return sum((c / n) ** k for c, n in usable) / len(usable) if usable else 0.0


# -- the bootstrap -----------------------------------------------------------------------


# Fewer paired episodes than this get no bootstrap interval of a retrieval difference
# (docs/metrics.md, "Retrieval").
MIN_BOOTSTRAP_GROUPS: Final = 10


def draw(rng: random.Random, n: int) -> int:
    """A uniform index below ``n`` from ``random()`` alone (``randrange`` may change)."""
    return min(n - 1, int(rng.random() * n))


def bootstrap(
    groups: Sequence[G],
    statistic: Callable[[Sequence[G]], float | None],
    *,
    seed: int = BOOTSTRAP_SEED,
    reps: int = BOOTSTRAP_REPS,
    level: float = 0.95,
    min_groups: int = 1,
) -> Interval | None:
    """Percentile bootstrap: resample ``groups`` with replacement, ``reps`` times.

    A resample whose ``statistic`` is None (an empty denominator) is drawn again, so
    every kept resample estimates the same thing. None when the statistic is undefined
    on the data itself, when valid resamples are too rare to collect, or when there are
    fewer than ``min_groups`` groups (resampling two or three values gives an interval as
    narrow as their spread, none at all when they agree, never a 95% one).
    """
    if len(groups) < max(1, min_groups) or statistic(groups) is None:
        return None
    rng = random.Random(seed)
    n = len(groups)
    values: list[float] = []
    budget = reps * MAX_DRAWS_PER_REP
    while len(values) < reps:
        if budget == 0:
            return None
        budget -= 1
        value = statistic([groups[draw(rng, n)] for _ in range(n)])
        if value is not None:
            values.append(value)
    values.sort()
    lo = values[math.floor((1 - level) / 2 * reps)]
    hi = values[min(reps - 1, math.ceil((1 + level) / 2 * reps) - 1)]
    return Interval(lo, hi)


def stratified_means(
    strata: Sequence[Hashable],
    rows: Sequence[Sequence[float | None]],
    *,
    seed: int = BOOTSTRAP_SEED,
    reps: int = BOOTSTRAP_REPS,
    level: float = 0.95,
    min_groups: int = 1,
) -> list[Interval | None]:
    """Percentile intervals of each column's mean, items resampled within their strata.

    ``rows[i]`` holds item i's value in each column (None: the item is not in that mean);
    ``strata[i]`` is its stratum. Each resample draws, stratum by stratum (in order of first
    appearance), as many items with replacement as the stratum holds, from
    ``random.Random(seed).random()`` alone (``draw``): every stratum keeps its size, so the
    interval is conditional on the strata, as LoCoMo's conversations are fixed. One resample
    serves every column; a resample holding no item of a column leaves that column out of
    it. A column gets None when fewer than ``min_groups`` items have a value in it.
    """
    if len(strata) != len(rows):
        raise ValueError(f"{len(strata)} strata for {len(rows)} rows")
    width = len(rows[0]) if rows else 0
    have = [sum(1 for r in rows if r[j] is not None) for j in range(width)]
    out: list[Interval | None] = [None] * width
    wanted = [j for j in range(width) if have[j] >= max(1, min_groups)]
    if not wanted:
        return out
    import numpy as np  # the sums only; every draw is random.Random's

    values = np.array([[0.0 if r[j] is None else r[j] for j in wanted] for r in rows])
    present = np.array([[0.0 if r[j] is None else 1.0 for j in wanted] for r in rows])
    groups: dict[Hashable, list[int]] = {}
    for i, s in enumerate(strata):
        groups.setdefault(s, []).append(i)
    uniform = random.Random(seed).random
    picked: list[int] = []  # every resample's items, resample after resample
    for _ in range(reps):
        for members in groups.values():
            n, last = len(members), len(members) - 1
            picked += [members[min(last, int(uniform() * n))] for _ in members]  # ``draw``
    size = len(rows)
    offsets = np.repeat(np.arange(reps) * size, size)
    counts = np.bincount(offsets + np.array(picked), minlength=reps * size).reshape(reps, size)
    sums, dens = counts @ values, counts @ present
    for c, j in enumerate(wanted):
        kept = dens[:, c] > 0
        means = np.sort(sums[kept, c] / dens[kept, c])
        if not len(means):
            continue
        m = len(means)
        lo = float(means[math.floor((1 - level) / 2 * m)])
        hi = float(means[min(m - 1, math.ceil((1 + level) / 2 * m) - 1)])
        out[j] = Interval(lo, hi)
    return out


def pooled_rate(sample: Sequence[tuple[float, int]]) -> float | None:
    """Σ num / Σ den over (num, den) clusters; None for an empty denominator."""
    den = sum(d for _, d in sample)
    return sum(x for x, _ in sample) / den if den else None


def pooled_gain(sample: Sequence[tuple[float, int, float, int]]) -> float | None:
    """B's pooled rate minus A's over (a_num, a_den, b_num, b_den) clusters."""
    a = pooled_rate([(s[0], s[1]) for s in sample])
    b = pooled_rate([(s[2], s[3]) for s in sample])
    return None if a is None or b is None else b - a


def mean_gain(sample: Sequence[tuple[float, float]]) -> float | None:
    """The mean of B - A over paired (a, b) values."""
    return sum(b - a for a, b in sample) / len(sample) if sample else None


def cluster_rate_interval(
    clusters: Sequence[tuple[float, int]], *, seed: int = BOOTSTRAP_SEED, reps: int = BOOTSTRAP_REPS
) -> Interval | None:
    """A rate's interval from a bootstrap over protocols (clusters of (num, den))."""
    return bootstrap(clusters, pooled_rate, seed=seed, reps=reps)


# -- McNemar -------------------------------------------------------------------------------


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value for discordant pairs b (A only) and c (B only).

    2 · P(X <= min(b, c)) for X ~ Binomial(b + c, 1/2), capped at 1. The tail is summed
    downward from its largest term in ratios and scaled by that term's logarithm, so it
    costs a few hundred steps even at tens of thousands of discordant pairs.
    """
    n = b + c
    m = min(b, c)
    if n == 0 or 2 * m == n:
        return 1.0
    log_top = math.lgamma(n + 1) - math.lgamma(m + 1) - math.lgamma(n - m + 1) - n * math.log(2)
    total, term, i = 0.0, 1.0, m
    while True:
        total += term
        if i == 0:
            break
        term *= i / (n - i + 1)  # C(n, i-1) / C(n, i)
        i -= 1
        if term < total * 1e-17:
            break
    return min(1.0, 2 * math.exp(log_top + math.log(total)))
