"""The contention guard on Horovod's sweeps (real peers, a real neighbour): a job that shared
the cores with another process is run again, and one that never had them to itself is kept,
marked, so its verdict says so instead of calling a neighbour's load a regression. Parked
conformance peers leave the measured ranks the cores and come back on the next request."""

from __future__ import annotations

import os

from pytest_hpccomm import retries
from pytest_hpccomm.cluster.placement import LOOPBACK
from pytest_hpccomm.stacks.horovod.driver import HorovodPeers
from pytest_hpccomm.stacks.horovod.env import HorovodEnv
from pytest_hpccomm.stacks.horovod.perf import allreduce_sweeps, measurements
from tests.neighbour import busy_neighbour


def test_a_neighbour_marks_the_sweep_and_its_jobs_are_run_again(
    horovod_env: HorovodEnv, retry_ledger: list[retries.Retry]
) -> None:
    parked: list[str] = []
    sweeps = allreduce_sweeps(
        horovod_env,
        [1 << 16],
        "quick",
        1.0,
        repeats=1,
        max_repeats=1,
        before_job=lambda: parked.append("job"),
    )
    with busy_neighbour(300.0):  # two busy loops: the neighbour takes a core and more
        with busy_neighbour(300.0):
            sweep = sweeps.get(("gloo", LOOPBACK, "default"), None)
    assert parked == ["job"] * 3, "every try parks the idle peers first"
    assert sweep.reruns == 2 and len(sweep.cpu) == 1, (sweep.reruns, sweep.cpu)
    # counted, each naming the neighbour's busy loop among the busiest processes
    assert [r.cause for r in retry_ledger] == [retries.CONTENTION] * 2, retry_ledger
    assert all("busiest: " in r.reason and "monotonic" in r.reason for r in retry_ledger)
    assert sweep.disturbed.startswith("cores shared: other processes used "), sweep.disturbed
    assert sweep.cpu[0]["foreign_cores"] >= 0.3, sweep.cpu
    for m in measurements(sweep, 1 << 16, {"controller": "gloo", "placement": LOOPBACK}):
        assert m.extra["cpu"]["disturbed"] == sweep.disturbed
        assert m.extra["cpu"]["reruns"] == 2


def test_parked_peers_end_and_the_next_request_starts_new_ones(horovod_env: HorovodEnv) -> None:
    with HorovodPeers(horovod_env, "mpi", LOOPBACK) as peers:
        first = peers.pids()
        peers.park()
        assert not peers.ranks and all(not _alive(pid) for pid in first)
        bench = {"op": "bench", "sizes": [16], "warmup": 1, "iters": 1, "batches": 1}
        replies = peers.request(bench, 60.0)
        assert len(replies) == len(first) and all(r["points"][0]["valid"] for r in replies)
        assert set(peers.pids()).isdisjoint(first) and peers.starts == 1


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
