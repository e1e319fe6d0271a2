"""OSU Micro-Benchmarks point-to-point set, each (benchmark, size) its own judged item.

Definitions: osu_latency (half round trip of a blocking ping-pong) and osu_bw (a window of 64
non-blocking sends, one acknowledgement; MB/s = 10^6 B/s). Data is validated as OSU's -c does:
a wrong byte fails the item even when the timing would pass.
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_hpccomm.measure.record import Direction, Measurement
from pytest_hpccomm.stacks.mpi.driver import SweepFailed
from pytest_hpccomm.stacks.mpi.plugin import MpiSweeps
from pytest_hpccomm.stacks.mpi.runtime import MpiRuntime

pytestmark = [pytest.mark.perf, pytest.mark.stack("mpi"),
              pytest.mark.fabric("ethernet", "ipoib")]

OSU = {
    "osu_latency": ("latency", "us", Direction.LOWER_IS_BETTER),
    "osu_bw": ("bandwidth", "MB/s", Direction.HIGHER_IS_BETTER),
}


def cluster_for(placement: str, request: pytest.FixtureRequest) -> Any:
    return request.getfixturevalue("hpc_virtual_cluster") if placement == "netns" else None


@pytest.mark.parametrize("osu", sorted(OSU))
def test_osu_p2p(osu: str, hpc_size: int, hpc_placement: str, mpi_runtime: MpiRuntime,
                 mpi_sweeps: MpiSweeps, hpc_record: Any, request: pytest.FixtureRequest) -> None:
    try:
        sweep = mpi_sweeps.get(mpi_runtime, hpc_placement, osu,
                               cluster_for(hpc_placement, request))
    except SweepFailed as exc:
        pytest.fail(str(exc), pytrace=False)
    errors = sweep.errors_for(hpc_size)
    assert not errors, f"data validation failed: {errors[:3]}"
    point = sweep.by_size[hpc_size]
    metric, unit, direction = OSU[osu]
    hpc_record(Measurement(
        stack="mpi", benchmark=osu,
        params={"size": hpc_size, "ranks": sweep.doc["ranks"], "mpi": mpi_runtime.name,
                "placement": hpc_placement},
        samples=tuple(point["samples"]), unit=unit, direction=direction,
        warmup_discarded=int(point["warmup"]), metric=metric,
        extra={"iterations_per_sample": point["iterations"]}),
        sweep.runtime_fingerprint)
