"""Peer side of the verbs stack: shared receive queues, as rdma-core's tests/test_srq.py uses
them (the limit event they raise arrives through events.EventOps). Imported only by the peer
program (peer rule).
"""

from __future__ import annotations

from typing import Any

import pyverbs.enums as e
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsError
from pyverbs.srq import SRQ, SrqAttr, SrqInitAttr
from pyverbs.wr import SGE, RecvWR

from pytest_hpccomm.stacks.verbs.peer.api import outcome
from pytest_hpccomm.stacks.verbs.peer.endpoint import VerbsError

SRQ_FIELDS = {"max_wr": e.IBV_SRQ_MAX_WR, "srq_limit": e.IBV_SRQ_LIMIT}


class SrqOps:
    """Mixed into the engine: needs its pd, MRs and id counter."""

    pd: PD
    mrs: dict[int, MR]
    srqs: dict[int, SRQ]
    _ids: Any

    def op_create_srq(self, msg: dict[str, Any]) -> dict[str, Any]:
        attr = SrqAttr(max_wr=int(msg.get("max_wr", 64)), max_sge=int(msg.get("max_sge", 1)))
        try:
            srq = SRQ(self.pd, SrqInitAttr(attr))
        except PyverbsError as exc:
            raise VerbsError(f"ibv_create_srq: {exc}") from None
        sid = next(self._ids)
        self.srqs[sid] = srq
        return {"srq": sid}

    def op_destroy_srq(self, msg: dict[str, Any]) -> None:
        self.srqs.pop(int(msg["srq"])).close()

    def op_post_srq_recv(self, msg: dict[str, Any]) -> None:
        """`count` receives of `length` bytes each, at `offset`, offset + length, ... of MR
        `mr`, with wr_id, wr_id + 1, ..."""
        srq, mr = self.srqs[int(msg["srq"])], self.mrs[int(msg["mr"])]
        offset, length = int(msg.get("offset", 0)), int(msg["length"])
        count = int(msg.get("count", 1))
        if offset + count * length > mr.length:
            raise VerbsError(f"{count} receives of {length} B past the MR's {mr.length} B")
        for i in range(count):
            sge = SGE(mr.buf + offset + i * length, length, mr.lkey)
            wr = RecvWR(wr_id=int(msg.get("wr_id", 0)) + i, num_sge=1, sg=[sge])
            try:
                srq.post_recv(wr)
            except PyverbsError as exc:
                raise VerbsError(f"ibv_post_srq_recv (WR {i}): {exc}") from None

    def op_api_modify_srq(self, msg: dict[str, Any]) -> dict[str, Any]:
        """ibv_modify_srq with the fields given (max_wr, srq_limit); ok: None."""
        srq = self.srqs[int(msg["srq"])]
        attr, mask = SrqAttr(), 0
        for name, bit in SRQ_FIELDS.items():
            if name in msg:
                setattr(attr, name, int(msg[name]))
                mask |= bit
        return outcome(lambda: srq.modify(attr, mask))

    def op_api_query_srq(self, msg: dict[str, Any]) -> dict[str, Any]:
        srq = self.srqs[int(msg["srq"])]

        def query() -> dict[str, int]:
            got = srq.query()
            return {"max_wr": int(got.max_wr), "max_sge": int(got.max_sge),
                    "srq_limit": int(got.srq_limit)}  # fmt: skip

        return outcome(query)
