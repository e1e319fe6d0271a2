"""A case that hangs says where every rank was: real Horovod ranks, one of which sleeps
instead of joining an allreduce; the failure names each silent rank's Python frames (and,
where gdb is installed, Horovod's native threads) and keeps the whole text in a file."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from pytest_hpccomm.stacks.horovod.driver import STALL_CHECK_VAR, HorovodPeers, PeerLost
from pytest_hpccomm.stacks.horovod.env import HorovodEnv
from tests.stacks.horovod.test_horovod_gloo_timeout import environ

CASE_TIMEOUT = 10.0  # the stall inspector speaks at 5 s (a third of it, at least 5 s)


@pytest.mark.parametrize("controller", ["gloo", "mpi"])
def test_a_hung_case_names_where_each_rank_waits(horovod_env: HorovodEnv, controller: str) -> None:
    peers = HorovodPeers(horovod_env, controller, "loopback", case_timeout=CASE_TIMEOUT)
    try:
        peers.start()
        with pytest.raises(PeerLost) as lost:
            peers.run({"kind": "stall_in_allreduce", "victim": 1, "seconds": 600})
    finally:
        peers.close()
    text = str(lost.value)
    assert f"no reply within {CASE_TIMEOUT:.0f}s" in text, text
    assert "where the silent ranks were (0, 1)" in text, text
    frames = dict(re.findall(r"rank (\d+): (\S+) \(", text))
    # the victim sleeps in its case; the other waits for the allreduce Horovod never finishes
    assert frames.get("1") == "case_stall_in_allreduce", text
    assert frames.get("0") in ("synchronize", "allreduce", "allreduce_async"), text
    if shutil.which("gdb"):
        assert re.search(r"rank 0 native: .*horovod", text), text
    path = Path(re.findall(r"all stacks: (\S+)", text)[-1])
    assert "case_stall_in_allreduce" in path.read_text()
    path.unlink()


def test_the_stall_inspector_speaks_before_the_harness_gives_up(horovod_env: HorovodEnv) -> None:
    """Real ranks: the stall inspector's period in their environment is under the case
    timeout; a period the user set is kept."""
    with HorovodPeers(horovod_env, "gloo", "loopback", case_timeout=CASE_TIMEOUT) as peers:
        got = {environ(r.pid).get(STALL_CHECK_VAR) for r in peers.ranks}
    assert len(got) == 1 and float(got.pop() or "inf") < CASE_TIMEOUT
    with HorovodPeers(horovod_env, "gloo", "loopback", env={STALL_CHECK_VAR: "120"}) as peers:
        assert {environ(r.pid).get(STALL_CHECK_VAR) for r in peers.ranks} == {"120"}
