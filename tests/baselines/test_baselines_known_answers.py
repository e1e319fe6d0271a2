"""Known answers of the verdict rules, each expected value computed here from first principles
(numpy, scipy.stats.t) rather than with the rule's own helpers, so that a change of a
definition, a direction, a band edge or the confidence level fails a test.

Constant samples make the within-run bootstrap interval a point (every resample gives the same
ratio), so the stored rule's interval is exactly ratio x exp(+-margin) from the sessions: its
edges are hand-computable.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from scipy import stats as sps

from pytest_hpccomm.baselines.paired import classify_paired, judge_paired
from pytest_hpccomm.baselines.store import BaselineEntry, entry_from_measurement
from pytest_hpccomm.baselines.verdict import (
    DEFAULT_ALPHA,
    FEW_SESSIONS,
    MIN_SESSIONS,
    Outcome,
    band,
    classify,
    judge,
    within_band,
)
from pytest_hpccomm.measure.measurement import Direction, Measurement
from tests.builders import FINGERPRINT, make_measurement

LOWER, HIGHER = Direction.LOWER_IS_BETTER, Direction.HIGHER_IS_BETTER
TOL = 0.05
LEVEL = 0.98  # the documented level: two-sided 98 %, i.e. a one-sided 1 % per side
Q = 0.5 + LEVEL / 2  # the upper quantile of that interval: 0.99
N = 20  # samples a side


def flat(value: float, direction: Direction = LOWER) -> Measurement:
    return make_measurement(
        [value] * N, direction=direction, unit="us" if direction is LOWER else "MB/s"
    )


def entry(
    value: float, direction: Direction = LOWER, levels: list[float] | None = None
) -> BaselineEntry:
    """A stored entry of constant samples; `levels`: the medians of the sessions behind it
    (default: three sessions at `value`, a steady host, so the rule claims what the jobs show)."""
    e = entry_from_measurement(flat(value, direction), FINGERPRINT, "t")
    levels = [value] * MIN_SESSIONS if levels is None else levels
    return dataclasses.replace(e, sessions=tuple((f"s{i}", m) for i, m in enumerate(levels)))


def test_the_documented_level_and_session_floor() -> None:
    assert DEFAULT_ALPHA == 0.01 and 1 - 2 * DEFAULT_ALPHA == pytest.approx(LEVEL)
    assert MIN_SESSIONS == 3


def test_band_is_one_minus_and_one_plus_the_tolerance_edges_included() -> None:
    assert band(TOL) == (1 - TOL, 1 + TOL) == (0.95, 1.05)
    assert within_band(0.95, TOL) and within_band(1.05, TOL)
    assert not within_band(np.nextafter(0.95, 0.0), TOL)
    assert not within_band(np.nextafter(1.05, 2.0), TOL)
    assert within_band(0.951, TOL)  # inside 1 - tol, outside 1 / (1 + tol) = 0.9524
    assert not within_band(1.051, TOL)  # outside 1 + tol, inside 1 / (1 - tol) = 1.0526


@pytest.mark.parametrize(
    "current,outcome",
    [
        (105.0, Outcome.PASS),  # on the edge: inside
        (105.01, Outcome.REGRESSION),
        (105.1, Outcome.REGRESSION),  # a symmetric-in-log edge 1 / (1 - tol) would pass it
        (95.0, Outcome.PASS),
        (95.1, Outcome.PASS),  # an edge 1 / (1 + tol) would call it an improvement
        (94.99, Outcome.IMPROVEMENT),
        (100.0, Outcome.PASS),
    ],
)
def test_stored_rule_band_edges_on_exact_ratios(current: float, outcome: Outcome) -> None:
    """Latency, constant samples: the interval is the ratio itself, so the outcome turns
    exactly at the band's edges 0.95 and 1.05 (inclusive: an effect equal to the tolerance
    is no change)."""
    v = judge(flat(current), entry(100.0))
    assert v.ratio == pytest.approx(current / 100.0, rel=1e-12)
    assert (v.ci_low, v.ci_high) == (v.ratio, v.ratio)
    assert v.outcome is outcome, v.message


@pytest.mark.parametrize(
    "current,outcome",
    [
        (90.0, Outcome.REGRESSION),  # a bandwidth drop is the regression
        (110.0, Outcome.IMPROVEMENT),
        (95.0, Outcome.PASS),
        (94.99, Outcome.REGRESSION),
        (105.01, Outcome.IMPROVEMENT),
    ],
)
def test_stored_rule_direction_higher_is_better(current: float, outcome: Outcome) -> None:
    assert judge(flat(current, HIGHER), entry(100.0, HIGHER)).outcome is outcome


@pytest.mark.parametrize(
    "lower_is_better,ci,outcome",
    [
        (True, (1.10, 1.20), Outcome.REGRESSION),  # latency up
        (True, (0.80, 0.90), Outcome.IMPROVEMENT),
        (False, (0.80, 0.90), Outcome.REGRESSION),  # bandwidth down
        (False, (1.10, 1.20), Outcome.IMPROVEMENT),
    ],
)
def test_classify_direction(
    lower_is_better: bool, ci: tuple[float, float], outcome: Outcome
) -> None:
    ratio = math.sqrt(ci[0] * ci[1])
    worse_up = ratio > 1 if lower_is_better else ratio < 1
    p_worse, p_better = (1e-4, 0.9999) if worse_up else (0.9999, 1e-4)
    got, _ = classify(ratio, ci, p_worse, p_better, lower_is_better, TOL, 0.01)
    assert got is outcome
    # the evidence must be on the side of the move: swap the p-values and nothing is claimed
    got, _ = classify(ratio, ci, p_better, p_worse, lower_is_better, TOL, 0.01)
    assert got is Outcome.INCONCLUSIVE


def margin_by_hand(levels: list[float], dof: int | None = None, sd: float | None = None) -> float:
    """t(0.99, k - 1) x sd of the log session medians x sqrt(1 + 1/k)."""
    k = len(levels)
    s = float(np.std(np.log(levels), ddof=1)) if sd is None else sd
    return float(sps.t.ppf(Q, k - 1 if dof is None else dof)) * s * math.sqrt(1 + 1 / k)


@pytest.mark.parametrize(
    "levels", [[1.0, 1.02, 0.99], [1.0, 1.02, 0.99, 1.01, 0.985], [1.0, 1.004, 0.998, 1.002, 0.999]]
)
def test_sessions_margin_interval_and_min_effect_by_hand(levels: list[float]) -> None:
    """k session medians: reference = their geometric mean; the interval of a constant run is
    ratio x exp(+-m), m = t(0.99, k - 1) s sqrt(1 + 1/k); a slowdown is claimed from
    (1 + tol) exp(m) on (min_effect), just above it is a regression, just below it is not."""
    ref = math.exp(sum(math.log(x) for x in levels) / len(levels))
    m = margin_by_hand(levels)
    base = entry(levels[-1], levels=levels)
    v = judge(flat(ref * 1.02), base)
    assert v.baseline_median == pytest.approx(ref, rel=1e-12)
    assert v.ratio == pytest.approx(1.02, rel=1e-12)
    assert v.session_margin == pytest.approx(m, rel=1e-9)
    assert v.ci_low == pytest.approx(1.02 * math.exp(-m), rel=1e-9)
    assert v.ci_high == pytest.approx(1.02 * math.exp(m), rel=1e-9)
    edge = (1 + TOL) * math.exp(m)
    assert v.min_effect == pytest.approx(edge, rel=1e-9)  # from ratio 1, whatever this one
    # 1.02 is inside the band: a PASS unless the interval is wider than the band itself
    wide = 2 * m > math.log(1.05 / 0.95)
    assert v.outcome is (Outcome.INCONCLUSIVE if wide else Outcome.PASS), v.message
    assert judge(flat(ref * edge * (1 + 1e-6)), base).outcome is Outcome.REGRESSION
    below = judge(flat(ref * edge * (1 - 1e-6)), base)
    assert below.outcome is Outcome.INCONCLUSIVE, below.message
    # the mirror: an improvement needs the whole interval below (1 - tol)
    low = (1 - TOL) * math.exp(-m)
    assert judge(flat(ref * low * (1 - 1e-6)), base).outcome is Outcome.IMPROVEMENT
    assert judge(flat(ref * low * (1 + 1e-6)), base).outcome is Outcome.INCONCLUSIVE


def test_a_family_floor_keeps_the_entrys_degrees_of_freedom() -> None:
    """The family's spread is a floor under the entry's, but its t quantile keeps the entry's
    k - 1 degrees of freedom: the family's entries were written by the same k sessions, and one
    session's host speed moves them all alike, so pooling them adds entries, not session draws
    (with pooled ones, a 4th session of unchanged code was called a 1.3x regression)."""
    levels = [1.0, 1.001, 0.999]
    base = entry(1.0, levels=levels)
    v = judge(flat(1.0), base, family_sd=0.01)
    assert v.session_margin == pytest.approx(margin_by_hand(levels, dof=2, sd=0.01), rel=1e-9)
    own = judge(flat(1.0), base, family_sd=0.0001)  # below its own: its own spread
    assert own.session_margin == pytest.approx(margin_by_hand(levels), rel=1e-9)


def test_fewer_than_three_sessions_claim_nothing() -> None:
    """Two sessions give one difference: no spread is estimated, so the interval holds only
    the run's own jobs and could not tell a host that moved between sessions from a change of
    the code. The jobs' reading stays in the message; the verdict is INCONCLUSIVE and the
    gate counts the point as not armed (no min_effect)."""
    for levels in ([100.0], [90.0, 100.0]):
        for current, said in ((106.0, "regression"), (94.0, "improvement"), (101.0, "pass")):
            v = judge(flat(current), entry(100.0, levels=levels))
            assert v.session_margin is None and v.between_sessions_sd is None
            assert v.baseline_median == 100.0
            assert v.outcome is Outcome.INCONCLUSIVE and v.min_effect is None, v.message
            assert v.reason == f"{FEW_SESSIONS} ({len(levels)} of 3)"
            assert f"{said} not claimed" in v.message
    three = judge(flat(106.0), entry(100.0, levels=[90.0, 100.0, 100.0]))
    assert three.session_margin is not None and three.outcome is not Outcome.REGRESSION
    steady = judge(flat(106.0), entry(100.0, levels=[100.0, 100.0, 100.0]))
    assert steady.outcome is Outcome.REGRESSION and steady.min_effect is not None


def paired(medians: list[float], direction: Direction = LOWER) -> Measurement:
    m = make_measurement(
        [x * f for x in medians for f in (0.99, 1.0, 1.01)],
        direction=direction,
        unit="us" if direction is LOWER else "MB/s",
    )
    return dataclasses.replace(m, extra={"job_medians": medians})


@pytest.mark.parametrize(
    "factors,outcome",
    [
        ([1.10, 1.12, 1.08, 1.11, 1.09, 1.10], Outcome.REGRESSION),
        ([1.01, 1.00, 1.02, 0.99, 1.01, 1.00], Outcome.PASS),
        ([0.90, 0.92, 0.89, 0.91, 0.90, 0.93], Outcome.IMPROVEMENT),
        ([1.20, 0.85, 1.10, 0.95, 1.05, 1.00], Outcome.INCONCLUSIVE),
    ],
)
def test_paired_t_interval_by_hand(factors: list[float], outcome: Outcome) -> None:
    """d = log(candidate / base) per round; ratio exp(mean d); CI exp(mean d +- t(0.99, n - 1)
    sd / sqrt n); p the one-sided t test; the outcome from classify_paired's documented rule."""
    base = [10.0, 11.0, 10.5, 12.0, 9.5, 10.2]
    cand = [b * f for b, f in zip(base, factors)]
    d = np.log(factors)
    n = len(d)
    half = float(sps.t.ppf(Q, n - 1)) * float(np.std(d, ddof=1)) / math.sqrt(n)
    lo, hi = math.exp(float(d.mean()) - half), math.exp(float(d.mean()) + half)
    tstat = float(d.mean()) / (float(np.std(d, ddof=1)) / math.sqrt(n))
    p_up = float(sps.t.sf(tstat, n - 1))
    v = judge_paired(paired(cand), paired(base), TOL)
    assert v.ratio == pytest.approx(math.exp(float(d.mean())), rel=1e-9)
    assert (v.ci_low, v.ci_high) == (pytest.approx(lo, rel=1e-9), pytest.approx(hi, rel=1e-9))
    assert v.p_value == pytest.approx(p_up, rel=1e-6)
    assert v.outcome is outcome, v.message
    # a bandwidth read of the same numbers: the same move is the opposite outcome
    mirror = {Outcome.REGRESSION: Outcome.IMPROVEMENT, Outcome.IMPROVEMENT: Outcome.REGRESSION}
    bw = judge_paired(paired(cand, HIGHER), paired(base, HIGHER), TOL)
    assert bw.outcome is mirror.get(outcome, outcome), bw.message


@pytest.mark.parametrize(
    "ci,outcome",
    [
        ((1.01, 1.04), Outcome.PASS),  # significant, but the whole CI inside the band
        ((1.01, 1.06), Outcome.REGRESSION),  # excludes 1, reaches beyond 1.05
        ((0.94, 0.99), Outcome.IMPROVEMENT),
        ((0.96, 1.04), Outcome.PASS),
        ((0.94, 1.06), Outcome.INCONCLUSIVE),
        ((0.95, 1.05), Outcome.PASS),  # the edges are inside
    ],
)
def test_classify_paired_band_edges(ci: tuple[float, float], outcome: Outcome) -> None:
    p_worse, p_better = (1e-4, 0.9999) if ci[0] > 1 else (0.9999, 1e-4) if ci[1] < 1 else (0.5, 0.5)
    assert classify_paired(ci, p_worse, p_better, True, TOL, 0.01)[0] is outcome
