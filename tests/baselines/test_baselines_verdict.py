"""judge(): every outcome, both directions, determinism, messages."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_hpccomm.baselines import adaptive
from pytest_hpccomm.baselines.store import BaselineEntry, entry_from_measurement
from pytest_hpccomm.baselines.verdict import (
    Outcome,
    block_length,
    blocks,
    classify,
    host_band,
    judge,
    min_effect,
    typical_sessions_sd,
)
from pytest_hpccomm.measure.measurement import Direction
from tests.builders import FINGERPRINT, make_measurement

LOWER, HIGHER = Direction.LOWER_IS_BETTER, Direction.HIGHER_IS_BETTER


def lognormal(median: float, sigma: float, n: int, seed: int) -> list[float]:
    return list(np.random.default_rng(seed).lognormal(np.log(median), sigma, n))


def baseline(samples: list[float], **kw: Any) -> BaselineEntry:
    """A stored entry of three sessions at one level (a steady host): the rule then claims what
    the jobs show (fewer sessions claim nothing: test_fewer_than_three_sessions_claim_nothing)."""
    e = entry_from_measurement(make_measurement(samples, **kw), FINGERPRINT, "t")
    return dataclasses.replace(e, sessions=tuple((f"s{i}", e.summary["median"]) for i in range(3)))


def one_session(samples: list[float], **kw: Any) -> BaselineEntry:
    """A stored entry of the one session that wrote it."""
    return entry_from_measurement(make_measurement(samples, **kw), FINGERPRINT, "t")


def test_new_without_baseline() -> None:
    v = judge(make_measurement([3.0, 3.1, 2.9]), None)
    assert v.outcome is Outcome.NEW
    assert v.current_median == 3.0 and v.baseline_median is None and v.ratio is None
    assert v.message == "new: osu_latency ranks=2 size=8: median 3.00 us (n=3), no baseline"


def test_latency_regression_message() -> None:
    base = baseline(lognormal(3.02, 0.01, 40, seed=1))
    v = judge(make_measurement(lognormal(4.31, 0.01, 40, seed=2)), base)
    assert v.outcome is Outcome.REGRESSION
    assert v.ratio == pytest.approx(4.31 / 3.02, rel=0.01)
    assert v.ratio is not None and v.ci_low is not None and v.ci_high is not None
    assert 1.05 < v.ci_low <= v.ratio <= v.ci_high
    assert v.p_value is not None and v.p_value < 0.01
    assert v.message.startswith("regression: osu_latency ranks=2 size=8: median 4.3")
    assert "us vs baseline 3.0" in v.message and "ratio 1.4" in v.message
    assert "98% CI 1.4" in v.message and "tolerance 5%)" in v.message
    assert "\n" not in v.message


def test_latency_improvement_quotes_the_better_side_p() -> None:
    base = baseline(lognormal(3.0, 0.01, 40, seed=1))
    v = judge(make_measurement(lognormal(2.4, 0.01, 40, seed=2)), base)
    assert v.outcome is Outcome.IMPROVEMENT
    assert v.p_value is not None and v.p_value > 0.5  # p_value stays the worse side's
    assert v.p_better is not None and v.p_better < 0.01
    assert f"p={v.p_better:.0e}".replace("e-0", "e-") in v.message


@pytest.mark.parametrize(
    ("factor", "outcome"),
    [(0.85, Outcome.REGRESSION), (1.2, Outcome.IMPROVEMENT), (1.0, Outcome.PASS)],
)
def test_bandwidth_is_direction_aware(factor: float, outcome: Outcome) -> None:
    kw: dict[str, Any] = dict(benchmark="osu_bw", unit="MB/s", direction=HIGHER)
    base = baseline(lognormal(9000.0, 0.01, 40, seed=3), **kw)
    v = judge(make_measurement(lognormal(9000.0 * factor, 0.01, 40, seed=4), **kw), base)
    assert v.outcome is outcome


def test_pass_within_tolerance_even_when_significant() -> None:
    # 2 % slower, clearly detectable, but inside the 5 % tolerance.
    base = baseline(lognormal(3.0, 0.005, 60, seed=5))
    v = judge(make_measurement(lognormal(3.06, 0.005, 60, seed=6)), base)
    assert v.p_value is not None and v.p_value < 0.01
    assert v.outcome is Outcome.PASS
    assert v.message.startswith("pass: ")


def test_identical_constant_samples_pass() -> None:
    v = judge(make_measurement([3.0] * 10), baseline([3.0] * 10))
    assert v.outcome is Outcome.PASS
    assert (v.ratio, v.ci_low, v.ci_high) == (1.0, 1.0, 1.0)


def test_constant_but_different_samples_regress() -> None:
    v = judge(make_measurement([3.5] * 10), baseline([3.0] * 10))
    assert v.outcome is Outcome.REGRESSION
    assert v.ci_low == v.ci_high == pytest.approx(3.5 / 3.0)


def test_inconclusive_too_few_samples() -> None:
    v = judge(make_measurement([4.0, 4.1, 3.9]), baseline([3.0] * 20))
    assert v.outcome is Outcome.INCONCLUSIVE
    assert "too few samples (3 vs 20" in v.message


def test_inconclusive_too_noisy() -> None:
    base = baseline(lognormal(3.0, 0.4, 12, seed=7))
    v = judge(make_measurement(lognormal(3.0, 0.4, 12, seed=8)), base)
    assert v.outcome is Outcome.INCONCLUSIVE
    assert "too noisy" in v.message


def test_inconclusive_beyond_tolerance_but_not_established() -> None:
    # Point ratio ~1.08 with a CI that reaches back inside the band.
    outcome, reason = classify(1.08, (1.02, 1.12), 1e-4, 0.9, True, 0.05, 0.01)
    assert outcome is Outcome.INCONCLUSIVE and "CI reaches inside" in reason
    outcome, reason = classify(1.08, (1.0, 1.1), 0.2, 0.8, True, 0.05, 0.01)
    assert outcome is Outcome.INCONCLUSIVE and "not significant" in reason
    # The same with a decided CI is a regression; without the p-value it is not.
    assert classify(1.08, (1.06, 1.10), 1e-4, 0.9, True, 0.05, 0.01)[0] is Outcome.REGRESSION
    assert classify(1.08, (1.06, 1.10), 0.02, 0.9, True, 0.05, 0.01)[0] is Outcome.INCONCLUSIVE


def test_unit_change_is_inconclusive() -> None:
    v = judge(make_measurement([3.0] * 10, unit="ms"), baseline([3.0] * 10))
    assert v.outcome is Outcome.INCONCLUSIVE and "update the baseline" in v.message


def test_tolerance_precedence() -> None:
    base = baseline(lognormal(3.0, 0.005, 40, seed=9), tolerance=0.5)
    cur = lognormal(3.6, 0.005, 40, seed=10)  # 20 % slower
    assert judge(make_measurement(cur), base).outcome is Outcome.PASS  # baseline's 50 %
    v = judge(make_measurement(cur, tolerance=0.1), base)  # the measurement's own wins
    assert v.outcome is Outcome.REGRESSION and v.tolerance == 0.1
    plain = baseline(lognormal(3.0, 0.005, 40, seed=9))
    assert judge(make_measurement(cur), plain, tolerance=0.3).tolerance == 0.3


def test_same_seed_same_verdict() -> None:
    base = baseline(lognormal(3.0, 0.05, 30, seed=11))
    cur = make_measurement(lognormal(3.2, 0.05, 30, seed=12))
    assert judge(cur, base, seed=5) == judge(cur, base, seed=5)


def test_bad_parameters_raise() -> None:
    base = baseline([3.0] * 10)
    with pytest.raises(ValueError):
        judge(make_measurement([3.0] * 10), base, tolerance=0.0)
    with pytest.raises(ValueError):
        judge(make_measurement([3.0] * 10), base, alpha=0.7)
    with pytest.raises(ValueError):
        judge(make_measurement([3.0, float("nan")]), base)


def test_blocks_drop_leftover_from_the_start() -> None:
    x = np.arange(10.0)
    assert blocks(x, 3).tolist() == [[1, 2, 3], [4, 5, 6], [7, 8, 9]]
    assert [block_length(n) for n in (5, 9, 10, 30, 100, 1000)] == [1, 1, 2, 3, 5, 10]


@settings(max_examples=25, deadline=None)
@given(
    median=st.floats(min_value=1e-3, max_value=1e6),
    sigma=st.floats(min_value=0.0, max_value=0.3),
    n=st.integers(min_value=5, max_value=60),
    seed=st.integers(min_value=0, max_value=2**16),
)
def test_same_run_against_itself_never_decides(
    median: float, sigma: float, n: int, seed: int
) -> None:
    xs = lognormal(median, sigma, n, seed)
    v = judge(make_measurement(xs), baseline(xs), n_resamples=300)
    assert v.outcome in (Outcome.PASS, Outcome.INCONCLUSIVE)
    assert v.ratio == pytest.approx(1.0)


@settings(max_examples=25, deadline=None)
@given(
    factor=st.floats(min_value=1.3, max_value=5.0),
    seed=st.integers(min_value=0, max_value=2**16),
)
def test_mirror_symmetry_of_directions(factor: float, seed: int) -> None:
    """A latency going up by f and a bandwidth going down by f are both regressions."""
    base = lognormal(100.0, 0.01, 30, seed)
    cur = lognormal(100.0 * factor, 0.01, 30, seed + 1)
    lat = judge(make_measurement(cur), baseline(base), n_resamples=300)
    bw_kw: dict[str, Any] = dict(unit="MB/s", direction=HIGHER)
    bw = judge(make_measurement(base, **bw_kw), baseline(cur, **bw_kw), n_resamples=300)
    assert lat.outcome is Outcome.REGRESSION and bw.outcome is Outcome.REGRESSION


def jobs_of(medians: list[float], n: int = 20, sigma: float = 0.01, seed: int = 0) -> list[float]:
    """Pooled samples of one job per median: tight batches, jobs apart."""
    return [x for j, m in enumerate(medians) for x in lognormal(m, sigma, n, seed + j)]


def test_pooled_jobs_are_resampled_as_units() -> None:
    # jobs that landed a few % apart (as jobs do on a noisy node), an 8 % shift between the
    # sides: pooled as one series the batches call it a regression beyond 5 %; resampled by
    # job, three jobs a side cannot tell an 8 % shift from the jobs' own spread
    base_s, cur_s = jobs_of([0.97, 1.0, 1.01]), jobs_of([1.05, 1.08, 1.10], seed=10)
    as_series = judge(make_measurement(cur_s), baseline(base_s))
    assert as_series.outcome is Outcome.REGRESSION
    by_job = judge(
        make_measurement(cur_s, job_sizes=[20] * 3), baseline(base_s, job_sizes=[20] * 3)
    )
    assert by_job.outcome is Outcome.INCONCLUSIVE, by_job.message
    assert by_job.ci_low is not None and as_series.ci_low is not None
    assert by_job.ci_low < as_series.ci_low and "over 3 vs 3 jobs" in by_job.message
    assert by_job.ratio == as_series.ratio  # the point estimate is the pooled median's


def test_a_slowdown_every_job_shows_is_still_a_regression() -> None:
    base = baseline(jobs_of([0.98, 1.0, 1.02]), job_sizes=[20] * 3)
    v = judge(make_measurement(jobs_of([1.28, 1.3, 1.33], seed=10), job_sizes=[20] * 3), base)
    assert v.outcome is Outcome.REGRESSION, v.message
    same = judge(make_measurement(jobs_of([0.99, 1.0, 1.01], seed=10), job_sizes=[20] * 3), base)
    assert same.outcome is Outcome.PASS, same.message


def test_job_sizes_that_do_not_add_up_leave_one_series() -> None:
    base = baseline(jobs_of([1.0, 1.0]))
    cur = make_measurement(jobs_of([1.0, 1.0], seed=5), job_sizes=[20, 19])
    assert judge(cur, base).message == judge(make_measurement(cur.samples), base).message


def test_job_aware_verdicts_are_deterministic() -> None:
    base = baseline(jobs_of([0.97, 1.0, 1.03]), job_sizes=[20] * 3)
    cur = make_measurement(jobs_of([1.01, 1.04, 1.06], seed=3), job_sizes=[20] * 3)
    assert judge(cur, base) == judge(cur, base)


def with_sessions(entry: BaselineEntry, medians: list[float]) -> BaselineEntry:
    """`entry` as if `medians` were the runs that updated it (its own run last)."""
    return dataclasses.replace(
        entry, sessions=tuple((f"s{i}", m) for i, m in enumerate([*medians, entry.median]))
    )


def test_a_shift_inside_the_spread_between_sessions_is_not_a_regression() -> None:
    # tight batches, 8 % apart: one session's CI calls it a regression; four earlier sessions
    # that moved by ~6 % between them say a new session's level moves that much anyway
    base = one_session(lognormal(1.0, 0.01, 40, seed=1))
    cur = make_measurement(lognormal(1.08, 0.01, 40, seed=2))
    alone = judge(cur, base)  # its jobs say regression; one session cannot claim it
    assert alone.outcome is Outcome.INCONCLUSIVE and alone.baseline_sessions == 1
    assert "regression not claimed" in alone.message and alone.between_sessions_sd is None
    spread = judge(cur, with_sessions(base, [1.05, 0.95, 1.07, 0.97]))
    assert spread.outcome is Outcome.INCONCLUSIVE, spread.message
    assert spread.reason.startswith("spread between sessions wider than the tolerance band")
    assert spread.baseline_sessions == 5 and spread.between_sessions_sd is not None
    assert 0.04 < spread.between_sessions_sd < 0.07
    assert "between 5 baseline sessions" in spread.message
    assert not adaptive.undecided(spread)  # more jobs of this run cannot narrow it
    assert alone.ci_low is not None and spread.ci_low is not None
    assert spread.ci_low < alone.ci_low


def test_the_reference_is_the_level_of_the_sessions() -> None:
    base = baseline(lognormal(1.1, 0.01, 40, seed=1))  # the last session ran high
    levels = [0.99, 1.0, 1.01]
    v = judge(make_measurement(lognormal(1.0, 0.01, 40, seed=2)), with_sessions(base, levels))
    geo = float(np.exp(np.mean(np.log([*levels, base.median]))))
    assert v.baseline_median == pytest.approx(geo)
    assert v.ratio == pytest.approx(float(np.median(lognormal(1.0, 0.01, 40, seed=2))) / geo)


def test_steady_sessions_keep_the_gate_sharp() -> None:
    # sessions within ~1 % of each other: a 20 % slowdown is still a regression, the same
    # level still a pass, and a bandwidth drop mirrors it
    base = with_sessions(baseline(lognormal(1.0, 0.01, 40, seed=1)), [1.01, 0.99, 1.0])
    slow = judge(make_measurement(lognormal(1.2, 0.01, 40, seed=2)), base)
    assert slow.outcome is Outcome.REGRESSION, slow.message
    same = judge(make_measurement(lognormal(1.0, 0.01, 40, seed=3)), base)
    assert same.outcome is Outcome.PASS, same.message
    bw_kw: dict[str, Any] = {"unit": "MB/s", "direction": HIGHER}
    bw_base = with_sessions(baseline(lognormal(100, 0.01, 40, seed=1), **bw_kw), [101, 99, 100])
    bw = judge(make_measurement(lognormal(80, 0.01, 40, seed=2), **bw_kw), bw_base)
    assert bw.outcome is Outcome.REGRESSION, bw.message


def test_the_verdict_carries_the_sessions_part_of_its_interval() -> None:
    # t(98 %, k - 1) x s_b x sqrt(1 + 1/k): what no number of this run's jobs removes
    # (adaptive.py); Student's t, since s_b rests on k - 1 degrees of freedom
    levels = [1.02, 0.98, 1.01]
    base = with_sessions(baseline(lognormal(1.0, 0.01, 40, seed=1)), levels)
    v = judge(make_measurement(lognormal(1.0, 0.01, 40, seed=2)), base)
    k = len(levels) + 1
    s_b = float(np.std(np.log([*levels, base.median]), ddof=1))
    assert v.between_sessions_sd == pytest.approx(s_b)
    assert v.session_margin == pytest.approx(4.5407 * s_b * (1 + 1 / k) ** 0.5, rel=1e-3)
    # where the family's spread is the floor, still the entry's k - 1 degrees of freedom:
    # the family's entries share these k sessions
    floored = judge(make_measurement(lognormal(1.0, 0.01, 40, seed=2)), base, family_sd=2 * s_b)
    assert floored.session_margin == pytest.approx(4.5407 * 2 * s_b * (1 + 1 / k) ** 0.5, rel=1e-3)
    alone = judge(
        make_measurement(lognormal(1.0, 0.01, 40, seed=2)),
        one_session(lognormal(1.0, 0.01, 40, seed=1)),
    )
    assert alone.session_margin is None


def test_the_typical_spread_of_a_family_is_robust_to_its_odd_entries() -> None:
    rng = np.random.default_rng(7)
    steady = [list(np.exp(rng.normal(0.0, 0.02, 3))) for _ in range(400)]
    got = typical_sessions_sd(steady)
    assert got is not None and 0.017 < got < 0.023  # sd 2 % over entries of 3 sessions
    wild = [[1.0, 3.0, 1.0]] * 40  # a tenth of the family bimodal: the median barely moves
    assert typical_sessions_sd(steady + wild) == pytest.approx(got, rel=0.15)
    assert typical_sessions_sd(steady[:2]) is None  # too few entries to speak for a family
    assert typical_sessions_sd([[1.0, 1.1]] * 10) is None  # two sessions give no spread


def test_an_entry_is_never_steadier_than_its_family() -> None:
    # three sessions that agree by chance (0.3 %) and a 9 % slowdown: on their own they call
    # it a regression; a family whose sessions typically move by 4 % says it may be drift
    base = with_sessions(baseline(lognormal(1.0, 0.01, 40, seed=1)), [1.003, 0.997])
    cur = make_measurement(lognormal(1.09, 0.01, 40, seed=2))
    alone = judge(cur, base)
    assert alone.outcome is Outcome.REGRESSION, alone.message
    floored = judge(cur, base, family_sd=0.04)
    assert floored.outcome is Outcome.INCONCLUSIVE, floored.message
    assert floored.between_sessions_sd == 0.04
    assert "sd 4.0% between 3 baseline sessions (its family's; its own 0." in floored.message
    steadier = judge(cur, base, family_sd=0.001)  # a floor below its own changes nothing
    assert steadier.message == alone.message and steadier.outcome is Outcome.REGRESSION


def test_two_sessions_give_no_spread() -> None:
    base = with_sessions(baseline(lognormal(1.0, 0.01, 40, seed=1)), [1.3])
    v = judge(make_measurement(lognormal(1.0, 0.01, 40, seed=2)), base)
    assert v.baseline_sessions == 2 and v.between_sessions_sd is None
    assert v.baseline_median == pytest.approx(base.median)  # the last session, as before


def test_a_host_of_another_speed_widens_the_claim_and_narrows_the_pass() -> None:
    """A host probed at 0.8x the set's moves a latency up by as much as 1.25x: a regression
    is claimed beyond 1.05 x 1.25, a PASS only where 1.25x of host could not hide 5 %: never
    (the pass band (1.1875, 1.05) is empty); a faster host leaves the regression side alone."""
    claim, passing = host_band(0.05, 0.8, lower_is_better=True)
    assert claim == pytest.approx((0.95, 1.3125)) and passing[0] > passing[1]
    claim, passing = host_band(0.05, 1.25, lower_is_better=True)
    assert claim == pytest.approx((0.76, 1.05)) and passing == pytest.approx((0.95, 0.84))
    bw_claim, _ = host_band(0.05, 0.8, lower_is_better=False)
    assert bw_claim == pytest.approx((0.76, 1.05))  # a slower host lowers a bandwidth
    base = baseline(lognormal(1.0, 0.01, 40, seed=1))
    for host, slowdown, outcome in (
        (0.8, 1.2, Outcome.INCONCLUSIVE),
        (0.8, 1.5, Outcome.REGRESSION),
        (1.25, 1.2, Outcome.REGRESSION),
        (0.8, 1.0, Outcome.INCONCLUSIVE),
        (1.0, 1.0, Outcome.PASS),
    ):
        v = judge(make_measurement(lognormal(slowdown, 0.01, 40, seed=2)), base, host_shift=host)
        assert v.outcome is outcome, (host, slowdown, v.message)
        assert v.host_shift == (None if host == 1.0 else host)


def test_min_effect_is_the_smallest_slowdown_the_interval_could_claim() -> None:
    # stored rule, latency: the whole interval beyond 1.05: ratio 1.0, lower edge 0.97
    assert min_effect(1.0, (0.97, 1.03), (0.95, 1.05), True) == pytest.approx(1.05 / 0.97)
    # bandwidth: the whole interval below 0.95
    assert min_effect(1.0, (0.97, 1.03), (0.95, 1.05), False) == pytest.approx(1.03 / 0.95)
    # paired rule: an interval excluding 1 that reaches beyond the band
    assert min_effect(1.0, (0.97, 1.03), (0.95, 1.05), True, paired=True) == pytest.approx(
        max(1 / 0.97, 1.05 / 1.03)
    )
    # a verdict's own figure: a slowdown of that size, same spread, is claimed; 10 % less is not
    base = baseline(lognormal(1.0, 0.02, 40, seed=1))
    v = judge(make_measurement(lognormal(1.0, 0.02, 40, seed=2)), base)
    assert v.min_effect is not None and v.min_effect > 1.05
    hit = judge(
        make_measurement([x * v.min_effect * 1.01 for x in lognormal(1.0, 0.02, 40, seed=2)]), base
    )
    miss = judge(
        make_measurement([x * v.min_effect * 0.97 for x in lognormal(1.0, 0.02, 40, seed=2)]), base
    )
    assert hit.outcome is Outcome.REGRESSION, hit.message
    assert miss.outcome is not Outcome.REGRESSION, miss.message
