"""SoftRoCE: the kernel's rdma_rxe device on an ordinary netdev (same GID choice as RoCE)."""

from __future__ import annotations

from pytest_hpccomm.fabrics import FabricSelection, FabricUnavailable, describe_inventory
from pytest_hpccomm.fabrics._common import pick_devices, select_roce_like
from pytest_hpccomm.fabrics.sysfs import Inventory, RdmaDevice

LABEL = "SoftRoCE"


def _is_rxe(dev: RdmaDevice) -> bool:
    return dev.driver == "rxe"


class SoftRoceProbe:
    kind = "softroce"
    auto_rank = 40

    def select(
        self, inv: Inventory, device: str | None, netdev: str | None
    ) -> FabricSelection | FabricUnavailable:
        devs = pick_devices(self.kind, inv, device, _is_rxe, "SoftRoCE (rxe)")
        if isinstance(devs, FabricUnavailable):
            return devs
        if not devs:
            return FabricUnavailable(
                self.kind, f"no SoftRoCE (rxe) device: found {describe_inventory(inv)}"
            )
        return select_roce_like(self.kind, LABEL, inv, devs, netdev)


PROBE = SoftRoceProbe()
