"""Helpers shared by the fabric probes: overrides, port states, RoCE GID choice."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pytest_hpccomm.fabrics import (
    FabricSelection,
    FabricUnavailable,
    describe_inventory,
    device_kind,
    netdev_kind,
)
from pytest_hpccomm.fabrics.sysfs import Gid, Inventory, NetDev, Port, RdmaDevice

PortRef = tuple[RdmaDevice, Port]


def pick_devices(
    kind: str,
    inv: Inventory,
    device: str | None,
    wanted: Callable[[RdmaDevice], bool],
    label: str,
) -> list[RdmaDevice] | FabricUnavailable:
    """The RDMA devices a probe may use: all that fit, or exactly the one the user named."""
    if device is None:
        return [d for d in inv.rdma if wanted(d)]
    dev = inv.device(device)
    if dev is None:
        return FabricUnavailable(kind, missing_device(inv, device))
    if not wanted(dev):
        return FabricUnavailable(kind, f"{device} is {describe_device(dev)}, not {label}")
    return [dev]


def describe_device(dev: RdmaDevice) -> str:
    if dev.driver == "rxe":
        return "SoftRoCE (rxe)"
    if dev.driver == "siw":
        return "software iWARP (siw)"
    return device_kind(dev)


def missing_netdev(inv: Inventory, netdev: str) -> str:
    """Why --hpc-netdev names nothing usable: an entry left out as unreadable is said so (it
    exists; "no interface named lo" beside "unreadable: lo (...)" contradicts itself)."""
    why = inv.unreadable_entry("net", netdev)
    if why is not None:
        return f"network interface {netdev} is unreadable: {why}"
    return f"no network interface named {netdev}: found {describe_inventory(inv)}"


def missing_device(inv: Inventory, device: str) -> str:
    why = inv.unreadable_entry("infiniband", device)
    if why is not None:
        return f"RDMA device {device} is unreadable: {why}"
    return f"no RDMA device named {device}: found {describe_inventory(inv)}"


def port_uses_netdev(port: Port, netdev: str) -> bool:
    return port.netdev == netdev or any(g.netdev == netdev for g in port.gids)


def filter_netdev(
    kind: str, inv: Inventory, refs: list[PortRef], netdev: str | None, label: str
) -> list[PortRef] | FabricUnavailable:
    if netdev is None:
        return refs
    kept = [(d, p) for d, p in refs if port_uses_netdev(p, netdev)]
    if kept:
        return kept
    if inv.netdev(netdev) is None:
        return FabricUnavailable(kind, missing_netdev(inv, netdev))
    return FabricUnavailable(
        kind, f"no {label} port uses {netdev}: found {describe_inventory(inv)}"
    )


def port_state_text(dev: RdmaDevice, port: Port) -> str:
    """ "mlx5_0 port 1 is DOWN (phys_state Polling)", with the usual cause where one is known."""
    text = f"{dev.name} port {port.num} is {port.state} (phys_state {port.phys_state}"
    if port.state in ("INIT", "ARMED") and port.link_layer == "InfiniBand":
        # The link trained but no subnet manager moved the port on to ACTIVE.
        text += "; is a subnet manager running?"
    return text + ")"


def no_active_port(
    kind: str, inv: Inventory, refs: Sequence[PortRef], label: str
) -> FabricUnavailable:
    if not refs:  # nothing of that kind at all: not a question of port state
        return FabricUnavailable(kind, f"no {label} device: found {describe_inventory(inv)}")
    states = "; ".join(port_state_text(d, p) for d, p in refs)
    return FabricUnavailable(kind, f"no {label} port in state ACTIVE: {states}")


def active_ports(
    kind: str, inv: Inventory, refs: list[PortRef], netdev: str | None, label: str
) -> list[PortRef] | FabricUnavailable:
    """The skeleton of every RDMA probe: the candidate ports, narrowed to --hpc-netdev, of
    which the ACTIVE ones; or why none is left (named netdev absent, ports not ACTIVE)."""
    filtered = filter_netdev(kind, inv, refs, netdev, label)
    if isinstance(filtered, FabricUnavailable):
        return filtered
    active = [(d, p) for d, p in filtered if p.is_active]
    return active or no_active_port(kind, inv, filtered, label)


def port_selection(
    kind: str,
    dev: RdmaDevice,
    port: Port,
    *,
    gid: Gid | None,
    netdev: str | None,
    address: str | None,
    link_layer: str | None,
    description: str,
) -> FabricSelection:
    """A selected RDMA port; the fields every port-based kind reads the same way."""
    return FabricSelection(
        kind=kind,
        device=dev.name,
        port=port.num,
        gid_index=gid.index if gid else None,
        gid=gid.gid if gid else None,
        netdev=netdev,
        address=address,
        rate_gbps=port.rate_gbps,
        mtu=port.active_mtu,
        firmware=dev.fw_ver,
        driver=dev.driver,
        link_layer=link_layer,
        description=description,
    )


# RoCE GID preference: v2 with an IPv4-mapped address is what rdma_cm and most MPI / UCX
# defaults pick; routable IPv6 next; link-local and v1 only as a fallback, said aloud.
_ROCE_RANKS: tuple[tuple[Callable[[Gid], bool], str], ...] = (
    (lambda g: g.type == "RoCE v2" and g.is_ipv4_mapped, ""),
    (lambda g: g.type == "RoCE v2" and not g.is_link_local, "no IPv4-mapped RoCE v2 GID"),
    (lambda g: g.type == "RoCE v2", "no IPv4-mapped or global RoCE v2 GID"),
    (lambda g: g.type == "RoCE v1" and g.is_ipv4_mapped, "no RoCE v2 GID"),
    (lambda g: g.type == "RoCE v1", "no RoCE v2 GID"),
)


def choose_roce_gid(port: Port, netdev: str | None = None) -> tuple[Gid, str] | None:
    """Best GID of a RoCE port and, if it is a fallback, why."""
    gids = [g for g in port.gids if netdev is None or g.netdev in (None, netdev)]
    for matches, note in _ROCE_RANKS:
        for gid in gids:
            if matches(gid):
                return gid, note
    return None


def select_roce_like(
    kind: str,
    label: str,
    inv: Inventory,
    devs: list[RdmaDevice],
    netdev: str | None,
) -> FabricSelection | FabricUnavailable:
    """Shared by roce (hardware) and softroce (rxe): an ACTIVE Ethernet port and its GID."""
    refs: list[PortRef] = [(d, p) for d in devs for p in d.ports if p.link_layer == "Ethernet"]
    active = active_ports(kind, inv, refs, netdev, label)
    if isinstance(active, FabricUnavailable):
        return active
    for dev, port in active:
        choice = choose_roce_gid(port, netdev)
        if choice is None:
            continue
        gid, note = choice
        on = gid.netdev or port.netdev
        parts = [] if label == "RoCE" else [label]
        ll = " (link-local)" if gid.is_link_local else ""
        parts += [gid.type, f"GID {gid.index} = {gid.short}{ll}" + (f" on {on}" if on else "")]
        if port.rate_text:
            parts.append(port.rate_text)
        if note:
            parts.append(f"fallback: {note}")
        return port_selection(
            kind,
            dev,
            port,
            gid=gid,
            netdev=on,
            address=gid.short,
            link_layer=port.link_layer,
            description=f"{dev.name} port {port.num} ({', '.join(parts)})",
        )
    names = "; ".join(
        f"{d.name} port {p.num}" + (f" on {p.netdev}" if p.netdev else "") for d, p in active
    )
    return FabricUnavailable(
        kind, f"no usable RoCE GID (no IP address on the netdev?): {names} is ACTIVE without one"
    )


def best_address(nd: NetDev | None) -> str | None:
    """First IPv4, else first routable IPv6, else any address of the interface."""
    if nd is None:
        return None
    if nd.ipv4:
        return nd.ipv4[0]
    routable = [a for a in nd.ipv6 if not a.lower().startswith("fe80:")]
    if routable:
        return routable[0]
    return nd.addresses[0] if nd.addresses else None


def port_of_netdev(inv: Inventory, name: str) -> PortRef | None:
    for dev in inv.rdma:
        for port in dev.ports:
            if port.netdev == name:
                return dev, port
    return None


def restrict_to_device(
    kind: str, inv: Inventory, device: str | None
) -> set[str] | None | FabricUnavailable:
    """For netdev-based fabrics: the netdevs of the RDMA device the user named (None = any)."""
    if device is None:
        return None
    dev = inv.device(device)
    if dev is None:
        return FabricUnavailable(kind, missing_device(inv, device))
    return set(dev.netdevs)


def named_netdev(
    kind: str, inv: Inventory, netdev: str, allowed_types: tuple[int, ...], label: str
) -> NetDev | FabricUnavailable:
    nd = inv.netdev(netdev)
    if nd is None:
        return FabricUnavailable(kind, missing_netdev(inv, netdev))
    if nd.type not in allowed_types:
        return FabricUnavailable(kind, f"{netdev} is {netdev_kind(nd.type)}, not {label}")
    if not nd.is_up:
        return FabricUnavailable(kind, f"{netdev} is {nd.operstate}")
    return nd


def speed_gbps(nd: NetDev) -> float | None:
    return nd.speed_mbps / 1000 if nd.speed_mbps is not None else None


def speed_text(nd: NetDev) -> str:
    gbps = speed_gbps(nd)
    return f"{gbps:g} Gb/s" if gbps is not None else "speed unknown"
