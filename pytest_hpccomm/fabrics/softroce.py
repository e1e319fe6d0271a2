"""SoftRoCE: the kernel's rdma_rxe device on an ordinary netdev (same GID choice as RoCE)."""

from __future__ import annotations

from pytest_hpccomm.fabrics import FabricSelection, FabricUnavailable, describe_inventory
from pytest_hpccomm.fabrics._common import select_roce_like
from pytest_hpccomm.fabrics.probe_base import PortProbe
from pytest_hpccomm.fabrics.sysfs import Inventory, RdmaDevice


class SoftRoceProbe(PortProbe):
    kind = "softroce"
    auto_rank = 40
    label = "SoftRoCE"
    wanted_label = "SoftRoCE (rxe)"

    def wanted(self, dev: RdmaDevice) -> bool:
        return dev.driver == "rxe"

    def none_found(self, inv: Inventory) -> FabricUnavailable:
        return FabricUnavailable(
            self.kind, f"no SoftRoCE (rxe) device: found {describe_inventory(inv)}"
        )

    def choose(
        self, inv: Inventory, devs: list[RdmaDevice], netdev: str | None
    ) -> FabricSelection | FabricUnavailable:
        return select_roce_like(self.kind, self.label, inv, devs, netdev)


PROBE = SoftRoceProbe()
