"""Realistic synthetic results, to look at the reports without a cluster.

    python -m pytest_hpccomm.report.demo OUTDIR   # writes every report into OUTDIR

The verdicts here come from a toy judge (Mann-Whitney U + a normal-approximation CI) whose
messages are worded like the verdict engine's, not from the engine itself: good enough to
exercise every outcome the reports must show, and independent of the engine's evolution.
"""

from __future__ import annotations

import datetime as dt
import sys
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import mannwhitneyu

from pytest_hpccomm.baselines.verdict import Outcome, Verdict
from pytest_hpccomm.measure.measurement import Direction, Measurement
from pytest_hpccomm.baselines.result import RunResult

SIZES = [1 << i for i in range(23)]  # OSU's default sweep: 1 B .. 4 MiB
FINGERPRINT: dict[str, Any] = {
    "system": "demo-ib-2node", "host": "cn042", "kernel": "6.1.0-28-amd64",
    "cpu": "AMD EPYC 7713 64-Core", "hca": "mlx5_0 ConnectX-6 HDR 200 Gb/s fw 20.39.1002",
    "mpi": "Open MPI 5.0.6 (ucx 1.17.0)", "python": "3.11.7",
}


def _judge(cur: np.ndarray, base: np.ndarray | None, direction: Direction, tol: float,
           unit: str, name: str) -> Verdict:
    med = float(np.median(cur))
    if base is None:
        return Verdict(Outcome.NEW, med, None, None, None, None, None, tol,
                       f"new: {name}: median {med:.4g} {unit} (n={len(cur)}), no baseline")
    bmed = float(np.median(base))
    ratio = med / bmed
    rel_se = float(np.hypot(np.std(cur) / med, np.std(base) / bmed) / np.sqrt(len(cur)) * 1.25)
    lo, hi = ratio * (1 - 1.96 * rel_se), ratio * (1 + 1.96 * rel_se)
    worse = "greater" if direction is Direction.LOWER_IS_BETTER else "less"
    p = float(mannwhitneyu(cur, base, alternative=worse).pvalue)
    effect = ratio - 1 if direction is Direction.LOWER_IS_BETTER else 1 - ratio
    cv = float(np.std(cur) / med)
    text = (f"{name}: median {med:.4g} {unit} vs baseline {bmed:.4g} {unit} "
            f"(ratio {ratio:.3f}, 95% CI {lo:.3f}–{hi:.3f}, p={p:.2g}, tolerance {tol:.0%})")
    if cv > 0.25:
        return Verdict(Outcome.INCONCLUSIVE, med, bmed, ratio, lo, hi, p, tol,
                       f"inconclusive: {text}; too noisy (cv {cv:.0%})")
    if effect > tol and p < 0.01:
        return Verdict(Outcome.REGRESSION, med, bmed, ratio, lo, hi, p, tol,
                       f"regression: {text}")
    if -effect > tol:
        return Verdict(Outcome.IMPROVEMENT, med, bmed, ratio, lo, hi, p, tol,
                       f"improvement: {text}")
    return Verdict(Outcome.PASS, med, bmed, ratio, lo, hi, p, tol, f"pass: {text}")


def _result(rng: np.random.Generator, stack: str, bench: str, metric: str, params: dict[str, Any],
            true: float, unit: str, direction: Direction, *, cv: float = 0.03, shift: float = 1.0,
            baseline: bool = True, n: int = 30, tol: float = 0.05) -> RunResult:
    def draw(centre: float) -> np.ndarray:
        return centre * rng.lognormal(0.0, cv, n)

    cur = draw(true * shift)
    base = draw(true) if baseline else None
    m = Measurement(stack=stack, benchmark=bench, params=params, samples=tuple(cur.tolist()),
                    unit=unit, direction=direction, warmup_discarded=10, metric=metric,
                    tolerance=tol)
    suite = {"mpi": "suites/mpi/test_perf_osu.py", "grpc": "suites/grpc/test_perf_grpc.py"}
    nodeid = f"{suite.get(stack, 'suites/x.py')}::test_{bench}"
    return RunResult(nodeid=nodeid, system=FINGERPRINT["system"], fabric="ib", measurement=m,
                     verdict=_judge(cur, base, direction, tol, unit,
                                    " ".join([bench, *(f"{k}={v}" for k, v in
                                                       sorted(params.items()))])),
                     fingerprint=FINGERPRINT)


def demo_results(seed: int = 7) -> list[RunResult]:
    """OSU latency 1 B–4 MiB (one regression, one improvement, the top sizes NEW), OSU bandwidth
    (one inconclusive), nccl-style allreduce busbw for 2 and 4 ranks, a size-less barrier."""
    rng = np.random.default_rng(seed)
    lo, hi = Direction.LOWER_IS_BETTER, Direction.HIGHER_IS_BETTER
    out: list[RunResult] = []
    for s in SIZES:
        lat = 1.05 + s / 11500.0 + (0.35 if s > 8192 else 0.0)  # µs: eager→rendezvous step
        shift = {8192: 1.31, 65536: 0.84}.get(s, 1.0)
        out.append(_result(rng, "mpi", "osu_latency", "latency", {"size": s, "ranks": 2}, lat,
                           "us", lo, shift=shift, baseline=s < (1 << 21)))
        bw = 12000.0 * s / (s + 6000.0)  # MB/s, half of peak at ~6 KB
        noisy = s == 512
        out.append(_result(rng, "mpi", "osu_bw", "bandwidth", {"size": s, "ranks": 2}, bw,
                           "MB/s", hi, cv=0.35 if noisy else 0.02))
    for ranks in (2, 4):
        for s in SIZES[10::2]:
            busbw = 9.5 * s / (s + 65536.0) * (1.0 if ranks == 2 else 0.92)
            out.append(_result(rng, "mpi", "allreduce", "busbw", {"size": s, "ranks": ranks},
                               busbw, "GB/s", hi, baseline=ranks == 2))
    for ranks in (2, 4, 8):
        out.append(_result(rng, "mpi", "osu_barrier", "latency", {"ranks": ranks},
                           1.6 * np.log2(ranks), "us", lo, baseline=ranks != 8,
                           shift=1.22 if ranks == 4 else 1.0))
    return out


def demo_session() -> dict[str, Any]:
    start = dt.datetime(2025, 3, 14, 2, 0, 5, tzinfo=dt.timezone.utc)
    return {"system": FINGERPRINT["system"], "fabric": "ib", "profile": "full",
            "started": start, "finished": start + dt.timedelta(minutes=17, seconds=42),
            "fingerprint": FINGERPRINT}


def main(argv: list[str] | None = None) -> int:
    from pytest_hpccomm.report.html import write_html_report
    from pytest_hpccomm.report.markdown import markdown_summary
    from pytest_hpccomm.report.results_json import write_pytest_benchmark_json, write_results
    from pytest_hpccomm.report.terminal import summary_table

    args = sys.argv[1:] if argv is None else argv
    out = Path(args[0] if args else "hpccomm-demo-report")
    results, session = demo_results(), demo_session()
    write_html_report(out / "report.html", results, session)
    write_results(out / "results.json", results, session)
    write_pytest_benchmark_json(out / "pytest-benchmark.json", results, None, None)
    (out / "summary.md").write_text(markdown_summary(results, session), encoding="utf-8")
    print("\n".join(summary_table(results)))
    print(f"reports in {out}/")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
