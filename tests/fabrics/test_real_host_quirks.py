"""Selection on trees shaped like the real hosts a review recorded (issue 15): Omni-Path and
iWARP devices beside InfiniBand HCAs, IPoIB without a netdev speed, trees without addresses,
an IB-only device asked for Ethernet."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from hpccomm_suites import DIR as SUITES_DIR
from pytest_hpccomm.fabrics import FabricSelection, FabricUnavailable, select_fabric
from pytest_hpccomm.fabrics.sysfs import ADDRESS_UNKNOWN, read_inventory

MLX5_DIR = "devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0/infiniband"


def clone_hca(root: Path, name: str, rate: str, node_type: str | None = "1: CA") -> None:
    """Another HCA in the EDR tree: a copy of mlx5_0 named `name` (sorted before it)."""
    base = root / MLX5_DIR
    shutil.copytree(base / "mlx5_0", base / name, symlinks=True)
    (base / name / "ports" / "1" / "rate").write_text(rate + "\n")
    if node_type is None:
        (base / name / "node_type").unlink()
    else:
        (base / name / "node_type").write_text(node_type + "\n")
    os.symlink(f"../../{MLX5_DIR}/{name}", root / "class" / "infiniband" / name)


def selected(root: Path, kind: str, device: str | None = None) -> FabricSelection:
    sel = select_fabric(read_inventory(root), kind, device)
    assert isinstance(sel, FabricSelection), sel
    return sel


def unavailable(root: Path, kind: str, device: str | None = None) -> str:
    sel = select_fabric(read_inventory(root), kind, device)
    assert isinstance(sel, FabricUnavailable), sel
    return sel.reason


def test_omni_path_is_not_picked_as_infiniband(tree_copy: Callable[[str], Path]) -> None:
    root = tree_copy("ib-edr-mlx5")
    clone_hca(root, "hfi1_0", "100 Gb/sec (4X EDR)")
    assert selected(root, "ib").device == "mlx5_0"
    assert "hfi1_0 is Omni-Path (PSM2/OPA), not InfiniBand" in unavailable(root, "ib", "hfi1_0")


def test_an_rnic_without_node_type_is_iwarp_not_infiniband(
    tree_copy: Callable[[str], Path],
) -> None:
    root = tree_copy("ib-edr-mlx5")
    clone_hca(root, "i40iw0", "40 Gb/sec (4X QDR)", node_type=None)
    inv = read_inventory(root)
    i40iw = inv.device("i40iw0")
    assert i40iw is not None and i40iw.node_kind == "RNIC"
    assert i40iw.ports[0].link_layer == "Ethernet"
    assert selected(root, "ib").device == "mlx5_0"
    assert selected(root, "iwarp").device == "i40iw0"


def test_infiniband_takes_the_fastest_active_port(tree_copy: Callable[[str], Path]) -> None:
    root = tree_copy("ib-edr-mlx5")
    clone_hca(root, "mlx4_0", "40 Gb/sec (4X QDR)")  # sorts first by name
    assert selected(root, "ib").device == "mlx5_0"


def test_ipoib_takes_the_ports_rate_when_the_netdev_has_no_speed(
    tree_copy: Callable[[str], Path],
) -> None:
    root = tree_copy("ib-edr-mlx5")
    speed = (root / "class" / "net" / "ib0").resolve() / "speed"
    speed.unlink()
    speed.write_text("")
    sel = selected(root, "ipoib")
    assert sel.rate_gbps == 100.0 and "100 Gb/sec (4X EDR)" in sel.description


def test_a_tree_without_addresses_says_they_are_unknown(tree_copy: Callable[[str], Path]) -> None:
    root = tree_copy("ib-edr-mlx5")
    (root.parent / "ip-addr.json").unlink()
    ipoib = selected(root, "ipoib")
    assert ipoib.netdev == "ib0" and ipoib.address is None
    assert ADDRESS_UNKNOWN in ipoib.description
    assert ADDRESS_UNKNOWN in selected(root, "ethernet").description


def test_ethernet_on_an_ib_only_device_names_its_netdevs(tree_copy: Callable[[str], Path]) -> None:
    root = tree_copy("ib-edr-mlx5")
    assert (
        unavailable(root, "ethernet", "mlx5_0")
        == "mlx5_0 has no Ethernet interface that is up: its netdevs are ib0 (IPoIB)"
    )


def test_fabric_suite_skips_address_checks_on_a_tree_without_addresses(
    pytester: pytest.Pytester, tree_copy: Callable[[str], Path]
) -> None:
    root = tree_copy("ib-edr-mlx5")
    (root.parent / "ip-addr.json").unlink()
    suite = SUITES_DIR / "fabric" / "test_conformance_fabric.py"
    pytester.copy_example(str(suite))
    for fabric in ("ethernet", "ipoib"):
        result = pytester.runpytest(
            f"--hpc-sysfs-root={root}",
            f"--hpc-fabric={fabric}",
            "--hpc-history=none",
            "-rs",
            "--import-mode=importlib",
        )
        result.assert_outcomes(passed=1, skipped=5)
        result.stdout.fnmatch_lines([f"*{ADDRESS_UNKNOWN}*"])
