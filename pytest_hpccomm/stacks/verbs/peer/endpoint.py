"""Peer side of the verbs stack: what the engine (engine.py) and its mixins share: an endpoint
(a QP, its CQs and its connection state), the error every failed verbs call becomes, the
deterministic buffer fill and a completion as JSON."""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pyverbs.enums as e
from pyverbs.addr import AH
from pyverbs.cq import CQ
from pyverbs.pyverbs_error import PyverbsRDMAError
from pyverbs.qp import QP

from pytest_hpccomm.stacks.verbs.wire import status_text

# access flags and QP states by the names the orchestrator uses (engine.py, api.py)
ACCESS = {
    "local_write": e.IBV_ACCESS_LOCAL_WRITE,
    "remote_write": e.IBV_ACCESS_REMOTE_WRITE,
    "remote_read": e.IBV_ACCESS_REMOTE_READ,
    "remote_atomic": e.IBV_ACCESS_REMOTE_ATOMIC,
    "mw_bind": e.IBV_ACCESS_MW_BIND,
}
STATES = {
    "RESET": e.IBV_QPS_RESET,
    "INIT": e.IBV_QPS_INIT,
    "RTR": e.IBV_QPS_RTR,
    "RTS": e.IBV_QPS_RTS,
    "SQD": e.IBV_QPS_SQD,
    "SQE": e.IBV_QPS_SQE,
    "ERR": e.IBV_QPS_ERR,
}
STATE_NAMES = {v: k for k, v in STATES.items()}
WC_OPCODES = {
    e.IBV_WC_SEND: "SEND",
    e.IBV_WC_RDMA_WRITE: "RDMA_WRITE",
    e.IBV_WC_RDMA_READ: "RDMA_READ",
    e.IBV_WC_COMP_SWAP: "ATOMIC_CMP_AND_SWP",
    e.IBV_WC_FETCH_ADD: "ATOMIC_FETCH_AND_ADD",
    e.IBV_WC_RECV: "RECV",
    e.IBV_WC_RECV_RDMA_WITH_IMM: "RECV_RDMA_WITH_IMM",
}


def access_flags(names: Iterable[Any]) -> int:
    """The IBV_ACCESS_* bits of the access names given (ACCESS)."""
    flags = 0
    for name in names:
        flags |= ACCESS[str(name)]
    return flags


class VerbsError(Exception):
    """A verbs call failed; the message names the call and the errno."""


def pattern(length: int, seed: int) -> bytes:
    """Deterministic bytes, distinct per seed, so a stale or shifted buffer cannot match."""
    return random.Random(seed).randbytes(length)


def errno_of(exc: Exception) -> int | None:
    return getattr(exc, "error_code", None) if isinstance(exc, PyverbsRDMAError) else None


@dataclass
class Endpoint:
    qp: QP
    scq: CQ
    rcq: CQ
    qp_type: str
    psn: int
    max_send_wr: int
    max_recv_wr: int
    ah: AH | None = None
    remote_qpn: int = 0
    cm: Any = None  # CMID of an rdma_cm connection (iWARP)
    listen: Any = None  # listening CMID while accepting
    channel: Any = None  # CMEventChannel
    channel_fd: int | None = None  # its descriptor, non-blocking (None: not found)
    cm_events: list[str] = field(default_factory=list)  # seen after ESTABLISHED
    retry_cnt: int = 7  # RC: transport retries before IBV_WC_RETRY_EXC_ERR (7 = 7, per IBTA)
    # "send"/"recv" -> (its CQ's completion channel, the channel's fd): events.armed_cq
    channels: dict[str, tuple[Any, int]] = field(default_factory=dict)
    ex: bool = False  # an extended QP (ibv_qp_ex): its sends go through qpex.post
    rd_atomic: int = 16  # RDMA READs/atomics in flight asked for, each way (capped by the device)


def wc_json(wc: Any) -> dict[str, Any]:
    return {
        "wr_id": wc.wr_id,
        "status": wc.status,
        "status_text": status_text(wc.status),
        "opcode": WC_OPCODES.get(wc.opcode, str(wc.opcode)),
        "byte_len": wc.byte_len,
        "vendor_err": wc.vendor_err,
        "src_qp": wc.src_qp,
        "imm": wc.imm_data,
    }
