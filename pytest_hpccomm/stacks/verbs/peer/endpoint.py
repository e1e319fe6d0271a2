"""Peer side of the verbs stack: what the engine (engine.py) and its rdma_cm half
(engine_cm.py) share: an endpoint (a QP, its CQs and its connection state), the error every
failed verbs call becomes, and the deterministic buffer fill."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

import pyverbs.enums as e
from pyverbs.addr import AH
from pyverbs.cq import CQ
from pyverbs.pyverbs_error import PyverbsRDMAError
from pyverbs.qp import QP

# access flags and QP states by the names the orchestrator uses (engine.py, api.py)
ACCESS = {
    "local_write": e.IBV_ACCESS_LOCAL_WRITE,
    "remote_write": e.IBV_ACCESS_REMOTE_WRITE,
    "remote_read": e.IBV_ACCESS_REMOTE_READ,
    "remote_atomic": e.IBV_ACCESS_REMOTE_ATOMIC,
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
