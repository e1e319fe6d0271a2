"""Paired A/B verdicts: a candidate build against a base build measured in the same session.

Both sides run as independent jobs in rounds (A B, B A, ...: a linear drift cancels); the unit
of evidence is the job. `judge_paired`: d_i = log(candidate job median / base job median) per
round; ratio = exp(mean d) with a Student t CI at 1 - 2*alpha and a one-sided t test (a
bootstrap over a handful of rounds is too narrow). REGRESSION: p < alpha, CI excludes 1 and
reaches beyond the tolerance (drift is inside the samples here, so a tolerance-sized change
must be caught); PASS: the whole CI inside the band; INCONCLUSIVE otherwise. Why and what it
was measured to catch: docs/explanation/paired-ab.md.
"""

from __future__ import annotations

import math

import numpy as np
import scipy  # scipy.stats loads on first use (scipy imports subpackages lazily)

from pytest_hpccomm.baselines.verdict import (
    DEFAULT_ALPHA,
    Outcome,
    Verdict,
    band,
    describe,
    fmt_num,
    fmt_p,
    fmt_tol,
    min_effect,
    verdict_line,
    within_band,
)
from pytest_hpccomm.measure.measurement import Direction, Measurement

MIN_ROUNDS = 3  # a t interval from 2 rounds (1 degree of freedom) spans orders of magnitude


def job_medians(m: Measurement) -> list[float]:
    """Each job's median batch, in job order (the driver pools jobs: measure/pooling.py):
    `job_medians` when the driver kept them, else the median of each job's run of samples
    (`job_sizes`: where each job's batches end), else one job."""
    medians = m.extra.get("job_medians")
    if medians:
        return [float(x) for x in medians]
    sizes = [int(n) for n in m.extra.get("job_sizes") or []]
    if sizes and sum(sizes) == len(m.samples):
        ends = np.cumsum(sizes)
        return [float(np.median(m.samples[e - n : e])) for n, e in zip(sizes, ends) if n > 0]
    return [float(np.median(m.samples))]


def judge_paired(
    candidate: Measurement,
    base: Measurement,
    tolerance: float,
    alpha: float = DEFAULT_ALPHA,
    labels: tuple[str, str] = ("candidate", "base"),
) -> Verdict:
    """Candidate vs base of one benchmark point, rounds paired by job order (module docstring).
    `labels` name the two sides in the message, e.g. ("openmpi", "openmpi4")."""
    tol = candidate.tolerance if candidate.tolerance is not None else tolerance
    if not 0 < tol < 1:
        raise ValueError(f"tolerance must be in (0, 1), got {tol!r}")
    cand_jobs, base_jobs = job_medians(candidate), job_medians(base)
    rounds = min(len(cand_jobs), len(base_jobs))
    cur_med = float(np.median(candidate.samples))
    base_med = float(np.median(base.samples))
    level = 1.0 - 2.0 * alpha
    lower_better = candidate.direction == Direction.LOWER_IS_BETTER
    head = (
        f"{describe(candidate.benchmark, candidate.params)}: {labels[0]} (candidate) "
        f"median {fmt_num(cur_med)} {candidate.unit} vs {labels[1]} (base) "
        f"{fmt_num(base_med)} {base.unit}"
    )

    def verdict(
        outcome: Outcome,
        reason: str,
        ratio: float | None = None,
        ci: tuple[float, float] | None = None,
        p_worse: float | None = None,
        p_better: float | None = None,
    ) -> Verdict:
        detail = [f"{rounds} job pairs"]
        if ratio is not None:
            detail.append(f"paired ratio {ratio:.3f}")
        if ci is not None:
            detail.append(f"{level * 100:g}% CI {ci[0]:.3f}\N{EN DASH}{ci[1]:.3f}")
        moved_better = ratio is not None and (ratio < 1 if lower_better else ratio > 1)
        p = p_better if moved_better else p_worse
        if p is not None:
            detail.append(f"p={fmt_p(p)}")
        detail.append(f"tolerance {fmt_tol(tol)}")
        msg = verdict_line(outcome, head, detail, reason)
        return Verdict.of(
            outcome,
            (cur_med, base_med),
            ratio,
            ci,
            (p_worse, p_better),
            (len(cand_jobs), len(base_jobs)),
            tolerance=tol,
            message=msg,
            reason=reason,
            min_effect=None
            if ci is None or ratio is None
            else min_effect(ratio, ci, band(tol), lower_better, paired=True),
        )

    if base.unit != candidate.unit or base.direction != candidate.direction:
        return verdict(
            Outcome.INCONCLUSIVE,
            f"base in {base.unit}, candidate in {candidate.unit}: not comparable",
        )
    if len(cand_jobs) != len(base_jobs):
        return verdict(
            Outcome.INCONCLUSIVE,
            f"unpaired jobs ({len(cand_jobs)} candidate, {len(base_jobs)} base)",
        )
    if rounds < MIN_ROUNDS:
        return verdict(Outcome.INCONCLUSIVE, f"too few job pairs ({rounds}; need {MIN_ROUNDS})")
    if min(cand_jobs) <= 0 or min(base_jobs) <= 0:
        return verdict(Outcome.INCONCLUSIVE, "non-positive job medians: ratio undefined")
    d = np.log(np.asarray(cand_jobs)) - np.log(np.asarray(base_jobs))
    ratio = math.exp(float(np.mean(d)))
    if np.all(d == d[0]):  # identical ratios in every round: no spread to test against
        ci, p_up, p_down = (ratio, ratio), float(d[0] <= 0), float(d[0] >= 0)
    else:
        res = scipy.stats.ttest_1samp(d, 0.0, alternative="two-sided")
        low, high = res.confidence_interval(confidence_level=level)
        ci = (math.exp(float(low)), math.exp(float(high)))
        p_up = float(scipy.stats.ttest_1samp(d, 0.0, alternative="greater").pvalue)
        p_down = float(scipy.stats.ttest_1samp(d, 0.0, alternative="less").pvalue)
    p_worse, p_better = (p_up, p_down) if lower_better else (p_down, p_up)
    outcome, reason = classify_paired(ci, p_worse, p_better, lower_better, tol, alpha)
    return verdict(outcome, reason, ratio, ci, p_worse, p_better)


def classify_paired(
    ci: tuple[float, float],
    p_worse: float,
    p_better: float,
    lower_is_better: bool,
    tolerance: float,
    alpha: float,
) -> tuple[Outcome, str]:
    """The A/B decision rule on precomputed statistics (pure); returns (outcome, reason)."""
    lo, hi = ci
    down, up = band(tolerance)
    if lower_is_better:  # worse = the ratio moved up
        worse_sig, better_sig = lo > 1.0, hi < 1.0
        worse_reach, better_reach = hi > up, lo < down
    else:
        worse_sig, better_sig = hi < 1.0, lo > 1.0
        worse_reach, better_reach = lo < down, hi > up
    if worse_sig and p_worse < alpha and worse_reach:
        return Outcome.REGRESSION, "candidate worse, a tolerance-sized change within the CI"
    if better_sig and p_better < alpha and better_reach:
        return Outcome.IMPROVEMENT, "candidate better, a tolerance-sized change within the CI"
    if within_band(lo, tolerance) and within_band(hi, tolerance):
        return Outcome.PASS, "any change smaller than the tolerance"
    return Outcome.INCONCLUSIVE, "the CI reaches beyond the tolerance without a significant change"
