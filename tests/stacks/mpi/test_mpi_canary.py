"""The canary reaches the MPI peer's timed regions: with --hpc-inject-slowdown F every timed
batch takes F times its own work, and the peer reports that work unstretched beside the
samples: the host's own speed in the same session, which tells a canary run whether its stretch
could show beyond the band (baselines/canary.py). Real Open MPI ranks over loopback: a
ping-pong, a window (a rate), a collective timed per operation and the barrier timed per batch.

Each batch is held to the stretch's definition (it spins until the region took F times its own
work): time >= F x work, rate <= work's rate / F. A plain job reports no unstretched work.
"""

from __future__ import annotations

import statistics

import pytest

from pytest_hpccomm.cluster.mpi import mpirun_path
from pytest_hpccomm.measure.measurement import UNSTRETCHED, Direction
from pytest_hpccomm.stacks.mpi.driver import SweepSettings, measurements, run_sweep
from pytest_hpccomm.stacks.mpi.env import resolve

FACTOR = 2.0
BENCHMARKS = ("osu_latency", "osu_bw", "osu_allreduce", "osu_barrier")
SIZE = 1024
SETTINGS = SweepSettings(
    batches=5,
    min_batches=5,
    budget=0.0,
    iterations=50,
    loops=2,
    coll_iterations=20,
    batch_bytes=1 << 20,
    warmup=5,
    window=16,
)
# float rounding between the peer's clock arithmetic and the unit conversion, nothing else
ROUNDING = 1e-9

pytestmark = pytest.mark.skipif(
    mpirun_path("openmpi") is None,
    reason="MPI environment 'openmpi' not created (ci/bootstrap.sh "
    "makes it: python -m pytest_hpccomm mpi create)",
)


def test_slowdown_stretches_every_batch_and_reports_its_own_work() -> None:
    runtime = resolve("openmpi")
    names = ",".join(BENCHMARKS)
    plain = run_sweep(runtime, "loopback", names, [SIZE], SETTINGS)
    canary = run_sweep(runtime, "loopback", names, [SIZE], SETTINGS, slowdown=FACTOR)
    for bench in BENCHMARKS:
        size = 0 if bench == "osu_barrier" else SIZE
        assert "unstretched" not in plain.point(bench, size), f"{bench}: a plain job stretched"
        assert UNSTRETCHED not in measurements(plain, bench, size, {})[0].extra
        p = canary.point(bench, size)
        record = measurements(canary, bench, size, {})[0]
        rate = record.direction is Direction.HIGHER_IS_BETTER
        ratios = [
            (u / s if rate else s / u) for s, u in zip(p["samples"], p["unstretched"], strict=True)
        ]
        assert len(ratios) == SETTINGS.batches, f"{bench}: {p}"
        assert min(ratios) >= FACTOR * (1 - ROUNDING), (
            f"{bench}: reported/unstretched per batch = {ratios}, never below {FACTOR} by the "
            "stretch's definition"
        )
        assert record.extra[UNSTRETCHED] == statistics.median(p["unstretched"]), record.extra
