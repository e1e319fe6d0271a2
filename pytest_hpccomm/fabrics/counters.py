"""Traffic counters that prove which path bytes took: the RDMA port's, the netdev's, TCP's.

Hardware HCAs count payload in `ports/N/counters/port_xmit_data` / `port_rcv_data` (units of 4
bytes, IBTA); rxe has no `counters/` but `ports/N/hw_counters/` (sent_pkts, rcvd_pkts,
rdma_sends, ...); siw has neither, so only the netdev's statistics see its traffic (iWARP runs
over TCP, so TCP's segment counters move too). `Tcp: OutSegs` from /proc/net/snmp shows how
much went through the kernel's TCP: an MPI job whose payload went over RDMA sends far fewer
TCP segments than its payload would fill.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType

from pytest_hpccomm.fabrics.not_in_sysfs import LIVE_SYSFS

WORD = 4  # bytes per unit of port_xmit_data / port_rcv_data
PROC_SNMP = Path("/proc/net/snmp")


def _ints(folder: Path) -> dict[str, int]:
    out: dict[str, int] = {}
    if not folder.is_dir():
        return out
    for f in sorted(folder.iterdir()):
        try:
            out[f.name] = int(f.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue  # write-only or unreadable counters (e.g. lifespan) are not traffic
    return out


def port_counters(device: str, port: int, sysfs_root: Path = LIVE_SYSFS) -> dict[str, int]:
    """The port's counters by name: `counters/*` as they are, `hw_counters/*` prefixed `hw.`."""
    base = Path(sysfs_root) / "class" / "infiniband" / device / "ports" / str(port)
    out = _ints(base / "counters")
    out.update({f"hw.{k}": v for k, v in _ints(base / "hw_counters").items()})
    return out


def netdev_counters(netdev: str, sysfs_root: Path = LIVE_SYSFS) -> dict[str, int]:
    return _ints(Path(sysfs_root) / "class" / "net" / netdev / "statistics")


def netdev_mtu(netdev: str, sysfs_root: Path = LIVE_SYSFS) -> int | None:
    try:
        return int((Path(sysfs_root) / "class" / "net" / netdev / "mtu").read_text())
    except (OSError, ValueError):
        return None


def tcp_segments_for(payload: int, mtu: int | None) -> int:
    """The fewest segments `Tcp: OutSegs` counts for `payload` bytes sent over TCP on a link
    of `mtu` (unknown: loopback's 65536): it counts each MSS-sized segment of a TSO send, and
    an MSS is at most the MTU less 40 bytes of IPv4 and TCP headers."""
    return payload // ((mtu or 65536) - 40)


def tcp_out_segments(snmp: Path = PROC_SNMP) -> int | None:
    """Tcp: OutSegs of this host's network namespace (None when unreadable)."""
    try:
        lines = [ln.split() for ln in snmp.read_text().splitlines() if ln.startswith("Tcp:")]
    except OSError:
        return None
    if len(lines) < 2 or "OutSegs" not in lines[0]:
        return None
    return int(lines[1][lines[0].index("OutSegs")])


def fabric_counters(device: str, port: int, netdev: str | None) -> dict[str, object]:
    """A fabric port's counters on this host, as the path proofs read them: {port: {...},
    netdev: {...}, tcp_out_segments: N, mtu: M} (mtu: the netdev's, None when unknown)."""
    return {
        "port": port_counters(device, port),
        "netdev": netdev_counters(netdev) if netdev else {},
        "tcp_out_segments": tcp_out_segments(),
        "mtu": netdev_mtu(netdev) if netdev else None,
    }


def sent_and_received(port: dict[str, int]) -> tuple[int, int] | None:
    """(sent, received) on the RDMA port in packets (rxe) or bytes (IBTA counters); None when
    the device counts neither (siw)."""
    if "hw.sent_pkts" in port and "hw.rcvd_pkts" in port:
        return port["hw.sent_pkts"], port["hw.rcvd_pkts"]
    if "port_xmit_data" in port and "port_rcv_data" in port:
        return port["port_xmit_data"] * WORD, port["port_rcv_data"] * WORD
    return None


def netdev_bytes(netdev: str, sysfs_root: Path = LIVE_SYSFS) -> tuple[int, int]:
    """(tx_bytes, rx_bytes) of a network device of this host's network namespace; an absent
    device or counter raises (a traffic check must not pass on nothing read)."""
    stats = Path(sysfs_root) / "class" / "net" / netdev / "statistics"
    return int((stats / "tx_bytes").read_text()), int((stats / "rx_bytes").read_text())


# host name -> (rx_bytes, tx_bytes) of its veth, as VirtualCluster.all_counters reads them
HostCounters = Callable[[], Mapping[str, tuple[int, int]]]


class TrafficMeter:
    """The bytes sent, per device, on the network a placement names while a `with` block
    runs: this host's fabric `netdev` (hosts; `both_ways`: "<netdev> tx" and "<netdev> rx"),
    every virtual host's veth as `cluster` counts it (netns; `hosts`: only those, in that
    order), else lo (loopback: TCP over lo, not shared memory). The block gets the dict,
    filled when it ends without an error:

        with TrafficMeter(placement, netdev, cluster.all_counters) as sent:
            run()
        assert all(v >= need for v in sent.values())
    """

    # the placements of cluster.placement (which imports fabrics: named here, not imported)
    HOSTS, NETNS = "hosts", "netns"

    def __init__(
        self,
        placement: str,
        netdev: str | None = None,
        cluster: HostCounters | None = None,
        hosts: Sequence[str] | None = None,
        both_ways: bool = False,
        sysfs_root: Path = LIVE_SYSFS,
    ) -> None:
        if placement == self.HOSTS and not netdev:
            raise ValueError("hosts placement: no netdev of this host to count")
        if placement == self.NETNS and cluster is None:
            raise ValueError("netns placement: no virtual cluster to count")
        self.placement, self.netdev, self.cluster = placement, netdev, cluster
        self.hosts, self.both_ways, self.sysfs_root = hosts, both_ways, sysfs_root
        self.sent: dict[str, int] = {}
        self._before: dict[str, int] = {}

    def read(self) -> dict[str, int]:
        """The counters this meter compares, by the name a report shows."""
        if self.placement == self.HOSTS:
            assert self.netdev is not None
            tx, rx = netdev_bytes(self.netdev, self.sysfs_root)
            if self.both_ways:
                return {f"{self.netdev} tx": tx, f"{self.netdev} rx": rx}
            return {self.netdev: tx}
        if self.placement == self.NETNS:
            assert self.cluster is not None
            counts = self.cluster()
            return {h: counts[h][1] for h in (counts if self.hosts is None else self.hosts)}
        return {"lo": netdev_bytes("lo", self.sysfs_root)[0]}

    def __enter__(self) -> dict[str, int]:
        self.sent.clear()
        self._before = self.read()
        return self.sent

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:  # a failed block's error is what the test reports
            after = self.read()
            self.sent.update({k: after[k] - self._before[k] for k in after})
