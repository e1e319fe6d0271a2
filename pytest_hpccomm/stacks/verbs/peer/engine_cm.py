"""Peer side of the verbs stack: the rdma_cm half of the engine: the engine's own ("external")
QPs connected through the connection manager, as rdma-core's tests do with with_ext_qp. iWARP
QPs reach RTS only this way (the kernel moves them; the CM context and PD of an RNIC are
librdmacm's); on InfiniBand and RoCE the peer moves them with the CM's attributes (INIT, RTR,
RTS) before accepting, or on the active side at CONNECT_RESPONSE, then rdma_establish. Waiting
for CM events has a deadline (pyverbs exposes no descriptor and blocks with the GIL held, so
the channel's fd is found and made non-blocking: open_cm_channel)."""

from __future__ import annotations

import errno
import os
import select
import stat
import time
from typing import Any, Callable

import pyverbs.enums as e
from pyverbs.pyverbs_error import PyverbsRDMAError

from pytest_hpccomm.stacks.verbs.peer.endpoint import Endpoint, VerbsError, errno_of


class CmOps:
    """The engine's rdma_cm operations (a mixin of engine.Engine, whose state it uses)."""

    device: str
    address: str | None
    iwarp: bool
    eps: dict[int, Endpoint]
    dev_attr: Any
    _cm_anchor: Any

    def op_query_qp(self, msg: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError  # engine.Engine's

    def _cm_context(self, address: str | None) -> tuple[Any, Any]:
        """librdmacm's verbs context and PD for the device that owns `address`."""
        import pyverbs.cm_enums as ce
        from pyverbs.cmid import CMID, AddrInfo, CMEventChannel

        if not address:
            raise VerbsError(f"{self.device} is an iWARP device: rdma_cm needs an IP address")
        channel = CMEventChannel()
        anchor = CMID(creator=channel, port_space=ce.RDMA_PS_TCP)
        anchor.bind_addr(AddrInfo(src=address, port_space=ce.RDMA_PS_TCP, flags=ce.RAI_PASSIVE))
        if anchor.dev_name != self.device:
            raise VerbsError(f"{address} belongs to {anchor.dev_name}, not {self.device}")
        self._cm_anchor = (channel, anchor)
        return anchor.context, anchor.pd

    def _cm_next(self, ep: Endpoint, timeout: float) -> Any:
        return next_event(ep.channel, ep.channel_fd, timeout)

    def _cm_wait(self, ep: Endpoint, wanted: int, timeout: float) -> Any:
        return wait_event(ep.channel, ep.channel_fd, wanted, timeout)

    def _cm_drain(self, ep: Endpoint) -> list[str]:
        """Events that arrived since ESTABLISHED (DISCONNECTED: the other side terminated the
        connection), recorded in ep.cm_events; never blocks."""
        if ep.channel is None or ep.channel_fd is None:
            return ep.cm_events
        while (event := self._cm_next(ep, 0)) is not None:
            ep.cm_events.append(event.event_str())
            event.ack_cm_event()
        return ep.cm_events

    def op_cm_listen(self, msg: dict[str, Any]) -> None:
        import pyverbs.cm_enums as ce
        from pyverbs.cmid import CMID, AddrInfo, CMEventChannel

        ep = self.eps[int(msg["ep"])]
        ep.channel, ep.channel_fd = open_cm_channel(CMEventChannel)
        ep.listen = CMID(creator=ep.channel, port_space=ce.RDMA_PS_TCP)
        ep.listen.bind_addr(
            AddrInfo(
                src=msg["address"],
                src_service=str(msg["port"]),
                port_space=ce.RDMA_PS_TCP,
                flags=ce.RAI_PASSIVE,
            )
        )
        ep.listen.listen()

    def _to_init_for_cm(self, ep: Endpoint, cm: Any) -> None:
        attr, mask = cm.init_qp_attr(e.IBV_QPS_INIT)
        ep.qp.modify(attr, mask)

    def _to_rts_for_cm(self, ep: Endpoint) -> None:
        """InfiniBand / RoCE: INIT again (the access the exchange granted), RTR, RTS, each
        with the attributes rdma_init_qp_attr gives once the CM knows the other side."""
        for state in (e.IBV_QPS_INIT, e.IBV_QPS_RTR, e.IBV_QPS_RTS):
            attr, mask = ep.cm.init_qp_attr(state)
            ep.qp.modify(attr, mask)

    def _conn_param(self, ep: Endpoint) -> Any:
        from pyverbs.cmid import ConnParam

        depth = min(ep.rd_atomic, max(1, self.dev_attr.max_qp_rd_atom))
        return ConnParam(resources=depth, depth=depth, qp_num=ep.qp.qp_num)

    def op_cm_accept(self, msg: dict[str, Any]) -> None:
        import pyverbs.cm_enums as ce
        from pyverbs.cmid import CMID

        ep = self.eps[int(msg["ep"])]
        event = self._cm_wait(ep, ce.RDMA_CM_EVENT_CONNECT_REQUEST, float(msg.get("limit", 30)))
        ep.cm = CMID(creator=event, listen_id=ep.listen)
        event.ack_cm_event()
        self._to_init_for_cm(ep, ep.cm)
        if not self.iwarp:
            self._to_rts_for_cm(ep)
        ep.cm.accept(self._conn_param(ep))

    def op_cm_connect(self, msg: dict[str, Any]) -> None:
        import pyverbs.cm_enums as ce
        from pyverbs.cmid import CMID, AddrInfo, CMEventChannel

        ep = self.eps[int(msg["ep"])]
        timeout = float(msg.get("limit", 30))
        ep.channel, ep.channel_fd = open_cm_channel(CMEventChannel)
        ep.cm = CMID(creator=ep.channel, port_space=ce.RDMA_PS_TCP)
        ai = AddrInfo(
            src=self.address,
            dst=msg["address"],
            dst_service=str(msg["port"]),
            port_space=ce.RDMA_PS_TCP,
        )
        ep.cm.resolve_addr(ai, int(timeout * 1000))
        self._cm_wait(ep, ce.RDMA_CM_EVENT_ADDR_RESOLVED, timeout).ack_cm_event()
        ep.cm.resolve_route(int(timeout * 1000))
        self._cm_wait(ep, ce.RDMA_CM_EVENT_ROUTE_RESOLVED, timeout).ack_cm_event()
        self._to_init_for_cm(ep, ep.cm)
        ep.cm.connect(self._conn_param(ep))

    def op_cm_established(self, msg: dict[str, Any]) -> dict[str, Any]:
        import pyverbs.cm_enums as ce

        ep = self.eps[int(msg["ep"])]
        limit = float(msg.get("limit", 30))
        if not self.iwarp and ep.listen is None:  # the active side of an external QP
            self._cm_wait(ep, ce.RDMA_CM_EVENT_CONNECT_RESPONSE, limit).ack_cm_event()
            self._to_rts_for_cm(ep)
            ep.cm.establish()
            return self.op_query_qp(msg)
        self._cm_wait(ep, ce.RDMA_CM_EVENT_ESTABLISHED, limit).ack_cm_event()
        return self.op_query_qp(msg)


def next_event(channel: Any, fd: int | None, timeout: float) -> Any:
    """The CM channel's next event within `timeout` seconds, or None. The channel's fd is
    non-blocking (see open_cm_channel): poll(2) waits, with the GIL released."""
    from pyverbs.cmid import CMEvent

    if fd is None:  # fd not found: the old blocking read, bounded by the
        return CMEvent(channel)  # orchestrator's request timeout and a peer restart
    deadline = time.monotonic() + timeout
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not poller.poll(left * 1000):
            return None
        try:
            return CMEvent(channel)
        except PyverbsRDMAError as exc:
            if errno_of(exc) not in (errno.EAGAIN, errno.EINTR):
                raise


def wait_event(channel: Any, fd: int | None, wanted: int, timeout: float) -> Any:
    """The CM channel's next event, which must be `wanted`, within `timeout` seconds."""
    event = next_event(channel, fd, timeout)
    if event is None:
        raise VerbsError(f"rdma_cm: no {cm_event_name(wanted)} within {timeout:g} s")
    got = event.event_type
    if got != wanted:
        text = event.event_str()
        event.ack_cm_event()
        raise VerbsError(f"rdma_cm: expected {cm_event_name(wanted)}, got {text}")
    return event


def open_cm_channel(make: Callable[[], Any]) -> tuple[Any, int | None]:
    """A new CMEventChannel and its descriptor, made non-blocking so that waiting for an event
    can have a deadline: pyverbs exposes no fd and calls rdma_get_cm_event without releasing
    the GIL, so a lost event used to block the peer for good. The descriptor is the character
    device (/dev/infiniband/rdma_cm) the constructor opened: the peer is single-threaded."""
    before = _open_files()
    channel = make()
    # by (fd, target): listing /proc/self/fd briefly holds an fd of its own, which the
    # channel's may reuse
    after = _open_files()
    new = [fd for fd, target in after.items() if before.get(fd) != target]
    for fd in sorted(new, key=lambda fd: not after[fd].endswith("rdma_cm")):
        try:
            if stat.S_ISCHR(os.fstat(fd).st_mode):
                os.set_blocking(fd, False)
                return channel, fd
        except OSError:
            continue
    return channel, None


def _open_files() -> dict[int, str]:
    """This process's descriptors and what they point at."""
    out = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            out[int(name)] = os.readlink(f"/proc/self/fd/{name}")
        except (OSError, ValueError):
            continue
    return out


def cm_event_name(event: int) -> str:
    import pyverbs.cm_enums as ce

    names = {getattr(ce, n): n for n in dir(ce) if n.startswith("RDMA_CM_EVENT_")}
    return names.get(event, f"rdma_cm event {event}")
