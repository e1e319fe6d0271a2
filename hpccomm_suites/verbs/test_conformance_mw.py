"""Memory windows as rdma-core's tests/test_mr.py (MWTest) checks them: a window of type 1
(ibv_bind_mw) or type 2 (an IBV_WR_BIND_MW work request) grants remote write to an MR that has
none of its own; once invalidated (type 1: re-bound with no length; type 2: LOCAL_INV, a
SEND_WITH_INV from the remote side, or deallocated) its rkey is refused.

The responder's MR is registered with local write and MW_BIND only, so every WRITE that lands
came through the window. Beyond upstream, each refused WRITE is checked to leave the target
as it was, and the MR's own rkey is checked to grant nothing. Where the provider has no memory
windows (ibv_alloc_mw: EOPNOTSUPP, siw) the tests skip, as upstream's do.
"""

from __future__ import annotations

import contextlib
import errno
from collections.abc import Iterator
from typing import Any

import pytest

from pytest_hpccomm.stacks.verbs.coverage import cells
from pytest_hpccomm.stacks.verbs.driver import VerbsCallError, VerbsPair
from pytest_hpccomm.stacks.verbs.fixtures import FreshLink
from pytest_hpccomm.stacks.verbs.skips import connect_extended

pytestmark = [pytest.mark.conformance, pytest.mark.stack("verbs")]

LENGTH = 4096
WINDOW_ONLY = ("local_write", "mw_bind")  # the MR itself grants no remote access


def window_cells(*cases: str, family: str = "mr.MWTest") -> list[str]:
    return cells(*(f"{family}.{c}" for c in cases))


@pytest.fixture
def windows(verbs_pair: VerbsPair, verbs_fresh_rc: FreshLink) -> Iterator[list[int]]:
    """The windows a test allocated on peer b: any still there are deallocated before the
    link's MR is deregistered (which a bound window would refuse)."""
    made: list[int] = []
    yield made
    for mw in made:
        with contextlib.suppress(VerbsCallError):  # the test deallocated it already
            verbs_pair.b.call("dealloc_mw", mw=mw)


def _alloc(pair: VerbsPair, link: Any, kind: int, made: list[int]) -> int:
    res = link.b.peer.call("api_alloc_mw", type=kind)
    if "ok" in res:
        made.append(int(res["ok"]["mw"]))
        return made[-1]
    if res["errno"] == errno.EOPNOTSUPP:
        pytest.skip(f"{pair.info['device']}'s provider has no memory windows: EOPNOTSUPP")
    pytest.fail(f"ibv_alloc_mw(type {kind}): {res}", pytrace=False)


def _bind(pair: VerbsPair, link: Any, mw: int, length: int, access: list[str]) -> int:
    """Bind through b's QP; the window's new rkey once the bind completed."""
    got = link.b.peer.call(
        "bind_mw", ep=link.b.ep, mw=mw, mr=link.mr_b["mr"], length=length, access=access, wr_id=90
    )
    wcs = pair.poll(link.b, "send", count=1, nbytes=0)
    pair.expect_success(wcs, [{"wr_id": 90}], f"bind of MW {mw} ({length} B)")
    return int(got["rkey"])


def _write(pair: VerbsPair, link: Any, rkey: int, seed: int) -> tuple[dict[str, Any], str]:
    want = link.a.peer.call("fill", mr=link.mr_a["mr"], offset=0, length=LENGTH, seed=seed)
    wr = {
        "opcode": "RDMA_WRITE", "mr": link.mr_a["mr"], "offset": 0, "length": LENGTH,
        "remote_addr": link.mr_b["addr"], "rkey": rkey, "wr_id": seed,
    }  # fmt: skip
    return wr, str(want)


def _target(link: Any) -> str:
    return str(link.b.peer.call("digest", mr=link.mr_b["mr"], offset=0, length=LENGTH))


def _lands(pair: VerbsPair, link: Any, rkey: int, seed: int, what: str) -> None:
    wr, want = _write(pair, link, rkey, seed)
    pair.expect_success(pair.execute(link.a, [wr]), [wr], what)
    link.placed()
    assert _target(link) == want, f"{what}: completed, but the bytes did not land"


def _refused(pair: VerbsPair, link: Any, rkey: int, seed: int, what: str) -> str:
    """A WRITE through `rkey` fails and leaves the target as it was; how it failed."""
    before = _target(link)
    wr, _ = _write(pair, link, rkey, seed)
    how = pair.refused(link.a, wr, what, allow_missing=True)
    assert _target(link) == before, f"{what}: the refused WRITE changed the target ({how})"
    return how


@pytest.mark.parametrize("kind", [1, 2], ids=["type1", "type2"])
@pytest.mark.covers("verbs", *window_cells("mw_type1", "mw_type2"))
def test_window_grants_remote_write_its_mr_lacks(
    verbs_pair: VerbsPair,
    verbs_fresh_rc: FreshLink,
    windows: list[int],
    kind: int,
    record_property: Any,
) -> None:
    """A window bound with remote write over an MR registered without it: a WRITE through
    the window's rkey lands; one through the MR's own rkey is refused; the MR cannot be
    deregistered while the window is bound to it (ibv_dereg_mr(3)), and can once the window
    is deallocated."""
    link = verbs_fresh_rc(b_access=WINDOW_ONLY)
    mw = _alloc(verbs_pair, link, kind, windows)
    rkey = _bind(verbs_pair, link, mw, LENGTH, ["local_write", "remote_write"])
    _lands(verbs_pair, link, rkey, 81, f"WRITE through a type {kind} window")
    how = _refused(verbs_pair, link, link.mr_b["rkey"], 82, "WRITE through the MR's own rkey")
    record_property("mr_rkey_refusal", how[:300])
    with pytest.raises(VerbsCallError) as bound:
        link.b.peer.call("dereg_mr", mr=link.mr_b["mr"])
    record_property("dereg_while_bound", bound.value.message[:300])
    link.b.peer.call("dealloc_mw", mw=mw)


INVALIDATIONS = {
    # id -> (window type, upstream case)
    "type1-rebound-empty": (1, "invalidate_mw_type1"),
    "type2-local-inv": (2, "mw_type2_invalidate_local"),
    "type2-send-with-inv": (2, "mw_type2_invalidate_remote"),
    "type2-dealloc": (2, "mw_type2_invalidate_dealloc"),
}


@pytest.mark.parametrize("how", list(INVALIDATIONS))
@pytest.mark.covers("verbs", *window_cells(*(case for _, case in INVALIDATIONS.values())))
def test_invalidated_window_is_refused(
    verbs_pair: VerbsPair,
    verbs_fresh_rc: FreshLink,
    windows: list[int],
    how: str,
    record_property: Any,
) -> None:
    """A window that carried a WRITE is invalidated: type 1 re-bound with no length and no
    rights; type 2 by a LOCAL_INV of its rkey on the responder, by a SEND_WITH_INV of it
    from the requester (received by the responder), or deallocated. The next WRITE through
    its rkey is refused and changes nothing."""
    kind, _ = INVALIDATIONS[how]
    link = verbs_fresh_rc(b_access=WINDOW_ONLY)
    mw = _alloc(verbs_pair, link, kind, windows)
    rkey = _bind(verbs_pair, link, mw, LENGTH, ["local_write", "remote_write"])
    _lands(verbs_pair, link, rkey, 83, "WRITE through the window before it was invalidated")
    if how == "type1-rebound-empty":
        _bind(verbs_pair, link, mw, 0, [])
    elif how == "type2-local-inv":
        inv = {"opcode": "LOCAL_INV", "invalidate": rkey, "wr_id": 91}
        verbs_pair.expect_success(verbs_pair.execute(link.b, [inv]), [inv], "LOCAL_INV")
    elif how == "type2-send-with-inv":
        link.b.peer.call("post_recv", ep=link.b.ep, mr=link.mr_b["mr"], length=64, wr_id=92)
        send = {
            "opcode": "SEND_WITH_INV", "invalidate": rkey, "mr": link.mr_a["mr"],
            "offset": 0, "length": 64, "wr_id": 93,
        }  # fmt: skip
        verbs_pair.expect_success(verbs_pair.execute(link.a, [send]), [send], "SEND_WITH_INV")
        got = verbs_pair.poll(link.b, "recv", count=1, nbytes=64)
        verbs_pair.expect_success(got, [], "the SEND_WITH_INV's receive")
    else:
        link.b.peer.call("dealloc_mw", mw=mw)
    refusal = _refused(verbs_pair, link, rkey, 84, f"WRITE through a window invalidated ({how})")
    record_property("invalidated_refusal", refusal[:300])


@pytest.mark.covers("verbs", *window_cells("reg_mw_wrong_type"))
def test_window_of_an_unknown_type_is_refused(
    verbs_pair: VerbsPair, verbs_fresh_rc: FreshLink, windows: list[int], record_property: Any
) -> None:
    """ibv_alloc_mw of type 3 (only 1 and 2 exist) fails, on a provider that has windows."""
    link = verbs_fresh_rc(b_access=WINDOW_ONLY)
    mw = _alloc(verbs_pair, link, 2, windows)
    link.b.peer.call("dealloc_mw", mw=mw)
    res = link.b.peer.call("api_alloc_mw", type=3)
    assert "ok" not in res, f"ibv_alloc_mw made a window of type 3: {res}"
    record_property("type3_errno", res["errno"])


@pytest.mark.covers("verbs", *window_cells("qp_ex_rc_bind_mw", family="qpex.QpExTestCase"))
def test_window_bound_through_the_extended_api(verbs_pair: VerbsPair, record_property: Any) -> None:
    """Type 2 windows bound with ibv_wr_bind_mw on extended RC QPs (upstream's
    qp_ex_rc_bind_mw): one granting remote write carries a WRITE; one granting local write
    only refuses it, and the target stays as it was."""
    from pytest_hpccomm.stacks.verbs.links import Link

    ops = ["RDMA_WRITE", "RDMA_READ", "BIND_MW"]  # READ: the iWARP placement fence
    conn = connect_extended(verbs_pair, "RC", ops, max_send_wr=16, max_recv_wr=16)
    link = Link(
        verbs_pair, conn, verbs_pair.reg_mr(verbs_pair.a, LENGTH),
        verbs_pair.reg_mr(verbs_pair.b, LENGTH, WINDOW_ONLY), WINDOW_ONLY, LENGTH,
    )  # fmt: skip
    made: list[int] = []
    try:
        grant = _alloc(verbs_pair, link, 2, made)
        rkey = _bind(verbs_pair, link, grant, LENGTH, ["local_write", "remote_write"])
        _lands(verbs_pair, link, rkey, 85, "WRITE through a window bound by wr_bind_mw")
        local = _alloc(verbs_pair, link, 2, made)
        rkey = _bind(verbs_pair, link, local, LENGTH, ["local_write"])
        how = _refused(verbs_pair, link, rkey, 86, "WRITE through a local-write-only window")
        record_property("local_only_refusal", how[:300])
    finally:
        for mw in made:
            with contextlib.suppress(VerbsCallError):
                verbs_pair.b.call("dealloc_mw", mw=mw)
        link.close()
