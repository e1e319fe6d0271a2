"""InfiniBand: an ACTIVE port whose link layer is InfiniBand (verbs with LIDs, GID index 0)."""

from __future__ import annotations

from pytest_hpccomm.fabrics import FabricSelection, FabricUnavailable
from pytest_hpccomm.fabrics._common import (
    best_address,
    filter_netdev,
    no_active_port,
    pick_devices,
)
from pytest_hpccomm.fabrics.sysfs import Inventory, RdmaDevice

LABEL = "InfiniBand"


def _has_ib_port(dev: RdmaDevice) -> bool:
    return any(p.link_layer == LABEL for p in dev.ports)


class IbProbe:
    kind = "ib"
    auto_rank = 10

    def select(
        self, inv: Inventory, device: str | None, netdev: str | None
    ) -> FabricSelection | FabricUnavailable:
        devs = pick_devices(self.kind, inv, device, _has_ib_port, LABEL)
        if isinstance(devs, FabricUnavailable):
            return devs
        refs = [(d, p) for d in devs for p in d.ports if p.link_layer == LABEL]
        filtered = filter_netdev(self.kind, inv, refs, netdev, LABEL)
        if isinstance(filtered, FabricUnavailable):
            return filtered
        active = [(d, p) for d, p in filtered if p.is_active]
        if not active:
            return no_active_port(self.kind, inv, filtered, LABEL)
        dev, port = active[0]
        # GID index 0 is the port GID (subnet prefix + port GUID): what IB verbs tests use.
        gid0 = port.gid(0)
        lid = f"LID {port.lid:#x}" if port.lid is not None else "LID unknown"
        rate = port.rate_text or "rate unknown"
        return FabricSelection(
            kind=self.kind,
            device=dev.name,
            port=port.num,
            gid_index=0,
            gid=gid0.gid if gid0 else None,
            netdev=port.netdev,
            address=best_address(inv.netdev(port.netdev)) if port.netdev else None,
            rate_gbps=port.rate_gbps,
            mtu=port.active_mtu,
            firmware=dev.fw_ver,
            driver=dev.driver,
            link_layer=LABEL,
            description=f"{dev.name} port {port.num} ({LABEL}, {rate}, {lid})",
        )


PROBE = IbProbe()
