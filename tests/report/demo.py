"""Realistic synthetic results for the report tests and for looking at the reports without a
cluster (test data, not part of the package):

    python -m tests.report.demo OUTDIR        # writes every report into OUTDIR
    python -m tests.report.demo OUTDIR --ci   # ~2,300 results, nearly all new, as
                                              # ci/run-suites.sh makes without baselines

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

from pytest_hpccomm.baselines.result import RunResult
from pytest_hpccomm.baselines.verdict import Outcome, Verdict
from pytest_hpccomm.measure.measurement import Direction, Measurement

SIZES = [1 << i for i in range(23)]  # OSU's default sweep: 1 B .. 4 MiB
FINGERPRINT: dict[str, Any] = {
    "system": "demo-ib-2node",
    "host": "cn042",
    "kernel": "6.1.0-28-amd64",
    "cpu": "AMD EPYC 7713 64-Core",
    "hca": "mlx5_0 ConnectX-6 HDR 200 Gb/s fw 20.39.1002",
    "mpi": "Open MPI 5.0.6 (ucx 1.17.0)",
    "python": "3.11.7",
}


def _judge(
    cur: np.ndarray, base: np.ndarray | None, direction: Direction, tol: float, unit: str, name: str
) -> Verdict:
    med = float(np.median(cur))
    if base is None:
        return Verdict(
            Outcome.NEW,
            med,
            None,
            None,
            None,
            None,
            None,
            tol,
            f"new: {name}: median {med:.4g} {unit} (n={len(cur)}), no baseline",
        )
    bmed = float(np.median(base))
    ratio = med / bmed
    rel_se = float(np.hypot(np.std(cur) / med, np.std(base) / bmed) / np.sqrt(len(cur)) * 1.25)
    lo, hi = ratio * (1 - 1.96 * rel_se), ratio * (1 + 1.96 * rel_se)
    worse = "greater" if direction is Direction.LOWER_IS_BETTER else "less"
    p = float(mannwhitneyu(cur, base, alternative=worse).pvalue)
    effect = ratio - 1 if direction is Direction.LOWER_IS_BETTER else 1 - ratio
    cv = float(np.std(cur) / med)
    text = (
        f"{name}: median {med:.4g} {unit} vs baseline {bmed:.4g} {unit} "
        f"(ratio {ratio:.3f}, 95% CI {lo:.3f}–{hi:.3f}, p={p:.2g}, tolerance {tol:.0%})"
    )
    if cv > 0.25:
        return Verdict(
            Outcome.INCONCLUSIVE,
            med,
            bmed,
            ratio,
            lo,
            hi,
            p,
            tol,
            f"inconclusive: {text}; too noisy (cv {cv:.0%})",
        )
    if effect > tol and p < 0.01:
        return Verdict(Outcome.REGRESSION, med, bmed, ratio, lo, hi, p, tol, f"regression: {text}")
    if -effect > tol:
        return Verdict(
            Outcome.IMPROVEMENT, med, bmed, ratio, lo, hi, p, tol, f"improvement: {text}"
        )
    return Verdict(Outcome.PASS, med, bmed, ratio, lo, hi, p, tol, f"pass: {text}")


def _result(
    rng: np.random.Generator,
    stack: str,
    bench: str,
    metric: str,
    params: dict[str, Any],
    true: float,
    unit: str,
    direction: Direction,
    *,
    cv: float = 0.03,
    shift: float = 1.0,
    baseline: bool = True,
    n: int = 30,
    tol: float = 0.05,
    extra: dict[str, Any] | None = None,
) -> RunResult:
    def draw(centre: float) -> np.ndarray:
        return centre * rng.lognormal(0.0, cv, n)

    cur = draw(true * shift)
    base = draw(true) if baseline else None
    m = Measurement(
        stack=stack,
        benchmark=bench,
        params=params,
        samples=tuple(cur.tolist()),
        unit=unit,
        direction=direction,
        warmup_discarded=10,
        metric=metric,
        tolerance=tol,
        extra=extra or {},
    )
    suite = {
        "mpi": "mpi/test_perf_osu.py",
        "grpc": "grpc/test_perf_tf_grpc_bench.py",
        "verbs": "verbs/test_perf_perftest.py",
        "tf": "tf/test_perf_tf.py",
        "horovod": "horovod/test_perf_horovod.py",
    }
    nodeid = f"hpccomm_suites/{suite.get(stack, 'x.py')}::test_{bench}"
    return RunResult(
        nodeid=nodeid,
        system=FINGERPRINT["system"],
        fabric="ib",
        measurement=m,
        verdict=_judge(
            cur,
            base,
            direction,
            tol,
            unit,
            " ".join([bench, *(f"{k}={v}" for k, v in sorted(params.items()))]),
        ),
        fingerprint=FINGERPRINT,
    )


def _mpi(rng: np.random.Generator) -> list[RunResult]:
    lo, hi = Direction.LOWER_IS_BETTER, Direction.HIGHER_IS_BETTER
    out: list[RunResult] = []
    for s in SIZES:
        lat = 1.05 + s / 11500.0 + (0.35 if s > 8192 else 0.0)  # µs: eager→rendezvous step
        shift = {8192: 1.31, 65536: 0.84}.get(s, 1.0)
        out.append(
            _result(
                rng,
                "mpi",
                "osu_latency",
                "latency",
                {"size": s, "ranks": 2},
                lat,
                "us",
                lo,
                shift=shift,
                baseline=s < (1 << 21),
            )
        )
        bw = 12000.0 * s / (s + 6000.0)  # MB/s, half of peak at ~6 KB
        noisy = s == 512
        out.append(
            _result(
                rng,
                "mpi",
                "osu_bw",
                "bandwidth",
                {"size": s, "ranks": 2},
                bw,
                "MB/s",
                hi,
                cv=0.35 if noisy else 0.02,
            )
        )
    for ranks in (2, 4):
        for s in SIZES[10::2]:
            busbw = 9.5 * s / (s + 65536.0) * (1.0 if ranks == 2 else 0.92)
            out.append(
                _result(
                    rng,
                    "mpi",
                    "allreduce",
                    "busbw",
                    {"size": s, "ranks": ranks},
                    busbw,
                    "GB/s",
                    hi,
                    baseline=ranks == 2,
                )
            )
    for ranks in (2, 4, 8):
        out.append(
            _result(
                rng,
                "mpi",
                "osu_barrier",
                "latency",
                {"ranks": ranks},
                1.6 * np.log2(ranks),
                "us",
                lo,
                baseline=ranks != 8,
                shift=1.22 if ranks == 4 else 1.0,
            )
        )
    return out


LINK = {"link_rate_gbps": 200.0, "link_rate_source": "sysfs mlx5_0 port 1 rate"}


def _verbs(rng: np.random.Generator) -> list[RunResult]:
    """perftest's ib_send_* over RC, 2 B–8 MiB; bandwidth in perftest's MB/s (2^20 B/s) with
    the link's rate, as the fabric reports it."""
    lo, hi = Direction.LOWER_IS_BETTER, Direction.HIGHER_IS_BETTER
    out: list[RunResult] = []
    for s in (1 << i for i in range(1, 24)):
        p = {"size": s, "connection": "RC"}
        out.append(
            _result(
                rng, "verbs", "ib_send_lat", "latency", p, 0.92 + s / 24000.0, "us", lo, cv=0.02
            )
        )
        out.append(
            _result(
                rng,
                "verbs",
                "ib_send_bw",
                "bandwidth",
                p,
                23000.0 * s / (s + 2500.0),
                "MB/s",
                hi,
                cv=0.01,
                extra=dict(LINK),
            )
        )
    return out


# one buffer per payload, sized to meet OSU's powers of two (--hpc-grpc-buffers 1
# --hpc-grpc-small 8 --hpc-grpc-medium 8K): random drew a medium buffer, skew a large one
GRPC_BYTES = {
    "uniform-small": 8,
    "uniform-medium": 8192,
    "uniform-large": 1 << 20,
    "random": 8192,
    "skew": 1 << 20,
}
GRPC_COST = {
    "native": (28.0, 1500.0),
    "python": (450.0, 700.0),  # µs per RPC, B per µs
    "python-aio": (520.0, 650.0),
}


def _grpc(
    rng: np.random.Generator,
    *,
    peers: tuple[str, ...] = ("native", "python"),
    placements: tuple[str, ...] = ("loopback",),
    baseline: bool = True,
    changes: bool = True,
    n: int = 30,
) -> list[RunResult]:
    """TF-gRPC-Bench's four benchmarks x five payload schemes per peer kind, mode and
    placement, with the params the suite records."""
    lo, hi = Direction.LOWER_IS_BETTER, Direction.HIGHER_IS_BETTER
    out: list[RunResult] = []
    for placement in placements:
        for peer in peers:
            for mode in ("raw", "serialized"):
                base, speed = GRPC_COST[peer]
                if mode == "serialized":
                    base, speed = base * 1.1, speed * 0.8
                for scheme, b in GRPC_BYTES.items():
                    p: dict[str, Any] = {
                        "scheme": scheme,
                        "buffers": 1,
                        "bytes": b,
                        "runtime": "stock",
                        "peer": peer,
                        "mode": mode,
                        "placement": placement,
                    }
                    ps = {**p, "workers": 2, "servers": 2}
                    rpc = base + 2 * b / speed
                    slow = changes and (peer, mode, scheme) == (
                        "python",
                        "serialized",
                        "uniform-medium",
                    )

                    def one(
                        bench: str,
                        metric: str,
                        params: dict[str, Any],
                        value: float,
                        unit: str,
                        d: Direction,
                        shift: float = 1.0,
                    ) -> RunResult:
                        return _result(
                            rng,
                            "grpc",
                            bench,
                            metric,
                            params,
                            value,
                            unit,
                            d,
                            shift=shift,
                            baseline=baseline,
                            n=n,
                        )

                    out += [
                        one(
                            "tf_grpc_p2p_latency",
                            "latency",
                            p,
                            rpc,
                            "us",
                            lo,
                            shift=1.25 if slow else 1.0,
                        ),
                        one(
                            "tf_grpc_p2p_bandwidth",
                            "bandwidth",
                            p,
                            b / (base / 2 + b / speed),
                            "MB/s",
                            hi,
                        ),
                        one("tf_grpc_ps_throughput", "rate", ps, 4e6 / rpc, "rpc/s", hi),
                        one("tf_grpc_mimic_step", "step time", ps, (8 * rpc) / 1000.0, "ms", lo),
                    ]
    return out


def _tf(
    rng: np.random.Generator,
    placements: tuple[str, ...] = ("loopback",),
    baseline: bool = True,
    n: int = 30,
) -> list[RunResult]:
    """RecvTensor latency and bandwidth at the powers of 4, as hpccomm_suites/tf records them."""
    out: list[RunResult] = []
    for placement in placements:
        for s in SIZES[::2]:
            p: dict[str, Any] = {"size": s, "placement": placement, "tasks": "ps:1,worker:1"}
            lat = 880.0 + s / 900.0
            out.append(
                _result(
                    rng,
                    "tf",
                    "tf_recv_tensor",
                    "latency",
                    p,
                    lat,
                    "us",
                    Direction.LOWER_IS_BETTER,
                    baseline=baseline,
                    n=n,
                )
            )
            out.append(
                _result(
                    rng,
                    "tf",
                    "tf_recv_tensor",
                    "bandwidth",
                    {**p, "metric": "bandwidth"},
                    s / lat,
                    "MB/s",
                    Direction.HIGHER_IS_BETTER,
                    baseline=baseline,
                    n=n,
                )
            )
    return out


def _horovod(
    rng: np.random.Generator,
    controllers: tuple[str, ...] = ("mpi",),
    baseline: bool = True,
    n: int = 30,
) -> list[RunResult]:
    """hvd_allreduce latency and busbw (2 ranks: busbw = algbw) from 4 B."""
    out: list[RunResult] = []
    for controller in controllers:
        for s in SIZES[2::2]:
            p: dict[str, Any] = {
                "size": s,
                "ranks": 2,
                "controller": controller,
                "mpi": "openmpi",
                "placement": "loopback",
            }
            lat = 1076.0 + s / 2400.0
            out.append(
                _result(
                    rng,
                    "horovod",
                    "hvd_allreduce",
                    "latency",
                    p,
                    lat,
                    "us",
                    Direction.LOWER_IS_BETTER,
                    baseline=baseline,
                    n=n,
                )
            )
            out.append(
                _result(
                    rng,
                    "horovod",
                    "hvd_allreduce",
                    "busbw",
                    {**p, "metric": "busbw"},
                    s / lat / 1000.0,
                    "GB/s",
                    Direction.HIGHER_IS_BETTER,
                    baseline=baseline,
                    n=n,
                )
            )
    return out


def demo_results(seed: int = 7) -> list[RunResult]:
    """OSU latency 1 B–4 MiB (one regression, one improvement, the top sizes NEW), OSU bandwidth
    (one inconclusive), nccl-style allreduce busbw for 2 and 4 ranks, a size-less barrier;
    perftest's send latency/bandwidth with the link's rate; TF-gRPC-Bench (native and Python
    peers, raw and serialized; one regression); TF's RecvTensor; Horovod's allreduce."""
    rng = np.random.default_rng(seed)
    return _mpi(rng) + _verbs(rng) + _grpc(rng) + _tf(rng) + _horovod(rng)


def ci_results(seed: int = 11) -> list[RunResult]:
    """What ci/run-suites.sh gives without baselines (~2,300 results, every one new): OSU's
    point-to-point and collective sweeps for two MPIs on three placements, TF-gRPC-Bench for
    three peer kinds on two placements, TF and Horovod."""
    rng = np.random.default_rng(seed)
    lo, hi = Direction.LOWER_IS_BETTER, Direction.HIGHER_IS_BETTER
    out: list[RunResult] = []
    for mpi in ("openmpi", "mpich"):
        for placement in ("loopback", "netns", "hosts"):
            for s in SIZES:
                p: dict[str, Any] = {"mpi": mpi, "placement": placement, "ranks": 2, "size": s}
                lat = 1.3 + s / 9000.0
                for bench, metric, v, unit, d in (
                    ("osu_latency", "latency", lat, "us", lo),
                    ("osu_multi_lat", "latency", lat * 1.1, "us", lo),
                    ("osu_bw", "bandwidth", s / lat, "MB/s", hi),
                    ("osu_bibw", "bandwidth", 1.7 * s / lat, "MB/s", hi),
                    ("osu_mbw_mr", "bandwidth", s / lat, "MB/s", hi),
                ):
                    out.append(
                        _result(rng, "mpi", bench, metric, p, v, unit, d, baseline=False, n=10)
                    )
                out.append(
                    _result(
                        rng,
                        "mpi",
                        "osu_mbw_mr",
                        "message_rate",
                        {**p, "metric": "message_rate"},
                        1e6 / lat,
                        "msg/s",
                        hi,
                        baseline=False,
                        n=10,
                    )
                )
                for coll in ("osu_allreduce", "osu_allgather", "osu_bcast", "osu_reduce"):
                    out.append(
                        _result(
                            rng, "mpi", coll, "latency", p, 2 * lat, "us", lo, baseline=False, n=10
                        )
                    )
                    out.append(
                        _result(
                            rng,
                            "mpi",
                            coll,
                            "busbw",
                            {**p, "metric": "busbw"},
                            s / (2 * lat) / 1000.0,
                            "GB/s",
                            hi,
                            baseline=False,
                            n=10,
                        )
                    )
    out += _grpc(
        rng,
        peers=("native", "python", "python-aio"),
        placements=("loopback", "netns"),
        baseline=False,
        changes=False,
        n=10,
    )
    out += _tf(rng, placements=("loopback", "netns"), baseline=False, n=10)
    out += _horovod(rng, controllers=("mpi", "gloo"), baseline=False, n=10)
    return out


def demo_session() -> dict[str, Any]:
    start = dt.datetime(2025, 3, 14, 2, 0, 5, tzinfo=dt.timezone.utc)
    return {
        "system": FINGERPRINT["system"],
        "fabric": "ib",
        "profile": "full",
        "started": start,
        "finished": start + dt.timedelta(minutes=17, seconds=42),
        "fingerprint": FINGERPRINT,
    }


def main(argv: list[str] | None = None) -> int:
    from pytest_hpccomm.report.html import write_html_report
    from pytest_hpccomm.report.markdown import markdown_summary
    from pytest_hpccomm.report.results_json import write_pytest_benchmark_json, write_results
    from pytest_hpccomm.report.terminal import summary_table

    args = sys.argv[1:] if argv is None else argv
    ci = "--ci" in args
    paths = [a for a in args if a != "--ci"]
    out = Path(paths[0] if paths else "hpccomm-demo-report")
    results, session = (ci_results() if ci else demo_results()), demo_session()
    write_html_report(out / "report.html", results, session)
    write_results(out / "results.json", results, session)
    write_pytest_benchmark_json(out / "pytest-benchmark.json", results, None, None)
    md = markdown_summary(results, session)
    (out / "summary.md").write_text(md, encoding="utf-8")
    lines = summary_table(results)
    print("\n".join(lines))
    print(
        f"reports in {out}/: {len(results)} results, terminal {len(lines)} lines, "
        f"summary.md {len(md):,} characters, report.html "
        f"{(out / 'report.html').stat().st_size:,} bytes"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
