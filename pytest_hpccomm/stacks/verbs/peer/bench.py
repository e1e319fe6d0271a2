"""Peer side: perftest's benchmark loops over one connected QP (run by the engine's op_bench).

Each loop follows the perftest program of the same name (linux-rdma/perftest, src/*.c):

- send_lat   ping-pong of SENDs; both sides keep a receive posted (send_lat.c)
- write_lat  ping-pong of RDMA WRITEs; each side spins on the last byte of its receive half
             until the peer's write lands, then writes back (write_lat.c)
- read_lat   RDMA READs from the server's buffer, one at a time (read_lat.c)
- atomic_lat one FETCH_AND_ADD or CMP_AND_SWP at a time (atomic_lat.c)
- *_bw       `depth` operations in flight (perftest's tx_depth), every one signalled; send_bw
             ends each batch with a zero-byte ack from the server, as osu_bw does, so an
             unreliable (UD) receiver is never overrun

More: docs/explanation/internals.md (pytest_hpccomm.stacks.verbs.peer.bench).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Callable

import pyverbs.enums as e
from pyverbs.wr import SGE, RecvWR, SendWR

from pytest_hpccomm.peer.canary import stretch
from pytest_hpccomm.stacks.verbs.wire import GRH_BYTES, QKEY, status_text

if TYPE_CHECKING:
    from pyverbs.mr import MR

    from pytest_hpccomm.stacks.verbs.peer.endpoint import Endpoint

LATENCY = ("send_lat", "write_lat", "read_lat", "atomic_lat")
BANDWIDTH = ("send_bw", "write_bw", "read_bw", "atomic_bw")
PASSIVE_SERVER = ("read_lat", "atomic_lat", "write_bw", "read_bw", "atomic_bw")

now = time.perf_counter_ns


class BenchError(Exception):
    pass


class Loop:
    def __init__(self, mrs: Mapping[int, MR], ep: Endpoint, msg: dict[str, Any]) -> None:
        self.ep = ep
        self.bench: str = msg["benchmark"]
        self.role: str = msg["role"]
        self.size = int(msg["size"])
        self.iterations = int(msg["iterations"])
        self.warmup = int(msg.get("warmup", 0))
        self.batches = int(msg.get("batches", 1))
        self.depth = max(1, min(int(msg.get("depth", 128)), ep.max_send_wr))
        self.timeout = float(msg.get("limit", 60))
        self.mr = mrs[int(msg["mr"])]
        self.remote = msg.get("remote") or {}
        self.atomic = msg.get("atomic", "FETCH_AND_ADD")
        self.slowdown = float(msg.get("slowdown", 1.0))
        if self.slowdown < 1.0:
            raise BenchError(f"{self.bench}: slowdown {self.slowdown:g} < 1")
        self.factor = 1.0  # the stretch of the batch being run: 1 in warm-up
        self.work_ns = self.region_ns = 0  # this batch's regions, unstretched and stretched
        self.late_ns = 0  # this batch's longest overshoot of one region past its target
        self.grh = GRH_BYTES if ep.qp_type == "UD" else 0
        need = 2 * self.size + self.grh + 8
        if self.mr.length < need:
            raise BenchError(f"{self.bench}: MR of {self.mr.length} B < {need} B needed")
        self.deadline = 0.0

    def stretched(self, t0: int) -> None:
        """The canary: the client spins until the region since `t0` took `factor` times as
        long (the server is never stretched: it only answers the client)."""
        if self.factor > 1.0 and self.role == "client":
            work = now() - t0
            stretch(t0, self.factor, now)
            region = now() - t0
            self.work_ns += work
            self.region_ns += region
            # how long after its target this region ended (a late wake of the spinner)
            self.late_ns = max(self.late_ns, region - int(self.factor * work))

    # -- building blocks ----------------------------------------------------------------------
    def sge(self, offset: int, length: int) -> SGE:
        return SGE(self.mr.buf + offset, length, self.mr.lkey)

    def send_wr(self, opcode: int, length: int, remote_offset: int = 0, offset: int = 0) -> SendWR:
        wr = SendWR(
            wr_id=1,
            opcode=opcode,
            num_sge=1,
            sg=[self.sge(offset, length)],
            send_flags=e.IBV_SEND_SIGNALED,
        )
        if opcode in (e.IBV_WR_RDMA_WRITE, e.IBV_WR_RDMA_READ):
            wr.set_wr_rdma(int(self.remote["rkey"]), int(self.remote["addr"]) + remote_offset)
        elif opcode == e.IBV_WR_ATOMIC_FETCH_AND_ADD:
            wr.set_wr_atomic(int(self.remote["rkey"]), int(self.remote["addr"]), 1, 0)
        elif opcode == e.IBV_WR_ATOMIC_CMP_AND_SWP:
            # compare with what is there cannot be known without a read: swap 0 for 0, which
            # exercises the whole operation on every iteration like perftest's -A CMP_AND_SWAP
            wr.set_wr_atomic(int(self.remote["rkey"]), int(self.remote["addr"]), 0, 0)
        if self.ep.qp_type == "UD":
            if self.ep.ah is None:
                raise BenchError("UD benchmark without the remote's address handle")
            wr.set_wr_ud(self.ep.ah, self.ep.remote_qpn, QKEY)
        return wr

    def recv_wr(self, length: int) -> RecvWR:
        return RecvWR(wr_id=2, num_sge=1, sg=[self.sge(self.size, length + self.grh)])

    def wait(self, cq: Any, count: int, what: str) -> None:
        """Spin until `count` successful completions; a failed one or the deadline raises."""

        got = 0
        while got < count:
            n, wcs = cq.poll(min(16, count - got))
            if n:
                for wc in wcs[:n]:
                    if wc.status != e.IBV_WC_SUCCESS:
                        raise BenchError(
                            f"{self.bench} {self.role}: {what} completed with "
                            f"status {wc.status} ({status_text(wc.status)}), "
                            f"vendor error {wc.vendor_err:#x}"
                        )
                got += n
            elif time.monotonic() > self.deadline:
                raise BenchError(
                    f"{self.bench} {self.role}: {what}: {got} of {count} "
                    f"completions within {self.timeout:g}s"
                )

    def spin_byte(self, offset: int, value: int, what: str) -> None:
        read = self.mr.read
        while read(1, offset)[0] != value:
            if time.monotonic() > self.deadline:
                raise BenchError(
                    f"{self.bench} {self.role}: {what} did not land within {self.timeout:g}s"
                )

    # -- latency --------------------------------------------------------------------------------
    def send_lat(self, n: int, times: list[int]) -> None:
        qp, scq, rcq = self.ep.qp, self.ep.scq, self.ep.rcq
        swr = self.send_wr(e.IBV_WR_SEND, self.size)
        rwr = self.recv_wr(self.size)
        client = self.role == "client"
        for _ in range(n):
            if client:
                t0 = now()
                times.append(t0)
                qp.post_send(swr)
                self.wait(rcq, 1, "pong")
                qp.post_recv(rwr)
                self.wait(scq, 1, "ping send")
                self.stretched(t0)
            else:
                self.wait(rcq, 1, "ping")
                qp.post_recv(rwr)
                qp.post_send(swr)
                self.wait(scq, 1, "pong send")
        times.append(now())  # closes the last iteration: it has no successor post

    def write_lat(self, n: int, times: list[int]) -> None:
        qp, scq, size = self.ep.qp, self.ep.scq, self.size
        wr = self.send_wr(e.IBV_WR_RDMA_WRITE, size, remote_offset=size)
        last_out, last_in = size - 1, 2 * size - 1
        client = self.role == "client"
        for i in range(n):
            value = self.counter % 255 + 1
            self.counter += 1
            if not client:
                self.spin_byte(last_in, value, f"write {i}")
            self.mr.write(bytes([value]), 1, last_out)
            t0 = now()
            if client:
                times.append(t0)
            qp.post_send(wr)
            if client:
                self.spin_byte(last_in, value, f"write-back {i}")
            self.wait(scq, 1, "write")
            self.stretched(t0)
        times.append(now())

    def one_sided_lat(self, opcode: int, n: int, times: list[int]) -> None:
        qp, scq = self.ep.qp, self.ep.scq
        length = (
            8
            if opcode in (e.IBV_WR_ATOMIC_FETCH_AND_ADD, e.IBV_WR_ATOMIC_CMP_AND_SWP)
            else self.size
        )
        wr = self.send_wr(opcode, length)
        for _ in range(n):
            t0 = now()
            times.append(t0)
            qp.post_send(wr)
            self.wait(scq, 1, "operation")
            self.stretched(t0)
        times.append(now())  # closes the last iteration: it has no successor post

    # -- bandwidth ------------------------------------------------------------------------------
    def stream(self, opcode: int, n: int) -> int:
        """n operations, `depth` in flight; ns from the first post to the last completion."""
        qp, scq = self.ep.qp, self.ep.scq
        atomic = opcode in (e.IBV_WR_ATOMIC_FETCH_AND_ADD, e.IBV_WR_ATOMIC_CMP_AND_SWP)
        remote_offset = self.size if opcode == e.IBV_WR_RDMA_WRITE else 0
        wr = self.send_wr(opcode, 8 if atomic else self.size, remote_offset=remote_offset)
        posted = done = 0
        t0 = now()
        while done < n:
            while posted < n and posted - done < self.depth:
                qp.post_send(wr)
                posted += 1
            k = min(16, posted - done)
            self.wait(scq, k, f"operation {done}")
            done += k
        self.stretched(t0)
        return now() - t0

    def send_bw(self, n: int) -> int:
        qp, scq, rcq = self.ep.qp, self.ep.scq, self.ep.rcq
        if self.role == "server":
            self.wait(rcq, n, "window of sends")
            for _ in range(n):
                qp.post_recv(self.rwr)
            qp.post_send(self.ack)
            self.wait(scq, 1, "ack send")
            return 0
        elapsed = self.stream(e.IBV_WR_SEND, n)
        self.wait(rcq, 1, "ack")
        qp.post_recv(self.ack_rwr)
        return elapsed

    # -- driver ---------------------------------------------------------------------------------
    def run(self, notify: Callable[[], None]) -> dict[str, Any]:
        self.counter = 0
        bench, client = self.bench, self.role == "client"
        self.deadline = time.monotonic() + self.timeout
        if bench == "send_bw":
            # the server pre-posts a whole window; the client one receive for each ack
            self.rwr = self.recv_wr(self.size)
            self.ack = self.send_wr(e.IBV_WR_SEND, 0)
            self.ack_rwr = self.recv_wr(0)
            window = max(self.iterations, self.warmup)
            if window > self.ep.max_recv_wr:
                raise BenchError(f"send_bw: window {window} > max_recv_wr {self.ep.max_recv_wr}")
            if not client:
                for _ in range(window):
                    self.ep.qp.post_recv(self.rwr)
            else:
                self.ep.qp.post_recv(self.ack_rwr)
        elif bench == "send_lat":
            self.ep.qp.post_recv(self.recv_wr(self.size))
        if bench == "write_lat":
            self.mr.write(b"\0", 1, 2 * self.size - 1)
        notify()  # receives are posted: the other side may start
        if not client and bench in PASSIVE_SERVER:
            return {"role": "server", "passive": True}
        out: dict[str, Any] = {
            "role": self.role,
            "benchmark": bench,
            "size": self.size,
            "iterations": self.iterations,
            "warmup": self.warmup,
        }
        samples: list[Any] = []
        canary: list[dict[str, int]] = []
        for batch in range(-1 if self.warmup else 0, self.batches):
            n = self.warmup if batch < 0 else self.iterations
            self.factor = 1.0 if batch < 0 else self.slowdown
            self.work_ns = self.region_ns = self.late_ns = 0
            if bench in LATENCY:
                times: list[int] = []
                if bench == "send_lat":
                    self.send_lat(n, times)
                elif bench == "write_lat":
                    self.write_lat(n, times)
                elif bench == "read_lat":
                    self.one_sided_lat(e.IBV_WR_RDMA_READ, n, times)
                else:
                    self.one_sided_lat(self.atomic_opcode(), n, times)
                if batch >= 0 and client:
                    samples.append(times)
            else:
                if bench == "send_bw":
                    elapsed = self.send_bw(n)
                elif bench == "write_bw":
                    elapsed = self.stream(e.IBV_WR_RDMA_WRITE, n)
                elif bench == "read_bw":
                    elapsed = self.stream(e.IBV_WR_RDMA_READ, n)
                else:
                    elapsed = self.stream(self.atomic_opcode(), n)
                if batch >= 0 and client:
                    samples.append(elapsed)
            if batch >= 0 and client and self.slowdown > 1.0:
                canary.append(
                    {"work_ns": self.work_ns, "region_ns": self.region_ns, "late_ns": self.late_ns}
                )
        out["times_ns" if bench in LATENCY else "elapsed_ns"] = samples
        if canary:
            out["canary"] = canary
        return out

    def atomic_opcode(self) -> int:
        return (
            e.IBV_WR_ATOMIC_CMP_AND_SWP
            if self.atomic == "CMP_AND_SWP"
            else e.IBV_WR_ATOMIC_FETCH_AND_ADD
        )


def run_bench(
    mrs: Mapping[int, MR],
    ep: Endpoint,
    msg: dict[str, Any],
    notify: Callable[[], None] = lambda: None,
) -> dict[str, Any]:
    """One benchmark loop over `ep` with the engine's memory region msg["mr"] (of `mrs`)."""
    if msg["benchmark"] not in LATENCY + BANDWIDTH:
        raise BenchError(f"unknown benchmark {msg['benchmark']!r}")
    try:
        return Loop(mrs, ep, msg).run(notify)
    except BenchError:
        raise
    except Exception as exc:  # pyverbs errors from post_send / post_recv
        raise BenchError(f"{msg['benchmark']} {msg['role']}: {type(exc).__name__}: {exc}") from None
