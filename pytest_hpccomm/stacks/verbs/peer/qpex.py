"""Peer side of the verbs stack: the extended post-send API (ibv_wr_post(3): ibv_qp_ex,
wr_start ... wr_complete), as rdma-core's tests/test_qpex.py drives it. The engine creates
such a QP when asked (`ex`) and posts its work requests here; everything else about the QP
(connection, receives, polling) is the same as for a legacy one. Imported only by the peer
program (peer rule).
"""

from __future__ import annotations

import socket
from typing import Any

import pyverbs.enums as e
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsError
from pyverbs.qp import QPCap, QPInitAttrEx

from pytest_hpccomm.stacks.verbs.peer.endpoint import Endpoint, VerbsError, errno_of
from pytest_hpccomm.stacks.verbs.wire import QKEY

# the work-request builders an extended QP is created with (IBV_QP_EX_WITH_*), by opcode
SEND_OPS = {
    "SEND": e.IBV_QP_EX_WITH_SEND,
    "SEND_WITH_IMM": e.IBV_QP_EX_WITH_SEND_WITH_IMM,
    "RDMA_WRITE": e.IBV_QP_EX_WITH_RDMA_WRITE,
    "RDMA_WRITE_WITH_IMM": e.IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM,
    "RDMA_READ": e.IBV_QP_EX_WITH_RDMA_READ,
    "ATOMIC_CMP_AND_SWP": e.IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP,
    "ATOMIC_FETCH_AND_ADD": e.IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD,
    "BIND_MW": e.IBV_QP_EX_WITH_BIND_MW,  # posted by mw.MwOps, not by post()
}


def init_attr(
    qp_type: int, pd: PD, scq: Any, rcq: Any, cap: QPCap, srq: Any, ops: list[str]
) -> QPInitAttrEx:
    """The attributes of an extended QP with the builders of `ops` (default: all above but
    BIND_MW, which only a window test asks for)."""
    flags = 0
    for name in ops or [op for op in SEND_OPS if op != "BIND_MW"]:
        flags |= SEND_OPS[name]
    return QPInitAttrEx(
        qp_type=qp_type,
        scq=scq,
        rcq=rcq,
        srq=srq,
        cap=cap,
        pd=pd,
        sq_sig_all=0,
        comp_mask=e.IBV_QP_INIT_ATTR_PD | e.IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
        send_ops_flags=flags,
    )


def post(ep: Endpoint, wrs: list[tuple[dict[str, Any], Any]]) -> None:
    """Post (work request, its SGE) pairs in one wr_start ... wr_complete batch; a rejected
    batch raises with the errno wr_complete returned."""
    qp: Any = ep.qp
    qp.wr_start()
    for w, sge in wrs:
        opcode = w.get("opcode", "SEND")
        flags = e.IBV_SEND_SIGNALED if w.get("signaled", True) else 0
        qp.wr_id, qp.wr_flags = int(w.get("wr_id", 0)), flags
        rkey, raddr = int(w.get("rkey", 0)), int(w.get("remote_addr", 0))
        # "imm" is the raw __be32 of ibv_send_wr (the legacy path passes it as is); pyverbs'
        # builders take a host-order value and convert it: hand them that value
        imm = socket.ntohl(int(w.get("imm", 0)))
        if opcode == "SEND":
            qp.wr_send()
        elif opcode == "SEND_WITH_IMM":
            qp.wr_send_imm(imm)
        elif opcode == "RDMA_WRITE":
            qp.wr_rdma_write(rkey, raddr)
        elif opcode == "RDMA_WRITE_WITH_IMM":
            qp.wr_rdma_write_imm(rkey, raddr, imm)
        elif opcode == "RDMA_READ":
            qp.wr_rdma_read(rkey, raddr)
        elif opcode == "ATOMIC_CMP_AND_SWP":
            qp.wr_atomic_cmp_swp(rkey, raddr, int(w.get("compare_add", 0)), int(w.get("swap", 0)))
        elif opcode == "ATOMIC_FETCH_AND_ADD":
            qp.wr_atomic_fetch_add(rkey, raddr, int(w.get("compare_add", 0)))
        else:
            qp.wr_abort()
            raise VerbsError(f"no extended builder for {opcode}")
        if ep.qp_type == "UD":
            if ep.ah is None:
                qp.wr_abort()
                raise VerbsError("UD send without a remote address (ud_remote first)")
            qp.wr_set_ud_addr(ep.ah, ep.remote_qpn, QKEY)
        qp.wr_set_sge(sge)
    try:
        qp.wr_complete()
    except PyverbsError as exc:
        raise VerbsError(
            f"ibv_wr_complete ({len(wrs)} WRs, first {wrs[0][0].get('opcode', 'SEND')}): "
            f"errno {errno_of(exc)}: {exc}"
        ) from None
