"""The RDMA path cut (fabrics/link_cut.py) on a real link: in a virtual host of the netns
cluster, RoCE v2's UDP port is dropped on arrival while other traffic passes, and the rule is
gone afterwards."""

from __future__ import annotations

import sys
import textwrap

import pytest

from pytest_hpccomm.cluster.peer_env import PROJECT_ROOT, peer_env
from pytest_hpccomm.cluster.virtual import IFACE, VirtualCluster, unavailable_reason

pytestmark = pytest.mark.needs_root

RECEIVER = textwrap.dedent("""
    import socket, sys, time
    from pytest_hpccomm.fabrics.link_cut import roce_cut
    socks = {}
    for port in (4791, 4792):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind(("0.0.0.0", port)); socks[port] = s
    def drain(s):
        n = 0
        while True:
            try:
                s.recv(64)
                n += 1
            except BlockingIOError:
                return n
    for s in socks.values():
        s.setblocking(False)
    with roce_cut(sys.argv[1], "h1") as fault:
        print("CUT", fault, flush=True)
        for s in socks.values():  # what arrived before the cut is not the cut's
            drain(s)
        time.sleep(2)  # the datagrams that pass wait in the sockets' buffers
        got = {port: drain(s) for port, s in socks.items()}
    print("GOT", got[4791], got[4792], flush=True)
""")
SENDER = textwrap.dedent("""
    import socket, sys, time
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    end = time.monotonic() + 4
    while time.monotonic() < end:
        for port in (4791, 4792):
            s.sendto(b"x", (sys.argv[1], port))
        time.sleep(0.02)
""")


def test_roce_is_dropped_and_the_rest_passes() -> None:
    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)
    env = peer_env(inherit=True)
    with VirtualCluster(2) as vc:
        rx = vc.start_job(1, [sys.executable, "-c", RECEIVER, IFACE], env, timeout=60)
        tx = vc.start_job(0, [sys.executable, "-c", SENDER, vc.host(1).address], env, timeout=60)
        got, _ = rx.wait(60), tx.wait(60)
        assert got.ok, got.describe() + got.stderr[-2000:]
        assert "CUT cut the RDMA path" in got.stdout and "UDP 4791" in got.stdout
        roce, other = (int(x) for x in got.stdout.split("GOT")[1].split())
        assert roce == 0, f"{roce} RoCE v2 datagrams got through the cut"
        assert other > 20, f"only {other} datagrams to another port passed the cut"
        left = vc.run_job(1, ["nft", "list", "tables"], timeout=30)
        assert "hpccomm_cut" not in left.stdout, f"the cut was left behind: {left.stdout}"
    assert PROJECT_ROOT.is_dir()
