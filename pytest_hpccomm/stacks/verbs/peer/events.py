"""Peer side of the verbs stack: events, as rdma-core's tests wait for them: the device's
asynchronous events (an SRQ's limit reached, tests/test_srq.py) and completion events of CQs
armed on a completion channel (tests/test_cq_events.py).

pyverbs blocks in ibv_get_async_event and ibv_get_cq_event with the GIL held and exposes no
descriptor, so both are waited for on the uverbs event descriptors, made non-blocking, with
poll(2) and a deadline; the read follows only once one is readable. Imported only by the peer
program (peer rule).
"""

from __future__ import annotations

import os
import select
import time
from typing import Any

import pyverbs.enums as e
from pyverbs.cq import CQ, CompChannel
from pyverbs.device import Context
from pyverbs.pyverbs_error import PyverbsError

from pytest_hpccomm.stacks.verbs.peer.endpoint import Endpoint, VerbsError, wc_json

EVENT_FD = "anon_inode:[infinibandevent]"  # what /proc/self/fd shows for uverbs event files
EVENT_NAMES = {
    getattr(e, n): n.removeprefix("IBV_EVENT_") for n in dir(e) if n.startswith("IBV_EVENT_")
}


class EventOps:
    """Mixed into the engine: needs its ctx and endpoints."""

    ctx: Context
    eps: dict[int, Endpoint]

    def op_async_events(self, msg: dict[str, Any]) -> list[str]:
        """The device's asynchronous events (their IBV_EVENT_ names) that arrive within `wait`
        seconds, each acknowledged; the wait ends early once `until` is among them."""
        fds = event_fds()
        if not fds:
            raise VerbsError(f"no uverbs event descriptor ({EVENT_FD}) in /proc/self/fd")
        poller = select.poll()
        for fd in fds:
            poller.register(fd, select.POLLIN)
        got: list[str] = []
        deadline = time.monotonic() + float(msg.get("wait", 5))
        while (left := deadline - time.monotonic()) > 0 and msg.get("until") not in got:
            if not poller.poll(left * 1000):
                break
            try:
                event = self.ctx.get_async_event()
            except PyverbsError:  # readable, but not this context's events (EAGAIN)
                time.sleep(0.01)
                continue
            got.append(EVENT_NAMES.get(event.event_type, str(event.event_type)))
            event.ack()
        return got

    def op_poll_events(self, msg: dict[str, Any]) -> dict[str, Any]:
        """Up to `count` completions of endpoint `ep`'s send or recv CQ (made with `events`),
        each batch only after its completion event: wait for the channel's event, acknowledge
        it, re-arm the CQ, then poll (upstream's order, so none is missed). A completion no
        event announced is never seen: the wait ends at `wait` seconds with fewer."""
        ep = self.eps[int(msg["ep"])]
        which = "recv" if msg.get("cq") == "recv" else "send"
        if which not in ep.channels:
            raise VerbsError(f"endpoint {msg['ep']}'s {which} CQ has no completion channel")
        channel, fd = ep.channels[which]
        cq = ep.rcq if which == "recv" else ep.scq
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        got: list[Any] = []
        events = 0
        deadline = time.monotonic() + float(msg.get("wait", 10))
        while len(got) < int(msg.get("count", 1)):
            left = deadline - time.monotonic()
            if left <= 0 or not poller.poll(left * 1000):
                break
            try:
                channel.get_cq_event(cq)
            except PyverbsError as exc:
                raise VerbsError(f"ibv_get_cq_event: {exc}") from None
            cq.ack_events(1)
            events += 1
            cq.req_notify()
            n, wcs = cq.poll(int(msg.get("count", 1)) - len(got))
            got.extend(wcs[:n])
        return {"wcs": [wc_json(wc) for wc in got], "events": events}


def armed_cq(ctx: Context, cqe: int) -> tuple[CQ, tuple[CompChannel, int]]:
    """A CQ of `cqe` entries on a completion channel of its own, armed (ibv_req_notify_cq),
    and the channel with its descriptor, made non-blocking."""
    before = set(event_fds())
    channel = CompChannel(ctx)
    new = [fd for fd in event_fds() if fd not in before]
    if len(new) != 1:
        channel.close()
        raise VerbsError(f"the completion channel's descriptor not found ({len(new)} new)")
    cq = CQ(ctx, cqe, None, channel, 0)
    cq.req_notify()
    return cq, (channel, new[0])


def event_fds() -> list[int]:
    """This process's uverbs event descriptors (each context's async events, each completion
    channel), made non-blocking: a read on one with nothing to read then fails with EAGAIN
    instead of blocking the peer."""
    fds = []
    for name in os.listdir("/proc/self/fd"):
        try:
            fd = int(name)
            if os.readlink(f"/proc/self/fd/{name}") == EVENT_FD:
                os.set_blocking(fd, False)
                fds.append(fd)
        except (OSError, ValueError):
            continue
    return fds
