"""iWARP: an ACTIVE port of an RNIC, software (siw) or hardware (cxgb4, irdma in iWARP mode)."""

from __future__ import annotations

from pytest_hpccomm.fabrics import FabricSelection, FabricUnavailable, describe_inventory
from pytest_hpccomm.fabrics._common import active_ports, best_address, pick_devices, port_selection
from pytest_hpccomm.fabrics.sysfs import ADDRESS_UNKNOWN, Inventory, RdmaDevice

LABEL = "iWARP"


def _is_rnic(dev: RdmaDevice) -> bool:
    return dev.node_kind == "RNIC"


class IwarpProbe:
    kind = "iwarp"
    auto_rank = 30

    def select(
        self, inv: Inventory, device: str | None, netdev: str | None
    ) -> FabricSelection | FabricUnavailable:
        devs = pick_devices(self.kind, inv, device, _is_rnic, "iWARP (node type RNIC)")
        if isinstance(devs, FabricUnavailable):
            return devs
        if not devs:
            return FabricUnavailable(
                self.kind, f"no iWARP (RNIC) device: found {describe_inventory(inv)}"
            )
        active = active_ports(
            self.kind, inv, [(d, p) for d in devs for p in d.ports], netdev, LABEL
        )
        if isinstance(active, FabricUnavailable):
            return active
        # iWARP connects through rdma_cm to an IP address; prefer ports whose netdev has one.
        active.sort(key=lambda ref: best_address(inv.netdev(ref[1].netdev or "")) is None)
        dev, port = active[0]
        address = best_address(inv.netdev(port.netdev)) if port.netdev else None
        via = f"{dev.driver} over {port.netdev}" if port.netdev else dev.driver
        # "no IP address" only where that is known: a recording may not say which netdev, or
        # which addresses (ADDRESS_UNKNOWN)
        address_text = address or (
            "netdev unknown"
            if port.netdev is None
            else "no IP address"
            if inv.addresses_known
            else ADDRESS_UNKNOWN
        )
        parts = [f"{LABEL} via {via}", address_text]
        if port.rate_text:
            parts.append(port.rate_text)
        return port_selection(
            self.kind,
            dev,
            port,
            gid=port.gid(0),
            netdev=port.netdev,
            address=address,
            link_layer=port.link_layer,
            description=f"{dev.name} port {port.num} ({', '.join(parts)})",
        )


PROBE = IwarpProbe()
