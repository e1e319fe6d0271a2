"""iWARP: an ACTIVE port of an RNIC, software (siw) or hardware (cxgb4, irdma in iWARP mode)."""

from __future__ import annotations

from pytest_hpccomm.fabrics import FabricSelection, FabricUnavailable, describe_inventory
from pytest_hpccomm.fabrics._common import (
    best_address,
    filter_netdev,
    no_active_port,
    pick_devices,
)
from pytest_hpccomm.fabrics.sysfs import Inventory, RdmaDevice

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
        refs = [(d, p) for d in devs for p in d.ports]
        filtered = filter_netdev(self.kind, inv, refs, netdev, LABEL)
        if isinstance(filtered, FabricUnavailable):
            return filtered
        active = [(d, p) for d, p in filtered if p.is_active]
        if not active:
            return no_active_port(self.kind, inv, filtered, LABEL)
        # iWARP connects through rdma_cm to an IP address; prefer ports whose netdev has one.
        active.sort(key=lambda ref: best_address(inv.netdev(ref[1].netdev or "")) is None)
        dev, port = active[0]
        address = best_address(inv.netdev(port.netdev)) if port.netdev else None
        gid0 = port.gid(0)
        via = f"{dev.driver} over {port.netdev}" if port.netdev else dev.driver
        parts = [f"{LABEL} via {via}", address or "no IP address"]
        if port.rate_text:
            parts.append(port.rate_text)
        return FabricSelection(
            kind=self.kind,
            device=dev.name,
            port=port.num,
            gid_index=0 if gid0 else None,
            gid=gid0.gid if gid0 else None,
            netdev=port.netdev,
            address=address,
            rate_gbps=port.rate_gbps,
            mtu=port.active_mtu,
            firmware=dev.fw_ver,
            driver=dev.driver,
            link_layer=port.link_layer,
            description=f"{dev.name} port {port.num} ({', '.join(parts)})",
        )


PROBE = IwarpProbe()
