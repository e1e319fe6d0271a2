"""Peer side of the verbs stack: pyverbs resources behind small JSON-able operations.

Imported only by the peer program (peer/__main__.py), never by pytest (peer rule). Every public
`op_*` method takes and returns plain JSON values; resources (MRs, QPs) are named by small
integer ids that the orchestrator passes back. Buffers are never shipped whole: the
orchestrator asks for a deterministic fill (seed) and compares SHA-256 digests, so a 4 MiB
integrity check costs two short messages.

Connection: RC and UD QPs on InfiniBand and RoCE are connected by hand (the orchestrator relays
QPN, PSN, LID and GID between the peers, as perftest does over its TCP side channel); iWARP
QPs only reach RTS through the connection manager, so on an RNIC the engine takes its context
and PD from librdmacm (one per device, shared by every CM id of the process) and connects
"external" QPs with rdma_cm (as rdma-core's tests do with with_ext_qp): engine_cm.py.
"""

from __future__ import annotations

import hashlib
import itertools
import random
import time
from typing import Any, Callable

import pyverbs.enums as e
from pyverbs.addr import AH, GID, AHAttr, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.device import Context, get_device_list
from pyverbs.mem_alloc import free
from pyverbs.mr import MR, MW
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsError
from pyverbs.qp import QP, QPAttr, QPCap, QPEx, QPInitAttr
from pyverbs.srq import SRQ
from pyverbs.wr import SGE, RecvWR, SendWR

from pytest_hpccomm.stacks.verbs.peer import qpex
from pytest_hpccomm.stacks.verbs.peer.api import ApiOps
from pytest_hpccomm.stacks.verbs.peer.cmid import CmConn, CmIdOps
from pytest_hpccomm.stacks.verbs.peer.endpoint import (
    STATE_NAMES,
    STATES,
    Endpoint,
    VerbsError,
    access_flags,
    errno_of,
    pattern,
    wc_json,
)
from pytest_hpccomm.stacks.verbs.peer.engine_cm import CmOps
from pytest_hpccomm.stacks.verbs.peer.events import EventOps, armed_cq
from pytest_hpccomm.stacks.verbs.peer.mw import MwOps
from pytest_hpccomm.stacks.verbs.peer.srq import SrqOps
from pytest_hpccomm.stacks.verbs.wire import QKEY

QP_TYPES = {"RC": e.IBV_QPT_RC, "UD": e.IBV_QPT_UD}
OPCODES = {
    "SEND": e.IBV_WR_SEND,
    "SEND_WITH_IMM": e.IBV_WR_SEND_WITH_IMM,
    "RDMA_WRITE": e.IBV_WR_RDMA_WRITE,
    "RDMA_WRITE_WITH_IMM": e.IBV_WR_RDMA_WRITE_WITH_IMM,
    "RDMA_READ": e.IBV_WR_RDMA_READ,
    "ATOMIC_CMP_AND_SWP": e.IBV_WR_ATOMIC_CMP_AND_SWP,
    "ATOMIC_FETCH_AND_ADD": e.IBV_WR_ATOMIC_FETCH_AND_ADD,
    "LOCAL_INV": e.IBV_WR_LOCAL_INV,  # invalidates `invalidate`, an rkey (no data)
    "SEND_WITH_INV": e.IBV_WR_SEND_WITH_INV,  # a SEND that invalidates it at the receiver
}
INVALIDATING = ("LOCAL_INV", "SEND_WITH_INV")
MTU_BYTES = {1: 256, 2: 512, 3: 1024, 4: 2048, 5: 4096}
PLANTS = ("mr-no-remote-write",)


class Engine(CmOps, CmIdOps, ApiOps, SrqOps, EventOps, MwOps):
    """The peer's verbs resources; its QPs connected through rdma_cm are engine_cm.CmOps,
    rdma_cm's own QPs cmid.CmIdOps, the object-level calls of rdma-core's API tests
    api.ApiOps, shared receive queues srq.SrqOps, waiting for events events.EventOps, memory
    windows mw.MwOps."""

    def __init__(
        self,
        device: str,
        port: int = 1,
        gid_index: int | None = None,
        address: str | None = None,
        plant: str | None = None,
    ) -> None:
        if plant is not None and plant not in PLANTS:
            raise ValueError(f"unknown planted bug {plant!r}: expected one of {PLANTS}")
        self.device, self.port, self.plant = device, port, plant
        self.node_type = self._node_type(device)
        self.iwarp = self.node_type == e.IBV_NODE_RNIC
        self.address = address
        self._cm_anchor: Any = None
        if self.iwarp:
            self.ctx, self.pd = self._cm_context(address)
        else:
            self.ctx = Context(name=device)
            self.pd = PD(self.ctx)
        self.dev_attr = self.ctx.query_device()
        self.port_attr = self.ctx.query_port(port)
        self.gid_index = 0 if gid_index is None else gid_index
        self.gid = self.ctx.query_gid(port, self.gid_index).gid
        self.mrs: dict[int, MR] = {}
        self._rereg_kept = []
        self.srqs: dict[int, SRQ] = {}
        self.mws: dict[int, tuple[MW, int]] = {}
        self.eps: dict[int, Endpoint] = {}
        self.cms: dict[int, CmConn] = {}
        self._ids = itertools.count(1)
        self._psn = random.Random(port * 7919 + id(self))

    @staticmethod
    def _node_type(device: str) -> int:
        for dev in get_device_list():
            if dev.name.decode() == device:
                return int(dev.node_type)
        names = ", ".join(d.name.decode() for d in get_device_list()) or "none"
        raise VerbsError(f"no RDMA device {device!r} (devices: {names})")

    # -- description --------------------------------------------------------------------------
    def op_info(self, msg: dict[str, Any]) -> dict[str, Any]:
        a, p = self.dev_attr, self.port_attr
        return {
            "device": self.device,
            "port": self.port,
            "gid_index": self.gid_index,
            "gid": self.gid,
            "lid": p.lid,
            "link_layer": int(p.link_layer),
            "iwarp": self.iwarp,
            "node_type": self.node_type,
            "active_mtu": MTU_BYTES.get(int(p.active_mtu)),
            "max_mtu": MTU_BYTES.get(int(p.max_mtu)),
            "fw_ver": a.fw_version,
            "max_qp_wr": a.max_qp_wr,
            "max_sge": a.max_sge,
            "max_mr_size": a.max_mr_size,
            "max_qp_rd_atom": a.max_qp_rd_atom,
            "max_qp_init_rd_atom": a.max_qp_init_rd_atom,
            "atomic_cap": int(a.atomic_caps),
            "plant": self.plant,
        }

    # -- memory ---------------------------------------------------------------------------------
    def op_reg_mr(self, msg: dict[str, Any]) -> dict[str, Any]:
        length = int(msg["length"])
        names = list(msg.get("access", ["local_write"]))
        if self.plant == "mr-no-remote-write" and "remote_write" in names:
            names.remove("remote_write")  # the planted bug: asked for, silently not granted
        access = access_flags(names)
        try:
            mr = MR(self.pd, max(length, 1), access)
        except PyverbsError as exc:
            raise VerbsError(
                f"ibv_reg_mr(length={length}, access={'|'.join(names)}): {exc}"
            ) from None
        mid = next(self._ids)
        self.mrs[mid] = mr
        mr.write(b"\0" * mr.length, mr.length, 0)
        return {"mr": mid, "addr": mr.buf, "rkey": mr.rkey, "lkey": mr.lkey, "length": length}

    def op_dereg_mr(self, msg: dict[str, Any]) -> None:
        # forgotten only once gone: a refused dereg (a window still bound) keeps it
        self.mrs[int(msg["mr"])].close()
        del self.mrs[int(msg["mr"])]

    def _region(self, msg: dict[str, Any]) -> tuple[MR, int, int]:
        mr = self.mrs[int(msg["mr"])]
        offset, length = int(msg.get("offset", 0)), int(msg["length"])
        if offset < 0 or length < 0 or offset + length > mr.length:
            raise VerbsError(f"region [{offset}, {offset + length}) outside MR of {mr.length} B")
        return mr, offset, length

    def op_fill(self, msg: dict[str, Any]) -> str:
        """Write pattern(seed) (or one repeated byte) and return its digest."""
        mr, offset, length = self._region(msg)
        data = bytes([msg["byte"]]) * length if "byte" in msg else pattern(length, msg["seed"])
        if length:
            mr.write(data, length, offset)
        return hashlib.sha256(data).hexdigest()

    def op_digest(self, msg: dict[str, Any]) -> str:
        mr, offset, length = self._region(msg)
        return hashlib.sha256(mr.read(length, offset) if length else b"").hexdigest()

    def op_read(self, msg: dict[str, Any]) -> str:
        mr, offset, length = self._region(msg)
        return mr.read(length, offset).hex()

    def op_write(self, msg: dict[str, Any]) -> None:
        data = bytes.fromhex(msg["hex"])
        mr, offset, _ = self._region({**msg, "length": len(data)})
        mr.write(data, len(data), offset)

    # -- queue pairs ----------------------------------------------------------------------------
    def op_create_qp(self, msg: dict[str, Any]) -> dict[str, Any]:
        qp_type = msg.get("qp_type", "RC")
        send_wr = min(int(msg.get("max_send_wr", 128)), self.dev_attr.max_qp_wr)
        recv_wr = min(int(msg.get("max_recv_wr", 128)), self.dev_attr.max_qp_wr)
        sge = min(int(msg.get("max_sge", 1)), self.dev_attr.max_sge)
        channels = {}
        if msg.get("events"):  # each CQ on a completion channel of its own, armed
            scq, channels["send"] = armed_cq(self.ctx, send_wr + 1)
            rcq, channels["recv"] = armed_cq(self.ctx, recv_wr + 1)
        else:
            scq, rcq = CQ(self.ctx, send_wr + 1), CQ(self.ctx, recv_wr + 1)
        cap = QPCap(
            max_send_wr=send_wr,
            max_recv_wr=recv_wr,
            max_send_sge=sge,
            max_recv_sge=sge,
            max_inline_data=int(msg.get("max_inline", 0)),
        )
        # with a shared receive queue (`srq`: its id) the QP's receives come from it
        srq = self.srqs[int(msg["srq"])] if "srq" in msg else None
        try:
            if msg.get("ex"):  # posts through the extended API (qpex.py)
                attr = qpex.init_attr(
                    QP_TYPES[qp_type], self.pd, scq, rcq, cap, srq, list(msg.get("send_ops", []))
                )
                qp = QPEx(self.ctx, attr)
            else:
                init = QPInitAttr(
                    qp_type=QP_TYPES[qp_type], scq=scq, rcq=rcq, srq=srq, cap=cap, sq_sig_all=0
                )
                qp = QP(self.pd, init)
        except PyverbsError as exc:
            for cq in (scq, rcq):
                cq.close()
            raise VerbsError(
                f"ibv_create_qp{'_ex' if msg.get('ex') else ''}({qp_type}): "
                f"errno {errno_of(exc)}: {exc}"
            ) from None
        ep = Endpoint(
            qp,
            scq,
            rcq,
            qp_type,
            self._psn.randrange(1 << 24),
            send_wr,
            recv_wr,
            retry_cnt=max(0, min(7, int(msg.get("retry_cnt", 7)))),
            channels=channels,
            ex=bool(msg.get("ex")),
            rd_atomic=int(msg.get("rd_atomic", 16)),
        )
        eid = next(self._ids)
        self.eps[eid] = ep
        return {"ep": eid, **self._address(ep)}

    def _address(self, ep: Endpoint) -> dict[str, Any]:
        return {
            "qpn": ep.qp.qp_num,
            "psn": ep.psn,
            "lid": self.port_attr.lid,
            "gid": self.gid,
            "qkey": QKEY,
            "mtu": int(self.port_attr.active_mtu),
        }

    def op_destroy_qp(self, msg: dict[str, Any]) -> None:
        ep = self.eps.pop(int(msg["ep"]))
        for obj in (ep.cm, ep.listen):
            if obj is not None:
                try:
                    obj.close()
                except PyverbsError:
                    pass
        ep.qp.close()
        ep.scq.close()
        ep.rcq.close()
        for channel, _ in ep.channels.values():
            channel.close()

    def op_query_qp(self, msg: dict[str, Any]) -> dict[str, Any]:
        ep = self.eps[int(msg["ep"])]
        attr, _ = ep.qp.query(e.IBV_QP_STATE)
        return {"state": STATE_NAMES.get(attr.qp_state, str(attr.qp_state))}

    def _attrs(
        self, ep: Endpoint, state: str, remote: dict[str, Any] | None, access: list[str]
    ) -> tuple[QPAttr, dict[str, int]]:
        """The attributes a transition to `state` needs, as ibv_modify_qp(3) lists them."""
        attr = QPAttr(qp_state=STATES[state])
        fields: dict[str, int] = {"STATE": e.IBV_QP_STATE}
        if state == "INIT":
            attr.pkey_index, attr.port_num = 0, self.port
            fields |= {"PKEY_INDEX": e.IBV_QP_PKEY_INDEX, "PORT": e.IBV_QP_PORT}
            if ep.qp_type == "UD":
                attr.qkey = QKEY
                fields["QKEY"] = e.IBV_QP_QKEY
            else:
                attr.qp_access_flags = access_flags(access)
                fields["ACCESS_FLAGS"] = e.IBV_QP_ACCESS_FLAGS
        elif state == "RTR" and ep.qp_type == "RC":
            remote = remote or {}
            attr.path_mtu = min(int(remote.get("mtu", 3)), int(self.port_attr.active_mtu))
            attr.dest_qp_num = int(remote.get("qpn", 0))
            attr.rq_psn = int(remote.get("psn", 0))
            attr.max_dest_rd_atomic = min(ep.rd_atomic, max(1, self.dev_attr.max_qp_rd_atom))
            attr.min_rnr_timer = 1  # 0.01 ms: the peers post receives a moment late
            attr.ah_attr = self._ah_attr(remote)
            fields |= {
                "AV": e.IBV_QP_AV,
                "PATH_MTU": e.IBV_QP_PATH_MTU,
                "DEST_QPN": e.IBV_QP_DEST_QPN,
                "RQ_PSN": e.IBV_QP_RQ_PSN,
                "MAX_DEST_RD_ATOMIC": e.IBV_QP_MAX_DEST_RD_ATOMIC,
                "MIN_RNR_TIMER": e.IBV_QP_MIN_RNR_TIMER,
            }
        elif state == "RTS":
            attr.sq_psn = ep.psn
            fields["SQ_PSN"] = e.IBV_QP_SQ_PSN
            if ep.qp_type == "RC":
                # rnr_retry 7: forever (IBTA); retry_cnt 7 is 7 retries, but rxe retries
                # forever at 7 (rxe_comp.c), so a fault test asks for fewer
                attr.timeout, attr.retry_cnt, attr.rnr_retry = 14, ep.retry_cnt, 7
                attr.max_rd_atomic = min(ep.rd_atomic, max(1, self.dev_attr.max_qp_init_rd_atom))
                fields |= {
                    "TIMEOUT": e.IBV_QP_TIMEOUT,
                    "RETRY_CNT": e.IBV_QP_RETRY_CNT,
                    "RNR_RETRY": e.IBV_QP_RNR_RETRY,
                    "MAX_QP_RD_ATOMIC": e.IBV_QP_MAX_QP_RD_ATOMIC,
                }
        return attr, fields

    def _ah_attr(self, remote: dict[str, Any]) -> AHAttr:
        gr = GlobalRoute(
            dgid=GID(remote.get("gid", self.gid)), sgid_index=self.gid_index, hop_limit=64
        )
        # RoCE and iWARP route by GID; InfiniBand by LID (a GRH only across subnets)
        is_global = int(self.port_attr.link_layer) == e.IBV_LINK_LAYER_ETHERNET
        return AHAttr(
            port_num=self.port,
            is_global=int(is_global),
            gr=gr,
            dlid=int(remote.get("lid", 0)),
            sl=0,
        )

    def op_modify_qp(self, msg: dict[str, Any]) -> dict[str, Any]:
        """One raw transition (the state-machine tests): attributes as `_attrs` builds them,
        minus the fields named in `omit`. A rejection raises VerbsError with the errno."""
        ep = self.eps[int(msg["ep"])]
        state = msg["state"]
        attr, fields = self._attrs(ep, state, msg.get("remote"), msg.get("access", ["local_write"]))
        mask = 0
        for name, bit in fields.items():
            if name not in msg.get("omit", []):
                mask |= bit
        try:
            ep.qp.modify(attr, mask)
        except PyverbsError as exc:
            raise VerbsError(f"ibv_modify_qp(->{state}): errno {errno_of(exc)}: {exc}") from None
        return self.op_query_qp(msg)

    def op_connect(self, msg: dict[str, Any]) -> dict[str, Any]:
        """RESET -> INIT -> RTR -> RTS with the remote's address (UD: no remote needed)."""
        ep = self.eps[int(msg["ep"])]
        access = msg.get("access", ["local_write", "remote_write", "remote_read", "remote_atomic"])
        for state in ("INIT", "RTR", "RTS"):
            attr, fields = self._attrs(ep, state, msg.get("remote"), access)
            mask = 0
            for bit in fields.values():
                mask |= bit
            try:
                ep.qp.modify(attr, mask)
            except PyverbsError as exc:
                raise VerbsError(f"ibv_modify_qp(->{state}): {exc}") from None
        if ep.qp_type == "UD" and msg.get("remote"):
            self._set_ud_remote(ep, msg["remote"])
        return self.op_query_qp(msg)

    def op_ud_remote(self, msg: dict[str, Any]) -> None:
        self._set_ud_remote(self.eps[int(msg["ep"])], msg["remote"])

    def _set_ud_remote(self, ep: Endpoint, remote: dict[str, Any]) -> None:
        ep.ah = AH(self.pd, attr=self._ah_attr(remote))
        ep.remote_qpn = int(remote["qpn"])

    # -- work requests --------------------------------------------------------------------------
    def _sge(self, wr: dict[str, Any]) -> SGE:
        mr, offset, length = self._region(wr)
        return SGE(mr.buf + offset, length, int(wr.get("lkey", mr.lkey)))

    def _sges(self, msg: dict[str, Any], n: int) -> list[SGE]:
        """The region as `n` SGEs of equal length (the last takes the rest)."""
        if n <= 1:
            return [self._sge(msg)]
        offset, length = int(msg.get("offset", 0)), int(msg["length"])
        part = length // n
        return [
            self._sge({**msg, "offset": offset + i * part,
                       "length": part if i < n - 1 else length - part * (n - 1)})
            for i in range(n)
        ]  # fmt: skip

    def op_post_recv(self, msg: dict[str, Any]) -> None:
        ep = self.eps[int(msg["ep"])]
        sg = self._sges(msg, int(msg.get("sges", 1)))
        for i in range(int(msg.get("count", 1))):
            wr = RecvWR(wr_id=int(msg.get("wr_id", 0)) + i, num_sge=len(sg), sg=sg)
            try:
                ep.qp.post_recv(wr)
            except PyverbsError as exc:
                raise VerbsError(f"ibv_post_recv (WR {i}): errno {errno_of(exc)}: {exc}") from None

    def _send_wr(self, ep: Endpoint, w: dict[str, Any]) -> SendWR:
        opcode = w.get("opcode", "SEND")
        flags = e.IBV_SEND_SIGNALED if w.get("signaled", True) else 0
        if w.get("inline"):
            flags |= e.IBV_SEND_INLINE
        sg = [self._sge(w)] if "mr" in w else []  # LOCAL_INV moves no data
        wr = SendWR(
            wr_id=int(w.get("wr_id", 0)),
            opcode=OPCODES[opcode],
            num_sge=len(sg),
            sg=sg or None,
            send_flags=flags,
            # the union of imm_data and invalidate_rkey
            imm_data=int(w["invalidate"] if opcode in INVALIDATING else w.get("imm", 0)),
        )
        if opcode.startswith("RDMA"):
            wr.set_wr_rdma(int(w["rkey"]), int(w["remote_addr"]))
        elif opcode.startswith("ATOMIC"):
            wr.set_wr_atomic(
                int(w["rkey"]),
                int(w["remote_addr"]),
                int(w.get("compare_add", 0)),
                int(w.get("swap", 0)),
            )
        if ep.qp_type == "UD":
            if ep.ah is None:
                raise VerbsError("UD send without a remote address (ud_remote first)")
            wr.set_wr_ud(ep.ah, ep.remote_qpn, QKEY)
        return wr

    def op_post_send(self, msg: dict[str, Any]) -> None:
        """Post each WR in order; a rejected post raises with its index and errno."""
        ep = self.eps[int(msg["ep"])]
        if ep.ex:
            qpex.post(ep, [(w, self._sge(w)) for w in msg["wrs"]])
            return
        for i, w in enumerate(msg["wrs"]):
            wr = self._send_wr(ep, w)
            try:
                ep.qp.post_send(wr)
            except PyverbsError as exc:
                raise VerbsError(
                    f"ibv_post_send (WR {i}, {w.get('opcode', 'SEND')}, wr_id "
                    f"{w.get('wr_id', 0)}): errno {errno_of(exc)}: {exc}"
                ) from None

    def op_execute(self, msg: dict[str, Any]) -> list[dict[str, Any]]:
        """post_send, then poll the send CQ: one round trip for the orchestrator."""
        self.op_post_send(msg)
        return self.op_poll({**msg, "cq": "send"})

    def op_digests(self, msg: dict[str, Any]) -> list[str]:
        """Digests of several regions of one MR: [[offset, length], ...]."""
        return [
            self.op_digest({"mr": msg["mr"], "offset": o, "length": n}) for o, n in msg["regions"]
        ]

    def op_poll(self, msg: dict[str, Any]) -> list[dict[str, Any]]:
        """Up to `count` completions from the send or recv CQ within `wait` seconds; on an
        rdma_cm connection the wait ends early once rdma_cm reports it gone (the other side
        closed it: siw's TERMINATE leaves rdma_cm silent, there only the deadline ends it)."""
        ep = self.eps[int(msg["ep"])]
        cq = ep.rcq if msg.get("cq") == "recv" else ep.scq
        gone: Callable[[], bool] | None = None
        if ep.cm is not None and ep.channel_fd is not None:
            gone = lambda: bool(self._cm_drain(ep))  # noqa: E731
        return [
            wc_json(wc)
            for wc in poll(cq, int(msg.get("count", 1)), float(msg.get("wait", 10)), gone)
        ]

    def op_diagnose(self, msg: dict[str, Any]) -> dict[str, Any]:
        """What a silent QP can tell: its state as the device reports it, and the rdma_cm
        events since it was established (a DISCONNECTED means the connection is gone)."""
        ep = self.eps[int(msg["ep"])]
        events = list(self._cm_drain(ep))
        try:
            state = self.op_query_qp(msg)["state"]
        except PyverbsError as exc:
            state = f"unknown (ibv_query_qp: {exc})"
        return {"qp_state": state, "cm_events": events}

    # -- benchmarks (see bench.py) --------------------------------------------------------------
    def op_bench(
        self, msg: dict[str, Any], notify: Callable[[], None] = lambda: None
    ) -> dict[str, Any]:
        """One benchmark at one size; notify() once receives are posted (the driver starts
        the other side only then)."""
        from pytest_hpccomm.stacks.verbs.peer.bench import BenchError, run_bench

        ep = self.eps[int(msg["ep"])]
        try:
            return run_bench(self.mrs, ep, msg, notify)
        except BenchError as exc:
            raise VerbsError(str(exc)) from None

    def close(self) -> None:
        for eid in list(self.eps):
            try:
                self.op_destroy_qp({"ep": eid})
            except PyverbsError:
                pass
        for mw, _ in self.mws.values():
            mw.close()
        self.mws.clear()
        for srq in self.srqs.values():
            srq.close()
        self.srqs.clear()
        for mr in self.mrs.values():
            mr.close()
        self.mrs.clear()
        for pd, buf in self._rereg_kept:
            if pd is not None:
                pd.close()
            if buf:
                free(buf)
        if self._cm_anchor is not None:
            self._cm_anchor[1].close()
        else:
            self.pd.close()
            self.ctx.close()


GONE_CHECK = 0.2  # seconds between looks at the connection while a CQ stays empty
FLUSH_GRACE = 0.5  # once the connection is gone, flushed completions may still come


def poll(cq: CQ, count: int, timeout: float, gone: Callable[[], bool] | None = None) -> list[Any]:
    """Busy-poll (as perftest does) until `count` completions or the timeout; gone() says
    the connection was torn down, which shortens the wait to a grace for flushes."""
    got: list[Any] = []
    now = time.monotonic()
    deadline, check = now + timeout, now + GONE_CHECK
    while len(got) < count:
        n, wcs = cq.poll(min(16, count - len(got)))
        if n:
            got.extend(wcs[:n])
            continue
        now = time.monotonic()
        if now > deadline:
            break
        if gone is not None and now > check:
            check = now + GONE_CHECK
            if gone():
                deadline, gone = min(deadline, now + FLUSH_GRACE), None
    return got
