"""summarize(): known answers, degenerate inputs, invariants (hypothesis)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_hpccomm.measure.stats import Summary, median_ci, summarize


def test_known_values() -> None:
    s = summarize(range(1, 102))  # 1..101
    assert s.n == 101
    assert (s.min, s.max, s.median, s.p50, s.mean) == (1, 101, 51, 51, 51)
    assert s.p25 == 26 and s.p75 == 76 and s.iqr == 50
    assert s.p5 == 6 and s.p95 == 96
    assert s.p99 == pytest.approx(100) and s.p99_9 == pytest.approx(100.9)
    assert s.stddev == pytest.approx(np.std(np.arange(1, 102), ddof=1))
    assert s.cv == pytest.approx(s.stddev / 51)
    assert s.median_ci_low is not None and s.median_ci_high is not None
    assert s.median_ci_low < 51 < s.median_ci_high
    assert s.confidence_level == 0.95


def test_single_sample() -> None:
    s = summarize([4.2])
    assert s.n == 1
    assert s.min == s.max == s.median == s.mean == s.p99_9 == 4.2
    assert s.stddev == 0.0 and s.cv == 0.0 and s.iqr == 0.0
    assert s.median_ci_low is None and s.median_ci_high is None


def test_constant_samples_have_exact_ci() -> None:
    s = summarize([3.0] * 20)
    assert s.stddev == 0.0 and s.cv == 0.0
    assert (s.median_ci_low, s.median_ci_high) == (3.0, 3.0)


def test_zero_mean_with_spread_has_infinite_cv_and_json_null() -> None:
    s = summarize([-1.0, 1.0])
    assert math.isinf(s.cv)
    assert s.to_json()["cv"] is None


@pytest.mark.parametrize("bad", [[], [1.0, float("nan")], [float("inf")]])
def test_rejects_empty_and_non_finite(bad: list[float]) -> None:
    with pytest.raises(ValueError):
        summarize(bad)


def test_seed_makes_ci_reproducible() -> None:
    x = np.random.default_rng(3).lognormal(1.0, 0.3, 50)
    assert median_ci(x, seed=7) == median_ci(x, seed=7)
    assert summarize(x, seed=7) == summarize(x, seed=7)


def test_ci_level_widens_interval() -> None:
    x = np.random.default_rng(4).normal(10.0, 1.0, 60)
    lo90, hi90 = median_ci(x, confidence_level=0.90)  # type: ignore[misc]
    lo99, hi99 = median_ci(x, confidence_level=0.99)  # type: ignore[misc]
    assert lo99 <= lo90 and hi90 <= hi99


finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)


@settings(max_examples=60, deadline=None)
@given(st.lists(finite, min_size=1, max_size=40))
def test_invariants(xs: list[float]) -> None:
    s = summarize(xs, n_resamples=200)
    assert isinstance(s, Summary)
    eps = 1e-9 * max(1.0, max(abs(v) for v in xs))
    order = [s.min, s.p5, s.p25, s.p50, s.p75, s.p95, s.p99, s.p99_9, s.max]
    assert all(a <= b + eps for a, b in zip(order, order[1:]))
    assert s.median == s.p50
    assert s.min - eps <= s.mean <= s.max + eps
    assert s.iqr == pytest.approx(s.p75 - s.p25, abs=eps)
    assert s.stddev >= 0 and s.cv >= 0
    if s.n >= 2:
        assert s.median_ci_low is not None and s.median_ci_high is not None
        assert s.min - eps <= s.median_ci_low <= s.median_ci_high <= s.max + eps
