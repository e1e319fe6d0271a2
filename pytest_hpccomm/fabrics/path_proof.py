"""Proof of path: did a job's payload cross the RDMA device, or did it go over kernel TCP?

Read the fabric's port counters and the kernel's TCP segment counter before and after the job;
the payload must show on the RDMA port (rxe counts packets, IBTA ports count bytes) while TCP
sent fewer segments than a TCP carriage of the payload would need. A runtime that silently
fell back to TCP fails the first test and, at any payload size, the second. siw counts nothing
on its port (its RDMA rides on kernel TCP): there the proof is whose TCP it was
(tcp_owners.py): the kernel's own sockets, siw's, must have sent at least the payload, the
processes' sockets far less; without that meter, unprovable, and said so.

More: docs/explanation/internals.md (pytest_hpccomm.fabrics.path_proof).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

from pytest_hpccomm.fabrics.counters import port_counters, sent_and_received, tcp_out_segments
from pytest_hpccomm.fabrics.not_in_sysfs import LIVE_SYSFS
from pytest_hpccomm.fabrics.tcp_owners import TcpBytes, TcpOwnersMeter

MAX_MTU = 4096  # the largest RoCE/IB path MTU: the fewest packets when the port's is unknown
MAX_SEGMENT = 65536  # above the largest MSS (a 16-bit option): most bytes a counted segment holds


@dataclass(frozen=True)
class Reading:
    port: tuple[int, int] | None  # (sent, received) on the RDMA port; None: not counted
    packets: bool  # units of `port`: packets (rxe) or bytes (IBTA)
    tcp_segments: int | None
    tcp_bytes: TcpBytes | None = None  # whose TCP (siw): only with a TcpOwnersMeter

    @classmethod
    def of(
        cls, port: dict[str, int], tcp_segments: int | None, tcp_bytes: TcpBytes | None = None
    ) -> Reading:
        """From a port's counters (fabrics/counters.port_counters, here or on another host)."""
        return cls(sent_and_received(port), "hw.sent_pkts" in port, tcp_segments, tcp_bytes)

    def __add__(self, other: Reading) -> Reading:
        """Two hosts' readings as one (servers on several hosts: all their traffic)."""

        def both(a: Any, b: Any) -> Any:
            return None if a is None or b is None else a + b

        port = (
            None
            if self.port is None or other.port is None
            else (self.port[0] + other.port[0], self.port[1] + other.port[1])
        )
        tcp = (
            None
            if self.tcp_bytes is None or other.tcp_bytes is None
            else TcpBytes(
                self.tcp_bytes.total + other.tcp_bytes.total,
                self.tcp_bytes.owned + other.tcp_bytes.owned,
            )
        )
        return Reading(
            port, self.packets and other.packets, both(self.tcp_segments, other.tcp_segments), tcp
        )


def read(
    device: str, port: int, sysfs_root: Path = LIVE_SYSFS, owners: TcpOwnersMeter | None = None
) -> Reading:
    return Reading.of(
        port_counters(device, port, sysfs_root),
        tcp_out_segments(),
        owners.read() if owners is not None else None,
    )


@dataclass(frozen=True)
class Crossing:
    """One job's traffic: what the RDMA port and TCP counted while it moved `payload` bytes."""

    device: str
    payload: int
    rdma_sent: int | None
    rdma_received: int | None
    unit: str  # "packets" or "bytes"
    tcp_segments: int | None
    tcp_bytes: int | None = None  # all TCP bytes sent (siw: with a TcpOwnersMeter)
    owned_bytes: int | None = None  # of which through processes' own sockets
    mtu: int | None = None  # the RDMA port's active MTU (None: not known, MAX_MTU is used)

    @classmethod
    def between(
        cls, device: str, before: Reading, after: Reading, payload: int, mtu: int | None = None
    ) -> Crossing:
        sent = rcvd = None
        if before.port is not None and after.port is not None:
            sent, rcvd = after.port[0] - before.port[0], after.port[1] - before.port[1]
        tcp = None
        if before.tcp_segments is not None and after.tcp_segments is not None:
            tcp = after.tcp_segments - before.tcp_segments
        total = owned = None
        if before.tcp_bytes is not None and after.tcp_bytes is not None:
            total = after.tcp_bytes.total - before.tcp_bytes.total
            owned = after.tcp_bytes.owned - before.tcp_bytes.owned
        return cls(
            device,
            payload,
            sent,
            rcvd,
            "packets" if after.packets else "bytes",
            tcp,
            total,
            owned,
            mtu,
        )

    @property
    def packet_mtu(self) -> tuple[int, str]:
        """The MTU that packets are counted against, and which one it is."""
        if self.mtu is not None:
            return self.mtu, f"the port's active MTU {self.mtu}"
        return MAX_MTU, f"the largest path MTU {MAX_MTU}: the port's active MTU is not known"

    @property
    def least(self) -> int:
        """The fewest units the payload takes on the RDMA port."""
        return -(-self.payload // self.packet_mtu[0]) if self.unit == "packets" else self.payload

    @property
    def tcp_need(self) -> int:
        """The fewest segments kernel TCP counts carrying the payload."""
        return -(-self.payload // MAX_SEGMENT)

    def problem(self) -> str | None:
        """Why the payload is not shown to have crossed the device (None: it did)."""
        if self.rdma_sent is None or self.rdma_received is None:
            return self._kernel_tcp_problem()
        # the payload crosses the port in one direction at least: a server's port across hosts
        # receives it and sends what the server answers (acknowledgements, a response), which
        # need not be as much; on loopback one port counts both ways
        if max(self.rdma_sent, self.rdma_received) < self.least:
            per = f" at {self.packet_mtu[1]}" if self.unit == "packets" else ""
            return (
                f"{self.payload} B of payload, but {self.device} counted {self.rdma_sent} "
                f"{self.unit} sent and {self.rdma_received} received (at least {self.least} "
                f"expected one way{per}): the payload did not cross the RDMA device"
            )
        if self.tcp_segments is not None and self.tcp_segments >= self.tcp_need:
            return (
                f"kernel TCP sent {self.tcp_segments} segments while {self.payload} B moved, "
                f"as many as the payload over TCP would need (at least {self.tcp_need} of at "
                f"most {MAX_SEGMENT} B): it may have gone over TCP, not {self.device}; the "
                f"counter is the host's, so whether those were the payload's or other TCP "
                f"is unprovable"
            )
        return None

    def _kernel_tcp_problem(self) -> str | None:
        """siw: its RDMA is TCP through the kernel's own sockets, a fallback's through the
        peers' sockets."""
        if self.tcp_bytes is None or self.owned_bytes is None:
            return (
                f"{self.device} counts no traffic on its port (siw has no RDMA counters) "
                "and TCP was not metered by socket owner (nftables): the counters cannot "
                "show which path the payload took"
            )
        if self.owned_bytes * 8 >= self.payload:
            return (
                f"processes' own TCP sockets sent {self.owned_bytes} B while {self.payload} "
                f"B of payload moved: it went over TCP, not {self.device}"
            )
        kernel = self.tcp_bytes - self.owned_bytes
        if kernel < self.payload:
            return (
                f"the kernel's own TCP sockets ({self.device}'s) sent {kernel} B, less than "
                f"the {self.payload} B of payload: it did not cross {self.device}"
            )
        return None

    def describe(self) -> str:
        tcp = "?" if self.tcp_segments is None else str(self.tcp_segments)
        owners = (
            ""
            if self.tcp_bytes is None
            else (f" ({self.tcp_bytes} B, {self.owned_bytes} B of them through processes' sockets)")
        )
        per = f" (at least {self.least} at {self.packet_mtu[1]})" if self.unit == "packets" else ""
        return (
            f"{self.payload} B payload; {self.device}: {self.rdma_sent} {self.unit} sent, "
            f"{self.rdma_received} received{per}; kernel TCP: {tcp} segments{owners}"
        )

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class PathProbe:
    """Reads the counters that prove a job's path: `device` names what they count (the RDMA
    port, and the host when it is not this one)."""

    device: str
    read: Callable[[], Reading]
    mtu: int | None = None  # the port's active MTU (several ports: the largest; None: unknown)

    def crossing(self, before: Reading, payload: int) -> Crossing:
        """The job that moved `payload` since `before` was read."""
        return Crossing.between(self.device, before, self.read(), payload, self.mtu)
