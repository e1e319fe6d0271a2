"""Calibration of the verdict rules on seeded simulated sessions: how often unchanged code is
called a change (bounded by the rule's own nominal level) and how often a real 1.5x slowdown
(the canary's) is claimed.

Model (benchmarks/stored_rule_mc.py): a session's level is lognormal(0, SD_B) (drift between
sessions), each of its jobs lognormal(level, SD_J), each batch lognormal(job, SD_W).

Nominal level. A REGRESSION needs the whole 1 - 2*alpha interval beyond 1 + tol and the
one-sided rank test at alpha: a one-sided test of "slowdown > tol" at level alpha (verdict.py,
rule 3). With no change the true ratio is 1 < 1 + tol, so a calibrated rule claims a
regression in at most a fraction alpha = DEFAULT_ALPHA of trials (the interval's own nominal
one-sided tail); the mirror bound holds for IMPROVEMENT. The bound a test asserts for n trials
is binom.ppf(1 - 1e-3, n, alpha) / n: a rule at its nominal level exceeds it by chance in at
most 0.1 % of seeds, and these seeds are fixed.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from scipy import stats as sps

from pytest_hpccomm.baselines import adaptive
from pytest_hpccomm.baselines.paired import judge_paired
from pytest_hpccomm.baselines.store import BaselineEntry, entry_from_measurement
from pytest_hpccomm.baselines.verdict import Outcome, Verdict, judge, typical_sessions_sd
from pytest_hpccomm.measure.measurement import Measurement
from tests.builders import FINGERPRINT, make_measurement

NOMINAL_ALPHA = 0.01  # the rule's documented level: 98 % two-sided intervals, 1 % one-sided
JOBS, BATCHES, SD_J, SD_W = 3, 30, 0.02, 0.01  # as benchmarks/stored_rule_mc.py
SD_B = 0.03  # drift between sessions
TOL = 0.05
SHIFT = 1.5  # the canary's slowdown
RESAMPLES = 300


def false_alarm_bound(n: int, alpha: float = NOMINAL_ALPHA) -> float:
    """The most false claims in n trials a rule at level alpha shows in 99.9 % of seeds."""
    return float(sps.binom.ppf(1 - 1e-3, n, alpha)) / n


def session_jobs(rng: np.random.Generator, n_jobs: int = JOBS) -> list[list[float]]:
    """One session's jobs, each a list of batch samples around 10 (lower is better)."""
    level = rng.normal(0.0, SD_B)
    return [
        list(np.exp(rng.normal(rng.normal(level, SD_J), SD_W, BATCHES)) * 10.0)
        for _ in range(n_jobs)
    ]


def pooled(jobs: list[list[float]], factor: float = 1.0) -> Measurement:
    return make_measurement([x * factor for j in jobs for x in j], job_sizes=[len(j) for j in jobs])


def stored_entry(rng: np.random.Generator, k: int) -> BaselineEntry:
    """A baseline entry updated by k sessions of the same code (its last one's samples)."""
    medians, jobs = [], []
    for _ in range(k):
        jobs = session_jobs(rng)
        medians.append(float(np.median([x for j in jobs for x in j])))
    entry = entry_from_measurement(pooled(jobs), FINGERPRINT, "t")
    return dataclasses.replace(entry, sessions=tuple((f"s{i}", m) for i, m in enumerate(medians)))


def test_stored_rule_with_sessions_false_alarms_and_canary() -> None:
    """A-vs-A: a new session of unchanged code against k = 3 and 5 stored ones regresses (or
    improves) in at most the nominal alpha (+ binomial margin) of trials.
    The same session 1.5x slower: the bootstrap (same seed) and the sessions' margin are
    scale-equivariant, so its interval is exactly 1.5x the A-vs-A one, and the rule claims it
    exactly where that A-vs-A verdict's min_effect (the smallest slowdown from ratio 1 that an
    interval of its width could claim: (1 + tol) x ratio / its lower edge) is below 1.5 x its
    ratio: checked trial by trial, so the detection rate is the one min_effect predicts.
    More sessions narrow the margin (t with k - 1 dof, sqrt(1 + 1/k)), so 5 sessions detect
    at least as often as 3."""
    trials = 150
    detected = {}
    for k in (3, 5):
        rng = np.random.default_rng(100 + k)
        regressions = improvements = claimed = predicted = 0
        for _ in range(trials):
            entry = stored_entry(rng, k)
            jobs = session_jobs(rng)
            same = judge(pooled(jobs), entry, n_resamples=RESAMPLES)
            assert same.baseline_sessions == k and same.session_margin is not None
            regressions += same.outcome is Outcome.REGRESSION
            improvements += same.outcome is Outcome.IMPROVEMENT
            slow = judge(pooled(jobs, SHIFT), entry, n_resamples=RESAMPLES)
            assert same.min_effect is not None and same.ratio is not None
            expect = same.min_effect < SHIFT * same.ratio
            if abs(math.log(same.min_effect / (SHIFT * same.ratio))) > 1e-9:  # off the edge
                assert (slow.outcome is Outcome.REGRESSION) == expect, (k, slow.message)
            claimed += slow.outcome is Outcome.REGRESSION
            predicted += expect
        bound = false_alarm_bound(trials)
        assert regressions / trials <= bound, (k, regressions, trials, bound)
        assert improvements / trials <= bound, (k, improvements, trials, bound)
        assert claimed == predicted, (k, claimed, predicted)
        detected[k] = claimed
    assert detected[5] >= detected[3] > 0, detected


def test_adaptive_repeats_false_alarms_bounded_and_a_real_shift_decided() -> None:
    """until_decided with a seeded source of jobs (3 to start, one more while the verdict is
    undecided, at most 6). A claimed change is itself undecided (it is confirmed on the most
    jobs), so a final REGRESSION is one judged on 6 jobs; stopping early happens only on a
    verdict that claims nothing. The false-regression rate is therefore at most that of one
    look at 6 jobs: the nominal alpha, + the binomial margin. A 1.5x slower session is
    decided: claimed on 6 jobs wherever min_effect says a 1.5x slowdown is within reach."""
    trials, start, most = 60, 3, 6
    rng = np.random.default_rng(7)

    def run(entry: BaselineEntry, jobs: list[list[float]], factor: float) -> tuple[Verdict, int]:
        n = [start]

        def grow() -> list[Measurement] | None:
            assert adaptive.undecided(verdict_of(pooled(jobs[: n[0]], factor)))  # only then
            if n[0] >= most:
                return None
            n[0] += 1
            return [pooled(jobs[: n[0]], factor)]

        def verdict_of(m: Measurement) -> Verdict:
            return judge(m, entry, n_resamples=RESAMPLES)

        records = adaptive.until_decided(
            [pooled(jobs[:start], factor)],
            lambda m: adaptive.undecided(verdict_of(m)),
            grow,
            lambda: {"jobs": n[0]},
        )
        final = verdict_of(records[0])
        assert records[0].extra["adaptive"] == {"jobs": n[0]}
        assert n[0] == most or not adaptive.undecided(final)  # more jobs only while undecided
        return final, n[0]

    false_alarms = decided_shifts = predicted = fixed = 0
    for _ in range(trials):
        entry = stored_entry(rng, 5)
        jobs = session_jobs(rng, most)
        same, _ = run(entry, jobs, 1.0)
        false_alarms += same.outcome is Outcome.REGRESSION
        slow, used = run(entry, jobs, SHIFT)
        # a shift stops short of 6 jobs only on a verdict more jobs cannot mend; on 6 jobs it
        # is claimed where the A-vs-A verdict on the same 6 jobs says its interval could
        # claim a 1.5x slowdown (min_effect, scale-equivariance as above)
        whole = judge(pooled(jobs), entry, n_resamples=RESAMPLES)
        assert whole.min_effect is not None and whole.ratio is not None
        expect = used == most and whole.min_effect < SHIFT * whole.ratio
        assert (slow.outcome is Outcome.REGRESSION) == expect, slow.message
        decided_shifts += slow.outcome is Outcome.REGRESSION
        predicted += whole.min_effect < SHIFT * whole.ratio
        fixed += (
            judge(pooled(jobs[:start], SHIFT), entry, n_resamples=RESAMPLES).outcome
            is Outcome.REGRESSION
        )
    assert false_alarms / trials <= false_alarm_bound(trials), false_alarms
    assert decided_shifts == predicted, (decided_shifts, predicted)  # none stopped short
    # more jobs while undecided: at least as many claims as the 3 jobs it started from
    assert decided_shifts >= fixed, (decided_shifts, fixed, trials)


def paired_jobs(medians: list[float]) -> Measurement:
    m = make_measurement([x * f for x in medians for f in (0.99, 1.0, 1.01)])
    return dataclasses.replace(m, extra={"job_medians": medians})


def test_paired_rule_a_vs_a_improvements_are_bounded_too() -> None:
    """The paired rule's mirror side (test_baselines_paired checks false regressions): with
    no change, IMPROVEMENT needs the one-sided t test at alpha and a 98 % t interval below 1,
    so it happens in at most alpha of trials (t is exact for normal log ratios, as here)."""
    trials = 400
    rng = np.random.default_rng(11)
    improvements = regressions = 0
    for _ in range(trials):
        drift = np.linspace(1.0, 1.2, 6)
        base = list(10.0 * drift * rng.lognormal(0, 0.03, 6))
        cand = list(10.0 * drift * rng.lognormal(0, 0.03, 6))
        v = judge_paired(paired_jobs(cand), paired_jobs(base), TOL)
        improvements += v.outcome is Outcome.IMPROVEMENT
        regressions += v.outcome is Outcome.REGRESSION
    bound = false_alarm_bound(trials)
    assert improvements / trials <= bound and regressions / trials <= bound, (
        improvements,
        regressions,
        bound,
    )


def family_session(rng: np.random.Generator, level: float, entries: int) -> list[list[list[float]]]:
    """One session of a family of `entries` points (sizes of one benchmark): the session's
    host speed `level` moves them all alike, each point's jobs scatter around it."""
    return [
        [
            list(np.exp(rng.normal(rng.normal(level, SD_J), SD_W, BATCHES)) * 10.0)
            for _ in range(JOBS)
        ]
        for _ in range(entries)
    ]


SLOW_MODE, P_SLOW = 1.3, 0.2  # a host that runs a session 1.3x slower one time in five
MAIN_TOL = 0.15  # the main job's tolerance


def two_mode_level(rng: np.random.Generator) -> float:
    """A session's host speed on a VM that moves between two speed modes for minutes at a time
    (as the 2-core VMs do: MPI jobs 1.22-1.36x apart between sessions of unchanged code)."""
    return float(
        rng.normal(0.0, SD_B * 2 / 3) + (math.log(SLOW_MODE) if rng.random() < P_SLOW else 0.0)
    )


def test_stored_rule_of_a_family_sharing_its_sessions_false_alarms() -> None:
    """The points of a family (one benchmark's sizes) are written by the same k = 3 sessions,
    so one draw of each session's host speed moves all of them: the family's typical spread
    (the floor under each point's own) rests on k - 1 degrees of freedom however many points
    it has. On a two-mode host, three sessions in one mode and a fourth in the other are
    common (about one trial in ten); a new session of unchanged code, judged point by point
    with that floor at the main job's tolerance, must still regress (or improve) in at most
    the nominal alpha of trials. The points of one trial move together, so the bound counts
    trials, not points. (Pooling the family's degrees of freedom, as if each point had
    sessions of its own, called about 5 % of points regressions here.)"""
    trials, entries, k = 300, 8, 3
    rng = np.random.default_rng(31)
    regressions = improvements = 0
    for _ in range(trials):
        sessions = [family_session(rng, two_mode_level(rng), entries) for _ in range(k)]
        medians = [
            [float(np.median([x for j in s[e] for x in j])) for s in sessions]
            for e in range(entries)
        ]
        family_sd = typical_sessions_sd(medians)
        new = family_session(rng, two_mode_level(rng), entries)
        for e in range(entries):
            stored = dataclasses.replace(
                entry_from_measurement(pooled(sessions[-1][e]), FINGERPRINT, "t"),
                sessions=tuple((f"s{i}", m) for i, m in enumerate(medians[e])),
            )
            v = judge(
                pooled(new[e]),
                stored,
                tolerance=MAIN_TOL,
                family_sd=family_sd,
                n_resamples=RESAMPLES,
            )
            regressions += v.outcome is Outcome.REGRESSION
            improvements += v.outcome is Outcome.IMPROVEMENT
    bound = false_alarm_bound(trials)
    points = trials * entries
    assert regressions / points <= bound, (regressions, points, bound)
    assert improvements / points <= bound, (improvements, points, bound)
