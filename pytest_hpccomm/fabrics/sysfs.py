"""Read-only discovery of RDMA devices and network interfaces from a sysfs tree.

The sysfs root is a parameter so that recorded trees (fixtures/sysfs/<tree>/sys) and the live
/sys are read by the same code.  Formats follow the kernel (drivers/infiniband/core/sysfs.c,
Documentation/ABI/stable/sysfs-class-infiniband) and the way rdma-core reads them
(libibverbs/sysfs.c, cmd_device.c, init.c, kernel-boot/rdma-description.rules).

Every attribute is read defensively: a missing, unreadable (the kernel answers EINVAL for
e.g. `speed` of a virtual netdev or `gid_attrs/ndevs/N` of an IB GID) or garbled file means
"unknown", never an exception.  Only a sysfs root that does not exist is an error.
"""

from __future__ import annotations

import ipaddress
import os
import re
from dataclasses import dataclass
from pathlib import Path

from pytest_hpccomm.fabrics.not_in_sysfs import LIVE_SYSFS, read_addresses, read_ibv_devinfo

ARPHRD_ETHER = 1
ARPHRD_INFINIBAND = 32
ARPHRD_LOOPBACK = 772
IFF_UP = 0x1

SOFTWARE_DRIVERS = ("rxe", "siw")
ADDRESS_UNKNOWN = "addresses unknown: no ip-addr.json beside the tree"
# Devices that are iWARP whatever else sysfs says (older kernels and some recorded trees have
# no node_type; i40iw/cxgb ports may read link_layer "InfiniBand" there), by device name
# prefix or driver: Intel X722 (i40iw), Chelsio T3-T6 (cxgb3/cxgb4), NetEffect (nes), siw.
IWARP_NAMES = ("i40iw", "iwp", "cxgb3", "cxgb4", "iw_cxgb", "nes", "siw")
_IWARP_DRIVER_NAMES = ("i40iw", "cxgb3", "cxgb4", "iw_cxgb3", "iw_cxgb4", "nes")
# Omni-Path (hfi1): link_layer "InfiniBand" and verbs, but its own fabric (PSM2/OPA).
OPA_NAMES = ("hfi1",)
IB_MTUS = (4096, 2048, 1024, 512, 256)
# Bytes an RDMA transport reserves below the netdev MTU when it derives the port's active
# MTU: mlx5 & co use iboe_get_mtu() (include/rdma/ib_addr.h: GRH 40 + UDP 8 + BTH 12 + XRC 4
# + AtomicETH 28 + ICRC 4), rxe uses RXE_MAX_HDR_LENGTH (rxe_param.h), siw uses the netdev MTU
# as is (siw_query_port).
_ETH_MTU_OVERHEAD = {"rxe": 80, "siw": 0}
_IBOE_OVERHEAD = 96
IPOIB_ENCAP_LEN = 4  # datagram-mode IPoIB MTU = IB MTU - 4 (drivers/infiniband/ulp/ipoib)


@dataclass(frozen=True)
class Gid:
    index: int
    gid: str  # as the kernel prints it (%pI6: eight groups of four hex digits)
    type: str  # "IB" | "RoCE v1" | "RoCE v2"
    netdev: str | None

    @property
    def address(self) -> ipaddress.IPv6Address | None:
        try:
            return ipaddress.IPv6Address(self.gid)
        except ValueError:
            return None

    @property
    def is_ipv4_mapped(self) -> bool:
        return self.ipv4 is not None

    @property
    def ipv4(self) -> str | None:
        addr = self.address
        mapped = addr.ipv4_mapped if addr is not None else None
        return str(mapped) if mapped is not None else None

    @property
    def is_link_local(self) -> bool:
        addr = self.address
        return addr is not None and addr.is_link_local

    @property
    def short(self) -> str:
        """The GID as a person writes it: IPv4 for mapped GIDs, else compressed IPv6."""
        addr = self.address
        if addr is None:
            return self.gid
        return self.ipv4 or str(addr)


@dataclass(frozen=True)
class Port:
    num: int
    state: str  # "ACTIVE", "DOWN", ... ("UNKNOWN" if unreadable)
    phys_state: str  # "LinkUp", "Polling", ... ("<unknown>" if unreadable)
    link_layer: str  # "InfiniBand" | "Ethernet" | "Unknown"
    rate_gbps: float | None
    rate_text: str  # e.g. "100 Gb/sec (4X EDR)"; "" if unreadable
    active_mtu: int | None  # bytes
    lid: int | None
    sm_lid: int | None
    gids: tuple[Gid, ...]
    netdev: str | None

    @property
    def is_active(self) -> bool:
        return self.state == "ACTIVE"

    def gid(self, index: int) -> Gid | None:
        return next((g for g in self.gids if g.index == index), None)


@dataclass(frozen=True)
class RdmaDevice:
    name: str
    driver: str  # "mlx5_core", "rxe", "siw", ... ("unknown" if it cannot be told)
    node_type: str  # as the kernel prints it: "1: CA", "4: RNIC"
    fw_ver: str | None
    node_guid: str | None
    hca_type: str | None
    board_id: str | None
    ports: tuple[Port, ...]
    netdevs: tuple[str, ...]

    @property
    def node_kind(self) -> str:
        """ "CA", "RNIC", "switch", ... without the number."""
        return self.node_type.partition(":")[2].strip() or self.node_type

    @property
    def is_software(self) -> bool:
        return self.driver in SOFTWARE_DRIVERS

    @property
    def is_omni_path(self) -> bool:
        return self.name.startswith(OPA_NAMES) or self.driver.startswith(OPA_NAMES)

    def port(self, num: int) -> Port | None:
        return next((p for p in self.ports if p.num == num), None)


@dataclass(frozen=True)
class NetDev:
    name: str
    type: int | None  # ARPHRD_*: 1 Ethernet, 32 InfiniBand, 772 loopback; None if unreadable
    operstate: str  # "up", "down", "unknown", ...
    mtu: int | None
    speed_mbps: int | None
    addresses: tuple[str, ...]  # without prefix length, IPv4 first as `ip` lists them
    driver: str | None
    flags: int | None = None  # IFF_* from the `flags` attribute
    mode: str | None = None  # IPoIB only: "datagram" | "connected" (its `mode` attribute)

    @property
    def is_up(self) -> bool:
        # Loopback and many virtual devices report operstate "unknown" while IFF_UP is set.
        if self.operstate == "up":
            return True
        return self.operstate == "unknown" and self.flags is not None and bool(self.flags & IFF_UP)

    @property
    def ipv4(self) -> tuple[str, ...]:
        return tuple(a for a in self.addresses if ":" not in a)

    @property
    def ipv6(self) -> tuple[str, ...]:
        return tuple(a for a in self.addresses if ":" in a)


@dataclass(frozen=True)
class Inventory:
    rdma: tuple[RdmaDevice, ...]
    netdevs: tuple[NetDev, ...]
    # False for a tree recorded without ip-addr.json (or no `ip` here): an interface without
    # addresses then means "not known", not "has none"
    addresses_known: bool = True
    unreadable: tuple[str, ...] = ()  # class entries left out, with why ("lo: link to ...")

    def device(self, name: str) -> RdmaDevice | None:
        return next((d for d in self.rdma if d.name == name), None)

    def netdev(self, name: str) -> NetDev | None:
        return next((n for n in self.netdevs if n.name == name), None)

    def unreadable_entry(self, cls: str, name: str) -> str | None:
        """Why class/<cls>/<name> was left out ("lo (class/net/lo leads to ...)"), if it was."""
        return next(
            (u for u in self.unreadable if u.startswith(f"{name} (class/{cls}/{name} ")), None
        )


# ---------------------------------------------------------------------------------------------
# low-level readers


def read_attr(path: Path) -> str | None:
    """One sysfs attribute, stripped; None when missing or unreadable (EINVAL, EACCES, ...)."""
    try:
        raw = path.read_bytes()
    except OSError:
        return None
    # Some drivers pad with NULs (rxe's `parent` once did); nothing else is meaningful.
    text = raw.replace(b"\x00", b"").decode("utf-8", errors="replace").strip()
    return text


def _read_int(path: Path, base: int = 10) -> int | None:
    text = read_attr(path)
    if not text:
        return None
    try:
        return int(text, base)
    except ValueError:
        return None


def _link_name(path: Path) -> str | None:
    """Basename of a symlink's target (e.g. device/driver -> .../drivers/mlx5_core)."""
    try:
        return os.path.basename(os.readlink(path)) or None
    except OSError:
        return None


def listdir(path: Path) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


# The kernel writes state and phys_state as "<code>: <name>" (core/sysfs.c); the code is the
# IBTA value, the name is whatever that kernel or driver prints for it, so the code decides.
PORT_STATES = {1: "DOWN", 2: "INIT", 3: "ARMED", 4: "ACTIVE", 5: "ACTIVE_DEFER"}
PHYS_STATES = {
    1: "Sleep",
    2: "Polling",
    3: "Disabled",
    4: "PortConfigurationTraining",
    5: "LinkUp",
    6: "LinkErrorRecovery",
    7: "Phy Test",
}


def _state_name(text: str | None, names: dict[int, str], unknown: str) -> str:
    """ "4: ACTIVE" -> names[4]; the name after the colon only when the code is not a known
    one; a bare name as it is."""
    if not text:
        return unknown
    code, sep, name = text.partition(":")
    if not sep:
        return text
    try:
        return names[int(code.strip())]
    except (ValueError, KeyError):
        return name.strip() or text


_RATE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*Gb/sec\b")


def parse_rate(text: str | None) -> float | None:
    """ "100 Gb/sec (4X EDR)" -> 100.0; "2.5 Gb/sec (1X SDR)" -> 2.5; garbage -> None."""
    if not text:
        return None
    m = _RATE_RE.match(text)
    return float(m.group(1)) if m else None


def ib_mtu_floor(nbytes: int | None) -> int | None:
    """Largest IB MTU (256..4096) that fits in nbytes, as ib_mtu_int_to_enum() does."""
    if nbytes is None:
        return None
    return next((m for m in IB_MTUS if nbytes >= m), None)


# ---------------------------------------------------------------------------------------------
# network interfaces


def _netdev_driver(netdir: Path) -> str | None:
    return _link_name(netdir / "device" / "driver")


def read_netdev(netdir: Path, name: str, addresses: dict[str, tuple[str, ...]]) -> NetDev:
    speed = _read_int(netdir / "speed")
    return NetDev(
        name=name,
        type=_read_int(netdir / "type"),
        operstate=read_attr(netdir / "operstate") or "unknown",
        mtu=_read_int(netdir / "mtu"),
        speed_mbps=speed if speed is not None and speed > 0 else None,
        addresses=addresses.get(name, ()),
        driver=_netdev_driver(netdir),
        flags=_read_int(netdir / "flags", 16),
        mode=read_attr(netdir / "mode") or None,
    )


# ---------------------------------------------------------------------------------------------
# RDMA devices


def _gid_type(text: str | None, link_layer: str) -> str | None:
    # The kernel prints "IB/RoCE v1" for both IB and RoCE v1 GIDs (ib_cache_gid_type_str);
    # rdma-core tells them apart by the port's link layer, and treats a missing/unreadable
    # types file as v1 (cmd_device.c: query_sysfs_gid_type).
    if text is None or text == "IB/RoCE v1":
        return "IB" if link_layer == "InfiniBand" else "RoCE v1"
    if text == "RoCE v2":
        return "RoCE v2"
    return None  # unknown type: the GID cannot be used safely


_LINK_LOCAL_PREFIX = bytes.fromhex("fe80000000000000")


def is_empty_gid(text: str | None) -> bool:
    """An unused GID table entry (or unreadable text). Empty entries read as the zero GID, or,
    on mlx4/mlx5 IB ports, as the default prefix fe80:: with a zero interface ID (a ConnectX-3
    port lists 128 GIDs, 127 of them so); rdma-core treats a zero interface ID as empty.
    Only with the link-local prefix: siw's GID is its MAC followed by zeros, a real one."""
    try:
        packed = ipaddress.IPv6Address((text or "").strip()).packed
    except ValueError:
        return True
    return not any(packed) or (packed[:8] == _LINK_LOCAL_PREFIX and not any(packed[8:]))


def _read_gids(portdir: Path, link_layer: str) -> tuple[Gid, ...]:
    gids: list[Gid] = []
    names = [n for n in listdir(portdir / "gids") if n.isdigit()]
    for name in sorted(names, key=int):
        text = read_attr(portdir / "gids" / name)
        if is_empty_gid(text):
            continue
        gtype = _gid_type(read_attr(portdir / "gid_attrs" / "types" / name), link_layer)
        if gtype is None:
            continue
        ndev = read_attr(portdir / "gid_attrs" / "ndevs" / name) or None
        gids.append(Gid(index=int(name), gid=text or "", type=gtype, netdev=ndev))
    return tuple(gids)


def _mac_of_gid(gid: Gid) -> str | None:
    """siw's GID is the netdev MAC followed by zeros (siw_query_gid)."""
    addr = gid.address
    if addr is None:
        return None
    raw = addr.packed
    return ":".join(f"{b:02x}" for b in raw[:6])


def _device_driver(devdir: Path, name: str, node_kind: str) -> str:
    has_device_link = os.path.islink(devdir / "device")
    # a hardware iWARP name (i40iw0, cxgb4_0, iwp24s0f0 as udev names irdma's): never siw
    hw_iwarp = name.startswith(IWARP_NAMES) and not name.startswith("siw")
    # rxe exposes a `parent` attribute; rdma-core's udev rules (rdma-description.rules) and
    # provider name match (VERBS_NAME_MATCH("rxe")) identify it this way.
    if node_kind == "CA" and ((devdir / "parent").exists() or name.startswith("rxe")):
        return "rxe"
    # siw: before ~5.12 its ib_device had the NIC as parent, so device/driver named the
    # Ethernet driver (e.g. virtio_net); since then it is a virtual device without `device`.
    if node_kind == "RNIC" and (name.startswith("siw") or (not has_device_link and not hw_iwarp)):
        return "siw"
    # Hardware: the driver bound to the PCI function the ib_device hangs off (as udev's
    # DRIVERS== in rdma-description.rules sees it), e.g. mlx5_core, cxgb4, irdma, bnxt_en;
    # a recording without that link still names the driver where the device name is one
    # (i40iw0 -> i40iw; a udev name such as iwp24s0f0 is not)
    driver_name = next((p for p in _IWARP_DRIVER_NAMES if name.startswith(p)), None)
    return _link_name(devdir / "device" / "driver") or driver_name or "unknown"


def _port_netdev(
    num: int,
    gids: tuple[Gid, ...],
    node_kind: str,
    fn_netdevs: list[str],
    nports: int,
    parent: str | None,
    netdev_dirs: dict[str, Path],
) -> str | None:
    """The netdev of one port, by the first rule that answers."""
    for gid in gids:  # RoCE, and iWARP since 6.4 (core/cache.c sets the GID's ndev)
        if gid.netdev:
            return gid.netdev
    for nd in fn_netdevs:  # the PCI function's netdevs carry the port in dev_port (0-based)
        nd_dir = netdev_dirs.get(nd)
        dev_port = _read_int(nd_dir / "dev_port") if nd_dir else None
        if dev_port is not None and dev_port + 1 == num:
            return nd
    if parent:  # rxe
        return parent
    if node_kind == "RNIC" and gids:  # siw before 6.4: its GID is the netdev's MAC
        mac = _mac_of_gid(gids[0])
        for name, nd_dir in netdev_dirs.items():
            if read_attr(nd_dir / "address") == mac:
                return name
    if nports == 1 and len(fn_netdevs) == 1:
        return fn_netdevs[0]
    return None


def _derived_active_mtu(
    link_layer: str, driver: str, netdev: NetDev | None, netdev_dir: Path | None
) -> int | None:
    """Without verbs, the active MTU as the drivers derive it from the netdev."""
    if netdev is None or netdev.mtu is None:
        return None
    if link_layer == "Ethernet":
        return ib_mtu_floor(netdev.mtu - _ETH_MTU_OVERHEAD.get(driver, _IBOE_OVERHEAD))
    if link_layer == "InfiniBand" and netdev_dir is not None:
        if read_attr(netdev_dir / "mode") == "datagram":  # connected mode says nothing
            return ib_mtu_floor(netdev.mtu + IPOIB_ENCAP_LEN)
    return None


def _read_device(
    devdir: Path,
    name: str,
    netdevs: dict[str, NetDev],
    netdev_dirs: dict[str, Path],
    devinfo: dict[tuple[str, int], int],
) -> RdmaDevice:
    node_type = read_attr(devdir / "node_type") or "<unknown>"
    node_kind = node_type.partition(":")[2].strip()
    # The name rule first: the driver is told apart by node kind (an RNIC without a device
    # link is siw), so an i40iw0 without node_type must be an RNIC before its driver is read.
    if not node_kind and name.startswith(IWARP_NAMES):
        node_type, node_kind = "4: RNIC", "RNIC"  # classified by name: sysfs did not say
    driver = _device_driver(devdir, name, node_kind)
    if not node_kind and driver.startswith(IWARP_NAMES):
        node_type, node_kind = "4: RNIC", "RNIC"  # classified by driver: sysfs did not say
    # Netdevs in the order rdma-core / ibdev2netdev-style tools find them: the PCI function's
    # net/ directory (hardware, IPoIB), rxe's `parent` attribute, then the ports' netdevs.
    fn_netdevs = listdir(devdir / "device" / "net")
    parent = read_attr(devdir / "parent") or None
    dev_netdevs = fn_netdevs + ([parent] if parent else [])

    ports: list[Port] = []
    port_names = sorted((p for p in listdir(devdir / "ports") if p.isdigit()), key=int)
    for pname in port_names:
        portdir = devdir / "ports" / pname
        num = int(pname)
        link_layer = read_attr(portdir / "link_layer") or "Unknown"
        if node_kind == "RNIC":
            link_layer = "Ethernet"  # iWARP runs over TCP/IP on Ethernet, whatever is written
        state = _state_name(read_attr(portdir / "state"), PORT_STATES, "UNKNOWN")
        gids = _read_gids(portdir, link_layer)
        netdev = _port_netdev(
            num, gids, node_kind, fn_netdevs, len(port_names), parent, netdev_dirs
        )
        active_mtu = devinfo.get((name, num))
        if active_mtu is None and state == "ACTIVE":  # a down port has no meaningful MTU
            nd = netdevs.get(netdev) if netdev else None
            active_mtu = _derived_active_mtu(
                link_layer, driver, nd, netdev_dirs.get(netdev) if netdev else None
            )
        rate_text = read_attr(portdir / "rate") or ""
        is_ib = link_layer == "InfiniBand"  # LIDs mean nothing on Ethernet (the kernel says 0)
        ports.append(
            Port(
                num=num,
                state=state,
                phys_state=_state_name(read_attr(portdir / "phys_state"), PHYS_STATES, "<unknown>"),
                link_layer=link_layer,
                rate_gbps=parse_rate(rate_text),
                rate_text=rate_text,
                active_mtu=active_mtu,
                lid=_read_int(portdir / "lid", 16) if is_ib else None,
                sm_lid=_read_int(portdir / "sm_lid", 16) if is_ib else None,
                gids=gids,
                netdev=netdev,
            )
        )
        dev_netdevs += ([netdev] if netdev else []) + [g.netdev for g in gids if g.netdev]

    return RdmaDevice(
        name=name,
        driver=driver,
        node_type=node_type,
        fw_ver=read_attr(devdir / "fw_ver") or None,
        node_guid=read_attr(devdir / "node_guid") or None,
        hca_type=read_attr(devdir / "hca_type") or None,
        board_id=read_attr(devdir / "board_id") or None,
        ports=tuple(ports),
        netdevs=tuple(dict.fromkeys(dev_netdevs)),
    )


# ---------------------------------------------------------------------------------------------
# entry point


def _class_entries(root: Path, cls: str, unreadable: list[str] | None = None) -> dict[str, Path]:
    """name -> real directory of each /sys/class/<cls>/<name>, kept inside the root; entries
    left out are said in `unreadable` (a dangling link in a partial recording, say)."""
    out: dict[str, Path] = {}
    base = root / "class" / cls
    real_root = root.resolve()
    for name in listdir(base):
        if not (base / name).is_symlink() and (base / name).is_file():
            continue  # a class attribute, not a device (net/bonding_masters: bonding's control)
        try:
            real = (base / name).resolve()
        except (OSError, RuntimeError):
            continue
        # A recorded tree must never lead into the live /sys through an absolute link.
        if real != real_root and real_root not in real.parents:
            continue
        if real.is_dir():
            out[name] = real
        elif unreadable is not None:
            unreadable.append(f"{name} (class/{cls}/{name} leads to a missing directory)")
    return out


def read_inventory(sysfs_root: Path = LIVE_SYSFS) -> Inventory:
    """Everything fabric selection needs to know about this host (or a recorded tree)."""
    root = Path(sysfs_root)
    if not root.is_dir():
        raise ValueError(f"sysfs root {root} does not exist or is not a directory")
    addresses = read_addresses(root)
    unreadable: list[str] = []
    netdev_dirs = _class_entries(root, "net", unreadable)
    netdevs = {name: read_netdev(d, name, addresses or {}) for name, d in netdev_dirs.items()}
    ib_dirs = _class_entries(root, "infiniband", unreadable)
    devinfo = read_ibv_devinfo(root, bool(ib_dirs))
    rdma = tuple(
        _read_device(d, name, netdevs, netdev_dirs, devinfo) for name, d in ib_dirs.items()
    )
    return Inventory(
        rdma=rdma,
        netdevs=tuple(netdevs.values()),
        addresses_known=addresses is not None,
        unreadable=tuple(unreadable),
    )
