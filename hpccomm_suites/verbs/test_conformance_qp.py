"""QP state machine (IB spec 10.3.1; ibv_modify_qp(3); the kernel's ib_modify_qp_is_ok table).

RESET -> INIT -> RTR -> RTS with exactly the attributes each transition requires; a skipped
state, or a transition missing a required attribute, is rejected and leaves the QP where it
was; any state may go to ERR and to RESET. iWARP QPs reach RTR/RTS only through the connection
manager, so there the manual walk is replaced by checking what rdma_cm produces.
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_hpccomm.stacks.verbs.coverage import cells
from pytest_hpccomm.stacks.verbs.defects import known_defects
from pytest_hpccomm.stacks.verbs.driver import Side, VerbsCallError, VerbsPair
from pytest_hpccomm.stacks.verbs.fixtures import NewQp
from pytest_hpccomm.stacks.verbs.skips import MANUAL_ONLY_IWARP

pytestmark = [pytest.mark.conformance, pytest.mark.stack("verbs")]

# ib_modify_qp_is_ok's required attributes for RC (drivers/infiniband/core/verbs.c qp_state_table)
RC_REQUIRED = {
    "INIT": ("PKEY_INDEX", "PORT", "ACCESS_FLAGS"),
    "RTR": ("AV", "PATH_MTU", "DEST_QPN", "RQ_PSN", "MAX_DEST_RD_ATOMIC", "MIN_RNR_TIMER"),
    "RTS": ("SQ_PSN", "TIMEOUT", "RETRY_CNT", "RNR_RETRY", "MAX_QP_RD_ATOMIC"),
}


# the walks made by hand, which an iWARP QP cannot take (rdma_cm moves it to RTR and RTS)
manual_only = pytest.mark.verbs_not_on("iwarp", reason=MANUAL_ONLY_IWARP)


def state(side: Side) -> str:
    return str(side.peer.call("query_qp", ep=side.ep)["state"])


def modify(
    side: Side, to: str, remote: dict[str, Any] | None = None, omit: tuple[str, ...] = ()
) -> str:
    return str(
        side.peer.call(
            "modify_qp",
            ep=side.ep,
            state=to,
            remote=remote,
            omit=list(omit),
            access=["local_write", "remote_write", "remote_read"],
        )["state"]
    )


def rejected(side: Side, to: str, **kw: Any) -> str:
    """Assert the transition is refused; return the refusal's text."""
    with pytest.raises(VerbsCallError) as info:
        modify(side, to, **kw)
    return info.value.message


@pytest.mark.covers("verbs")  # no case of rdma-core's tests in whole
def test_new_qp_is_in_reset(verbs_qps: NewQp, verbs_pair: VerbsPair) -> None:
    got = state(verbs_qps("RC"))
    if verbs_pair.iwarp:
        # iWARP's verbs have one Idle state for IB's RESET and INIT (siw reports INIT)
        assert got in ("RESET", "INIT"), got
    else:
        assert got == "RESET"


@pytest.mark.covers("verbs")  # no case of rdma-core's tests in whole
@manual_only
def test_rc_walks_reset_init_rtr_rts(verbs_qps: NewQp) -> None:
    a, b = verbs_qps("RC"), verbs_qps("RC")
    assert modify(a, "INIT") == "INIT"
    assert modify(a, "RTR", remote=b.address) == "RTR"
    assert modify(a, "RTS") == "RTS"


@pytest.mark.covers("verbs")  # no case of rdma-core's tests in whole
@manual_only
def test_ud_walks_reset_init_rtr_rts(verbs_pair: VerbsPair, verbs_qps: NewQp) -> None:
    a = verbs_qps("UD")
    for to in ("INIT", "RTR", "RTS"):
        assert modify(a, to) == to


@manual_only
@pytest.mark.parametrize(
    "start,to",
    [("RESET", "RTR"), ("RESET", "RTS"), ("INIT", "RTS")],
    ids=["RESET-RTR", "RESET-RTS", "INIT-RTS"],
)
@pytest.mark.covers("verbs")  # no case of rdma-core's tests in whole
def test_skipping_a_state_is_rejected(verbs_qps: NewQp, start: str, to: str) -> None:
    a, b = verbs_qps("RC"), verbs_qps("RC")
    if start == "INIT":
        modify(a, "INIT")
    rejected(a, to, remote=b.address)
    assert state(a) == start, f"a rejected {start}->{to} must leave the QP in {start}"


@manual_only
@pytest.mark.parametrize(
    "to,missing",
    [(to, m) for to, ms in RC_REQUIRED.items() for m in ms],
    ids=[f"{to}-no-{m}" for to, ms in RC_REQUIRED.items() for m in ms],
)
@pytest.mark.covers("verbs")  # no case of rdma-core's tests in whole
def test_transition_without_a_required_attribute_is_rejected(
    verbs_qps: NewQp, to: str, missing: str
) -> None:
    a, b = verbs_qps("RC"), verbs_qps("RC")
    walk = ["INIT", "RTR", "RTS"]
    for step in walk[: walk.index(to)]:
        modify(a, step, remote=b.address)
    before = state(a)
    rejected(a, to, remote=b.address, omit=(missing,))
    assert state(a) == before


@pytest.mark.covers("verbs")  # no case of rdma-core's tests in whole
@manual_only
def test_any_state_goes_to_err_and_reset(verbs_qps: NewQp) -> None:
    a, b = verbs_qps("RC"), verbs_qps("RC")
    for step in ("INIT", "RTR", "RTS"):
        modify(a, step, remote=b.address)
    assert modify(a, "ERR") == "ERR"
    assert modify(a, "RESET") == "RESET"
    assert modify(a, "INIT") == "INIT", "a QP reset from ERR must be usable again"


@pytest.mark.covers("verbs")  # no case of rdma-core's tests in whole
def test_cm_connection_reaches_rts(verbs_pair: VerbsPair) -> None:
    """Whatever the transport, a connection the suite makes ends with both QPs in RTS."""
    conn = verbs_pair.connect("RC")
    try:
        with known_defects(verbs_pair.selection.driver, "siw-no-qp-state"):
            states = conn.state(conn.a), conn.state(conn.b)
            assert states == ("RTS", "RTS"), f"connected QPs report {', '.join(states)}"
    finally:
        conn.close()


RD_ATOMIC = 12  # upstream's request, each way


@pytest.mark.covers("verbs", *cells("qp.RCQPTest.modify_rc_qp_rd_atomic"))
def test_rd_atomic_depths_hold_what_was_asked(verbs_pair: VerbsPair) -> None:
    """An RC connection made asking for 12 RDMA READs/atomics in flight each way (at most the
    device's limits): ibv_query_qp on both QPs reports at least that (rdma_cm's responder
    resources and initiator depth on iWARP)."""
    info = verbs_pair.info
    want = min(RD_ATOMIC, info["max_qp_rd_atom"], info["max_qp_init_rd_atom"])
    conn = verbs_pair.connect("RC", rd_atomic=want)
    try:
        for name, side in (("a", conn.a), ("b", conn.b)):
            got = side.peer.call("api_qp_rd_atomic", ep=side.ep)
            assert "ok" in got, f"ibv_query_qp on {name}: {got}"
            depths = got["ok"]
            assert depths["max_rd_atomic"] >= want and depths["max_dest_rd_atomic"] >= want, (
                f"{name}: asked {want} each way, the QP reports {depths}"
            )
    finally:
        conn.close()
