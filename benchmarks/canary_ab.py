"""The paired A/B gate's false alarms and detection power on real jobs of this machine.

Not a test: a script (`benchmarks/canary.py --ab ...` runs it). One long sequence of real
MPI latency jobs (Open MPI, TCP over loopback, the suite's own driver and contention guard):
each round runs one job of the base and one job of the candidate per canary factor (1.0 =
the same build again, the false-alarm condition; 1.02, 1.05, 1.10 = the candidate slowed by
the canary), in a shuffled order. The rounds are then cut into disjoint windows of k rounds;
each window is one paired session, and each (window, size, factor) one trial judged by the
shipped rule (baselines/paired.py) at each tolerance. So one sequence answers "how many rounds
does a 5 % change need on this machine, and what do they cost".

    .venv/bin/python benchmarks/canary.py --ab --rounds 120 [--windows 6,10,20]
        [--sizes 8:64K] [--mpi openmpi] [--factors 1.02,1.05,1.10] [--dump ab.json]
    .venv/bin/python benchmarks/canary.py --ab --stack grpc --rounds 60 [--windows 6,10,20]

With --stack grpc each factor is one real paired pytest session of `--rounds` rounds (the
native peer against itself, TF-gRPC-Bench p2p latency), windowed the same way.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import paired_session  # benchmarks/paired_session.py (scripts run from benchmarks/)

from hpccomm_suites import DIR as SUITES_DIR
from pytest_hpccomm.baselines.paired import judge_paired
from pytest_hpccomm.baselines.verdict import Outcome
from pytest_hpccomm.measure.measurement import Direction, Measurement
from pytest_hpccomm.measure.sizes import parse_size_spec
from pytest_hpccomm.proc.cpu_share import QuietRetry
from pytest_hpccomm.stacks.mpi.driver import SweepSettings, measurements, run_sweep
from pytest_hpccomm.stacks.mpi.env import resolve

TOLERANCES = (0.02, 0.05, 0.10)
ROOT = Path(__file__).resolve().parents[1]
GRPC_SUITE = SUITES_DIR / "grpc" / "test_perf_tf_grpc_bench.py"
BASE = "base"


def collect(args: argparse.Namespace, factors: tuple[float, ...]) -> dict[str, Any]:
    """{"sizes": [...], "jobs": {label: [[median per size] per round]}, "seconds": wall}."""
    runtime = resolve(args.mpi)
    sizes = parse_size_spec(args.sizes)
    settings = SweepSettings.for_profile("quick")
    retry = QuietRetry()
    labels = [BASE, *(str(f) for f in factors)]
    jobs: dict[str, list[list[float]]] = {label: [] for label in labels}
    rng = random.Random(args.seed)
    t0 = time.monotonic()
    for rnd in range(args.rounds):
        order = list(labels)
        rng.shuffle(order)
        for label in order:
            slowdown = 1.0 if label == BASE else float(label)
            sweep, _ = retry.run(
                lambda: run_sweep(runtime, "loopback", "osu_latency", sizes, settings, slowdown),
                lambda s: s.disturbed,
            )
            jobs[label].append(
                [
                    statistics.median(measurements(sweep, "osu_latency", s, {})[0].samples)
                    for s in sizes
                ]
            )
        if (rnd + 1) % 10 == 0:
            print(
                f"round {rnd + 1}/{args.rounds} ({time.monotonic() - t0:.0f} s, "
                f"{retry.extra_runs} disturbed jobs re-run)",
                file=sys.stderr,
            )
    return {
        "jobs": jobs,
        "seconds": time.monotonic() - t0,
        "n_jobs": args.rounds * len(labels),
        "reruns": retry.extra_runs,
        "what": f"{args.mpi} osu_latency {sizes[0]} B-{sizes[-1]} B, TCP over loopback; "
        f"one base job per round shared by the factors",
    }


def _side(medians: list[float], unit: str, lower_better: bool) -> Measurement:
    direction = Direction.LOWER_IS_BETTER if lower_better else Direction.HIGHER_IS_BETTER
    return Measurement(
        stack="ab",
        benchmark="point",
        params={},
        samples=tuple(medians),
        unit=unit,
        direction=direction,
        extra={"job_medians": medians},
    )


def pairs_of(data: dict[str, Any]) -> dict[float, tuple[list[list[float]], list[list[float]]]]:
    """factor -> (base rounds, candidate rounds), each round a list of job medians per point.
    The MPI study shares one base job per round among the factors; the gRPC one has a session
    (with its own base) per factor."""
    if "pairs" in data:
        return {float(f): (p["base"], p["candidate"]) for f, p in data["pairs"].items()}
    jobs = data["jobs"]
    return {float(k): (jobs[BASE], v) for k, v in jobs.items() if k != BASE}


def tabulate(data: dict[str, Any], windows: list[int]) -> None:
    pairs = pairs_of(data)
    factors = sorted(pairs)
    rounds = min(len(b) for b, _ in pairs.values())
    points = len(pairs[factors[0]][0][0])
    n_jobs = data.get("n_jobs") or sum(len(v) for v in data["jobs"].values())
    what = data.get("what") or f"{data['mpi']} osu_latency, TCP over loopback"
    per_job = data["seconds"] / max(1, n_jobs)
    print(
        f"\n{what}: {rounds} rounds, {n_jobs} jobs in "
        f"{data['seconds'] / 60:.1f} min ({per_job:.1f} s per job), {points} points, "
        f"{data.get('reruns', 0)} disturbed jobs re-run\n"
    )
    print(
        "| rounds (job pairs) | cost per session | tolerance | trials per condition | "
        "false alarms (A vs A) | inconclusive (A vs A) | "
        + " | ".join(f"{f - 1:.0%} caught" for f in factors if f != 1.0)
        + " |"
    )
    print("|---" * (6 + sum(f != 1.0 for f in factors)) + "|")
    for k in windows:
        for tol in TOLERANCES:
            counts: dict[float, dict[Outcome, int]] = defaultdict(lambda: defaultdict(int))
            for f in factors:
                base_rounds, cand_rounds = pairs[f]
                for w in range(rounds // k):
                    span = slice(w * k, (w + 1) * k)
                    for i in range(points):
                        base = _side([r[i] for r in base_rounds[span]], "us", True)
                        cand = _side([r[i] for r in cand_rounds[span]], "us", True)
                        counts[f][judge_paired(cand, base, tol).outcome] += 1

            def pct(f: float, o: Outcome) -> str:
                c = counts[f]
                return f"{100 * c[o] / max(1, sum(c.values())):.1f} %"

            n = sum(counts[1.0].values())
            cost = 2 * k * per_job / 60
            print(
                f"| {k} | {cost:.1f} min | {tol:.0%} | {n} | {pct(1.0, Outcome.REGRESSION)} "
                f"| {pct(1.0, Outcome.INCONCLUSIVE)} | "
                + " | ".join(pct(f, Outcome.REGRESSION) for f in factors if f != 1.0)
                + " |"
            )


def collect_grpc(args: argparse.Namespace, factors: tuple[float, ...]) -> dict[str, Any]:
    """One real paired pytest session per factor (native peer against itself, system gRPC,
    TF-gRPC-Bench p2p latency, every scheme, raw mode, loopback), `--rounds` rounds each; the
    job medians of both sides come from the results JSON."""
    pairs: dict[str, dict[str, list[list[float]]]] = {}
    t0, jobs = time.monotonic(), 0
    order = list(factors)
    random.Random(args.seed).shuffle(order)
    for f in order:
        results, _seconds = paired_session.run(
            GRPC_SUITE,
            ["-k", "tf_grpc_p2p_latency", "--hpc-grpc-modes=raw"],
            "grpc",
            "system",
            "system",
            rounds=args.rounds,
            factor=f,
            timeout=60 * args.rounds + 600,
        )
        cand = [r["measurement"]["extra"]["job_medians"] for r in results]
        base = [r["measurement"]["extra"]["paired_base"]["job_medians"] for r in results]
        pairs[str(f)] = {
            "base": [list(x) for x in zip(*base)],
            "candidate": [list(x) for x in zip(*cand)],
        }
        jobs += 2 * args.rounds
        print(f"factor {f} done ({time.monotonic() - t0:.0f} s)", file=sys.stderr)
    return {
        "pairs": pairs,
        "seconds": time.monotonic() - t0,
        "n_jobs": jobs,
        "what": "gRPC native peer (system gRPC) tf_grpc_p2p_latency, 5 schemes, raw, "
        "loopback; a session per factor",
    }


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=120)
    ap.add_argument("--windows", default="6,10,20", help="rounds per simulated session")
    ap.add_argument("--sizes", default="8:64K")
    ap.add_argument("--mpi", default="openmpi")
    ap.add_argument("--stack", choices=("mpi", "grpc"), default="mpi")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--factors", default="1.02,1.05,1.10")
    ap.add_argument("--dump", type=Path, help="write every job's medians here (JSON)")
    ap.add_argument("--from-dump", type=Path, help="tabulate a --dump file instead of running")
    args = ap.parse_args(argv)
    windows = [int(w) for w in args.windows.split(",")]
    if args.from_dump:
        tabulate(json.loads(args.from_dump.read_text()), windows)
        return 0
    factors = (1.0, *(float(f) for f in args.factors.split(",")))
    data = collect(args, factors) if args.stack == "mpi" else collect_grpc(args, factors)
    if args.dump:
        args.dump.write_text(json.dumps(data))
    tabulate(data, windows)
    return 0
