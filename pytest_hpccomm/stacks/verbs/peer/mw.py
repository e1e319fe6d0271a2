"""Peer side of the verbs stack: memory windows, as rdma-core's tests/test_mr.py (MWTest) uses
them: allocated on the engine's PD, bound to one of its MRs through an endpoint's QP (type 1
with ibv_bind_mw, type 2 with an IBV_WR_BIND_MW work request), deallocated. Invalidation is a
work request (LOCAL_INV, SEND_WITH_INV: engine.py). Imported only by the peer program (peer
rule).
"""

from __future__ import annotations

from typing import Any

import pyverbs.enums as e
from pyverbs.base import inc_rkey
from pyverbs.mr import MR, MW, MWBind, MWBindInfo
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsError
from pyverbs.wr import SendWR

from pytest_hpccomm.stacks.verbs.peer.api import outcome
from pytest_hpccomm.stacks.verbs.peer.endpoint import Endpoint, VerbsError, access_flags, errno_of


class MwOps:
    """Mixed into the engine: needs its pd, MRs, endpoints and id counter."""

    pd: PD
    mrs: dict[int, MR]
    eps: dict[int, Endpoint]
    mws: dict[int, tuple[MW, int]]  # id -> (window, its type)
    _ids: Any

    def op_api_alloc_mw(self, msg: dict[str, Any]) -> dict[str, Any]:
        """ibv_alloc_mw of `type` (1 or 2, or any other number upstream tries); ok is its id
        and rkey."""
        kind = int(msg["type"])

        def alloc() -> dict[str, int]:
            mw = MW(self.pd, kind)
            mid = next(self._ids)
            self.mws[mid] = (mw, kind)
            return {"mw": mid, "rkey": int(mw.rkey)}

        return outcome(alloc)

    def op_dealloc_mw(self, msg: dict[str, Any]) -> None:
        self.mws.pop(int(msg["mw"]))[0].close()

    def op_bind_mw(self, msg: dict[str, Any]) -> dict[str, int]:
        """Bind window `mw` to `length` bytes at `offset` of MR `mr` with the `access` named,
        through endpoint `ep`'s QP (an extended one: with wr_bind_mw), signalled with `wr_id`;
        the rkey the window now has. Its completion arrives on the endpoint's send CQ."""
        ep, (mw, kind) = self.eps[int(msg["ep"])], self.mws[int(msg["mw"])]
        mr = self.mrs[int(msg["mr"])]
        access = access_flags(msg.get("access", []))
        info = MWBindInfo(mr, mr.buf + int(msg.get("offset", 0)), int(msg["length"]), access)
        wr_id = int(msg.get("wr_id", 0))
        try:
            if ep.ex:  # through the extended API: wr_bind_mw (type 2)
                rkey = inc_rkey(mw.rkey)
                qp: Any = ep.qp
                qp.wr_start()
                qp.wr_id, qp.wr_flags = wr_id, e.IBV_SEND_SIGNALED
                qp.wr_bind_mw(mw, rkey, info)
                qp.wr_complete()
                return {"rkey": int(rkey)}
            if kind == 1:
                ep.qp.bind_mw(mw, MWBind(info, e.IBV_SEND_SIGNALED, wr_id))
                return {"rkey": int(mw.rkey)}
            wr = SendWR(wr_id=wr_id, opcode=e.IBV_WR_BIND_MW, send_flags=e.IBV_SEND_SIGNALED)
            wr.set_bind_wr(mw, info)
            ep.qp.post_send(wr)
            return {"rkey": int(wr.rkey)}
        except PyverbsError as exc:
            raise VerbsError(f"bind of a type {kind} MW: errno {errno_of(exc)}: {exc}") from None
