"""Monte Carlo of the stored-baseline rule's false regressions with no change in the code.

Not a test: a script. Each trial builds a baseline entry of K sessions and judges one more
session of the same code with the shipped verdict.judge(). A session's level is drawn from
lognormal(0, SD_B) (the host's drift between sessions), each of its JOBS jobs from
lognormal(level, SD_J), each batch from lognormal(job, SD_W). The rule is run twice on the
same draws: with Student's t for the spread between sessions (the shipped rule) and with the
normal quantile z (the rule before), so the table shows what t changes.

    .venv/bin/python benchmarks/stored_rule_mc.py [--trials 400] [--sessions 3,5]
        [--sd-b 0.03,0.05,0.08] [--tolerance 0.05]
"""

from __future__ import annotations

import argparse
import dataclasses
import types

import numpy as np
from scipy import stats as sps

from pytest_hpccomm.baselines import verdict as rule
from pytest_hpccomm.baselines.store import entry_from_measurement
from pytest_hpccomm.measure.measurement import Direction, Measurement

JOBS, BATCHES, SD_J, SD_W = 3, 30, 0.02, 0.01


def session(rng: np.random.Generator, sd_b: float) -> tuple[list[float], list[int]]:
    level = rng.normal(0.0, sd_b)
    samples: list[float] = []
    for _ in range(JOBS):
        job = rng.normal(level, SD_J)
        samples += list(np.exp(rng.normal(job, SD_W, BATCHES)) * 10.0)
    return samples, [BATCHES] * JOBS


def measurement(samples: list[float], sizes: list[int]) -> Measurement:
    return Measurement(
        stack="mpi",
        benchmark="osu_latency",
        params={"size": 8},
        samples=tuple(samples),
        unit="us",
        direction=Direction.LOWER_IS_BETTER,
        metric="latency",
        extra={"job_sizes": sizes},
    )


def trial(rng: np.random.Generator, k: int, sd_b: float, tol: float) -> dict[str, str]:
    medians = []
    for _ in range(k):
        samples, sizes = session(rng, sd_b)
        medians.append(float(np.median(samples)))
    entry = entry_from_measurement(measurement(samples, sizes), {}, "t")
    entry = dataclasses.replace(
        entry, sessions=tuple((f"s{i}", m) for i, m in enumerate(medians)), job_sizes=tuple(sizes)
    )
    cur = measurement(*session(rng, sd_b))
    out = {"t": rule.judge(cur, entry, tolerance=tol, n_resamples=500).outcome.value}
    real = rule.sps
    rule.sps = types.SimpleNamespace(  # type: ignore[assignment]
        t=types.SimpleNamespace(ppf=lambda q, df: sps.norm.ppf(q)),
        norm=sps.norm,
        mannwhitneyu=sps.mannwhitneyu,
        chi2=sps.chi2,
    )
    try:
        out["z"] = rule.judge(cur, entry, tolerance=tol, n_resamples=500).outcome.value
    finally:
        rule.sps = real
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=400)
    ap.add_argument("--sessions", default="3,5")
    ap.add_argument("--sd-b", default="0.03,0.05,0.08")
    ap.add_argument("--tolerance", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    print(
        "| sessions | sd between sessions | false regressions, t | false regressions, z "
        "| pass, t | pass, z | trials |\n|---|---|---|---|---|---|---|"
    )
    for k in (int(x) for x in a.sessions.split(",")):
        for sd_b in (float(x) for x in a.sd_b.split(",")):
            got = [trial(rng, k, sd_b, a.tolerance) for _ in range(a.trials)]

            def rate(side: str, outcome: str) -> str:
                n = sum(g[side] == outcome for g in got)
                return f"{100 * n / len(got):.1f} %"

            print(
                f"| {k} | {sd_b * 100:g} % | {rate('t', 'regression')} | "
                f"{rate('z', 'regression')} | {rate('t', 'pass')} | {rate('z', 'pass')} | "
                f"{a.trials} |"
            )


if __name__ == "__main__":
    main()
