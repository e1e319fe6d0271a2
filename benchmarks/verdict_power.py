"""Power study of the verdict rule: false alarms with no change, detection of real slowdowns.

Not a test: a script whose table shapes the rule in pytest_hpccomm/baselines/verdict.py.

    .venv/bin/python benchmarks/verdict_power.py [--trials 400] [--seed 1] [--sessions 1,5]

Model of one run's samples (one per timed batch, lower is better, e.g. latency in µs):
- a run-to-run shift: the whole run is multiplied by exp(N(0, run_sigma)) — a different node
  placement, cache state, CPU frequency, noisy neighbour. Within-run tests cannot see this.
- lognormal batch noise with AR(1) correlation rho between consecutive batches (drift,
  interference lasting longer than one batch);
- outlier bursts: with probability burst_p per batch, 1–5 batches are slowed 1.2–3x (another
  process takes the core).
The baseline and the current run are independent runs of the same model; the current run is
then slowed by `change` (0, 5, 10, 20 %). Alpha 0.01 (judge's default); tolerance per row.
With `--sessions K` (column k) the baseline entry was updated by K runs, each with its own
run-to-run shift: its samples are the last run's, its `sessions` the K runs' medians, as
`--hpc-update-baselines` leaves them (store.py); from 3 on the verdict counts their spread.

Three rules are tabulated on the same draws (columns: % of trials):
- judge : the shipped rule: block-bootstrap CI of the median ratio, Mann-Whitney; a
          regression needs p < alpha AND the whole CI beyond tolerance;
- point : the same statistics, but only the point ratio must pass tolerance;
- naive : Mann-Whitney on the raw samples (as if independent) + point ratio beyond tolerance.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass, replace

import numpy as np
from scipy.stats import mannwhitneyu

from pytest_hpccomm.baselines.store import BaselineEntry, entry_from_measurement
from pytest_hpccomm.baselines.verdict import Outcome, Verdict, judge
from pytest_hpccomm.measure.measurement import Direction, Measurement


@dataclass(frozen=True)
class Scenario:
    name: str
    n: int
    sigma: float  # within-run log-sd of one batch
    rho: float  # lag-1 autocorrelation between batches
    burst_p: float
    run_sigma: float  # run-to-run log-sd
    tolerance: float = 0.05


SCENARIOS = [
    Scenario("quiet cluster", 30, 0.02, 0.3, 0.01, 0.01),
    Scenario("quiet cluster", 100, 0.02, 0.3, 0.01, 0.01),
    Scenario("noisy 2-core CI", 10, 0.05, 0.6, 0.04, 0.02),
    Scenario("noisy 2-core CI", 30, 0.05, 0.6, 0.04, 0.02),
    Scenario("noisy 2-core CI", 100, 0.05, 0.6, 0.04, 0.02),
    Scenario("noisy 2-core CI", 30, 0.05, 0.6, 0.04, 0.02, tolerance=0.10),
    Scenario("noisy, big shifts", 30, 0.08, 0.7, 0.06, 0.04),
    # batches agree within a run, runs do not: what a same-build re-run showed here (README)
    Scenario("drifting sessions", 30, 0.02, 0.3, 0.01, 0.05),
]
CHANGES = [0.0, 0.05, 0.10, 0.20]
ALPHA = 0.01


def simulate_run(rng: np.random.Generator, sc: Scenario, level: float = 3.0) -> np.ndarray:
    z = rng.standard_normal(sc.n)
    e = np.empty(sc.n)
    e[0] = sc.sigma * z[0]
    innov = sc.sigma * np.sqrt(1.0 - sc.rho**2)
    for t in range(1, sc.n):
        e[t] = sc.rho * e[t - 1] + innov * z[t]
    x = level * np.exp(rng.normal(0.0, sc.run_sigma) + e)
    t = 0
    while t < sc.n:
        if rng.random() < sc.burst_p:
            length = int(rng.integers(1, 6))
            x[t : t + length] *= rng.uniform(1.2, 3.0)
            t += length
        else:
            t += 1
    return x


def measurement(samples: np.ndarray) -> Measurement:
    return Measurement(
        stack="sim",
        benchmark="osu_latency",
        params={"size": 8},
        samples=tuple(float(v) for v in samples),
        unit="us",
        direction=Direction.LOWER_IS_BETTER,
    )


def point_rule(v: Verdict) -> bool:
    """Same statistics as judge, but the point ratio (not the whole CI) must pass tolerance."""
    if v.ratio is None or v.ci_low is None or v.p_value is None:
        return False
    return v.p_value < ALPHA and v.ci_low > 1.0 and v.ratio > 1.0 + v.tolerance


def naive_rule(cur: np.ndarray, base: np.ndarray, tolerance: float) -> bool:
    """Mann-Whitney on raw (autocorrelated) samples + point ratio beyond tolerance."""
    p = mannwhitneyu(cur, base, alternative="greater").pvalue
    return bool(p < ALPHA and np.median(cur) / np.median(base) > 1.0 + tolerance)


def baseline_of(rng: np.random.Generator, sc: Scenario, sessions: int) -> BaselineEntry:
    """The entry `sessions` independent runs leave: the last run's samples, every run's median."""
    runs = [simulate_run(rng, sc) for _ in range(sessions)]
    entry = entry_from_measurement(measurement(runs[-1]), {}, "sim")
    return replace(
        entry, sessions=tuple((f"s{i}", float(np.median(r))) for i, r in enumerate(runs))
    )


def run(trials: int, seed: int, session_counts: list[int], scenarios: list[Scenario]) -> None:
    rng = np.random.default_rng(seed)
    header = (
        f"{'scenario':<18} {'n':>4} {'tol':>4} {'k':>2} {'slower':>6} | {'judge: regr':>11} "
        f"{'inconcl':>7} "
        f"{'pass':>6} {'impr':>5} | {'point: regr':>11} | {'naive: regr':>11}"
    )
    print(f"alpha {ALPHA}, {trials} trials per row, % of trials")
    print(header)
    print("-" * len(header))
    for sc in scenarios:
        for k, change in [(k, c) for k in session_counts for c in CHANGES]:
            counts = {o: 0 for o in Outcome}
            point = naive = 0
            for i in range(trials):
                entry = baseline_of(rng, sc, k)
                base = np.asarray(entry.samples)
                cur = simulate_run(rng, sc) * (1.0 + change)
                v = judge(measurement(cur), entry, tolerance=sc.tolerance, alpha=ALPHA, seed=i)
                counts[v.outcome] += 1
                point += point_rule(v)
                naive += naive_rule(cur, base, sc.tolerance)
            pct = {o: 100.0 * c / trials for o, c in counts.items()}
            print(
                f"{sc.name:<18} {sc.n:>4} {sc.tolerance:>4.0%} {k:>2} {change:>+6.0%} | "
                f"{pct[Outcome.REGRESSION]:>11.1f} {pct[Outcome.INCONCLUSIVE]:>7.1f} "
                f"{pct[Outcome.PASS]:>6.1f} {pct[Outcome.IMPROVEMENT]:>5.1f} | "
                f"{100.0 * point / trials:>11.1f} | {100.0 * naive / trials:>11.1f}"
            )
        print()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=300)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument(
        "--sessions", default="1", help="baseline sessions per row, comma-separated (e.g. 1,5)"
    )
    ap.add_argument("--scenario", default="", help="only the scenarios whose name contains this")
    args = ap.parse_args(argv)
    counts = [int(k) for k in args.sessions.split(",")]
    if any(k < 1 for k in counts):
        ap.error("--sessions: counts must be >= 1")
    t0 = time.perf_counter()
    run(args.trials, args.seed, counts, [sc for sc in SCENARIOS if args.scenario in sc.name])
    print(f"({time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
