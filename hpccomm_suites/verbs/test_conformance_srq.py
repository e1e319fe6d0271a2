"""Shared receive queues as rdma-core's tests/test_srq.py checks them: RC traffic into two
QPs that take their receives from one SRQ, an SRQ resized, and its limit event.

Each test asks the peers (peer/srq.py posts, modifies and queries the SRQ and waits for the
device's asynchronous events) and judges here. Beyond upstream's traffic, which only checks
completions, every message is found intact in the receive buffer its completion names, and each
QP's messages in the order it sent them.
"""

from __future__ import annotations

import errno
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from pytest_hpccomm.stacks.verbs.coverage import cells
from pytest_hpccomm.stacks.verbs.driver import Connection, VerbsPair, completion_wait

pytestmark = [pytest.mark.conformance, pytest.mark.stack("verbs")]

MESSAGE = 512  # bytes per SEND, and per receive posted to the SRQ
PER_QP = 4  # SENDs on each of the two QPs
WR_BASE = 100  # the SRQ's receives carry wr_id WR_BASE + i and take region i of b's MR
IBV_DEVICE_SRQ_RESIZE = 1 << 13


@dataclass
class SrqLinks:
    srq: int
    conns: list[Connection]
    mr_a: dict[str, Any]
    mr_b: dict[str, Any]

    def post(self, count: int, first: int = 0) -> None:
        """`count` receives to the SRQ: regions first, first + 1, ... of b's MR."""
        b = self.conns[0].b.peer
        b.call(
            "post_srq_recv",
            srq=self.srq,
            mr=self.mr_b["mr"],
            offset=first * MESSAGE,
            length=MESSAGE,
            count=count,
            wr_id=WR_BASE + first,
        )


@pytest.fixture
def srq_links(verbs_pair: VerbsPair) -> Iterator[SrqLinks]:
    """Two RC connections whose b QPs share one SRQ, and an MR on each side."""
    b = verbs_pair.b
    srq = int(b.call("create_srq", max_wr=4 * PER_QP, max_sge=1)["srq"])
    conns: list[Connection] = []
    mrs: list[tuple[Any, dict[str, Any]]] = []
    try:
        for _ in range(2):
            conns.append(
                verbs_pair.connect("RC", b_caps={"srq": srq}, max_send_wr=16, max_recv_wr=16)
            )
        mrs = [
            (verbs_pair.a, verbs_pair.reg_mr(verbs_pair.a, 4 * PER_QP * MESSAGE)),
            (b, verbs_pair.reg_mr(b, 4 * PER_QP * MESSAGE)),
        ]
        yield SrqLinks(srq, conns, mrs[0][1], mrs[1][1])
    finally:
        for conn in conns:
            conn.close()
        for peer, mr in mrs:
            if not peer.broken:
                peer.call("dereg_mr", mr=mr["mr"])
        if not b.broken:
            b.call("destroy_srq", srq=srq)


def _send(pair: VerbsPair, links: SrqLinks, q: int, k: int) -> str:
    """SEND message k of QP q (region q * PER_QP + k of a's MR, its own pattern); its digest."""
    conn, region = links.conns[q], q * PER_QP + k
    a = conn.a.peer
    want = str(
        a.call("fill", mr=links.mr_a["mr"], offset=region * MESSAGE, length=MESSAGE, seed=region)
    )
    wr = {
        "opcode": "SEND",
        "mr": links.mr_a["mr"],
        "offset": region * MESSAGE,
        "length": MESSAGE,
        "wr_id": region,
    }
    pair.expect_success(pair.execute(conn.a, [wr]), [wr], f"SEND {k} on QP {q}")
    return want


@pytest.mark.covers("verbs", *cells("srq.SrqTestCase.rc_srq_traffic"))
def test_two_qps_receive_through_one_srq(verbs_pair: VerbsPair, srq_links: SrqLinks) -> None:
    """SENDs on two RC QPs, in turn, into QPs that share one SRQ: each completes on its own
    QP's receive CQ with the message's length; each receive of the SRQ is taken once; each
    message lands whole in the buffer its completion's wr_id names; each QP's messages arrive
    in the order it sent them."""
    srq_links.post(2 * PER_QP)
    sent: list[list[str]] = [[], []]
    for k in range(PER_QP):
        for q in (0, 1):
            sent[q].append(_send(verbs_pair, srq_links, q, k))
    taken: list[int] = []
    for q, conn in enumerate(srq_links.conns):
        wcs = verbs_pair.poll(conn.b, "recv", count=PER_QP, nbytes=PER_QP * MESSAGE)
        verbs_pair.expect_success(wcs, [], f"receives of QP {q}")
        assert all(w["byte_len"] == MESSAGE for w in wcs), [w["byte_len"] for w in wcs]
        regions = [int(w["wr_id"]) - WR_BASE for w in wcs]
        got = conn.b.peer.call(
            "digests", mr=srq_links.mr_b["mr"], regions=[[r * MESSAGE, MESSAGE] for r in regions]
        )
        assert got == sent[q], (
            f"QP {q}: the buffers its completions name (SRQ receives {regions}) do not hold "
            "its messages in the order sent"
        )
        taken += regions
    assert sorted(taken) == list(range(2 * PER_QP)), f"SRQ receives taken: {sorted(taken)}"


@pytest.mark.covers("verbs", *cells("srq.SrqTestCase.resize_srq"))
def test_srq_resized_holds_what_was_asked(verbs_pair: VerbsPair, srq_links: SrqLinks) -> None:
    """ibv_modify_srq(IBV_SRQ_MAX_WR) to twice its size (at most the device's max_srq_wr):
    ibv_query_srq then reports at least that. Where the device does not claim
    IBV_DEVICE_SRQ_RESIZE, upstream skips, and so does this."""
    b = verbs_pair.b
    got = b.call("api_query_device")
    assert "ok" in got, got
    device = got["ok"]
    if not device["device_cap_flags"] & IBV_DEVICE_SRQ_RESIZE:
        pytest.skip(f"{verbs_pair.info['device']} does not claim IBV_DEVICE_SRQ_RESIZE")
    before = b.call("api_query_srq", srq=srq_links.srq)
    assert "ok" in before, f"ibv_query_srq: {before}"
    want = min(device["max_srq_wr"], 2 * before["ok"]["max_wr"])
    res = b.call("api_modify_srq", srq=srq_links.srq, max_wr=want)
    assert "ok" in res, f"ibv_modify_srq(max_wr={want}): {res}"
    after = b.call("api_query_srq", srq=srq_links.srq)["ok"]
    assert after["max_wr"] >= want, f"asked {want} WRs, the SRQ holds {after['max_wr']}"


LIMIT_POSTED, LIMIT, LIMIT_SENDS = 10, 7, 4  # upstream's numbers


@pytest.mark.covers("verbs", *cells("srq.SrqTestCase.modify_srq_limit"))
def test_srq_limit_raises_its_event(
    verbs_pair: VerbsPair, srq_links: SrqLinks, record_property: Any
) -> None:
    """10 receives on the SRQ, its limit set to 7 (ibv_query_srq then says 7), 4 SENDs
    consume 4: the SRQ falls below its limit and the device raises
    IBV_EVENT_SRQ_LIMIT_REACHED, once armed, and not before the receives were taken."""
    b = verbs_pair.b
    srq_links.post(LIMIT_POSTED)
    res = b.call("api_modify_srq", srq=srq_links.srq, srq_limit=LIMIT)
    assert "ok" in res, f"ibv_modify_srq(srq_limit={LIMIT}): {res}"
    queried = b.call("api_query_srq", srq=srq_links.srq)
    if "ok" in queried:
        assert queried["ok"]["srq_limit"] == LIMIT, queried
    else:  # siw's provider has no ibv_query_srq: the event below is the check
        assert queried["errno"] == errno.EOPNOTSUPP, f"ibv_query_srq: {queried}"
    record_property("query_srq", queried.get("ok", f"errno {queried.get('errno')}"))
    early = b.call("async_events", wait=0.2)
    assert early == [], f"events before any receive was taken: {early}"
    for k in range(LIMIT_SENDS):
        _send(verbs_pair, srq_links, k % 2, k // 2)
    conns = srq_links.conns
    for q in (0, 1):
        verbs_pair.poll(conns[q].b, "recv", count=LIMIT_SENDS // 2, nbytes=MESSAGE)
    # the device raises it as the receive is taken, before its completion: the wait for a
    # completion bounds it
    wait = completion_wait(MESSAGE)
    events = b.call("async_events", wait=wait, until="SRQ_LIMIT_REACHED")
    record_property("async_events", events)
    assert "SRQ_LIMIT_REACHED" in events, (
        f"{LIMIT_POSTED - LIMIT_SENDS} receives left under a limit of {LIMIT}: no "
        f"IBV_EVENT_SRQ_LIMIT_REACHED (events seen: {events})"
    )
