"""Peer side of the verbs stack: rdma_cm's own QPs, as rdma-core's tests/test_rdmacm.py drives
them: a QP made by rdma_create_qp on the CM id (librdmacm makes its two CQs, each on a
completion channel of its own), connected, rejected or refused through the CM's events, and
traffic posted and reaped with librdmacm's verbs (rdma_post_send / recv / read / write,
rdma_get_send_comp / rdma_get_recv_comp).

Every wait has a deadline: the CM channel and both completion channels are made non-blocking
and polled, so librdmacm's calls return EAGAIN instead of blocking the peer (pyverbs holds the
GIL in them). A connection is a handle; a passive side's accepted id is a handle of its own,
sharing its listener's channel. Imported only by the peer program (peer rule).
"""

from __future__ import annotations

import errno
import select
import time
from dataclasses import dataclass, field
from typing import Any

import pyverbs.enums as e
from pyverbs.mr import MR
from pyverbs.pyverbs_error import PyverbsError, PyverbsRDMAError

from pytest_hpccomm.stacks.verbs.peer.endpoint import STATE_NAMES, VerbsError, errno_of, wc_json
from pytest_hpccomm.stacks.verbs.peer.engine_cm import (
    cm_event_name,
    next_event,
    open_cm_channel,
    wait_event,
)
from pytest_hpccomm.stacks.verbs.peer.events import event_fds

RECV, SEND = "recv", "send"


@dataclass
class CmConn:
    """A CM id and what the peer knows of it."""

    port_space: str  # "tcp" (RC) or "udp" (UD)
    id: Any  # the CMID: a listener until accept, or one side of a connection
    channel: Any  # its CMEventChannel (a listener's, for an accepted id)
    channel_fd: int | None
    owns_channel: bool
    comp_fds: dict[str, int] = field(default_factory=dict)  # RECV/SEND -> completion channel
    mrs: list[int] = field(default_factory=list)  # ids of the MRs registered on this id
    ud: Any = None  # UDP: the other side's UDParam (ESTABLISHED on the active side)
    recv_mr: Any = None  # UDP: the MR of the receive posted last (its GRH names the sender)
    reply_ah: Any = None  # UDP: an AH back to the sender of the last datagram received


class CmIdOps:
    """Mixed into the engine: needs its address, MR table and id counter."""

    address: str | None
    mrs: dict[int, MR]
    _ids: Any
    cms: dict[int, CmConn]

    def _cm(self, msg: dict[str, Any]) -> CmConn:
        return self.cms[int(msg["cm"])]

    def _new_cm(self, conn: CmConn) -> dict[str, Any]:
        cid = next(self._ids)
        self.cms[cid] = conn
        return {"cm": cid}

    def op_cmid_listen(self, msg: dict[str, Any]) -> dict[str, Any]:
        from pyverbs.cmid import CMID, AddrInfo, CMEventChannel

        ps = _port_space(msg)
        channel, fd = open_cm_channel(CMEventChannel)
        cmid = CMID(creator=channel, port_space=ps)
        cmid.bind_addr(
            AddrInfo(
                src=msg["address"], src_service=str(msg["port"]), port_space=ps, flags=_passive()
            )
        )
        cmid.listen()
        return self._new_cm(CmConn(msg.get("port_space", "tcp"), cmid, channel, fd, True))

    def op_cmid_connect(self, msg: dict[str, Any]) -> dict[str, Any]:
        """Resolve the address and route, make the QP, set the ACK timeout if asked, and send
        the connection request (UDP: the service ID resolution request)."""
        import pyverbs.cm_enums as ce
        from pyverbs.cmid import CMID, AddrInfo, CMEventChannel, ConnParam

        ps = _port_space(msg)
        limit = float(msg.get("limit", 30))
        channel, fd = open_cm_channel(CMEventChannel)
        cmid = CMID(creator=channel, port_space=ps)
        conn = CmConn(msg.get("port_space", "tcp"), cmid, channel, fd, True)
        out = self._new_cm(conn)
        ai = AddrInfo(
            src=self.address, dst=msg["address"], dst_service=str(msg["port"]), port_space=ps
        )
        try:
            cmid.resolve_addr(ai, int(limit * 1000))
            wait_event(channel, fd, ce.RDMA_CM_EVENT_ADDR_RESOLVED, limit).ack_cm_event()
            cmid.resolve_route(int(limit * 1000))
            wait_event(channel, fd, ce.RDMA_CM_EVENT_ROUTE_RESOLVED, limit).ack_cm_event()
            self._own_qp(conn, msg)
            cmid.connect(ConnParam())
        except BaseException:
            self.op_cmid_close(out)
            raise
        return {**out, "qpn": cmid.qpn}

    def op_cmid_accept(self, msg: dict[str, Any]) -> dict[str, Any]:
        """The next connection request on listener `cm`: a new id with its own QP, accepted,
        or rejected with `reject` as private data."""
        import pyverbs.cm_enums as ce
        from pyverbs.cmid import CMID, ConnParam

        listener = self._cm(msg)
        limit = float(msg.get("limit", 30))
        event = wait_event(
            listener.channel, listener.channel_fd, ce.RDMA_CM_EVENT_CONNECT_REQUEST, limit
        )
        child = CMID(creator=event, listen_id=listener.id)
        event.ack_cm_event()
        conn = CmConn(listener.port_space, child, listener.channel, listener.channel_fd, False)
        out = self._new_cm(conn)
        try:
            self._own_qp(conn, msg)
            if "reject" in msg:
                child.reject(str(msg["reject"]).encode())
            else:
                child.accept(ConnParam())
        except BaseException:
            self.op_cmid_close(out)
            raise
        return {**out, "qpn": child.qpn}

    def _own_qp(self, conn: CmConn, msg: dict[str, Any]) -> None:
        """rdma_create_qp on the id, without CQs: librdmacm makes them (_comp_fds)."""
        qp_type = e.IBV_QPT_UD if conn.port_space == "udp" else e.IBV_QPT_RC
        before = set(event_fds())
        try:
            conn.id.create_qp(_init_attr(qp_type, msg))
        except PyverbsError as exc:
            raise VerbsError(f"rdma_create_qp: errno {errno_of(exc)}: {exc}") from None
        conn.comp_fds = _comp_fds(before)
        if "ack_timeout" in msg:
            import pyverbs.cm_enums as ce

            conn.id.set_option(
                ce.RDMA_OPTION_ID, ce.RDMA_OPTION_ID_ACK_TIMEOUT, int(msg["ack_timeout"]), 1
            )

    # -- synchronous ids (rdma_create_ep: librdmacm waits for each event itself) --------------
    def op_cmid_sync_listen(self, msg: dict[str, Any]) -> dict[str, Any]:
        """A passive endpoint (rdma_create_ep with RAI_PASSIVE and QP attributes), listening:
        each request it gets comes with a QP made by librdmacm."""
        import pyverbs.cm_enums as ce
        from pyverbs.cmid import CMID, AddrInfo

        ai = AddrInfo(
            src=msg["address"],
            src_service=str(msg["port"]),
            port_space=ce.RDMA_PS_TCP,
            flags=_passive(),
        )
        cmid = CMID(creator=ai, qp_init_attr=_init_attr(e.IBV_QPT_RC, msg))
        cmid.listen()
        return self._new_cm(CmConn("tcp", cmid, None, None, False))

    def op_cmid_sync_accept(self, msg: dict[str, Any]) -> dict[str, Any]:
        """rdma_get_request then rdma_accept, each blocking until its event (the request; the
        connection established): the orchestrator sends this before the other side connects
        and bounds the wait with its call timeout."""
        from pyverbs.cmid import ConnParam

        listener = self._cm(msg)
        before = set(event_fds())
        child = listener.id.get_request()
        conn = CmConn("tcp", child, None, None, False)
        out = self._new_cm(conn)
        conn.comp_fds = _comp_fds(before)
        child.accept(ConnParam())
        return {**out, "qpn": child.qpn}

    def op_cmid_sync_connect(self, msg: dict[str, Any]) -> dict[str, Any]:
        """rdma_create_ep (address and route resolved, QP made) then rdma_connect, blocking
        until the connection is established."""
        import pyverbs.cm_enums as ce
        from pyverbs.cmid import CMID, AddrInfo, ConnParam

        ai = AddrInfo(
            src=self.address,
            dst=msg["address"],
            dst_service=str(msg["port"]),
            port_space=ce.RDMA_PS_TCP,
        )
        before = set(event_fds())
        cmid = CMID(creator=ai, qp_init_attr=_init_attr(e.IBV_QPT_RC, msg))
        conn = CmConn("tcp", cmid, None, None, False)
        out = self._new_cm(conn)
        conn.comp_fds = _comp_fds(before)
        cmid.connect(ConnParam())
        return {**out, "qpn": cmid.qpn}

    # -- multicast (UDP port space) ------------------------------------------------------------
    def op_cmid_join(self, msg: dict[str, Any]) -> dict[str, Any]:
        """A UD id bound to this device's address, its QP joined to multicast group `group`
        (rdma_join_multicast, or rdma_join_multicast_ex as a full member with `extended`);
        its sends go to the group, as the MULTICAST_JOIN event gave it."""
        import pyverbs.cm_enums as ce
        from pyverbs.cmid import CMID, AddrInfo, CMEventChannel, JoinMCAttrEx, UDParam

        limit = float(msg.get("limit", 30))
        channel, fd = open_cm_channel(CMEventChannel)
        cmid = CMID(creator=channel, port_space=ce.RDMA_PS_UDP)
        conn = CmConn("udp", cmid, channel, fd, True)
        out = self._new_cm(conn)
        try:
            cmid.bind_addr(AddrInfo(src=self.address, port_space=ce.RDMA_PS_UDP))
            cmid.resolve_addr(AddrInfo(src=self.address, dst=msg["group"]), int(limit * 1000))
            wait_event(channel, fd, ce.RDMA_CM_EVENT_ADDR_RESOLVED, limit).ack_cm_event()
            self._own_qp(conn, msg)
            group = AddrInfo(src=msg["group"])
            if msg.get("extended"):
                mask = ce.RDMA_CM_JOIN_MC_ATTR_ADDRESS | ce.RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS
                flags = ce.RDMA_MC_JOIN_FLAG_FULLMEMBER
                cmid.join_multicast(
                    mc_attr=JoinMCAttrEx(addr=group, comp_mask=mask, join_flags=flags)
                )
            else:
                cmid.join_multicast(addr=group)
            event = wait_event(channel, fd, ce.RDMA_CM_EVENT_MULTICAST_JOIN, limit)
            conn.ud = UDParam(event)
            event.ack_cm_event()
        except BaseException:
            self.op_cmid_close(out)
            raise
        return {**out, "qpn": cmid.qpn, "ud": {"qp_num": conn.ud.qp_num, "qkey": conn.ud.qkey}}

    def op_cmid_leave(self, msg: dict[str, Any]) -> None:
        from pyverbs.cmid import AddrInfo

        try:
            self._cm(msg).id.leave_multicast(AddrInfo(src=msg["group"]))
        except PyverbsError as exc:
            raise VerbsError(f"rdma_leave_multicast: {exc}") from None

    def op_cmid_event(self, msg: dict[str, Any]) -> dict[str, Any]:
        """The id's next CM event within `limit` seconds ({"event": None} when none came): its
        name, private data, and for UDP the other side's QP number and Q_Key."""
        from pyverbs.cmid import UDParam

        conn = self._cm(msg)
        event = next_event(conn.channel, conn.channel_fd, float(msg.get("limit", 30)))
        if event is None:
            return {"event": None}
        name = cm_event_name(event.event_type)
        out: dict[str, Any] = {"event": name.removeprefix("RDMA_CM_EVENT_")}
        data = getattr(event, "private_data", None)
        if data:
            out["private_data"] = bytes(data).hex()
        if conn.port_space == "udp" and name == "RDMA_CM_EVENT_ESTABLISHED":
            conn.ud = UDParam(event)
            out["ud"] = {"qp_num": conn.ud.qp_num, "qkey": conn.ud.qkey}
        event.ack_cm_event()
        return out

    def op_cmid_reg_mr(self, msg: dict[str, Any]) -> dict[str, Any]:
        """rdma_reg_msgs / rdma_reg_read / rdma_reg_write (`kind`) on the id's PD."""
        conn = self._cm(msg)
        kind = str(msg.get("kind", "msgs"))
        if kind not in ("msgs", "read", "write"):
            raise VerbsError(f"rdma_reg_{kind}: no such call")
        try:
            mr = getattr(conn.id, f"reg_{kind}")(int(msg["length"]))
        except PyverbsError as exc:
            raise VerbsError(f"rdma_reg_{kind}: {exc}") from None
        mid = next(self._ids)
        self.mrs[mid] = mr
        conn.mrs.append(mid)
        mr.write(b"\0" * mr.length, mr.length, 0)
        return {"mr": mid, "addr": mr.buf, "rkey": mr.rkey, "length": mr.length}

    def op_cmid_post(self, msg: dict[str, Any]) -> None:
        """One work request through librdmacm: `what` recv, send, read or write (signalled),
        `length` bytes of MR `mr`; read/write at the other side's `addr` with its `rkey`;
        a UDP send to the other side (active: its ESTABLISHED; passive: its last receive)."""
        conn = self._cm(msg)
        mr = self.mrs[int(msg["mr"])]
        length = int(msg["length"])
        what = msg["what"]
        signaled = e.IBV_SEND_SIGNALED
        try:
            if what == RECV:
                conn.id.post_recv(mr, length)
                conn.recv_mr = mr
            elif what == SEND and conn.port_space == "udp":
                ah, rqpn = self._ud_destination(conn, msg)
                conn.id.post_ud_send(mr, ah, rqpn=rqpn, flags=signaled, length=length)
            elif what == SEND:
                conn.id.post_send(mr, signaled, length)
            elif what in ("read", "write"):
                post = conn.id.post_read if what == "read" else conn.id.post_write
                post(mr, length, int(msg["addr"]), int(msg["rkey"]), flags=signaled)
            else:
                raise VerbsError(f"rdma_post_{what}: no such call")
        except PyverbsError as exc:
            raise VerbsError(f"rdma_post_{what}: errno {errno_of(exc)}: {exc}") from None

    def _ud_destination(self, conn: CmConn, msg: dict[str, Any]) -> tuple[Any, int]:
        from pyverbs.addr import AH

        if conn.ud is not None:
            return AH(conn.id.pd, attr=conn.ud.ah_attr), int(conn.ud.qp_num)
        if conn.reply_ah is None:
            raise VerbsError("a UDP send with no destination: no ESTABLISHED, no datagram")
        return conn.reply_ah, int(msg["rqpn"])

    def _reply_ah(self, conn: CmConn, wc: Any) -> None:
        """An AH back to a datagram's sender, from its completion and the GRH it left in the
        receive buffer (ibv_create_ah_from_wc), made before the buffer is written again: the
        passive side of a UDP service has no other (a group member sends to the group)."""
        from pyverbs.addr import AH

        try:
            conn.reply_ah = AH(conn.id.pd, wc=wc, port_num=conn.id.port_num, grh=conn.recv_mr.buf)
        except PyverbsError as exc:
            raise VerbsError(f"ibv_create_ah_from_wc: {exc}") from None

    def op_cmid_comp(self, msg: dict[str, Any]) -> dict[str, Any] | None:
        """The next completion of the id's send or recv CQ (`cq`) within `wait` seconds, by
        rdma_get_send_comp / rdma_get_recv_comp; None when none came."""
        conn = self._cm(msg)
        which = RECV if msg.get("cq") == RECV else SEND
        get = conn.id.get_recv_comp if which == RECV else conn.id.get_send_comp
        poller = select.poll()
        poller.register(conn.comp_fds[which], select.POLLIN)
        deadline = time.monotonic() + float(msg.get("wait", 10))
        while True:
            try:
                wc = get()
            except PyverbsRDMAError as exc:
                if errno_of(exc) not in (errno.EAGAIN, errno.EINTR):
                    raise VerbsError(f"rdma_get_{which}_comp: {exc}") from None
            else:
                if wc is not None:
                    udp_service = conn.port_space == "udp" and conn.ud is None
                    if which == RECV and udp_service and wc.status == 0:
                        self._reply_ah(conn, wc)
                    return wc_json(wc)
            left = deadline - time.monotonic()
            if left <= 0 or not poller.poll(left * 1000):
                return None

    def op_cmid_query(self, msg: dict[str, Any]) -> dict[str, Any]:
        conn = self._cm(msg)
        attr, _ = conn.id.query_qp(e.IBV_QP_STATE | e.IBV_QP_TIMEOUT)
        return {
            "state": STATE_NAMES.get(attr.qp_state, str(attr.qp_state)),
            "timeout": attr.timeout,
        }

    def op_cmid_disconnect(self, msg: dict[str, Any]) -> None:
        try:
            self._cm(msg).id.disconnect()
        except PyverbsError as exc:
            raise VerbsError(f"rdma_disconnect: {exc}") from None

    def op_cmid_close(self, msg: dict[str, Any]) -> None:
        """The id, its QP and CQs (rdma_destroy_qp, rdma_destroy_id), its MRs, and the
        channel it made."""
        conn = self.cms.pop(int(msg["cm"]))
        for mid in conn.mrs:
            mr = self.mrs.pop(mid, None)
            if mr is not None:
                mr.close()
        conn.id.close()
        if conn.owns_channel:
            conn.channel.close()


def _init_attr(qp_type: int, msg: dict[str, Any]) -> Any:
    """QP attributes without CQs (librdmacm makes them), `max_send_wr` / `max_recv_wr`."""
    from pyverbs.qp import QPCap, QPInitAttr

    cap = QPCap(
        max_send_wr=int(msg.get("max_send_wr", 4)), max_recv_wr=int(msg.get("max_recv_wr", 4))
    )
    return QPInitAttr(qp_type=qp_type, cap=cap)


def _comp_fds(before: set[int]) -> dict[str, int]:
    """The completion channels librdmacm made for a QP since `before` (the uverbs event files
    then open): receive then send, each made non-blocking; the lower descriptor came first."""
    new = sorted(set(event_fds()) - before)
    if len(new) != 2:
        raise VerbsError(f"librdmacm made {len(new)} completion channels for the QP, not 2")
    return {RECV: new[0], SEND: new[1]}


def _port_space(msg: dict[str, Any]) -> int:
    import pyverbs.cm_enums as ce

    spaces = {"tcp": ce.RDMA_PS_TCP, "udp": ce.RDMA_PS_UDP}
    name = str(msg.get("port_space", "tcp"))
    if name not in spaces:
        raise VerbsError(f"port space {name!r}: one of {', '.join(spaces)}")
    return spaces[name]


def _passive() -> int:
    import pyverbs.cm_enums as ce

    return int(ce.RAI_PASSIVE)
