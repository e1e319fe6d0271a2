"""How a rank waits for an op. Horovod's torch synchronize() loops on sched_yield until the op
is done; with more ranks than cores (3 conformance ranks on 2) the waiting main threads starve
the background threads that do the work, and an op stalls for seconds with no rank doing
anything useful (Gloo: the coordinator's response list reached one rank 6.6 s after the other).
Such ranks poll and sleep instead (wire.WAIT_VAR). Real ranks; their CPU time read from /proc."""

from __future__ import annotations

import os
import time
from typing import Any

import pytest

from pytest_hpccomm.stacks.horovod.driver import HorovodPeers
from pytest_hpccomm.stacks.horovod.env import HorovodEnv
from pytest_hpccomm.stacks.horovod.peer.__main__ import sleep_while_pending
from pytest_hpccomm.stacks.horovod.wire import WAIT_VAR

SLEEPER_S = 3.0


class FakeLib:
    """Horovod's torch extension as sleep_while_pending sees it: a handle done after `polls`
    polls, whose wait raises the op's error like the real one."""

    def __init__(self, polls: int, error: str = "") -> None:
        self.polls, self.error, self.waited = polls, error, 0

    def horovod_torch_poll(self, handle: int) -> bool:
        self.polls -= 1
        return self.polls < 0

    def horovod_torch_wait_and_clear(self, handle: int) -> None:
        assert self.polls < 0, "Horovod's own wait called before the op was done"
        self.waited += 1
        if self.error:
            raise RuntimeError(self.error)


def test_a_sleeping_wait_polls_then_lets_horovod_clear_the_handle() -> None:
    lib = FakeLib(polls=3)
    sleep_while_pending(lib, period=0.001)
    lib.horovod_torch_wait_and_clear(7)
    assert lib.waited == 1
    failing = FakeLib(polls=1, error="Broadcast is not supported with Join at this time.")
    sleep_while_pending(failing, period=0.001)
    with pytest.raises(RuntimeError, match="not supported with Join"):
        failing.horovod_torch_wait_and_clear(8)


def cpu_seconds(pid: int) -> float:
    """User + system time of the main thread of `pid` so far (the thread that waits)."""
    fields = open(f"/proc/{pid}/task/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def waiting_cpu(peers: HorovodPeers) -> list[float]:
    """Rank 0 sleeps SLEEPER_S before a barrier the others already wait in: the CPU seconds
    each waiting rank's main thread used meanwhile."""
    before = [cpu_seconds(r.pid) for r in peers.ranks]
    case: dict[str, Any] = {"kind": "barrier", "sleeper": 0, "seconds": SLEEPER_S, "sets": [None]}
    start = time.monotonic()
    peers.run(case)
    assert time.monotonic() - start >= SLEEPER_S
    return [cpu_seconds(r.pid) - b for r, b in zip(peers.ranks[1:], before[1:])]


def test_ranks_beyond_the_cores_sleep_while_they_wait(horovod_env: HorovodEnv) -> None:
    """More ranks than cores (Gloo): every rank reports the sleeping wait, and the main thread
    of a rank waiting in a barrier for SLEEPER_S is on a CPU for under a tenth of it (a poll
    is microseconds every SLEEP_POLL_S). The same ranks told to spin are over that bound:
    the measure sees a spinning wait. (Under the MPI controller the background thread also
    spins, inside Open MPI's progress loop, yielding; the sleeping wait takes only the main
    thread out of the contest there.)"""
    n = len(os.sched_getaffinity(0)) + 1
    with HorovodPeers(horovod_env, "gloo", "loopback", loopback_ranks=n) as peers:
        assert [r.wait for r in peers.ranks] == ["sleep"] * n, peers.ranks
        sleeping = waiting_cpu(peers)
    spin_env = {WAIT_VAR: "spin"}
    with HorovodPeers(horovod_env, "gloo", "loopback", env=spin_env, loopback_ranks=n) as p:
        assert [r.wait for r in p.ranks] == ["spin"] * n, p.ranks
        spinning = waiting_cpu(p)
    bound = SLEEPER_S / 10
    assert max(sleeping) < bound, f"sleeping ranks' main threads used {sleeping} CPU s"
    assert min(spinning) > bound, f"spinning ranks' main threads used only {spinning} CPU s"


def test_mpi_ranks_beyond_the_cores_are_told_to_sleep(horovod_env: HorovodEnv) -> None:
    """The variable reaches ranks that mpirun starts, and the ranks still answer a case."""
    n = len(os.sched_getaffinity(0)) + 1
    with HorovodPeers(horovod_env, "mpi", "loopback", loopback_ranks=n) as peers:
        assert [r.wait for r in peers.ranks] == ["sleep"] * n, peers.ranks
        waiting_cpu(peers)


def test_ranks_with_a_core_each_keep_horovods_wait(horovod_env: HorovodEnv) -> None:
    with HorovodPeers(horovod_env, "gloo", "loopback") as peers:
        if len(peers.ranks) > len(os.sched_getaffinity(0)):
            pytest.skip("this host has fewer cores than the default loopback ranks")
        assert {r.wait for r in peers.ranks} == {"spin"}, peers.ranks
