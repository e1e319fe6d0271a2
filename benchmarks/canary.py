"""The gate's own false-alarm rate and detection power, on real runs of this machine.

Not a test: a script. Each round takes a fresh baseline with the real MPI latency sweep (Open MPI,
TCP over loopback), then runs the same sweep with no change and with the canary
(--hpc-inject-slowdown) at 1.05 and 1.10, in shuffled order. Every (round, size) is one trial.
The verdicts are then recomputed offline with the shipped judge() at several tolerances, so one
set of runs answers "which tolerance reaches >= 95 % detection of a 5 % slowdown with <= 1 %
false alarms on this machine".

    .venv/bin/python benchmarks/canary.py --rounds 20 [--sizes 8,64,1K,8K,64K] [--mpi openmpi]
        [--factors 1.05,1.10] [--repeats 3] [--jobs 8] [--dump trials.json]

With --jobs N every run records N jobs (job boundaries kept), and the table replays the
stored-mode rule as the suite applies it: a baseline of the first B jobs, the run judged with
its first --repeats jobs and, while the verdict is undecided (baselines/adaptive.py), one more
job at a time up to a limit (--hpc-max-repeats), all with the shipped judge().

With --ab it measures the paired A/B gate instead (benchmarks/canary_ab.py).
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from hpccomm_suites import DIR as SUITES_DIR
from pytest_hpccomm.baselines.adaptive import undecided
from pytest_hpccomm.baselines.store import entry_from_measurement
from pytest_hpccomm.baselines.verdict import Outcome, judge
from pytest_hpccomm.measure.measurement import Measurement
from pytest_hpccomm.report.results_json import load_results

ROOT = Path(__file__).resolve().parents[1]
SUITE = SUITES_DIR / "mpi" / "test_perf_osu.py"
TOLERANCES = (0.01, 0.02, 0.03, 0.05, 0.10, 0.15, 0.20)


class RunFailed(Exception):
    pass


def run_sweep(out: Path, args: argparse.Namespace, slowdown: float) -> dict[str, object]:
    """One pytest run of the real suite; returns {key: Measurement} from its results JSON."""
    (out / "r.json").unlink(missing_ok=True)
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        str(SUITE),
        "-q",
        "-p",
        "no:cacheprovider",
        "-k",
        "osu_latency",
        f"--hpc-mpi={args.mpi}",
        "--hpc-launcher=local",
        f"--hpc-sizes={args.sizes}",
        "--hpc-history=none",
        f"--hpc-baselines={out}/bl",
        f"--hpc-results={out}/r.json",
        f"--hpc-inject-slowdown={slowdown}",
        "--hpc-system=canary",
        f"--hpc-repeats={args.jobs}",
        f"--hpc-max-repeats={args.jobs}",
        "--import-mode=importlib",
    ]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    if not (out / "r.json").exists():
        raise RunFailed(f"pytest exit {proc.returncode}: {proc.stdout[-400:]}")
    results, _ = load_results(out / "r.json")
    return {r.measurement.key: r.measurement for r in results}


def collect(args: argparse.Namespace, factors: tuple[float, ...]) -> list[dict[str, Any]]:
    rng = random.Random(args.seed)
    trials: list[dict[str, Any]] = []
    t0 = time.monotonic()
    for rnd in range(args.rounds):
        order = list(factors)
        rng.shuffle(order)
        try:
            with tempfile.TemporaryDirectory() as tmp:
                base = run_sweep(Path(tmp), args, 1.0)
                got = [(f, run_sweep(Path(tmp), args, f)) for f in order]
        except (RunFailed, subprocess.TimeoutExpired) as exc:
            print(f"round {rnd + 1}: a run failed, round dropped: {exc}", file=sys.stderr)
            continue
        for factor, cur in got:
            for key, m in cur.items():
                if key in base:
                    trials.append(
                        {"round": rnd, "factor": factor, "key": key, "base": base[key], "cur": m}
                    )
        print(
            f"round {rnd + 1}/{args.rounds} done ({time.monotonic() - t0:.0f} s)", file=sys.stderr
        )
    return trials


def tabulate(trials: list[dict[str, Any]], factors: tuple[float, ...]) -> None:
    table: dict[tuple[float, float], dict[Outcome, int]] = defaultdict(lambda: defaultdict(int))
    for t in trials:
        entry = entry_from_measurement(t["base"], {}, "")
        for tol in TOLERANCES:
            v = judge(t["cur"], entry, tolerance=tol)
            table[(tol, t["factor"])][v.outcome] += 1
    n = sum(1 for t in trials if t["factor"] == 1.0)
    print(f"\n{n} trials per condition (osu_latency, TCP over loopback)\n")
    print(
        "| tolerance | false alarms (no change) | inconclusive (no change) | "
        + " | ".join(f"{f - 1:.0%} caught" for f in factors[1:])
        + " |"
    )
    print("|---" * (2 + len(factors)) + "|")
    for tol in TOLERANCES:

        def pct(f: float, o: Outcome) -> str:
            c = table[(tol, f)]
            return f"{100 * c[o] / max(1, sum(c.values())):.1f} %"

        print(
            f"| {tol:.0%} | {pct(1.0, Outcome.REGRESSION)} | {pct(1.0, Outcome.INCONCLUSIVE)} | "
            + " | ".join(pct(f, Outcome.REGRESSION) for f in factors[1:])
            + " |"
        )
    # what no within-run statistic sees: how far apart two runs of unchanged code land
    ratios = np.array(
        [
            np.median(t["cur"].samples) / np.median(t["base"].samples)
            for t in trials
            if t["factor"] == 1.0
        ]
    )
    if ratios.size:
        lo, mid, hi = np.percentile(ratios, [5, 50, 95])
        print(
            f"\nno-change run/run median ratio: median {mid:.3f}, p5-p95 {lo:.3f}-{hi:.3f}, "
            f"sd(log) {np.std(np.log(ratios)):.3f}"
        )


def first_jobs(m: Measurement, k: int) -> Measurement:
    """`m` as if only its first k jobs had run."""
    sizes = list(m.extra.get("job_sizes") or [len(m.samples)])
    n = sum(sizes[:k])
    return Measurement(
        stack=m.stack,
        benchmark=m.benchmark,
        params=m.params,
        samples=m.samples[:n],
        unit=m.unit,
        direction=m.direction,
        metric=m.metric,
        extra={**m.extra, "job_sizes": sizes[:k]},
    )


def replay(
    t: dict[str, Any], base_jobs: int, start: int, limit: int, tol: float
) -> tuple[Outcome, int]:
    """The stored-mode verdict with adaptive repeats: (outcome, jobs it took)."""
    entry = entry_from_measurement(first_jobs(t["base"], base_jobs), {}, "")
    k = start
    v = judge(first_jobs(t["cur"], k), entry, tolerance=tol)
    while undecided(v) and k < limit:
        k += 1
        v = judge(first_jobs(t["cur"], k), entry, tolerance=tol)
    return v.outcome, k


def tabulate_adaptive(
    trials: list[dict[str, Any]], factors: tuple[float, ...], start: int, jobs: int
) -> None:
    rules = sorted(
        {
            (start, start, start),
            (start, start, min(2 * start, jobs)),
            (start, start, jobs),
            (min(2 * start, jobs), start, jobs),
        }
    )
    print(
        "\n| tolerance | baseline jobs | run jobs | false alarms (no change) | inconclusive "
        "(no change) | "
        + " | ".join(f"{f - 1:.0%} caught" for f in factors[1:])
        + " | mean jobs (no change) | mean jobs ("
        + f"{factors[-1] - 1:.0%})"
        + " |"
    )
    print("|---" * (6 + len(factors)) + "|")
    for tol in (0.03, 0.05, 0.10):
        for base_jobs, first, limit in rules:
            counts: dict[float, dict[Outcome, int]] = defaultdict(lambda: defaultdict(int))
            used: dict[float, list[int]] = defaultdict(list)
            for t in trials:
                outcome, k = replay(t, base_jobs, first, limit, tol)
                counts[t["factor"]][outcome] += 1
                used[t["factor"]].append(k)

            def pct(f: float, o: Outcome) -> str:
                c = counts[f]
                return f"{100 * c[o] / max(1, sum(c.values())):.1f} %"

            run = f"{first}" if first == limit else f"{first}..{limit}"
            print(
                f"| {tol:.0%} | {base_jobs} | {run} | {pct(1.0, Outcome.REGRESSION)} | "
                f"{pct(1.0, Outcome.INCONCLUSIVE)} | "
                + " | ".join(pct(f, Outcome.REGRESSION) for f in factors[1:])
                + f" | {np.mean(used[1.0]):.1f} | {np.mean(used[factors[-1]]):.1f} |"
            )


def main() -> int:
    if "--ab" in sys.argv[1:]:  # the paired A/B gate: its own study (canary_ab.py)
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from canary_ab import main as ab_main

        return ab_main([a for a in sys.argv[1:] if a != "--ab"])
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--sizes", default="8,64,1K,8K,64K")
    ap.add_argument("--mpi", default="openmpi")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=3, help="--hpc-repeats of every run")
    ap.add_argument(
        "--jobs",
        type=int,
        default=0,
        help="jobs recorded per run (default --repeats): the adaptive replay's limit",
    )
    ap.add_argument(
        "--factors",
        default="1.05,1.10",
        help="canary slowdowns besides the no-change run (comma-separated)",
    )
    ap.add_argument("--dump", type=Path, help="write every trial's samples here (JSON)")
    ap.add_argument("--from-dump", type=Path, help="tabulate a --dump file instead of running")
    args = ap.parse_args()
    if args.from_dump:
        trials = [
            {**t, "base": Measurement.from_json(t["base"]), "cur": Measurement.from_json(t["cur"])}
            for t in json.loads(args.from_dump.read_text())
        ]
        factors = tuple(sorted({float(t["factor"]) for t in trials}))
        tabulate_all(trials, factors, args)
        return 0
    factors = (1.0, *(float(f) for f in args.factors.split(",")))
    args.jobs = max(args.jobs, args.repeats)
    t0 = time.monotonic()
    trials = collect(args, factors)
    print(
        f"{args.rounds} rounds, {args.mpi}, sizes {args.sizes}, {args.jobs} jobs per run, "
        f"{time.monotonic() - t0:.0f} s"
    )
    if args.dump:  # first: the tables take minutes of bootstrap
        args.dump.write_text(
            json.dumps(
                [{**t, "base": t["base"].to_json(), "cur": t["cur"].to_json()} for t in trials]
            )
        )
    tabulate_all(trials, factors, args)
    return 0


def tabulate_all(
    trials: list[dict[str, Any]], factors: tuple[float, ...], args: argparse.Namespace
) -> None:
    """The pooled-series table of every run's jobs; with job boundaries recorded, the
    stored-mode replay with adaptive repeats too."""
    jobs = max(len(t["cur"].extra.get("job_sizes") or [1]) for t in trials)
    if jobs > args.repeats:
        tabulate_adaptive(trials, factors, args.repeats, jobs)
    else:
        tabulate(trials, factors)


if __name__ == "__main__":
    sys.exit(main())
