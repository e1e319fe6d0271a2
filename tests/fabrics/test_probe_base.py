"""The probe bases serve a kind from outside the package: a toy `PortProbe` subclass, registered
like a plugin's probe, is selected on the recorded trees, and the base's reasons (device named
of another kind, none present, port not ACTIVE, port not on the named netdev) name it."""

from __future__ import annotations

import pytest

from pytest_hpccomm.fabrics import (
    _REGISTRY,
    FabricProbe,
    FabricSelection,
    FabricUnavailable,
    describe_inventory,
    get_probe,
    probes,
    register_fabric,
    select_fabric,
)
from pytest_hpccomm.fabrics._common import port_selection
from pytest_hpccomm.fabrics.probe_base import PortProbe
from pytest_hpccomm.fabrics.sysfs import Inventory, RdmaDevice
from tests.fabrics._fabric_trees import inventory


class ConnectXProbe(PortProbe):
    """Any ACTIVE port of a Mellanox ConnectX adapter, whatever its link layer."""

    kind = "connectx"
    auto_rank = 1  # ahead of every built-in
    label = "ConnectX"
    wanted_label = "ConnectX (mlx4/mlx5)"

    def wanted(self, dev: RdmaDevice) -> bool:
        return dev.name.startswith(("mlx4_", "mlx5_"))

    def none_found(self, inv: Inventory) -> FabricUnavailable:
        # its own words, not the port reasons' "no ConnectX device": the test sees which says it
        return FabricUnavailable(
            self.kind, f"no mlx4/mlx5 adapter: found {describe_inventory(inv)}"
        )

    def choose(
        self, inv: Inventory, devs: list[RdmaDevice], netdev: str | None
    ) -> FabricSelection | FabricUnavailable:
        active = self.active_ports(inv, [(d, p) for d in devs for p in d.ports], netdev)
        if isinstance(active, FabricUnavailable):
            return active
        dev, port = active[0]
        return port_selection(
            self.kind,
            dev,
            port,
            gid=port.gid(0),
            netdev=port.netdev,
            address=None,
            link_layer=port.link_layer,
            description=f"{dev.name} port {port.num} (ConnectX, {port.link_layer})",
        )


@pytest.fixture
def connectx(monkeypatch: pytest.MonkeyPatch) -> ConnectXProbe:
    probes()  # built-ins loaded before the registry is patched: the toy kind does not stay
    monkeypatch.setattr("pytest_hpccomm.fabrics._REGISTRY", dict(_REGISTRY))
    probe = ConnectXProbe()
    register_fabric(probe)
    return probe


def selected(result: FabricSelection | FabricUnavailable) -> FabricSelection:
    assert isinstance(result, FabricSelection), result
    return result


def reason(result: FabricSelection | FabricUnavailable) -> str:
    assert isinstance(result, FabricUnavailable), result
    assert result.kind == "connectx"
    return result.reason


def test_a_port_probe_subclass_is_registered_and_selected(connectx: ConnectXProbe) -> None:
    assert isinstance(connectx, FabricProbe)
    assert get_probe("connectx") is connectx and probes()[0] is connectx
    ib = selected(select_fabric(inventory("ib-edr-mlx5"), "connectx"))
    assert (ib.kind, ib.device, ib.port, ib.netdev) == ("connectx", "mlx5_0", 1, "ib0")
    assert (ib.rate_gbps, ib.firmware, ib.mtu) == (100.0, "16.35.2000", 4096)
    assert ib.description == "mlx5_0 port 1 (ConnectX, InfiniBand)"
    roce = selected(select_fabric(inventory("roce-v2-mlx5"), "connectx"))
    assert roce.description == "mlx5_0 port 1 (ConnectX, Ethernet)"
    # auto prefers it where it is present, and goes on to the built-ins where it is not
    assert selected(select_fabric(inventory("ib-edr-mlx5"), "auto")).kind == "connectx"
    assert selected(select_fabric(inventory("ethernet-plain"), "auto")).kind == "ethernet"


def test_the_base_says_why_a_port_probe_subclass_is_unavailable(connectx: ConnectXProbe) -> None:
    plain = inventory("ethernet-plain")
    assert reason(select_fabric(plain, "connectx")) == (
        f"no mlx4/mlx5 adapter: found {describe_inventory(plain)}"
    )
    assert reason(select_fabric(inventory("softroce-rxe"), "connectx", device="rxe0")) == (
        "rxe0 is SoftRoCE (rxe), not ConnectX (mlx4/mlx5)"
    )
    assert reason(select_fabric(plain, "connectx", device="mlx5_0")).startswith(
        "no RDMA device named mlx5_0: found"
    )
    assert reason(select_fabric(inventory("ib-port-down"), "connectx")) == (
        "no ConnectX port in state ACTIVE: mlx5_0 port 1 is DOWN (phys_state Polling)"
    )
    ib = inventory("ib-edr-mlx5")
    assert reason(select_fabric(ib, "connectx", netdev="eth0")) == (
        f"no ConnectX port uses eth0: found {describe_inventory(ib)}"
    )
