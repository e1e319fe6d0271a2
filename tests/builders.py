"""Measurements and judged results the plugin's own tests build (one place, so a field added
to Measurement or RunResult is added here once).  Verdicts in make_result are constructed
directly: report and history tests only present what the verdict engine decided."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_hpccomm.baselines.result import RunResult
from pytest_hpccomm.baselines.verdict import Outcome, Verdict
from pytest_hpccomm.measure.measurement import Direction, Measurement

FINGERPRINT: dict[str, Any] = {
    "device": "mlx5_0",
    "firmware": "20.31.1014",
    "link_rate_gbps": 100,
    "mtu": 4096,
    "kernel": "6.1.0-18-amd64",
    "cpu_model": "AMD EPYC 7763",
    "hostname": "node01",
    "stacks": {"mpi": {"vendor": "Open MPI", "version": "5.0.3"}},
}

REPORT_FINGERPRINT: dict[str, Any] = {"system": "testsys", "host": "h0", "kernel": "6.1.0"}


def make_measurement(
    samples: tuple[float, ...] | list[float],
    *,
    benchmark: str = "osu_latency",
    size: int = 8,
    stack: str = "mpi",
    unit: str = "us",
    direction: Direction = Direction.LOWER_IS_BETTER,
    tolerance: float | None = None,
    job_sizes: list[int] | None = None,
) -> Measurement:
    return Measurement(
        stack=stack,
        benchmark=benchmark,
        params={"size": size, "ranks": 2},
        samples=tuple(float(x) for x in samples),
        unit=unit,
        direction=direction,
        metric="latency" if direction is Direction.LOWER_IS_BETTER else "bandwidth",
        tolerance=tolerance,
        extra={} if job_sizes is None else {"job_sizes": job_sizes},
    )


def make_result(
    stack: str = "mpi",
    benchmark: str = "osu_latency",
    params: Any = None,
    samples: tuple[float, ...] = (1.0, 1.1, 0.9, 1.05, 0.95),
    unit: str = "us",
    direction: Direction = Direction.LOWER_IS_BETTER,
    outcome: Outcome = Outcome.PASS,
    baseline: float | None = 1.0,
    metric: str = "latency",
    message: str = "",
    nodeid: str | None = None,
    fingerprint: Any = None,
    tolerance: float = 0.05,
    system: str = "testsys",
    fabric: str = "ethernet",
    reason: str = "",
) -> RunResult:
    params = {"size": 8, "ranks": 2} if params is None else params
    current = sorted(samples)[len(samples) // 2] if samples else float("nan")
    ratio = None if baseline is None else current / baseline
    m = Measurement(
        stack=stack,
        benchmark=benchmark,
        params=params,
        samples=samples,
        unit=unit,
        direction=direction,
        warmup_discarded=2,
        metric=metric,
    )
    v = Verdict(
        outcome=outcome,
        current_median=current,
        baseline_median=baseline,
        ratio=ratio,
        ci_low=None if ratio is None else ratio * 0.97,
        ci_high=None if ratio is None else ratio * 1.03,
        p_value=None if baseline is None else 0.004,
        tolerance=tolerance,
        message=message or f"{outcome.value}: median {current:g} {unit}",
        reason=reason,
    )
    return RunResult(
        nodeid=nodeid or f"hpccomm_suites/{stack}/test_perf.py::test_{benchmark}",
        system=system,
        fabric=fabric,
        measurement=m,
        verdict=v,
        fingerprint=REPORT_FINGERPRINT if fingerprint is None else fingerprint,
    )


def usage_error_line(result: pytest.RunResult) -> str:
    """The one line of a pytest usage error (exit 4): no argparse usage dump, no traceback."""
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str() + result.stderr.str()
    lines = [line for line in result.stderr.lines if line.strip()]
    assert len(lines) == 1, lines
    return lines[0]
