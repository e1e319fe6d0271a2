"""The verbs pair across two hosts of --hpc-hosts (behind the `verbs_hosts` fixture): which
host each peer runs on, what their RDMA ports counted, one payload moved over a link and a
cut made under a transfer, so the host-to-host suite states what it moves and checks.

Peer a (the requester) runs on the first host, peer b (the responder) on the second
(plugin.placement_of). Counters come from the port (rxe: packets in `hw_counters`, IBTA HCAs:
`port_xmit_data`/`port_rcv_data`), or from the netdev's bytes where the port counts nothing
(siw).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pytest_hpccomm.cluster.host_fabrics import ClusterFabric, HostFabric
from pytest_hpccomm.fabrics.counters import sent_and_received
from pytest_hpccomm.fabrics.link_cut import roce_cut
from pytest_hpccomm.stacks.verbs.driver import VerbsPair, rdma_wr

if TYPE_CHECKING:
    from pytest_hpccomm.stacks.verbs.links import Link


@dataclass(frozen=True)
class PortCount:
    """What a host's RDMA port had counted at one moment."""

    sent: int
    received: int
    unit: str  # what and where: "packets on rxe0", "bytes on mlx5_0", "bytes on eth1" (siw)


def port_count(fabric: ClusterFabric, host: HostFabric) -> PortCount:
    """Host's RDMA port counts, or its netdev's where the port counts nothing (siw)."""
    got = fabric.counters(host)
    port = sent_and_received(got["port"])
    if port is not None:
        unit = "packets" if "hw.sent_pkts" in got["port"] else "bytes"
        return PortCount(port[0], port[1], f"{unit} on {host.selection.device}")
    nd = got["netdev"]
    return PortCount(
        int(nd.get("tx_bytes", 0)), int(nd.get("rx_bytes", 0)), f"bytes on {host.selection.netdev}"
    )


@dataclass(frozen=True)
class Moved:
    """One payload moved across the link: where from and to, the digest of the bytes sent and
    of those that arrived, and both hosts' counts taken before it moved (by host name)."""

    opcode: str
    length: int
    src: HostFabric
    dst: HostFabric
    sent_digest: str
    arrived_digest: str
    before: dict[str, PortCount]


@dataclass(frozen=True)
class Counted:
    """What the ports counted of a move: the source's sent, the destination's received."""

    sent: int
    sent_unit: str
    received: int
    received_unit: str


@dataclass(frozen=True)
class CutOutcome:
    """A transfer cut under way: the fault made, the statuses of the completions in the
    order the CQ gave them, and the seconds from the cut to the last of them."""

    fault: str
    statuses: list[int]
    took: float


@dataclass
class VerbsHosts:
    """The session's pair of peers on two hosts, and the fabric that reads their counters."""

    pair: VerbsPair
    fabric: ClusterFabric

    def _hosts(self) -> tuple[HostFabric, HostFabric]:
        pair = self.pair
        assert pair.hosts is not None, "needs_hosts: two hosts, yet the pair shares one device"
        by_name = {h.host: h for h in self.fabric.hosts}
        return by_name[pair.hosts[0]], by_name[pair.hosts[1]]

    @property
    def requester(self) -> HostFabric:
        """The host of peer a, which posts the operations."""
        return self._hosts()[0]

    @property
    def responder(self) -> HostFabric:
        """The host of peer b."""
        return self._hosts()[1]

    def counts(self) -> dict[str, PortCount]:
        """Both hosts' port counts now, by host name (requester's read first)."""
        return {h.host: port_count(self.fabric, h) for h in self._hosts()}

    def move(self, link: Link, opcode: str, length: int, seed: int) -> Moved:
        """`length` bytes of pattern(seed) over `link` by one `opcode` (SEND, RDMA_WRITE,
        RDMA_READ) posted by a: READ pulls b's bytes to a, SEND and WRITE push a's to b. A
        failed or missing completion fails here (WorkRequestFailed, LinkDown)."""
        ha, hb = self._hosts()
        pair = self.pair
        if opcode == "RDMA_READ":
            (src, src_host, src_mr), (dst, dst_host, dst_mr) = (
                (link.b, hb, link.mr_b),
                (link.a, ha, link.mr_a),
            )
        else:
            (src, src_host, src_mr), (dst, dst_host, dst_mr) = (
                (link.a, ha, link.mr_a),
                (link.b, hb, link.mr_b),
            )
        want = src.peer.fill(src_mr, 0, length, seed)
        before = self.counts()
        if opcode == "SEND":
            link.b.post_recv(link.mr_b, 0, length, wr_id=1)
        wr = rdma_wr(opcode, link.mr_a, link.mr_b, wr_id=2, length=length)
        pair.expect_success(pair.execute(link.a, [wr]), [wr], f"{opcode} {length} B")
        if opcode == "RDMA_WRITE":
            link.placed()
        if opcode == "SEND":
            pair.expect_success(
                pair.poll(link.b, "recv", count=1, nbytes=length),
                [{"wr_id": 1, "opcode": "RECV"}],
                "RECV",
            )
        got = dst.peer.digests(dst_mr, [(0, length)])[0]
        return Moved(opcode, length, src_host, dst_host, want, got, before)

    def counted(self, moved: Moved) -> Counted:
        """What the source's port sent and the destination's received since `moved` began."""
        after = self.counts()
        src, dst = after[moved.src.host], after[moved.dst.host]
        return Counted(
            src.sent - moved.before[moved.src.host].sent,
            src.unit,
            dst.received - moved.before[moved.dst.host].received,
            dst.unit,
        )

    def cut_mid_transfer(
        self, link: Link, writes: int, length: int, wait: float, on_cut: Callable[[str], None]
    ) -> CutOutcome:
        """`writes` RDMA WRITEs of `length` bytes each posted by a at once, then the
        requester's host cut (every RoCE v2 packet arriving there dropped, restored
        afterwards), so the cut lands mid-transfer; `on_cut` gets the fault's description as
        soon as it is made. The peer waits up to `wait` seconds for the completions. The
        requester must be this host (the cut is made here) and have a netdev."""
        ha = self.requester
        wrs = [
            rdma_wr("RDMA_WRITE", link.mr_a, link.mr_b, wr_id=100 + i, length=length)
            for i in range(writes)
        ]
        rid = link.a.peer.start("execute", ep=link.a.ep, wrs=wrs, count=writes, wait=wait)
        with roce_cut(str(ha.selection.netdev), ha.host) as fault:
            on_cut(fault)
            cut_at = time.monotonic()
            wcs = list(link.a.peer.wait_for(rid, wait + self.pair.call_margin))
            took = time.monotonic() - cut_at
        return CutOutcome(fault, [w["status"] for w in wcs], took)
