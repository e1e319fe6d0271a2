"""Fabric selection on every recorded tree: what is chosen, and why not when it is not."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pytest_hpccomm.fabrics import (
    _REGISTRY,
    FabricProbe,
    FabricSelection,
    FabricUnavailable,
    describe_inventory,
    fabric_kinds,
    get_probe,
    probes,
    register_fabric,
    select_fabric,
)
from pytest_hpccomm.fabrics.sysfs import Inventory, read_inventory
from tests.fabrics._fabric_trees import TREES, inventory, write

BUILTIN_KINDS = ("ib", "roce", "softroce", "iwarp", "ipoib", "ethernet")  # the package's modules
MLX5_ROCE_PORT = "devices/pci0000:5d/0000:5d:00.0/0000:5e:00.0/infiniband/mlx5_0/ports/1"
MLX5_IB_PORT = "devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0/infiniband/mlx5_0/ports/1"

# tree -> what --hpc-fabric=auto selects, and every field that matters for it
AUTO: dict[str, dict[str, Any]] = {
    "ib-edr-mlx5": dict(
        kind="ib",
        device="mlx5_0",
        port=1,
        gid_index=0,
        gid="fe80:0000:0000:0000:0c42:a103:0012:3456",
        netdev="ib0",
        address="192.0.2.11",
        rate_gbps=100.0,
        mtu=4096,
        firmware="16.35.2000",
        driver="mlx5_core",
        link_layer="InfiniBand",
        description="mlx5_0 port 1 (InfiniBand, 100 Gb/sec (4X EDR), LID 0x1a)",
    ),
    "roce-v2-mlx5": dict(
        kind="roce",
        device="mlx5_0",
        port=1,
        gid_index=3,
        gid="0000:0000:0000:0000:0000:ffff:c633:640a",
        netdev="ens1f0",
        address="198.51.100.10",
        rate_gbps=25.0,
        mtu=4096,
        firmware="14.32.1010",
        driver="mlx5_core",
        link_layer="Ethernet",
        description="mlx5_0 port 1 (RoCE v2, GID 3 = 198.51.100.10 on ens1f0, 25 Gb/sec (1X EDR))",
    ),
    "softroce-rxe": dict(
        kind="softroce",
        device="rxe0",
        port=1,
        gid_index=3,
        gid="0000:0000:0000:0000:0000:ffff:c000:020f",
        netdev="eth0",
        address="192.0.2.15",
        rate_gbps=2.5,
        mtu=1024,
        firmware=None,
        driver="rxe",
        link_layer="Ethernet",
        description=(
            "rxe0 port 1 (SoftRoCE, RoCE v2, GID 3 = 192.0.2.15 on eth0, 2.5 Gb/sec (1X SDR))"
        ),
    ),
    "iwarp-siw": dict(
        kind="iwarp",
        device="siw0",
        port=1,
        gid_index=0,
        gid="5254:0012:3457:0000:0000:0000:0000:0000",
        netdev="eth0",
        address="192.0.2.16",
        rate_gbps=2.5,
        mtu=1024,
        firmware=None,
        driver="siw",
        link_layer="Ethernet",
        description="siw0 port 1 (iWARP via siw over eth0, 192.0.2.16, 2.5 Gb/sec (1X SDR))",
    ),
    "ib-port-down": dict(
        kind="ethernet",
        device=None,
        port=None,
        gid_index=None,
        gid=None,
        netdev="eth0",
        address="198.51.100.12",
        rate_gbps=1.0,
        mtu=1500,
        firmware=None,
        driver="e1000e",
        link_layer="Ethernet",
        description="eth0 (Ethernet, 198.51.100.12, MTU 1500, 1 Gb/s)",
    ),
    "ethernet-plain": dict(
        kind="ethernet",
        device=None,
        port=None,
        gid_index=None,
        gid=None,
        netdev="eth0",
        address="192.0.2.20",
        rate_gbps=1.0,
        mtu=1500,
        firmware=None,
        driver="e1000e",
        link_layer="Ethernet",
        description="eth0 (Ethernet, 192.0.2.20, MTU 1500, 1 Gb/s)",
    ),
    # a public recording (fixtures/sysfs/procfs-opa-mlx4-mlx5/SOURCE.md): Omni-Path sorts
    # first and is fastest, but it is not InfiniBand; of the IB ports the fastest is taken
    "procfs-opa-mlx4-mlx5": dict(
        kind="ib",
        device="mlx4_0",
        port=1,
        gid_index=0,
        gid=None,
        netdev=None,
        address=None,
        rate_gbps=40.0,
        mtu=None,
        firmware="2.31.5050",
        driver="unknown",
        link_layer="InfiniBand",
        description="mlx4_0 port 1 (InfiniBand, 40 Gb/sec (4X QDR), LID unknown)",
    ),
}

# tree -> the kinds that are present (everything else must be FabricUnavailable)
PRESENT = {
    "ib-edr-mlx5": {"ib", "ipoib", "ethernet"},
    "ib-port-down": {"ethernet"},
    "roce-v2-mlx5": {"roce", "ethernet"},
    "softroce-rxe": {"softroce", "ethernet"},
    "iwarp-siw": {"iwarp", "ethernet"},
    "ethernet-plain": {"ethernet"},
    "procfs-opa-mlx4-mlx5": {"ib", "ethernet"},
}

DESCRIBED = {
    "ib-edr-mlx5": "mlx5_0 (InfiniBand), eth0 (Ethernet), ib0 (IPoIB datagram)",
    "ib-port-down": "mlx5_0 (InfiniBand, DOWN), eth0 (Ethernet), ib0 (IPoIB datagram, down)",
    "roce-v2-mlx5": "mlx5_0 (RoCE), ens1f0 (Ethernet), eth0 (Ethernet)",
    "softroce-rxe": "rxe0 (RoCE), eth0 (Ethernet)",
    "iwarp-siw": "siw0 (iWARP), eth0 (Ethernet)",
    "ethernet-plain": "eth0 (Ethernet)",
    "procfs-opa-mlx4-mlx5": "hfi1_0 (Omni-Path (PSM2/OPA)), mlx4_0 (InfiniBand), "
    "mlx5_0 (InfiniBand), eth0 (Ethernet)",
}


def selected(result: FabricSelection | FabricUnavailable) -> FabricSelection:
    assert isinstance(result, FabricSelection), result
    return result


def unavailable(result: FabricSelection | FabricUnavailable) -> str:
    assert isinstance(result, FabricUnavailable), result
    assert "\n" not in result.reason
    return result.reason


def test_every_tree_has_expectations() -> None:
    assert set(TREES) == set(AUTO) == set(PRESENT) == set(DESCRIBED)


@pytest.mark.parametrize("tree", sorted(AUTO))
def test_auto_selection(tree: str) -> None:
    assert selected(select_fabric(inventory(tree), "auto")) == FabricSelection(**AUTO[tree])


@pytest.mark.parametrize("tree", sorted(PRESENT))
@pytest.mark.parametrize("kind", BUILTIN_KINDS)
def test_presence_per_kind(tree: str, kind: str) -> None:
    result = select_fabric(inventory(tree), kind)
    assert result.kind == kind
    assert isinstance(result, FabricSelection) == (kind in PRESENT[tree]), result
    if isinstance(result, FabricUnavailable):
        assert result.reason and "\n" not in result.reason


@pytest.mark.parametrize("tree", sorted(DESCRIBED))
def test_describe_inventory(tree: str) -> None:
    assert describe_inventory(inventory(tree)) == DESCRIBED[tree]


def test_ipoib_on_ib_tree() -> None:
    sel = selected(select_fabric(inventory("ib-edr-mlx5"), "ipoib"))
    assert (sel.device, sel.port, sel.netdev, sel.address, sel.mtu, sel.rate_gbps) == (
        "mlx5_0",
        1,
        "ib0",
        "192.0.2.11",
        2044,
        100.0,
    )
    assert (sel.link_layer, sel.driver, sel.firmware) == ("InfiniBand", "mlx5_core", "16.35.2000")
    assert sel.description == (
        "ib0 (IPoIB datagram on mlx5_0 port 1, 192.0.2.11, MTU 2044, 100 Gb/s)"
    )


def test_ethernet_prefers_the_fast_ipv4_interface() -> None:
    sel = selected(select_fabric(inventory("roce-v2-mlx5"), "ethernet"))
    assert (sel.netdev, sel.address, sel.rate_gbps, sel.mtu) == (
        "ens1f0",
        "198.51.100.10",
        25.0,
        9000,
    )


# ------------------------------------------------------------------------------- reasons


def test_ib_on_softroce_names_what_was_found() -> None:
    reason = unavailable(select_fabric(inventory("softroce-rxe"), "ib"))
    # no InfiniBand device at all: not a question of port state
    assert reason == "no InfiniBand device: found rxe0 (RoCE), eth0 (Ethernet)"


def test_ib_port_down_gives_state() -> None:
    reason = unavailable(select_fabric(inventory("ib-port-down"), "ib"))
    assert reason == (
        "no InfiniBand port in state ACTIVE: mlx5_0 port 1 is DOWN (phys_state Polling)"
    )


def test_ib_port_init_hints_at_subnet_manager(tree_copy: Callable[[str], Path]) -> None:
    root = tree_copy("ib-port-down")
    write(root / MLX5_IB_PORT / "state", "2: INIT\n")
    write(root / MLX5_IB_PORT / "phys_state", "5: LinkUp\n")
    reason = unavailable(select_fabric(read_inventory(root), "ib"))
    assert "mlx5_0 port 1 is INIT (phys_state LinkUp; is a subnet manager running?)" in reason


def test_ipoib_down_reason() -> None:
    reason = unavailable(select_fabric(inventory("ib-port-down"), "ipoib"))
    assert reason == "no IPoIB interface that is up with an address: ib0 is down"


def test_roce_on_softroce_points_to_softroce() -> None:
    reason = unavailable(select_fabric(inventory("softroce-rxe"), "roce"))
    assert reason == "no hardware RoCE device: rxe0 is SoftRoCE (rxe); use --hpc-fabric=softroce"


def test_softroce_and_iwarp_reasons() -> None:
    assert unavailable(select_fabric(inventory("iwarp-siw"), "softroce")) == (
        "no SoftRoCE (rxe) device: found siw0 (iWARP), eth0 (Ethernet)"
    )
    assert unavailable(select_fabric(inventory("roce-v2-mlx5"), "iwarp")) == (
        "no iWARP (RNIC) device: found mlx5_0 (RoCE), ens1f0 (Ethernet), eth0 (Ethernet)"
    )
    assert unavailable(select_fabric(inventory("ib-edr-mlx5"), "roce")) == (
        "no RoCE device: found mlx5_0 (InfiniBand), eth0 (Ethernet), ib0 (IPoIB datagram)"
    )


# ------------------------------------------------------------------------ RoCE GID choice


def _drop_gid(root: Path, index: int) -> None:
    for sub in ("gids", "gid_attrs/types", "gid_attrs/ndevs"):
        (root / MLX5_ROCE_PORT / sub / str(index)).unlink()


def test_roce_falls_back_to_ipv6_v2(tree_copy: Callable[[str], Path]) -> None:
    root = tree_copy("roce-v2-mlx5")
    _drop_gid(root, 3)
    sel = selected(select_fabric(read_inventory(root), "roce"))
    assert (sel.gid_index, sel.address) == (5, "2001:db8::a")
    assert sel.description.endswith("fallback: no IPv4-mapped RoCE v2 GID)")


def test_roce_falls_back_to_link_local_v2(tree_copy: Callable[[str], Path]) -> None:
    root = tree_copy("roce-v2-mlx5")
    _drop_gid(root, 3)
    _drop_gid(root, 5)
    sel = selected(select_fabric(read_inventory(root), "roce"))
    assert sel.gid_index == 1
    assert "(link-local)" in sel.description and "fallback" in sel.description


def test_roce_falls_back_to_v1(tree_copy: Callable[[str], Path]) -> None:
    root = tree_copy("roce-v2-mlx5")
    for i in (1, 3, 5):
        _drop_gid(root, i)
    sel = selected(select_fabric(read_inventory(root), "roce"))
    assert (sel.gid_index, sel.address) == (2, "198.51.100.10")
    assert "RoCE v1" in sel.description and "fallback: no RoCE v2 GID" in sel.description


def test_roce_without_gids_is_unavailable(tree_copy: Callable[[str], Path]) -> None:
    root = tree_copy("roce-v2-mlx5")
    for i in range(6):
        _drop_gid(root, i)
    reason = unavailable(select_fabric(read_inventory(root), "roce"))
    assert reason.startswith("no usable RoCE GID") and "mlx5_0 port 1 on ens1f0" in reason


# ------------------------------------------------------------------------------ overrides


def test_device_override_unknown_names_what_exists() -> None:
    reason = unavailable(select_fabric(inventory("ib-edr-mlx5"), "ib", device="mlx5_1"))
    assert reason == (
        "no RDMA device named mlx5_1: found mlx5_0 (InfiniBand), eth0 (Ethernet), "
        "ib0 (IPoIB datagram)"
    )


def test_device_override_of_the_wrong_kind() -> None:
    inv = inventory("softroce-rxe")
    assert unavailable(select_fabric(inv, "roce", device="rxe0")) == (
        "rxe0 is SoftRoCE (rxe), not hardware RoCE"
    )
    assert unavailable(select_fabric(inv, "ib", device="rxe0")) == (
        "rxe0 is SoftRoCE (rxe), not InfiniBand"
    )
    assert selected(select_fabric(inv, "softroce", device="rxe0")).device == "rxe0"


def test_netdev_overrides() -> None:
    ib = inventory("ib-edr-mlx5")
    assert selected(select_fabric(ib, "ib", netdev="ib0")).port == 1
    assert unavailable(select_fabric(ib, "ib", netdev="ib1")).startswith(
        "no network interface named ib1: found mlx5_0 (InfiniBand)"
    )
    assert unavailable(select_fabric(ib, "ib", netdev="eth0")).startswith(
        "no InfiniBand port uses eth0"
    )
    assert unavailable(select_fabric(ib, "ethernet", netdev="ib0")) == (
        "ib0 is IPoIB, not Ethernet"
    )
    assert unavailable(select_fabric(ib, "ipoib", netdev="eth0")) == "eth0 is Ethernet, not IPoIB"
    assert selected(select_fabric(ib, "ipoib", netdev="ib0")).netdev == "ib0"
    soft = selected(select_fabric(inventory("softroce-rxe"), "softroce", netdev="eth0"))
    assert soft.gid_index == 3
    down = inventory("ib-port-down")
    assert unavailable(select_fabric(down, "ipoib", netdev="ib0")) == "ib0 is down"


def test_ethernet_overrides() -> None:
    inv = inventory("roce-v2-mlx5")
    assert selected(select_fabric(inv, "ethernet", netdev="eth0")).address == "203.0.113.5"
    lo = selected(select_fabric(inv, "ethernet", netdev="lo"))
    assert (lo.netdev, lo.address, lo.link_layer) == ("lo", "127.0.0.1", "loopback")
    assert lo.description == "lo (loopback, 127.0.0.1, MTU 65536)"
    # a device override restricts a netdev fabric to that device's interfaces
    assert selected(select_fabric(inv, "ethernet", device="mlx5_0")).netdev == "ens1f0"
    assert unavailable(select_fabric(inv, "ethernet", device="mlx9")).startswith(
        "no RDMA device named mlx9"
    )


def test_auto_honours_overrides() -> None:
    inv = inventory("roce-v2-mlx5")
    assert selected(select_fabric(inv, "auto", netdev="eth0")).kind == "ethernet"
    reason = unavailable(select_fabric(inv, "auto", device="nope"))
    assert reason.startswith("no fabric available for device=nope: found mlx5_0 (RoCE)")


def test_ethernet_falls_back_to_loopback(tree_copy: Callable[[str], Path]) -> None:
    root = tree_copy("ethernet-plain")
    write(root / "class/net/eth0/operstate", "down\n")
    inv = read_inventory(root)
    sel = selected(select_fabric(inv, "ethernet"))
    assert (sel.netdev, sel.address, sel.link_layer) == ("lo", "127.0.0.1", "loopback")
    assert "loopback: no Ethernet interface is up with an address" in sel.description
    assert selected(select_fabric(inv, "auto")).netdev == "lo"


def test_ethernet_unavailable_without_any_interface(tree_copy: Callable[[str], Path]) -> None:
    root = tree_copy("ethernet-plain")
    shutil.rmtree(root / "class/net")
    inv = read_inventory(root)
    assert unavailable(select_fabric(inv, "ethernet")) == (
        "no Ethernet interface is up (nor loopback): found no RDMA device and no network interface"
    )
    assert unavailable(select_fabric(inv, "auto")).startswith("no fabric available: found")


# ------------------------------------------------------------------------------- registry


def test_registry_order_and_lookup() -> None:
    assert [p.kind for p in probes()] == ["ib", "roce", "iwarp", "softroce", "ipoib", "ethernet"]
    assert set(BUILTIN_KINDS) <= set(fabric_kinds())
    assert all(isinstance(p, FabricProbe) for p in probes())
    assert get_probe("ib").kind == "ib"
    with pytest.raises(ValueError, match="unknown fabric 'infiniband'"):
        get_probe("infiniband")
    with pytest.raises(ValueError, match="unknown fabric"):
        select_fabric(inventory("ethernet-plain"), "nope")


@dataclass
class _OmniPath:
    kind: str = "opa"
    auto_rank: int = 5

    def select(self, inv: Inventory, device: str | None, netdev: str | None) -> Any:
        return FabricUnavailable(self.kind, "no Omni-Path adapter")


def test_register_a_new_fabric(monkeypatch: pytest.MonkeyPatch) -> None:
    probes()  # built-ins loaded before the registry is patched
    monkeypatch.setattr("pytest_hpccomm.fabrics._REGISTRY", dict(_REGISTRY))
    probe = _OmniPath()
    register_fabric(probe)
    register_fabric(probe)  # the same probe twice is harmless
    assert get_probe("opa") is probe and probes()[0] is probe
    reason = unavailable(select_fabric(inventory("ethernet-plain"), "opa"))
    assert reason == "no Omni-Path adapter"
    assert selected(select_fabric(inventory("ethernet-plain"), "auto")).kind == "ethernet"
    fresh = _OmniPath()  # a plugin handing out a new instance per session replaces the old
    register_fabric(fresh)
    assert get_probe("opa") is fresh
    with pytest.raises(ValueError, match="'ib' is already registered"):
        register_fabric(_OmniPath(kind="ib"))


# ------------------------------------------------------------------------------ live host


def test_live_sysfs_always_has_ethernet() -> None:
    inv = read_inventory()
    sel = selected(select_fabric(inv, "ethernet"))
    assert sel.kind == "ethernet" and sel.netdev is not None and sel.address is not None
    if not inv.rdma:
        assert selected(select_fabric(inv, "auto")).kind in ("ethernet", "ipoib")
