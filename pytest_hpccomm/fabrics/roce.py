"""RoCE on a hardware adapter: an ACTIVE Ethernet-link port of a CA that is not rxe."""

from __future__ import annotations

from pytest_hpccomm.fabrics import FabricSelection, FabricUnavailable
from pytest_hpccomm.fabrics._common import pick_devices, select_roce_like
from pytest_hpccomm.fabrics.sysfs import Inventory, RdmaDevice

LABEL = "RoCE"


def _is_hw_roce(dev: RdmaDevice) -> bool:
    return (
        not dev.is_software
        and dev.node_kind == "CA"
        and any(p.link_layer == "Ethernet" for p in dev.ports)
    )


class RoceProbe:
    kind = "roce"
    auto_rank = 20

    def select(
        self, inv: Inventory, device: str | None, netdev: str | None
    ) -> FabricSelection | FabricUnavailable:
        devs = pick_devices(self.kind, inv, device, _is_hw_roce, "hardware RoCE")
        if isinstance(devs, FabricUnavailable):
            return devs
        if not devs and any(d.driver == "rxe" for d in inv.rdma):
            soft = ", ".join(d.name for d in inv.rdma if d.driver == "rxe")
            return FabricUnavailable(
                self.kind,
                f"no hardware RoCE device: {soft} is SoftRoCE (rxe); use --hpc-fabric=softroce",
            )
        return select_roce_like(self.kind, LABEL, inv, devs, netdev)


PROBE = RoceProbe()
