"""InfiniBand: an ACTIVE port whose link layer is InfiniBand (verbs with LIDs, GID index 0)."""

from __future__ import annotations

import dataclasses

from pytest_hpccomm.fabrics import FabricSelection, FabricUnavailable
from pytest_hpccomm.fabrics._common import best_address, port_selection
from pytest_hpccomm.fabrics.probe_base import PortProbe
from pytest_hpccomm.fabrics.sysfs import Inventory, RdmaDevice

LABEL = "InfiniBand"


class IbProbe(PortProbe):
    kind = "ib"
    auto_rank = 10
    label = LABEL
    wanted_label = LABEL

    def wanted(self, dev: RdmaDevice) -> bool:
        """InfiniBand proper: not an RNIC, not Omni-Path (its ports also say InfiniBand)."""
        return (
            dev.node_kind != "RNIC"
            and not dev.is_omni_path
            and any(p.link_layer == LABEL for p in dev.ports)
        )

    def choose(
        self, inv: Inventory, devs: list[RdmaDevice], netdev: str | None
    ) -> FabricSelection | FabricUnavailable:
        refs = [(d, p) for d in devs for p in d.ports if p.link_layer == LABEL]
        active = self.active_ports(inv, refs, netdev)
        if isinstance(active, FabricUnavailable):
            return active
        # the fastest ACTIVE port, not the first by name (mlx4 QDR before mlx5 EDR)
        dev, port = max(active, key=lambda ref: ref[1].rate_gbps or 0.0)
        lid = f"LID {port.lid:#x}" if port.lid is not None else "LID unknown"
        rate = port.rate_text or "rate unknown"
        selection = port_selection(
            self.kind,
            dev,
            port,
            gid=port.gid(0),
            netdev=port.netdev,
            address=best_address(inv.netdev(port.netdev)) if port.netdev else None,
            link_layer=LABEL,
            description=f"{dev.name} port {port.num} ({LABEL}, {rate}, {lid})",
        )
        # GID index 0 is the port GID (subnet prefix + port GUID): what IB verbs tests use,
        # named even when sysfs lists no GID table
        return dataclasses.replace(selection, gid_index=0)


PROBE = IbProbe()
