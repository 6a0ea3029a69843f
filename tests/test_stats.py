"""Statistics against hand-computed values."""

from __future__ import annotations

import math

import pytest

from projections.stats import bootstrap, mcnemar_exact, pass_hat_k, plug_in_pass_k, wilson


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


def test_wilson_of_an_empty_denominator_is_zero_width():
    assert wilson(0, 0) == (0.0, 0.0)


def test_pass_hat_k_is_the_unbiased_estimator_and_differs_from_the_plug_in():
    counts = [(2, 3), (3, 3), (0, 3)]
    value, k = pass_hat_k(counts, 2)
    # C(2,2)/C(3,2) = 1/3, C(3,2)/C(3,2) = 1, 0  -> mean 4/9
    assert (value, k) == (pytest.approx(4 / 9), 2)
    plug = plug_in_pass_k(counts, 2)  # ((2/3)^2 + 1 + 0) / 3 = 13/27
    assert plug == pytest.approx(13 / 27)
    assert not math.isclose(value, plug)


def test_pass_hat_k_caps_k_at_the_smallest_attempt_count():
    value, k = pass_hat_k([(1, 1), (2, 3)], 3)
    assert k == 1 and value == pytest.approx((1 + 2 / 3) / 2)


def test_pass_hat_k_with_exactly_k_attempts_is_all_passed():
    value, _ = pass_hat_k([(5, 5), (4, 5), (5, 5)], 5)
    assert value == pytest.approx(2 / 3)


@pytest.mark.parametrize(
    ("b", "c", "p"),
    [(0, 5, 2 / 32), (3, 3, 1.0), (1, 9, 2 * 11 / 1024), (0, 0, 1.0)],
    ids=["0-5", "3-3", "1-9", "none"],
)
def test_mcnemar_exact_two_sided(b, c, p):
    assert mcnemar_exact(b, c) == pytest.approx(p)


def test_bootstrap_is_reproducible_with_its_fixed_seed():
    data = [(i * 0.37) % 1 for i in range(40)]
    mean = sum(data) / len(data)
    first = bootstrap(data, lambda xs: sum(xs) / len(xs))
    again = bootstrap(data, lambda xs: sum(xs) / len(xs))
    other = bootstrap(data, lambda xs: sum(xs) / len(xs), seed=1)
    assert first == again
    assert first.low < mean < first.high
    assert other != first
