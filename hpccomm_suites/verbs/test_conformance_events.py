"""Completion events as rdma-core's tests/test_cq_events.py uses them: CQs on completion
channels, armed, and traffic whose every completion is reached only through its event.

The peer (peer/events.py) waits for the channel's event, acknowledges it, re-arms the CQ and
only then polls, upstream's order; a completion that no event announced is never polled and
the item fails on its deadline. Beyond upstream, each message is checked to land intact.
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_hpccomm.stacks.verbs.coverage import cells
from pytest_hpccomm.stacks.verbs.driver import VerbsPair, completion_wait
from pytest_hpccomm.stacks.verbs.wire import GRH_BYTES

pytestmark = [pytest.mark.conformance, pytest.mark.stack("verbs")]

MESSAGE = 256
ITERS = 8  # SENDs, one at a time: each must raise an event on both sides' armed CQs


def _by_event(pair: VerbsPair, side: Any, cq: str, what: str) -> dict[str, Any]:
    got = side.peer.call("poll_events", ep=side.ep, cq=cq, count=1, wait=completion_wait(MESSAGE))
    assert got["wcs"], (
        f"{what}: no completion reached through an event on the armed {cq} CQ within "
        f"{completion_wait(MESSAGE):g} s ({got['events']} events)"
    )
    assert got["events"] >= 1
    wc: dict[str, Any] = got["wcs"][0]
    assert wc["status"] == 0, f"{what}: {wc['status_text']}"
    return wc


@pytest.mark.parametrize(
    "qp_type",
    [
        "RC",
        pytest.param(
            "UD", marks=pytest.mark.verbs_not_on("iwarp", reason="iWARP has RC QPs only (no UD)")
        ),
    ],
)
@pytest.mark.covers(
    "verbs",
    *cells("cq_events.CqEventsTestCase.cq_events_rc", "cq_events.CqEventsTestCase.cq_events_ud"),
)
def test_every_completion_comes_with_its_event(verbs_pair: VerbsPair, qp_type: str) -> None:
    """SENDs one at a time between QPs whose CQs sit on completion channels: each SEND's
    completion on the sender and its receive on the receiver are each announced by an event,
    and the message lands whole (a UD receive behind its 40-byte GRH)."""
    conn = verbs_pair.connect(qp_type, max_send_wr=16, max_recv_wr=16, events=True)
    grh = GRH_BYTES if qp_type == "UD" else 0
    mr_a = verbs_pair.reg_mr(verbs_pair.a, MESSAGE)
    mr_b = verbs_pair.reg_mr(verbs_pair.b, MESSAGE + grh)
    a, b = conn.a, conn.b
    try:
        for i in range(ITERS):
            b.peer.call("post_recv", ep=b.ep, mr=mr_b["mr"], length=MESSAGE + grh, wr_id=i)
            want = a.peer.call("fill", mr=mr_a["mr"], offset=0, length=MESSAGE, seed=40 + i)
            wr = {"opcode": "SEND", "mr": mr_a["mr"], "length": MESSAGE, "wr_id": i}
            a.peer.call("post_send", ep=a.ep, wrs=[wr])
            sent = _by_event(verbs_pair, a, "send", f"SEND {i}")
            got = _by_event(verbs_pair, b, "recv", f"receive {i}")
            assert (sent["wr_id"], got["wr_id"]) == (i, i)
            assert got["byte_len"] == MESSAGE + grh, got
            landed = b.peer.call("digest", mr=mr_b["mr"], offset=grh, length=MESSAGE)
            assert landed == want, f"SEND {i}'s bytes did not land intact"
    finally:
        conn.close()
        for side, mr in ((a, mr_a), (b, mr_b)):
            if not side.peer.broken:
                side.peer.call("dereg_mr", mr=mr["mr"])
