"""Gloo ranks run with Gloo's timeout above every timeout of this harness, so a late rank is
judged (and reported) by the harness, not aborted by Gloo 30 s in (Horovod's default). Real
ranks: their environment is read from /proc."""

from __future__ import annotations

from pathlib import Path

from pytest_hpccomm.stacks.horovod.driver import GLOO_TIMEOUT_VAR, HorovodPeers
from pytest_hpccomm.stacks.horovod.env import HorovodEnv


def environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(kv.decode().split("=", 1) for kv in raw if b"=" in kv)


def test_gloo_ranks_wait_as_long_as_the_harness(horovod_env: HorovodEnv) -> None:
    with HorovodPeers(horovod_env, "gloo", "loopback", job_timeout=600.0) as peers:
        assert peers.ranks
        for rank in peers.ranks:
            got = environ(rank.pid).get(GLOO_TIMEOUT_VAR)
            assert got is not None, f"rank {rank.rank}: no {GLOO_TIMEOUT_VAR}"
            assert float(got) == 600.0 > max(peers.case_timeout, peers.start_timeout), got


def test_a_timeout_the_user_set_is_kept(horovod_env: HorovodEnv) -> None:
    with HorovodPeers(horovod_env, "gloo", "loopback", env={GLOO_TIMEOUT_VAR: "45"}) as peers:
        assert {environ(r.pid).get(GLOO_TIMEOUT_VAR) for r in peers.ranks} == {"45"}
