"""judge_paired(): the paired A/B rule on job medians, both directions, messages, calibration."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from pytest_hpccomm.baselines.paired import classify_paired, job_medians, judge_paired
from pytest_hpccomm.baselines.verdict import Outcome
from pytest_hpccomm.measure.measurement import Direction, Measurement
from tests.builders import make_measurement

LOWER, HIGHER = Direction.LOWER_IS_BETTER, Direction.HIGHER_IS_BETTER


def jobs(medians: list[float], direction: Direction = LOWER) -> Measurement:
    """A pooled measurement whose jobs had these medians (3 batches each around them)."""
    samples = [x * f for x in medians for f in (0.99, 1.0, 1.01)]
    m = make_measurement(samples, direction=direction, unit="us" if direction is LOWER else "MB/s")
    return dataclasses.replace(m, extra={"job_medians": medians})


def drifting(
    ratio: float, rounds: int, spread: float, seed: int
) -> tuple[list[float], list[float]]:
    """Base and candidate job medians on a machine that drifts by 20 % over the session: each
    round shares the drift, each job adds its own lognormal noise."""
    rng = np.random.default_rng(seed)
    drift = np.linspace(1.0, 1.2, rounds)
    base = 10.0 * drift * rng.lognormal(0, spread, rounds)
    cand = 10.0 * ratio * drift * rng.lognormal(0, spread, rounds)
    return list(base), list(cand)


def test_job_medians_fall_back_to_one_job() -> None:
    assert job_medians(jobs([1.0, 2.0])) == [1.0, 2.0]
    assert job_medians(make_measurement([1.0, 3.0, 2.0])) == [2.0]


def test_job_medians_from_where_each_jobs_samples_end() -> None:
    """A record that keeps only job_sizes (a rate derived per sample, a training run) pairs
    job by job all the same: each job's median of its own run of samples."""
    m = make_measurement([1.0, 5.0, 3.0, 10.0, 30.0, 20.0, 7.0])
    assert job_medians(dataclasses.replace(m, extra={"job_sizes": [3, 3, 1]})) == [3.0, 20.0, 7.0]
    # sizes that do not cover the samples say nothing about where jobs end: one job
    assert job_medians(dataclasses.replace(m, extra={"job_sizes": [3, 3]})) == [7.0]


def test_ten_percent_slower_candidate_is_a_regression_naming_both_sides() -> None:
    base, cand = drifting(1.10, 6, 0.01, seed=1)
    v = judge_paired(jobs(cand), jobs(base), 0.05, labels=("ompi5", "ompi4"))
    assert v.outcome is Outcome.REGRESSION
    assert v.ratio is not None and 1.08 < v.ratio < 1.12
    assert v.message.startswith("regression: osu_latency ranks=2 size=8: ompi5 (candidate) median ")
    assert "vs ompi4 (base)" in v.message and "6 job pairs" in v.message
    assert v.n_current == 6 and v.n_baseline == 6


def test_drift_common_to_both_sides_cancels() -> None:
    # the session drifts 20 %, more than four tolerances: the pairs still say "no change"
    base, cand = drifting(1.0, 8, 0.01, seed=2)
    assert judge_paired(jobs(cand), jobs(base), 0.05).outcome is Outcome.PASS


def test_bandwidth_mirror() -> None:
    base, cand = drifting(0.88, 6, 0.01, seed=3)
    assert judge_paired(jobs(cand, HIGHER), jobs(base, HIGHER), 0.05).outcome is Outcome.REGRESSION
    base, cand = drifting(1.12, 6, 0.01, seed=3)
    assert judge_paired(jobs(cand, HIGHER), jobs(base, HIGHER), 0.05).outcome is Outcome.IMPROVEMENT
    # the same jobs as latency: 12 % higher is worse, and swapping the sides flips it
    assert judge_paired(jobs(cand), jobs(base), 0.05).outcome is Outcome.REGRESSION
    assert judge_paired(jobs(base), jobs(cand), 0.05).outcome is Outcome.IMPROVEMENT


def test_small_significant_change_passes_and_a_wide_ci_is_inconclusive() -> None:
    base, cand = drifting(1.01, 10, 0.002, seed=4)  # 1 % slower, measured precisely
    v = judge_paired(jobs(cand), jobs(base), 0.05)
    assert v.outcome is Outcome.PASS and v.ci_low is not None and v.ci_low > 1.0
    base, cand = drifting(1.0, 4, 0.08, seed=5)  # 8 % job-to-job noise, 4 rounds
    v = judge_paired(jobs(cand), jobs(base), 0.05)
    assert v.outcome is Outcome.INCONCLUSIVE
    assert "CI reaches beyond the tolerance" in v.message


@pytest.mark.parametrize(
    ("cand", "base", "reason"),
    [
        ([1.0, 1.0], [1.0, 1.0], "too few job pairs (2; need 3)"),
        ([1.0, 1.0, 1.0], [1.0, 1.0], "unpaired jobs (3 candidate, 2 base)"),
        ([1.0, 0.0, 1.0], [1.0, 1.0, 1.0], "non-positive job medians"),
    ],
)
def test_untestable_inputs_are_inconclusive(
    cand: list[float], base: list[float], reason: str
) -> None:
    v = judge_paired(jobs(cand), jobs(base), 0.05)
    assert v.outcome is Outcome.INCONCLUSIVE and reason in v.reason


def test_unit_mismatch_is_inconclusive() -> None:
    v = judge_paired(jobs([1.0] * 4), jobs([1.0] * 4, HIGHER), 0.05)
    assert v.outcome is Outcome.INCONCLUSIVE and "not comparable" in v.reason


@pytest.mark.parametrize(
    ("ci", "p", "outcome"),
    [
        ((1.02, 1.08), (0.001, 0.99), Outcome.REGRESSION),  # significant, 5 % inside the CI
        ((1.06, 1.09), (0.001, 0.99), Outcome.REGRESSION),
        ((1.01, 1.04), (0.001, 0.99), Outcome.PASS),  # significant but smaller than tolerance
        ((0.97, 1.03), (0.3, 0.7), Outcome.PASS),
        ((0.98, 1.07), (0.05, 0.95), Outcome.INCONCLUSIVE),  # could be 5 %, not significant
        ((0.92, 0.99), (0.99, 0.001), Outcome.IMPROVEMENT),
    ],
)
def test_classify_paired_latency(
    ci: tuple[float, float], p: tuple[float, float], outcome: Outcome
) -> None:
    assert classify_paired(ci, p[0], p[1], True, 0.05, 0.01)[0] is outcome
    # the same numbers for bandwidth: the ratio's direction flips worse and better
    mirrored = {
        Outcome.REGRESSION: Outcome.IMPROVEMENT,
        Outcome.IMPROVEMENT: Outcome.REGRESSION,
    }.get(outcome, outcome)
    assert classify_paired(ci, p[1], p[0], False, 0.05, 0.01)[0] is mirrored


def test_false_alarms_and_power_on_simulated_sessions() -> None:
    """The rule's own calibration on seeded sessions (6 rounds, 3 % job-to-job noise, the
    spread two jobs of one MPI show here): no-change sessions rarely regress, 10 % ones do."""
    trials = 400

    def rate(ratio: float) -> float:
        hits = 0
        for seed in range(trials):
            base, cand = drifting(ratio, 6, 0.03, seed=1000 + seed)
            hits += judge_paired(jobs(cand), jobs(base), 0.05).outcome is Outcome.REGRESSION
        return hits / trials

    assert rate(1.0) <= 0.015
    assert rate(1.10) >= 0.90
