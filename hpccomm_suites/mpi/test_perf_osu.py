"""OSU Micro-Benchmarks over MPI, each (benchmark, size) its own judged item.

Point-to-point: osu_latency, osu_bw, osu_bibw (ranks 0 and 1), osu_multi_lat and osu_mbw_mr
(ranks/2 pairs). Collectives: osu_allreduce, osu_reduce, osu_bcast, osu_allgather,
osu_alltoall, osu_reduce_scatter, osu_gather, osu_scatter (latency = average over ranks, as
OSU prints it) and osu_barrier (no size). Collectives and multi-pair benchmarks use 2 ranks on
loopback and one rank per virtual host (--hpc-vhosts) on netns. Definitions: see the peer
(pytest_hpccomm/stacks/mpi/peer/__main__.py); what each item records: see driver.measurements
(collectives add nccl-tests' busbw, osu_mbw_mr its message rate, as second records).

Sampling (driver.SweepSettings): one sample per batch between barriers, warm-up (OSU's skip,
at most one batch) discarded. Quick: at least 10 batches per size, up to 30 while the size has
used less than 0.1 s; a batch holds up to 200 ping-pongs, 10 windows of 64 or 50 collective
operations, fewer once it moves 1 MiB (per window slot for osu_bw/bibw/mbw_mr). Full: 20-100
batches, 2 s, 16 MiB. Data is validated as OSU's -c does, every batch: a wrong byte fails the
item even when the timing would pass. All selected benchmarks of one (MPI, placement) run in
one MPI job (two on netns with more than 2 hosts: two-rank benchmarks apart); a job added for
an undecided point (adaptive repeats) runs that point's benchmark alone. The `mpi_osu`
fixture (stacks/mpi/fixtures.py) selects, launches, pools and judges; a test names the points.
"""

from __future__ import annotations

import pytest

from pytest_hpccomm.stacks.mpi.plugin import OsuRun
from pytest_hpccomm.stacks.mpi.wire import COLLECTIVES, MULTI_PAIR, PAIR

pytestmark = [pytest.mark.perf, pytest.mark.stack("mpi")]  # every fabric: see transport.py

P2P = PAIR + MULTI_PAIR
SIZED_COLLECTIVES = tuple(c for c in COLLECTIVES if c != "osu_barrier")


@pytest.mark.parametrize("osu", P2P)
def test_osu_p2p(osu: str, hpc_size: int, mpi_osu: OsuRun) -> None:
    mpi_osu(osu, hpc_size)  # 0-byte points of the bandwidth benchmarks skip: undefined


@pytest.mark.parametrize("osu", SIZED_COLLECTIVES)
def test_osu_collective(osu: str, hpc_size: int, mpi_osu: OsuRun) -> None:
    mpi_osu(osu, hpc_size)


def test_osu_barrier(mpi_osu: OsuRun) -> None:
    mpi_osu("osu_barrier", 0)
