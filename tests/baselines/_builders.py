"""Builders shared by the baseline tests."""

from __future__ import annotations

from typing import Any

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


def make_measurement(
    samples: tuple[float, ...] | list[float],
    *,
    benchmark: str = "osu_latency",
    size: int = 8,
    stack: str = "mpi",
    unit: str = "us",
    direction: Direction = Direction.LOWER_IS_BETTER,
    tolerance: float | None = None,
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
    )
