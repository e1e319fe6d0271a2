"""Synthetic RunResults for the report tests: verdicts are constructed directly (fakes of the
verdict engine), because the reports only present what the engine decided."""

from __future__ import annotations

from typing import Any, Callable

import pytest

from pytest_hpccomm.baselines.verdict import Outcome, Verdict
from pytest_hpccomm.measure.measurement import Direction, Measurement
from pytest_hpccomm.baselines.result import RunResult
from pytest_hpccomm.report.demo import demo_results, demo_session

FP = {"system": "testsys", "host": "h0", "kernel": "6.1.0"}

MakeResult = Callable[..., RunResult]


def make_result(stack: str = "mpi", benchmark: str = "osu_latency", params: Any = None,
                samples: tuple[float, ...] = (1.0, 1.1, 0.9, 1.05, 0.95),
                unit: str = "us", direction: Direction = Direction.LOWER_IS_BETTER,
                outcome: Outcome = Outcome.PASS, baseline: float | None = 1.0,
                metric: str = "latency", message: str = "", nodeid: str | None = None,
                fingerprint: Any = None, tolerance: float = 0.05) -> RunResult:
    params = {"size": 8, "ranks": 2} if params is None else params
    current = sorted(samples)[len(samples) // 2] if samples else float("nan")
    ratio = None if baseline is None else current / baseline
    m = Measurement(stack=stack, benchmark=benchmark, params=params, samples=samples, unit=unit,
                    direction=direction, warmup_discarded=2, metric=metric)
    v = Verdict(outcome=outcome, current_median=current, baseline_median=baseline, ratio=ratio,
                ci_low=None if ratio is None else ratio * 0.97,
                ci_high=None if ratio is None else ratio * 1.03,
                p_value=None if baseline is None else 0.004, tolerance=tolerance,
                message=message or f"{outcome.value}: median {current:g} {unit}")
    return RunResult(nodeid=nodeid or f"suites/{stack}/test_perf.py::test_{benchmark}",
                     system="testsys", fabric="ethernet", measurement=m, verdict=v,
                     fingerprint=FP if fingerprint is None else fingerprint)


@pytest.fixture
def result() -> MakeResult:
    return make_result


@pytest.fixture(scope="session")
def demo() -> list[RunResult]:
    return demo_results()


@pytest.fixture
def session() -> dict[str, Any]:
    return demo_session()
