"""The extended post-send API (ibv_wr_post(3): ibv_qp_ex), as rdma-core's tests/test_qpex.py
drives it: every operation upstream posts through it, on RC and UD, with data and with none,
and the bad flows of an extended QP's queues.

Each case posts two work requests in one wr_start ... wr_complete batch (peer/qpex.py) and
checks what upstream's traffic checks leave out: both land whole and in order, immediates
arrive, a READ brings the target's bytes, the two atomics of a batch act in turn on one
target (the second sees the first's result).
"""

from __future__ import annotations

import errno
from collections.abc import Iterator
from typing import Any

import pytest

from pytest_hpccomm.stacks.verbs.coverage import cells
from pytest_hpccomm.stacks.verbs.driver import Connection, VerbsCallError, VerbsPair
from pytest_hpccomm.stacks.verbs.skips import connect_extended
from pytest_hpccomm.stacks.verbs.wire import GRH_BYTES

pytestmark = [pytest.mark.conformance, pytest.mark.stack("verbs")]

SIZE = 1024
MR = 8192
IMM = 0x1234ABCD
UD_ONLY = pytest.mark.verbs_not_on("iwarp", reason="iWARP has RC QPs only (no UD)")

# upstream case -> (QP type, opcode, bytes per WR)
CASES = {
    "qp_ex_rc_send": ("RC", "SEND", SIZE),
    "qp_ex_rc_send_imm": ("RC", "SEND_WITH_IMM", SIZE),
    "qp_ex_rc_rdma_write": ("RC", "RDMA_WRITE", SIZE),
    "qp_ex_rc_rdma_write_imm": ("RC", "RDMA_WRITE_WITH_IMM", SIZE),
    "qp_ex_rc_rdma_write_zero_size": ("RC", "RDMA_WRITE", 0),
    "qp_ex_rc_rdma_read": ("RC", "RDMA_READ", SIZE),
    "qp_ex_rc_rdma_read_zero_size": ("RC", "RDMA_READ", 0),
    "qp_ex_rc_atomic_cmp_swp": ("RC", "ATOMIC_CMP_AND_SWP", 8),
    "qp_ex_rc_atomic_fetch_add": ("RC", "ATOMIC_FETCH_AND_ADD", 8),
    "qp_ex_ud_send": ("UD", "SEND", SIZE),
    "qp_ex_ud_zero_size": ("UD", "SEND", 0),
    "qp_ex_ud_send_imm": ("UD", "SEND_WITH_IMM", SIZE),
}


def qpex_cells(*cases: str) -> list[str]:
    return cells(*(f"qpex.QpExTestCase.{c}" for c in cases))


def connect_ex(pair: VerbsPair, qp_type: str) -> Connection:
    """A connected pair of extended QPs, with every builder the QP type has (UD: the SENDs
    only); a skip where the provider has none (EOPNOTSUPP)."""
    ops = ["SEND", "SEND_WITH_IMM"] if qp_type == "UD" else []  # []: all (peer/qpex.py)
    return connect_extended(pair, qp_type, ops, max_send_wr=16, max_recv_wr=16)


@pytest.fixture
def mrs(verbs_pair: VerbsPair) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    a = verbs_pair.reg_mr(verbs_pair.a, MR)
    b = verbs_pair.reg_mr(verbs_pair.b, MR)
    yield a, b
    for peer, mr in ((verbs_pair.a, a), (verbs_pair.b, b)):
        if not peer.broken:
            peer.call("dereg_mr", mr=mr["mr"])


def _u64(peer: Any, mr: dict[str, Any], at: int, order: str) -> int:
    return int.from_bytes(bytes.fromhex(peer.call("read", mr=mr["mr"], offset=at, length=8)), order)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "case", [pytest.param(c, marks=UD_ONLY if "_ud_" in c else ()) for c in CASES]
)
@pytest.mark.covers("verbs", *qpex_cells(*CASES))
def test_extended_post_send_moves_what_it_names(
    verbs_pair: VerbsPair,
    mrs: tuple[dict[str, Any], dict[str, Any]],
    case: str,
    request: pytest.FixtureRequest,
) -> None:
    """Two WRs of the case's opcode in one batch: SENDs land whole in the receives in order
    (a UD one behind its GRH), with the immediate; WRITEs land, a WRITE with immediate also
    completes a receive with it; READs bring the target's bytes; the batch's second atomic
    sees the first's result; zero-byte WRs complete and move nothing."""
    qp_type, opcode, size = CASES[case]
    # the byte order of the device's arithmetic (skips a device without atomics)
    order = request.getfixturevalue("verbs_atomic_order") if "ATOMIC" in opcode else "little"
    mr_a, mr_b = mrs
    conn = connect_ex(verbs_pair, qp_type)
    a, b = conn.a, conn.b
    try:
        grh = GRH_BYTES if qp_type == "UD" else 0
        slot = size + grh  # each WR's region on either side
        wants = [
            a.peer.call("fill", mr=mr_a["mr"], offset=i * slot, length=size, seed=60 + i)
            for i in range(2)
        ]
        targets = [
            b.peer.call("fill", mr=mr_b["mr"], offset=i * slot, length=slot, seed=70 + i)
            for i in range(2)
        ]
        receives = opcode.startswith("SEND") or opcode.endswith("WITH_IMM")
        if receives:
            for i in range(2):
                b.peer.call(
                    "post_recv", ep=b.ep, mr=mr_b["mr"], offset=i * slot, length=slot, wr_id=i
                )
        old = 0x0123456789ABCDEF
        if opcode.startswith("ATOMIC"):
            b.peer.call("write", mr=mr_b["mr"], offset=0, hex=old.to_bytes(8, order).hex())  # type: ignore[arg-type]
        wrs = []
        for i in range(2):
            wr: dict[str, Any] = {
                "opcode": opcode, "mr": mr_a["mr"], "offset": i * slot, "length": size,
                "wr_id": 10 + i, "imm": IMM + i, "rkey": mr_b["rkey"],
                "remote_addr": mr_b["addr"] + (0 if opcode.startswith("ATOMIC") else i * slot),
            }  # fmt: skip
            if opcode == "ATOMIC_CMP_AND_SWP":
                wr |= {"compare_add": old, "swap": old + 1 + i}
            elif opcode == "ATOMIC_FETCH_AND_ADD":
                wr["compare_add"] = 5 + i
            wrs.append(wr)
        sent = verbs_pair.execute(a, wrs)
        verbs_pair.expect_success(sent, wrs, f"{case}: the batch")
        assert [w["wr_id"] for w in sent] == [10, 11], f"completions out of order: {sent}"
        if receives:
            got = verbs_pair.poll(b, "recv", count=2, nbytes=2 * size)
            verbs_pair.expect_success(got, [], f"{case}: the receives")
            assert [w["wr_id"] for w in got] == [0, 1], f"receives taken out of order: {got}"
            if opcode.endswith("WITH_IMM"):
                assert [w["imm"] for w in got] == [IMM, IMM + 1], got
            if opcode.startswith("SEND"):
                assert [w["byte_len"] for w in got] == [size + grh] * 2, got
        if opcode.startswith("ATOMIC"):
            returned = [_u64(a.peer, mr_a, i * slot, order) for i in range(2)]
            now = _u64(b.peer, mr_b, 0, order)
            if opcode == "ATOMIC_FETCH_AND_ADD":
                assert returned == [old, old + 5] and now == old + 11, (returned, now)
            else:  # the first swaps; the second compares with the old value, now gone
                assert returned == [old, old + 1] and now == old + 1, (returned, now)
            return
        if opcode == "RDMA_READ":
            wants = [
                b.peer.call("digest", mr=mr_b["mr"], offset=i * slot, length=size) for i in range(2)
            ]
            got_a = [
                a.peer.call("digest", mr=mr_a["mr"], offset=i * slot, length=size) for i in range(2)
            ]
            assert got_a == wants, f"{case}: the READs did not bring the target's bytes"
            return
        landed = [
            b.peer.call("digest", mr=mr_b["mr"], offset=i * slot + grh, length=size)
            for i in range(2)
        ]
        assert landed == wants, f"{case}: the bytes did not land whole"
        if size == 0 and not grh:  # nothing moved: the targets are as they were filled
            # (a UD receive takes the 40-byte GRH even then)
            whole = [
                b.peer.call("digest", mr=mr_b["mr"], offset=i * slot, length=slot) for i in range(2)
            ]
            assert whole == targets, f"{case}: a zero-byte WR changed the target"
    finally:
        conn.close()


@UD_ONLY
@pytest.mark.covers(
    "verbs",
    *qpex_cells(
        "post_receive_qp_state_bad_flow",
        "post_send_qp_state_bad_flow",
        "full_rq_bad_flow",
        "rq_with_larger_sgl_bad_flow",
    ),
)
def test_extended_qp_bad_flows(
    verbs_pair: VerbsPair, mrs: tuple[dict[str, Any], dict[str, Any]]
) -> None:
    """On an extended UD QP (upstream's): a receive with one SGE more than max_recv_sge is
    EINVAL; a receive queue filled to its max_recv_wr refuses one more with ENOMEM; a
    receive and a send posted in RESET are EINVAL."""
    mr_a, mr_b = mrs
    conn = connect_ex(verbs_pair, "UD")
    a, b = conn.a, conn.b
    try:
        recv = {"mr": mr_b["mr"], "offset": 0, "length": 64 + GRH_BYTES}
        caps = b.peer.call("api_qp_caps", ep=b.ep)
        assert "ok" in caps, f"ibv_query_qp(IBV_QP_CAP): {caps}"
        cap, sges = int(caps["ok"]["max_recv_wr"]), int(caps["ok"]["max_recv_sge"]) + 1
        with pytest.raises(VerbsCallError) as wide:
            b.peer.call("post_recv", ep=b.ep, sges=sges, **recv)
        assert f"errno {errno.EINVAL}" in wide.value.message, (
            f"a receive of {sges} SGEs past max_recv_sge: {wide.value.message}"
        )
        with pytest.raises(VerbsCallError) as full:
            b.peer.call("post_recv", ep=b.ep, count=cap + 1, **recv)
        assert f"(WR {cap}): errno {errno.ENOMEM}" in full.value.message, (
            f"the receive past a full queue of {cap}: {full.value.message}"
        )
        for side in (a, b):
            side.peer.call("modify_qp", ep=side.ep, state="RESET")
        with pytest.raises(VerbsCallError) as exc:
            b.peer.call("post_recv", ep=b.ep, **recv)
        assert f"errno {errno.EINVAL}" in exc.value.message, exc.value.message
        wr = {"opcode": "SEND", "mr": mr_a["mr"], "offset": 0, "length": 64, "wr_id": 1}
        with pytest.raises(VerbsCallError) as exc:
            a.peer.call("post_send", ep=a.ep, wrs=[wr])
        assert f"errno {errno.EINVAL}" in exc.value.message, exc.value.message
    finally:
        conn.close()
