"""Statistics against hand-computed values, published reference values, scipy and statsmodels.

scipy and statsmodels are test-only dependencies (the ``test`` extra): the project never
imports them at run time, the tests use them as independent implementations.
"""

from __future__ import annotations

import math
import random
import time

import pytest

from benchledger.projections.stats import (
    BOOTSTRAP_SEED,
    Interval,
    bootstrap,
    cluster_rate_interval,
    design_effect,
    icc_oneway,
    mcnemar_exact,
    newcombe_paired,
    pairs_for_power,
    pairs_needed,
    pass_hat_k,
    pass_probability,
    plug_in_pass_k,
    pooled_rate,
    resolution,
    stratified_means,
    tango,
    wilson,
)


@pytest.fixture(scope="module")
def scipy_stats():
    return pytest.importorskip("scipy.stats", reason="scipy is in the test extra")


@pytest.fixture(scope="module")
def statsmodels():
    pytest.importorskip("statsmodels", reason="statsmodels is in the test extra")
    import statsmodels.stats.contingency_tables
    import statsmodels.stats.proportion

    return statsmodels.stats


# -- Wilson ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("num", "den", "low", "high"),
    [
        (8, 10, 0.4902, 0.9433),
        (0, 10, 0.0, 0.2775),
        (10, 10, 0.7225, 1.0),
        (137, 149, 0.8649, 0.9530),
    ],
    ids=["8of10", "0of10", "10of10", "peer-capture"],
)
def test_wilson_matches_hand_computed_bounds(num, den, low, high):
    got = wilson(num, den)
    assert got.low == pytest.approx(low, abs=5e-4) and got.high == pytest.approx(high, abs=5e-4)


def test_wilson_of_an_empty_denominator_is_none_not_a_zero_width_interval():
    assert wilson(0, 0) is None


def test_wilson_bounds_are_exact_at_zero_and_at_all():
    assert wilson(0, 7).low == 0.0 and wilson(7, 7).high == 1.0


WILSON_GRID = [(k, n) for n in (*range(1, 41), 97, 149, 500, 4100) for k in
               sorted({0, 1, n // 3, n // 2, n - 1, n} & set(range(n + 1)))]  # fmt: skip


@pytest.mark.parametrize(("k", "n"), WILSON_GRID, ids=[f"{k}of{n}" for k, n in WILSON_GRID])
def test_wilson_agrees_with_scipy_and_statsmodels(scipy_stats, statsmodels, k, n):
    ours = wilson(k, n)
    sp = scipy_stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    sm = statsmodels.proportion.proportion_confint(k, n, alpha=0.05, method="wilson")
    assert ours.low == pytest.approx(sp.low, abs=1e-12)
    assert ours.high == pytest.approx(sp.high, abs=1e-12)
    assert (ours.low, ours.high) == pytest.approx(sm, abs=1e-12)


# -- McNemar -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("b", "c", "p"),
    [(0, 5, 2 / 32), (3, 3, 1.0), (1, 9, 2 * 11 / 1024), (0, 0, 1.0)],
    ids=["0-5", "3-3", "1-9", "none"],
)
def test_mcnemar_exact_two_sided(b, c, p):
    assert mcnemar_exact(b, c) == pytest.approx(p)


def test_mcnemar_matches_the_published_cavo_example():
    # Fagerland, Lydersen & Laake (2017) "Statistical Analysis of Contingency Tables",
    # ch. 8, Cavo et al. (2012) table [[59, 6], [16, 80]]: exact conditional P = 0.052479
    # (as the R package contingencytables reproduces it in its test-ch8.R).
    assert mcnemar_exact(6, 16) == pytest.approx(0.052479, abs=5e-7)


MCNEMAR_GRID = [(b, c) for b in range(0, 41, 3) for c in range(0, 41, 4)] + [
    (900, 1000), (2000, 2100), (20000, 20100), (0, 1200), (1, 1500)
]  # fmt: skip


@pytest.mark.parametrize(("b", "c"), MCNEMAR_GRID, ids=[f"{b}-{c}" for b, c in MCNEMAR_GRID])
def test_mcnemar_agrees_with_scipy_and_statsmodels(scipy_stats, statsmodels, b, c):
    ours = mcnemar_exact(b, c)
    n = b + c
    sp = 1.0 if n == 0 else scipy_stats.binomtest(min(b, c), n, 0.5).pvalue
    sm = statsmodels.contingency_tables.mcnemar([[10, b], [c, 10]], exact=True).pvalue
    assert ours == pytest.approx(sp, rel=1e-9, abs=1e-300)
    assert ours == pytest.approx(min(1.0, sm), rel=1e-9, abs=1e-300)


def test_mcnemar_is_fast_at_forty_thousand_discordant_pairs(scipy_stats):
    started = time.perf_counter()
    p = mcnemar_exact(20_000, 20_100)  # 40,100 discordant pairs
    took = time.perf_counter() - started
    print(f"mcnemar_exact(20000, 20100) = {p:.6f} in {took * 1000:.2f} ms")
    assert took < 0.05
    assert p == pytest.approx(scipy_stats.binomtest(20_000, 40_100, 0.5).pvalue, rel=1e-9)


# -- paired differences: published reference values ---------------------------------------
# Tables are [[n11, n12], [n21, n22]]: n12 = first side only, n21 = second side only.

TANGO_REFERENCES = {
    # Fagerland, Lydersen & Laake (2014) "Recommended tests and confidence intervals for
    # paired binomial proportions", Stat Med 33:2850-2875, Table V: the Bentur et al. (2009)
    # airway hyper-responsiveness data [[1, 1], [7, 12]], Tango: (-0.517, -0.026).
    "fagerland2014-bentur": ((1, 1, 7, 12), (-0.517, -0.026), 5e-4),
    # Fagerland, Lydersen & Laake (2017), ch. 8, Cavo et al. (2012) [[59, 6], [16, 80]]:
    # "Tango asymptotic score CI: estimate = -0.0621 (95% CI -0.1240 to -0.0054)", as the
    # R package contingencytables (tests/testthat/test-ch8.R) prints it.
    "fagerland2017-cavo": ((59, 6, 16, 80), (-0.1240, -0.0054), 5e-5),
}


@pytest.mark.parametrize(
    ("table", "expected", "tol"), TANGO_REFERENCES.values(), ids=TANGO_REFERENCES.keys()
)
def test_tango_matches_published_reference_values(table, expected, tol):
    n11, n12, n21, n22 = table
    got = tango(n12, n21, n11 + n12 + n21 + n22)
    assert got.low == pytest.approx(expected[0], abs=tol)
    assert got.high == pytest.approx(expected[1], abs=tol)


NEWCOMBE_REFERENCES = {
    # Fagerland, Lydersen & Laake (2017), ch. 8, Cavo et al. (2012): "The Newcombe
    # square-and-add CI: estimate = -0.0621 (95% CI -0.1186 to -0.0046)" (contingencytables).
    "fagerland2017-cavo": ((59, 6, 16, 80), (-0.1186, -0.0046)),
    # Newcombe (1998) "Improved confidence intervals for the difference between binomial
    # proportions based on paired data", Stat Med 17:2635-2650, worked example (a):
    # e=36, f=12, g=2, h=0, method 10: 0.0569 to 0.3404.
    "newcombe1998-a": ((36, 12, 2, 0), (0.0569, 0.3404)),
}


@pytest.mark.parametrize(
    ("table", "expected"), NEWCOMBE_REFERENCES.values(), ids=NEWCOMBE_REFERENCES.keys()
)
def test_newcombe_matches_published_reference_values(table, expected):
    got = newcombe_paired(*table)
    assert (got.low, got.high) == pytest.approx(expected, abs=5e-5)


@pytest.mark.parametrize("n", [1, 5, 30, 73, 400], ids=lambda n: f"n{n}")
def test_tango_with_no_discordant_pair_is_plus_minus_the_resolution(n):
    got = tango(0, 0, n)
    assert got.low == pytest.approx(-resolution(n), abs=1e-12)
    assert got.high == pytest.approx(resolution(n), abs=1e-12)
    assert got.width > 0  # never zero-width, unlike a percentile bootstrap


@pytest.mark.parametrize(
    ("n12", "n21", "n"), [(0, 5, 5), (5, 0, 5), (3, 1, 10), (0, 1, 30), (12, 2, 50)],
    ids=["all-second", "all-first", "small", "one-flip", "newcombe-a"],
)  # fmt: skip
def test_tango_contains_its_estimate_and_mirrors_when_the_sides_swap(n12, n21, n):
    got, swapped = tango(n12, n21, n), tango(n21, n12, n)
    estimate = (n12 - n21) / n
    assert got.low <= estimate <= got.high
    assert (swapped.low, swapped.high) == pytest.approx((-got.high, -got.low), abs=1e-12)
    assert got.low >= -1 and got.high <= 1


@pytest.mark.parametrize(
    ("n", "a_only", "b_only"),
    [(30, 0.10, 0.05), (30, 0.30, 0.25), (60, 0.20, 0.15), (100, 0.10, 0.05),
     (100, 0.30, 0.25), (400, 0.05, 0.0), (1000, 0.15, 0.10)],
    ids=["30-low", "30-high", "60-mid", "100-low", "100-high", "400-one-way", "1000-mid"],
)  # fmt: skip
def test_at_the_tolerance_boundary_tango_passes_about_the_nominal_share(n, a_only, b_only):
    # Exact enumeration: the true difference B - A is exactly -0.05, the tolerance.
    # "Not worse by 0.05" may then be claimed at most ~2.5% of the time (the one-sided end
    # of a 95% interval); the protocol-cluster percentile bootstrap claimed 8.5% at n=30.
    passes = pass_probability(n, a_only, b_only, 0.05)
    print(f"n={n}, A only {a_only}, B only {b_only}: P(pass at the boundary) = {passes:.4f}")
    assert passes <= 0.03


# -- how big a suite has to be -------------------------------------------------------------


def test_not_worse_by_five_points_takes_73_concordant_pairs():
    assert pairs_needed(0.05) == 73
    assert resolution(73) <= 0.05 < resolution(72)
    assert resolution(30) == pytest.approx(0.1135, abs=1e-4)  # 30 protocols at k=1


@pytest.mark.parametrize("tolerance", [0.01, 0.02, 0.03, 0.05, 0.1, 0.15, 0.2, 0.3])
def test_pairs_needed_is_the_smallest_size_that_resolves_the_tolerance(tolerance):
    n = pairs_needed(tolerance)
    assert resolution(n) <= tolerance < resolution(n - 1)


def test_pairs_for_power_grows_with_discordance_and_never_undercuts_the_minimum():
    n = pairs_for_power(0.05, 0.10)
    assert n == 339  # the normal approximation says 314 and gives only 76%
    assert pass_probability(n, 0.05, 0.05, 0.05) >= 0.8 > pass_probability(n - 1, 0.05, 0.05, 0.05)
    assert pairs_for_power(0.05, 0.0) == pairs_needed(0.05)
    assert pairs_for_power(0.05, 0.20) > n


@pytest.mark.parametrize(
    ("n", "a_only", "b_only", "tolerance"),
    [(30, 0.10, 0.05, 0.05), (40, 0.1, 0.1, 0.1), (12, 0.0, 0.2, 0.05), (25, 0.3, 0.0, 0.2)],
    ids=["boundary", "no-shift", "only-gains", "only-losses"],
)
def test_pass_probability_equals_brute_force_enumeration_of_tango_intervals(
    n, a_only, b_only, tolerance
):
    brute = 0.0
    for b in range(n + 1):
        for c in range(n - b + 1):
            if tango(c, b, n).low >= -tolerance:  # B - A: c pairs B only, b pairs A only
                brute += (
                    math.comb(n, b)
                    * math.comb(n - b, c)
                    * a_only**b
                    * b_only**c
                    * (1 - a_only - b_only) ** (n - b - c)
                )
    assert pass_probability(n, a_only, b_only, tolerance) == pytest.approx(brute, abs=1e-9)


def test_resolution_of_nothing_is_none():
    assert resolution(0) is None


@pytest.mark.parametrize(
    ("groups", "expected"),
    [
        ([[1, 1, 1], [0, 0, 0], [1, 1, 1]], 1.0),  # attempts of a protocol always agree
        ([[1, 0], [1, 0], [0, 1]], 0.0),  # within-protocol spread exceeds between: clipped
        ([[1, 1], [1, 1]], None),  # no variation at all: undefined
        # MSB = 7/12, MSW = 1/6, m = 4: (7/12 - 1/6) / (7/12 + 3/6) = 5/13
        ([[1, 0, 1, 1], [0, 0, 1, 0], [1, 1, 1, 1]], 5 / 13),
    ],
    ids=["identical", "negative-clipped", "undefined", "hand-computed"],
)
def test_icc_oneway(groups, expected):
    got = icc_oneway(groups)
    assert got == (None if expected is None else pytest.approx(expected, abs=1e-4))


def test_design_effect_is_one_for_single_attempts_and_k_for_identical_attempts():
    assert design_effect(1, 0.7) == 1
    assert design_effect(5, 1.0) == 5
    assert design_effect(5, 0.5) == 3


# -- pass^k ----------------------------------------------------------------------------------


def test_pass_hat_k_is_the_unbiased_estimator_and_differs_from_the_plug_in():
    counts = [(2, 3), (3, 3), (0, 3)]
    result = pass_hat_k(counts, 2)
    # C(2,2)/C(3,2) = 1/3, C(3,2)/C(3,2) = 1, 0  -> mean 4/9
    assert (result.value, result.k, result.used, result.short) == (pytest.approx(4 / 9), 2, 3, ())
    plug = plug_in_pass_k(counts, 2)  # ((2/3)^2 + 1 + 0) / 3 = 13/27
    assert plug == pytest.approx(13 / 27)
    assert not math.isclose(result.value, plug)


def test_pass_hat_k_leaves_out_protocols_with_fewer_than_k_attempts_and_names_them():
    result = pass_hat_k([(1, 1), (2, 3), (3, 3)], 3)
    assert result.k == 3  # never quietly lowered to the smallest attempt count
    assert result.short == (0,) and result.used == 2
    assert result.value == pytest.approx((0 + 1) / 2)


def test_pass_hat_k_with_no_protocol_at_k_attempts_is_none():
    assert pass_hat_k([(1, 1), (0, 2)], 3).value is None


def test_pass_hat_k_with_exactly_k_attempts_is_all_passed():
    assert pass_hat_k([(5, 5), (4, 5), (5, 5)], 5).value == pytest.approx(2 / 3)


def test_pass_hat_k_refuses_k_below_one():
    with pytest.raises(ValueError, match="k >= 1"):
        pass_hat_k([(1, 1)], 0)


# -- the bootstrap ---------------------------------------------------------------------------


def _mean(xs):
    return sum(xs) / len(xs)


def test_bootstrap_golden_output_is_pinned():
    # If this changes, every published interval moves: only random.Random(seed).random()
    # may feed the draws, because Python promises to keep that sequence.
    data = [(i * 0.37) % 1 for i in range(40)]
    got = bootstrap(data, _mean, seed=BOOTSTRAP_SEED)
    print(f"seed {BOOTSTRAP_SEED}: {got}")
    assert got == Interval(0.40074999999999983, 0.5787499999999997)
    clusters = [(3, 5), (5, 5), (0, 5), (4, 5), (5, 5), (1, 5), (5, 5), (2, 4)]
    assert cluster_rate_interval(clusters, seed=7, reps=500) == Interval(
        0.3783783783783784, 0.8717948717948718
    )


def test_bootstrap_draws_only_from_random(monkeypatch):
    def forbidden(*args, **kwargs):
        raise AssertionError("the bootstrap must draw with random() only")

    for name in ("randrange", "randint", "choice", "choices", "sample", "getrandbits"):
        monkeypatch.setattr(random.Random, name, forbidden)
    data = [(i * 0.37) % 1 for i in range(40)]
    assert bootstrap(data, _mean, seed=BOOTSTRAP_SEED) == Interval(
        0.40074999999999983, 0.5787499999999997
    )


def test_bootstrap_is_reproducible_with_its_seed_and_moves_with_another():
    data = [(i * 0.37) % 1 for i in range(40)]
    first = bootstrap(data, _mean)
    print(f"seed {BOOTSTRAP_SEED}: {first}; seed 1: {bootstrap(data, _mean, seed=1)}")
    assert first == bootstrap(data, _mean)
    assert first.low < _mean(data) < first.high
    assert bootstrap(data, _mean, seed=1) != first


def test_bootstrap_redraws_resamples_with_an_empty_denominator():
    # Eight of ten protocols have no unit in this denominator: about a tenth of the
    # resamples hold none with one, and those are drawn again instead of counting as 0.
    clusters = [(1, 1), (0, 1)] + [(0, 0)] * 8
    seen: list[float] = []

    def rate(sample):
        value = pooled_rate(sample)
        if value is not None:
            seen.append(value)
        return value

    got = bootstrap(clusters, rate, seed=11, reps=400)
    print(f"seed 11: {got} from {len(seen)} kept resamples")
    assert got == Interval(0.0, 1.0) and len(seen) == 401  # the data itself, then 400


def test_bootstrap_of_no_denominator_at_all_is_none():
    assert cluster_rate_interval([(0, 0), (0, 0)]) is None
    assert bootstrap([], _mean) is None


def test_bootstrap_gives_up_when_valid_resamples_are_too_rare():
    data = list(range(100))  # only resamples starting with 0 count: 1 in 100
    assert bootstrap(data, lambda s: 1.0 if s[0] == 0 else None, seed=3, reps=2000) is None


def test_stratified_means_resample_within_strata_so_a_between_strata_spread_is_no_noise(
    monkeypatch,
):
    # Two conversations of 20 questions, one all 0 and one all 1: resampled within each,
    # every resample's mean is exactly 0.5 (each keeps its size). A bootstrap over the
    # pooled questions would move the mix and give a wide interval.
    def forbidden(*args, **kwargs):
        raise AssertionError("the bootstrap must draw with random() only")

    for name in ("randrange", "randint", "choice", "choices", "sample", "getrandbits"):
        monkeypatch.setattr(random.Random, name, forbidden)
    strata = ["conv-a"] * 20 + ["conv-b"] * 20
    rows: list[list[float | None]] = [[0.0, None] for _ in range(20)]
    rows += [[1.0, float(i % 2)] for i in range(20)]
    print(f"seed {BOOTSTRAP_SEED}")
    inside, sparse = stratified_means(strata, rows, min_groups=10)
    assert inside == Interval(0.5, 0.5)
    pooled = bootstrap([r[0] for r in rows], _mean, seed=BOOTSTRAP_SEED)
    assert pooled is not None and pooled.width > 0.2
    # A column with values in one stratum only is that stratum's bootstrap.
    assert sparse is not None and sparse.low < 0.5 < sparse.high
    assert stratified_means(strata, rows, min_groups=21)[1] is None  # 20 values
    assert stratified_means(strata, rows) == stratified_means(strata, rows)  # seeded
