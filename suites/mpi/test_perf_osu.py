"""OSU Micro-Benchmarks over MPI, each (benchmark, size) its own judged item.

Point-to-point: osu_latency, osu_bw, osu_bibw (ranks 0 and 1), osu_multi_lat and osu_mbw_mr
(ranks/2 pairs). Collectives: osu_allreduce, osu_reduce, osu_bcast, osu_allgather,
osu_alltoall, osu_reduce_scatter, osu_gather, osu_scatter (latency = average over ranks, as
OSU prints it) and osu_barrier (no size). Collectives and multi-pair benchmarks use 2 ranks on
loopback and one rank per virtual host (--hpc-vhosts) on netns. Definitions: see the peer
(pytest_hpccomm/stacks/mpi/peer.py); what each item records: see driver.measurements
(collectives add nccl-tests' busbw, osu_mbw_mr its message rate, as second records).

Sampling (driver.SweepSettings): one sample per batch between barriers, warm-up (OSU's skip,
at most one batch) discarded. Quick: at least 10 batches per size, up to 30 while the size has
used less than 0.1 s; a batch holds up to 200 ping-pongs, 10 windows of 64 or 50 collective
operations, fewer once it moves 1 MiB (per window slot for osu_bw/bibw/mbw_mr). Full: 20-100
batches, 2 s, 16 MiB. Data is validated as OSU's -c does, every batch: a wrong byte fails the
item even when the timing would pass. All selected benchmarks of one (MPI, placement) run in
one MPI job (two on netns with more than 2 hosts: two-rank benchmarks apart).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest

from pytest_hpccomm.config import HpcConfig
from pytest_hpccomm.measure.measurement import Measurement
from pytest_hpccomm.stacks.mpi.driver import Sweep, SweepFailed, job_groups, measurements
from pytest_hpccomm.stacks.mpi.wire import COLLECTIVES, MULTI_PAIR, PAIR
from pytest_hpccomm.stacks.mpi.plugin import MpiSweeps, sweep_target
from pytest_hpccomm.stacks.mpi.runtime import MpiRuntime

pytestmark = [pytest.mark.perf, pytest.mark.stack("mpi")]  # every fabric: see transport.py

P2P = PAIR + MULTI_PAIR
SIZED_COLLECTIVES = tuple(c for c in COLLECTIVES if c != "osu_barrier")
BANDWIDTH = ("osu_bw", "osu_bibw", "osu_mbw_mr")

Selected = dict[tuple[str, str], set[str]]


@pytest.fixture(scope="session")
def osu_selected(request: pytest.FixtureRequest) -> Selected:
    """(MPI, placement) -> the benchmarks this session's items ask for, so one job runs just
    those (`-k osu_latency` must not pay for the other thirteen)."""
    chosen: Selected = defaultdict(set)
    for item in request.session.items:
        params = getattr(item, "callspec", None)
        name = getattr(item, "originalname", "")
        if params is None or not name.startswith("test_osu_"):
            continue
        bench = params.params.get("osu", "osu_barrier" if name == "test_osu_barrier" else None)
        mpi, placement = params.params.get("mpi_name"), params.params.get("hpc_placement")
        if bench and mpi and placement:
            chosen[(mpi, placement)].add(bench)
    return chosen


def sweep_for(benchmark: str, placement: str, runtime: MpiRuntime, sweeps: MpiSweeps,
              selected: Selected, cfg: HpcConfig, request: pytest.FixtureRequest) -> Sweep:
    target = sweep_target(placement, runtime, request.getfixturevalue("hpc_session"), request)
    wanted = selected.get((runtime.name, placement), set()) | {benchmark}
    hosts = len(target.hosts) if target.hosts else cfg.vhosts
    group = next(g for g in job_groups(wanted, placement, hosts) if benchmark in g)
    try:
        return sweeps.get(runtime, target, ",".join(group))
    except SweepFailed as exc:
        pytest.fail(str(exc), pytrace=False)


def judge(benchmark: str, size: int, sweep: Sweep, runtime: MpiRuntime, placement: str,
          record: Any) -> None:
    """Validation first (a wrong byte fails whatever the timing), then every record; a
    regression in one record fails the item only after all of them are recorded."""
    try:
        errors = sweep.errors_for(benchmark, size)
        ms: list[Measurement] = measurements(sweep, benchmark, size,
                                             {"mpi": runtime.name, "placement": placement})
    except SweepFailed as exc:
        pytest.fail(str(exc), pytrace=False)
    if errors:
        pytest.fail("data validation failed: " + "; ".join(errors[:3]), pytrace=False)
    failures = []
    for m in ms:
        try:
            record(m, sweep.runtime_fingerprint)
        except pytest.fail.Exception as exc:
            failures.append(str(exc))
    if failures:
        pytest.fail("\n".join(failures), pytrace=False)


@pytest.mark.parametrize("osu", P2P)
def test_osu_p2p(osu: str, hpc_size: int, hpc_placement: str, mpi_runtime: MpiRuntime,
                 mpi_sweeps: MpiSweeps, osu_selected: Selected, hpc_config: HpcConfig,
                 hpc_record: Any, request: pytest.FixtureRequest) -> None:
    if hpc_size == 0 and osu in BANDWIDTH:
        pytest.skip("bandwidth of 0-byte messages is undefined (OSU starts at 1 B)")
    sweep = sweep_for(osu, hpc_placement, mpi_runtime, mpi_sweeps, osu_selected, hpc_config,
                      request)
    judge(osu, hpc_size, sweep, mpi_runtime, hpc_placement, hpc_record)


@pytest.mark.parametrize("osu", SIZED_COLLECTIVES)
def test_osu_collective(osu: str, hpc_size: int, hpc_placement: str, mpi_runtime: MpiRuntime,
                        mpi_sweeps: MpiSweeps, osu_selected: Selected, hpc_config: HpcConfig,
                        hpc_record: Any, request: pytest.FixtureRequest) -> None:
    sweep = sweep_for(osu, hpc_placement, mpi_runtime, mpi_sweeps, osu_selected, hpc_config,
                      request)
    judge(osu, hpc_size, sweep, mpi_runtime, hpc_placement, hpc_record)


def test_osu_barrier(hpc_placement: str, mpi_runtime: MpiRuntime, mpi_sweeps: MpiSweeps,
                     osu_selected: Selected, hpc_config: HpcConfig, hpc_record: Any,
                     request: pytest.FixtureRequest) -> None:
    sweep = sweep_for("osu_barrier", hpc_placement, mpi_runtime, mpi_sweeps, osu_selected,
                      hpc_config, request)
    judge("osu_barrier", 0, sweep, mpi_runtime, hpc_placement, hpc_record)
