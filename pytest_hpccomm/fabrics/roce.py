"""RoCE on a hardware adapter: an ACTIVE Ethernet-link port of a CA that is not rxe."""

from __future__ import annotations

from pytest_hpccomm.fabrics import FabricSelection, FabricUnavailable
from pytest_hpccomm.fabrics._common import select_roce_like
from pytest_hpccomm.fabrics.probe_base import PortProbe
from pytest_hpccomm.fabrics.sysfs import Inventory, RdmaDevice


class RoceProbe(PortProbe):
    kind = "roce"
    auto_rank = 20
    label = "RoCE"
    wanted_label = "hardware RoCE"

    def wanted(self, dev: RdmaDevice) -> bool:
        return (
            not dev.is_software
            and dev.node_kind == "CA"
            and any(p.link_layer == "Ethernet" for p in dev.ports)
        )

    def none_found(self, inv: Inventory) -> FabricUnavailable | None:
        # only rxe present: point at the kind that has it; otherwise the port reasons say it
        soft = ", ".join(d.name for d in inv.rdma if d.driver == "rxe")
        if not soft:
            return None
        return FabricUnavailable(
            self.kind,
            f"no hardware RoCE device: {soft} is SoftRoCE (rxe); use --hpc-fabric=softroce",
        )

    def choose(
        self, inv: Inventory, devs: list[RdmaDevice], netdev: str | None
    ) -> FabricSelection | FabricUnavailable:
        return select_roce_like(self.kind, self.label, inv, devs, netdev)


PROBE = RoceProbe()
