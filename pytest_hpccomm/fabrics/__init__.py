"""Fabrics: WHAT network a run uses, found from sysfs (see fabrics/sysfs.py).

Each built-in fabric kind is one module in this package exposing `PROBE`, an object that
follows `FabricProbe`, and is named in BUILTIN (an explicit registry: the package's other
modules are helpers). Plugins add theirs through the `pytest_hpccomm_fabric_probes` hook (the
session registers them before it checks --hpc-fabric and the `fabric(...)` markers against
`fabric_kinds()`). The built-ins subclass `probe_base.PortProbe` (a kind on an RDMA port) or
`probe_base.NetdevProbe` (on a network interface); the registry needs only the protocol.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from pytest_hpccomm.fabrics.sysfs import Inventory, RdmaDevice

AUTO = "auto"


@dataclass(frozen=True)
class FabricSelection:
    kind: str
    device: str | None
    port: int | None
    gid_index: int | None
    gid: str | None
    netdev: str | None
    address: str | None
    rate_gbps: float | None
    mtu: int | None
    firmware: str | None
    driver: str | None
    link_layer: str | None
    description: str  # e.g. "mlx5_0 port 1 (InfiniBand, 100 Gb/sec (4X EDR), LID 0x1a)"
    ipoib_mode: str | None = None  # "connected" / "datagram": bounds the MTU, moves the speed


@dataclass(frozen=True)
class FabricUnavailable:
    kind: str
    reason: str  # one line naming what was found instead


@runtime_checkable
class FabricProbe(Protocol):
    kind: str
    auto_rank: int  # lower = preferred by --hpc-fabric=auto

    def select(
        self, inv: Inventory, device: str | None, netdev: str | None
    ) -> FabricSelection | FabricUnavailable: ...


_REGISTRY: dict[str, FabricProbe] = {}
# the built-in kinds, each module's PROBE; others come through register_fabric or the
# pytest_hpccomm_fabric_probes hook
BUILTIN = ("ib", "roce", "iwarp", "softroce", "ipoib", "ethernet")
RDMA_KINDS = ("ib", "roce", "softroce", "iwarp")  # kinds with an RDMA device (verbs)
TCP_FABRICS = ("ethernet", "ipoib")  # kinds a TCP stack runs on as it is
_loaded = False


def register_fabric(probe: FabricProbe) -> None:
    """Add a fabric kind.

    A new instance of the same class replaces the old one (plugins may hand out a fresh probe
    per session, e.g. under pytester); two different classes claiming one kind is a bug.
    """
    _load_builtin()
    existing = _REGISTRY.get(probe.kind)
    if existing is not None and type(existing) is not type(probe):
        raise ValueError(f"fabric kind {probe.kind!r} is already registered by {existing!r}")
    _REGISTRY[probe.kind] = probe


def _load_builtin() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    for name in BUILTIN:
        probe: FabricProbe = importlib.import_module(f"{__name__}.{name}").PROBE
        _REGISTRY.setdefault(probe.kind, probe)


def probes() -> list[FabricProbe]:
    """Registered probes, most preferred first."""
    _load_builtin()
    return sorted(_REGISTRY.values(), key=lambda p: (p.auto_rank, p.kind))


def fabric_kinds() -> tuple[str, ...]:
    """Every kind --hpc-fabric and the `fabric` marker accept (besides auto): the built-in
    probes' and those registered so far, most preferred first."""
    return tuple(p.kind for p in probes())


def get_probe(kind: str) -> FabricProbe:
    _load_builtin()
    try:
        return _REGISTRY[kind]
    except KeyError:
        known = ", ".join(p.kind for p in probes())
        raise ValueError(f"unknown fabric {kind!r}: expected one of {known}, or auto") from None


def select_fabric(
    inv: Inventory, kind: str, device: str | None = None, netdev: str | None = None
) -> FabricSelection | FabricUnavailable:
    """The fabric `kind` on this inventory, or why not.  `auto` takes the best present."""
    if kind != AUTO:
        return get_probe(kind).select(inv, device, netdev)
    for probe in probes():
        result = probe.select(inv, device, netdev)
        if isinstance(result, FabricSelection):
            return result
    overrides = ", ".join(
        f"{k}={v}" for k, v in (("device", device), ("netdev", netdev)) if v is not None
    )
    where = f" for {overrides}" if overrides else ""
    named = inv.netdev(netdev) if netdev is not None else None
    if named is not None and not named.is_up:  # the reason, not a generic "none available"
        return FabricUnavailable(
            AUTO,
            f"{netdev} is {named.operstate}: no fabric can use it "
            f"(found {describe_inventory(inv)})",
        )
    return FabricUnavailable(AUTO, f"no fabric available{where}: found {describe_inventory(inv)}")


# ---------------------------------------------------------------------------------------------
# one-line descriptions, shared by the probes' reasons


OMNI_PATH = "Omni-Path (PSM2/OPA)"  # verbs work, but its fabric is OPA, not InfiniBand


def device_kind(dev: RdmaDevice) -> str:
    """ "InfiniBand", "RoCE", "iWARP" (or several joined by "/" for VPI adapters)."""
    kinds: list[str] = []
    if dev.is_omni_path:
        return OMNI_PATH
    for port in dev.ports:
        if dev.node_kind == "RNIC":
            kinds.append("iWARP")
        elif port.link_layer == "InfiniBand":
            kinds.append("InfiniBand")
        elif port.link_layer == "Ethernet":
            kinds.append("RoCE")
        else:
            kinds.append(port.link_layer)
    if not kinds:
        kinds.append("iWARP" if dev.node_kind == "RNIC" else dev.node_kind or "unknown")
    return "/".join(dict.fromkeys(kinds))


_NETDEV_KINDS = {1: "Ethernet", 32: "IPoIB", 772: "loopback"}


def netdev_kind(ntype: int | None) -> str:
    if ntype is None:
        return "unknown type"
    return _NETDEV_KINDS.get(ntype, f"type {ntype}")


def describe_inventory(inv: Inventory) -> str:
    """ "rxe0 (RoCE), eth0 (Ethernet)" — what a skip reason says was found instead."""
    parts = []
    for dev in inv.rdma:
        label = device_kind(dev)
        if dev.ports and not any(p.is_active for p in dev.ports):
            label += ", " + "/".join(dict.fromkeys(p.state for p in dev.ports))
        parts.append(f"{dev.name} ({label})")
    for nd in inv.netdevs:
        if nd.type == 772:
            continue  # loopback is always there; naming it only adds noise
        label = netdev_kind(nd.type)
        if nd.type == 32 and nd.mode:
            label += f" {nd.mode}"  # IPoIB connected/datagram: it bounds the MTU
        if not nd.is_up:
            label += f", {nd.operstate}"
        parts.append(f"{nd.name} ({label})")
    found = ", ".join(parts) if parts else "no RDMA device and no network interface"
    if inv.unreadable:
        found += f"; unreadable: {', '.join(inv.unreadable)}"
    return found


__all__ = [
    "AUTO",
    "FabricProbe",
    "FabricSelection",
    "FabricUnavailable",
    "describe_inventory",
    "device_kind",
    "fabric_kinds",
    "get_probe",
    "netdev_kind",
    "probes",
    "register_fabric",
    "select_fabric",
]
