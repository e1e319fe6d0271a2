"""iWARP: an ACTIVE port of an RNIC, software (siw) or hardware (cxgb4, irdma in iWARP mode)."""

from __future__ import annotations

from pytest_hpccomm.fabrics import FabricSelection, FabricUnavailable, describe_inventory
from pytest_hpccomm.fabrics._common import best_address, port_selection
from pytest_hpccomm.fabrics.probe_base import PortProbe
from pytest_hpccomm.fabrics.sysfs import ADDRESS_UNKNOWN, Inventory, RdmaDevice

LABEL = "iWARP"


class IwarpProbe(PortProbe):
    kind = "iwarp"
    auto_rank = 30
    label = LABEL
    wanted_label = "iWARP (node type RNIC)"

    def wanted(self, dev: RdmaDevice) -> bool:
        return dev.node_kind == "RNIC"

    def none_found(self, inv: Inventory) -> FabricUnavailable:
        return FabricUnavailable(
            self.kind, f"no iWARP (RNIC) device: found {describe_inventory(inv)}"
        )

    def choose(
        self, inv: Inventory, devs: list[RdmaDevice], netdev: str | None
    ) -> FabricSelection | FabricUnavailable:
        active = self.active_ports(inv, [(d, p) for d in devs for p in d.ports], netdev)
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
