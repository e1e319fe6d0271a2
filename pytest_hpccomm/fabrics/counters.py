"""Traffic counters that prove which path bytes took: the RDMA port's, the netdev's, TCP's.

Hardware HCAs count payload in `ports/N/counters/port_xmit_data` / `port_rcv_data` (units of 4
bytes, IBTA); rxe has no `counters/` but `ports/N/hw_counters/` (sent_pkts, rcvd_pkts,
rdma_sends, ...); siw has neither, so only the netdev's statistics see its traffic (iWARP runs
over TCP, so TCP's segment counters move too). `Tcp: OutSegs` from /proc/net/snmp shows how
much went through the kernel's TCP: an MPI job whose payload went over RDMA sends far fewer
TCP segments than its payload would fill.
"""

from __future__ import annotations

from pathlib import Path

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


def tcp_out_segments(snmp: Path = PROC_SNMP) -> int | None:
    """Tcp: OutSegs of this host's network namespace (None when unreadable)."""
    try:
        lines = [ln.split() for ln in snmp.read_text().splitlines() if ln.startswith("Tcp:")]
    except OSError:
        return None
    if len(lines) < 2 or "OutSegs" not in lines[0]:
        return None
    return int(lines[1][lines[0].index("OutSegs")])


def sent_and_received(port: dict[str, int]) -> tuple[int, int] | None:
    """(sent, received) on the RDMA port in packets (rxe) or bytes (IBTA counters); None when
    the device counts neither (siw)."""
    if "hw.sent_pkts" in port and "hw.rcvd_pkts" in port:
        return port["hw.sent_pkts"], port["hw.rcvd_pkts"]
    if "port_xmit_data" in port and "port_rcv_data" in port:
        return port["port_xmit_data"] * WORD, port["port_rcv_data"] * WORD
    return None
