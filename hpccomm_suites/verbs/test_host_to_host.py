"""Verbs between two hosts (--hpc-hosts with two or more): the bytes cross the wire, and a cut
wire fails the QP as the IB spec says.

With --hpc-hosts the session's peers run one per host (as perftest's server and client run on
two nodes), so every other verbs item of the session also runs host to host; these items add
the evidence and the fault:
- each RC operation's payload is counted by both hosts' RDMA ports (rxe: packets in
  `hw_counters`, IBTA HCAs: `port_xmit_data`/`port_rcv_data`; siw counts nothing there, so its
  netdev's byte counters stand in), in the direction the data flows
- cutting the RDMA path mid-transfer (every RoCE v2 packet arriving at the requester dropped)
  completes the requester's work request with a retry-exceeded error within the bound that the
  QP's timeout and retry count set, flushes the rest, and the link works again when re-made

Without a second host these items skip, saying so; the two-guest cluster (ci/guest/run.sh
--hosts 2) runs them in CI.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from pytest_hpccomm.cluster.host_fabrics import ClusterFabric, HostFabric
from pytest_hpccomm.fabrics.counters import sent_and_received
from pytest_hpccomm.fabrics.link_cut import roce_cut
from pytest_hpccomm.stacks.verbs.driver import VerbsPair
from pytest_hpccomm.stacks.verbs.links import Link

pytestmark = [pytest.mark.conformance, pytest.mark.stack("verbs"), pytest.mark.needs_hosts]

PAYLOAD = 1 << 20
MAX_MTU = 4096  # the largest RDMA path MTU: fewest packets a payload can take
RETRY_EXC_ERR = 12  # IBV_WC_RETRY_EXC_ERR
FLUSH_ERR = 5  # IBV_WC_WR_FLUSH_ERR
# The cut link's QPs: timeout 14 (4.096 us x 2^14 = 67 ms, peer/engine.py) and retry_cnt 6, not
# the usual 7: rxe retries forever at 7 (rxe_comp.c: `if (retry_cnt != 7) retry_cnt--`), where
# IBTA's 7 means seven retries. The spec's bound is then (6 + 1) x 67 ms = 0.47 s; rxe's
# timer and the emulated guest add slack
RETRY_CNT = 6
RETRY_BOUND = 10.0


def _hosts(pair: VerbsPair, fabric: ClusterFabric) -> tuple[HostFabric, HostFabric]:
    assert pair.hosts is not None, "needs_hosts: two hosts, yet the pair shares one device"
    by_name = {h.host: h for h in fabric.hosts}
    return by_name[pair.hosts[0]], by_name[pair.hosts[1]]


def _moved(fabric: ClusterFabric, host: HostFabric) -> tuple[int, int, str]:
    """(sent, received, unit) on host's RDMA port, or on its netdev where the port counts
    nothing (siw)."""
    got = fabric.counters(host)
    port = sent_and_received(got["port"])
    if port is not None:
        unit = "packets" if "hw.sent_pkts" in got["port"] else "bytes"
        return port[0], port[1], f"{unit} on {host.selection.device}"
    nd = got["netdev"]
    return (
        int(nd.get("tx_bytes", 0)),
        int(nd.get("rx_bytes", 0)),
        f"bytes on {host.selection.netdev}",
    )


@pytest.mark.parametrize("opcode", ["SEND", "RDMA_WRITE", "RDMA_READ"])
def test_payload_crosses_the_link(
    opcode: str,
    verbs_pair: VerbsPair,
    verbs_rc: Link,
    hpc_rdma_fabric: ClusterFabric,
    record_property: Any,
) -> None:
    ha, hb = _hosts(verbs_pair, hpc_rdma_fabric)
    rc = verbs_rc
    # READ pulls b's bytes to a; SEND and WRITE push a's to b
    (src, src_host), (dst, dst_host) = (
        ((rc.b, hb), (rc.a, ha)) if opcode == "RDMA_READ" else ((rc.a, ha), (rc.b, hb))
    )
    src_mr = rc.mr_b if opcode == "RDMA_READ" else rc.mr_a
    want = src.peer.call("fill", mr=src_mr["mr"], offset=0, length=PAYLOAD, seed=7)
    before = {h.host: _moved(hpc_rdma_fabric, h) for h in (ha, hb)}
    if opcode == "SEND":
        rc.b.peer.call("post_recv", ep=rc.b.ep, mr=rc.mr_b["mr"], offset=0, length=PAYLOAD, wr_id=1)
    wr = {
        "opcode": opcode,
        "mr": rc.mr_a["mr"],
        "wr_id": 2,
        "offset": 0,
        "length": PAYLOAD,
        "remote_addr": rc.mr_b["addr"],
        "rkey": rc.mr_b["rkey"],
    }
    verbs_pair.expect_success(verbs_pair.execute(rc.a, [wr]), [wr], f"{opcode} {PAYLOAD} B")
    if opcode == "RDMA_WRITE":
        rc.placed()
    if opcode == "SEND":
        verbs_pair.expect_success(
            verbs_pair.poll(rc.b, "recv", count=1, nbytes=PAYLOAD),
            [{"wr_id": 1, "opcode": "RECV"}],
            "RECV",
        )
    dst_mr = rc.mr_a if opcode == "RDMA_READ" else rc.mr_b
    got = dst.peer.call("digests", mr=dst_mr["mr"], regions=[[0, PAYLOAD]])[0]
    assert got == want, f"{opcode}: the {PAYLOAD} bytes that arrived on {dst_host.host} differ"
    after = {h.host: _moved(hpc_rdma_fabric, h) for h in (ha, hb)}
    sent = after[src_host.host][0] - before[src_host.host][0]
    rcvd = after[dst_host.host][1] - before[dst_host.host][1]
    unit = after[src_host.host][2]
    record_property(
        "counters",
        f"{src_host.host} sent {sent} {unit}; {dst_host.host} received "
        f"{rcvd} {after[dst_host.host][2]}",
    )
    least = PAYLOAD // MAX_MTU if unit.startswith("packets") else PAYLOAD
    assert sent >= least, (
        f"{opcode} of {PAYLOAD} B from {src_host.host}: its port counted "
        f"{sent} {unit}, fewer than the payload needs ({least})"
    )
    assert rcvd >= least, (
        f"{opcode} of {PAYLOAD} B to {dst_host.host}: its port counted "
        f"{rcvd} {after[dst_host.host][2]}, fewer than the payload needs "
        f"({least})"
    )


def test_cut_link_fails_the_qp_with_retry_exceeded(
    verbs_pair: VerbsPair, verbs_fresh_rc: Any, hpc_rdma_fabric: ClusterFabric, record_property: Any
) -> None:
    ha, hb = _hosts(verbs_pair, hpc_rdma_fabric)
    if verbs_pair.iwarp:
        pytest.skip(
            "iWARP runs over TCP: a cut link stalls in TCP retransmission (minutes, "
            "tcp_retries2) before siw reports anything; this item cuts RoCE v2"
        )
    if not ha.local or not ha.selection.netdev:
        pytest.skip(
            f"the cut is made on the requester's host ({ha.host}), which must be the "
            "one running pytest"
        )
    chunk = 4 * PAYLOAD
    link = verbs_fresh_rc(length=chunk, retry_cnt=RETRY_CNT)
    n = 64  # 256 MiB posted at once, the cut follows at once: it lands mid-transfer
    wrs = [
        {
            "opcode": "RDMA_WRITE",
            "mr": link.mr_a["mr"],
            "wr_id": 100 + i,
            "offset": 0,
            "length": chunk,
            "remote_addr": link.mr_b["addr"],
            "rkey": link.mr_b["rkey"],
        }
        for i in range(n)
    ]
    rid = link.a.peer.start("execute", ep=link.a.ep, wrs=wrs, count=n, wait=RETRY_BOUND + 20)
    with roce_cut(ha.selection.netdev, ha.host) as fault:
        record_property("fault", fault)
        cut_at = time.monotonic()
        wcs = list(link.a.peer.wait_for(rid, RETRY_BOUND + 20 + verbs_pair.call_margin))
        took = time.monotonic() - cut_at
    statuses = [w["status"] for w in wcs]
    failed = [w for w in wcs if w["status"] == RETRY_EXC_ERR]
    assert failed, (
        f"{fault}: no work request completed with retry-exceeded in {took:.1f} s; "
        f"completions: {statuses[:8]}{'...' if len(statuses) > 8 else ''} of {n}"
    )
    assert len(wcs) == n, f"{fault}: {n - len(wcs)} of {n} work requests never completed"
    first = statuses.index(RETRY_EXC_ERR)
    assert all(s == 0 for s in statuses[:first]) and all(
        s == FLUSH_ERR for s in statuses[first + 1 :]
    ), f"{fault}: expected successes, one retry-exceeded, then flushes; got {statuses}"
    assert took <= RETRY_BOUND, (
        f"{fault}: the QP took {took:.1f} s to fail (bound {RETRY_BOUND:g} s)"
    )
    record_property(
        "fault_outcome",
        f"WR #{first} retry-exceeded after {took:.2f} s, "
        f"{first} completed before, {n - first - 1} flushed",
    )
    assert link.conn.state(link.a) == "ERR"
    link.suspect = True
