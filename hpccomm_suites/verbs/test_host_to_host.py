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

from typing import Any

import pytest

from pytest_hpccomm.stacks.verbs.hosts import VerbsHosts
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


@pytest.mark.covers("verbs")  # no case of rdma-core's tests in whole
@pytest.mark.parametrize("opcode", ["SEND", "RDMA_WRITE", "RDMA_READ"])
def test_payload_crosses_the_link(
    opcode: str, verbs_rc: Link, verbs_hosts: VerbsHosts, record_property: Any
) -> None:
    moved = verbs_hosts.move(verbs_rc, opcode, PAYLOAD, seed=7)
    src, dst = moved.src.host, moved.dst.host
    want, got = moved.sent_digest, moved.arrived_digest
    assert got == want, f"{opcode}: the {PAYLOAD} bytes that arrived on {dst} differ"
    counted = verbs_hosts.counted(moved)
    sent, rcvd, unit = counted.sent, counted.received, counted.sent_unit
    record_property(
        "counters", f"{src} sent {sent} {unit}; {dst} received {rcvd} {counted.received_unit}"
    )
    least = PAYLOAD // MAX_MTU if unit.startswith("packets") else PAYLOAD
    assert sent >= least, (
        f"{opcode} of {PAYLOAD} B from {src}: its port counted "
        f"{sent} {unit}, fewer than the payload needs ({least})"
    )
    assert rcvd >= least, (
        f"{opcode} of {PAYLOAD} B to {dst}: its port counted "
        f"{rcvd} {counted.received_unit}, fewer than the payload needs "
        f"({least})"
    )


@pytest.mark.verbs_not_on(
    "iwarp",
    reason="iWARP runs over TCP: a cut link stalls in TCP retransmission (minutes, "
    "tcp_retries2) before siw reports anything; this item cuts RoCE v2",
)
@pytest.mark.covers("verbs")  # no case of rdma-core's tests in whole
def test_cut_link_fails_the_qp_with_retry_exceeded(
    verbs_fresh_rc: Any, verbs_hosts: VerbsHosts, record_property: Any
) -> None:
    ha = verbs_hosts.requester
    if not ha.local or not ha.selection.netdev:
        pytest.skip(
            f"the cut is made on the requester's host ({ha.host}), which must be the "
            "one running pytest"
        )
    chunk = 4 * PAYLOAD
    link = verbs_fresh_rc(length=chunk, retry_cnt=RETRY_CNT)
    n = 64  # 256 MiB posted at once, the cut follows at once: it lands mid-transfer
    cut = verbs_hosts.cut_mid_transfer(
        link, n, chunk, RETRY_BOUND + 20, on_cut=lambda fault: record_property("fault", fault)
    )
    fault, statuses, took = cut.fault, cut.statuses, cut.took
    failed = [s for s in statuses if s == RETRY_EXC_ERR]
    assert failed, (
        f"{fault}: no work request completed with retry-exceeded in {took:.1f} s; "
        f"completions: {statuses[:8]}{'...' if len(statuses) > 8 else ''} of {n}"
    )
    assert len(statuses) == n, f"{fault}: {n - len(statuses)} of {n} work requests never completed"
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
