"""Ranks that share this host's cores run one per core. Unpinned, a rank's compute thread and
Horovod's background thread make 4 runnable threads on 2 cores; the scheduler now and then put
both compute threads on one core and both background threads on the other and kept them there,
so every training request ran at half speed until it moved them back (the cause of the
"plain request at half speed" of the Horovod canary's rounds). Real ranks, read from /proc."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pytest_hpccomm.stacks.horovod.driver import HorovodPeers
from pytest_hpccomm.stacks.horovod.env import HorovodEnv
from pytest_hpccomm.stacks.horovod.wire import CPUS_VAR, rank_cpu


def allowed(pid: int) -> dict[int, str]:
    """Each thread of `pid`: its Cpus_allowed_list."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        for line in Path(f"/proc/{pid}/task/{tid}/status").read_text().splitlines():
            if line.startswith("Cpus_allowed_list:"):
                out[int(tid)] = line.split(":", 1)[1].strip()
    return out


def test_a_rank_finds_its_cpu_from_its_launchers_rank() -> None:
    assert rank_cpu({CPUS_VAR: "0,1", "HOROVOD_RANK": "1"}) == 1
    assert rank_cpu({CPUS_VAR: "2,5", "OMPI_COMM_WORLD_RANK": "0"}) == 2
    assert rank_cpu({CPUS_VAR: "2,5", "PMI_RANK": "3"}) == 5  # more ranks than CPUs: wraps
    assert rank_cpu({CPUS_VAR: "0,1"}) is None  # no rank known: not pinned
    assert rank_cpu({"HOROVOD_RANK": "0"}) is None  # not asked to pin


@pytest.mark.parametrize("controller", ["gloo", "mpi"])
def test_loopback_ranks_run_one_per_core(horovod_env: HorovodEnv, controller: str) -> None:
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip(f"this process may use {len(cpus)} CPU: 2 ranks cannot have one each")
    with HorovodPeers(horovod_env, controller, "loopback") as peers:
        got = {r.rank: allowed(r.pid) for r in peers.ranks}
        assert [r.cpus for r in peers.ranks] == [(cpus[0],), (cpus[1],)], peers.ranks
    for rank, threads in got.items():
        # every thread, Horovod's background thread included, inherited the rank's one CPU
        assert set(threads.values()) == {str(cpus[rank])}, (rank, threads)


def test_more_ranks_than_cores_are_not_pinned(horovod_env: HorovodEnv) -> None:
    n = len(os.sched_getaffinity(0)) + 1
    with HorovodPeers(horovod_env, "gloo", "loopback", loopback_ranks=n) as peers:
        assert len(peers.ranks) == n
        assert all(r.cpus == tuple(sorted(os.sched_getaffinity(0))) for r in peers.ranks)
