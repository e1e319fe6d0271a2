"""The OSU items' plumbing behind the `mpi_osu` fixture (plugin.py): which benchmarks a session
selected, and the validated records of one (benchmark, size) point of a finished sweep."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any

import pytest

from pytest_hpccomm.measure.measurement import Measurement
from pytest_hpccomm.stacks.mpi.driver import Sweep, SweepFailed, measurements

FIXTURE = "mpi_osu"
BANDWIDTH = ("osu_bw", "osu_bibw", "osu_mbw_mr")  # undefined for 0-byte messages
ZERO_BYTES = "bandwidth of 0-byte messages is undefined (OSU starts at 1 B)"

Selected = dict[tuple[str, str], set[str]]  # (MPI, placement) -> benchmarks


def benchmark_of(item: pytest.Item) -> str | None:
    """The OSU benchmark an item runs: its `osu` parameter, else (a test of one benchmark,
    test_osu_barrier) its function's name without `test_`."""
    if FIXTURE not in getattr(item, "fixturenames", ()):
        return None
    params = _params(item)
    name = getattr(item, "originalname", "")
    bench = params.get("osu") or (
        name.removeprefix("test_") if name.startswith("test_osu_") else None
    )
    return str(bench) if bench else None


def _params(item: pytest.Item) -> dict[str, Any]:
    callspec = getattr(item, "callspec", None)  # only parametrized items have one
    return dict(callspec.params) if callspec is not None else {}


def selected(items: Iterable[pytest.Item]) -> Selected:
    """(MPI, placement) -> the benchmarks this session's items ask for, so one job runs just
    those (`-k osu_latency` must not pay for the other thirteen)."""
    chosen: Selected = defaultdict(set)
    for item in items:
        bench = benchmark_of(item)
        params = _params(item)
        mpi, placement = params.get("mpi_name"), params.get("hpc_placement")
        if bench and mpi and placement:
            chosen[(mpi, placement)].add(bench)
    return chosen


def records_of(
    benchmark: str, size: int, params: dict[str, str]
) -> Callable[[Sweep], list[Measurement]]:
    """records(sweep): the point's records, validation first (a wrong byte fails whatever the
    timing); a failed sweep or a validation error fails the item."""

    def records(sweep: Sweep) -> list[Measurement]:
        try:
            errors = sweep.errors_for(benchmark, size)
            ms = measurements(sweep, benchmark, size, params)
        except SweepFailed as exc:
            pytest.fail(str(exc), pytrace=False)
        if errors:
            pytest.fail("data validation failed: " + "; ".join(errors[:3]), pytrace=False)
        return ms

    return records
