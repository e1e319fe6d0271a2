"""Defects found by running discovery on recorded trees of real hosts (QLogic QDR, ConnectX-3
FDR, Omni-Path + ConnectX, Intel X722 iWARP + bonding), each on a copy of a fixture tree
reshaped the way that host's recording was."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from hpccomm_suites import DIR as SUITES_DIR
from pytest_hpccomm.baselines.store import fingerprint_diff
from pytest_hpccomm.fabrics import (
    FabricSelection,
    FabricUnavailable,
    describe_inventory,
    select_fabric,
)
from pytest_hpccomm.fabrics.ipoib import IPOIB_CM_MTU, mtu_problem
from pytest_hpccomm.fabrics.sysfs import ADDRESS_UNKNOWN, read_inventory
from pytest_hpccomm.fingerprint import fabric_fingerprint
from tests.fabrics._fabric_trees import inventory, write

SUITE = SUITES_DIR / "fabric" / "test_conformance_fabric.py"
MLX5_IB_PORT = "devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0/infiniband/mlx5_0/ports/1"
IB0 = "devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0/net/ib0"
I40IW = "devices/pci0000:00/0000:00:1f.0/infiniband/i40iw0"


def selected(result: FabricSelection | FabricUnavailable) -> FabricSelection:
    assert isinstance(result, FabricSelection), result
    return result


def unavailable(result: FabricSelection | FabricUnavailable) -> str:
    assert isinstance(result, FabricUnavailable), result
    return result.reason


def add_x722(root: Path, gid_netdev: str | None = None) -> None:
    """An X722 iWARP device as that host's recording had it: no node_type, no `device` link
    (so no driver link), its port saying link layer InfiniBand (i40iw); a GID naming its
    netdev only if `gid_netdev`.  Beside it the bonding driver's class/net/bonding_masters."""
    port = root / I40IW / "ports" / "1"
    write(port / "state", "4: ACTIVE\n")
    write(port / "phys_state", "5: LinkUp\n")
    write(port / "link_layer", "InfiniBand\n")
    write(port / "rate", "10 Gb/sec (4X SDR)\n")
    if gid_netdev is not None:
        write(port / "gids" / "0", "5254:0012:3456:0000:0000:0000:0000:0000\n")
        write(port / "gid_attrs" / "types" / "0", "IB/RoCE v1\n")
        write(port / "gid_attrs" / "ndevs" / "0", gid_netdev + "\n")
    (root / "class" / "infiniband").mkdir(parents=True, exist_ok=True)
    os.symlink(f"../../{I40IW}", root / "class" / "infiniband" / "i40iw0")
    write(root / "class" / "net" / "bonding_masters", "bond0\n")


def run_suite(pytester: pytest.Pytester, root: Path, *args: str) -> pytest.RunResult:
    pytester.copy_example(str(SUITE))
    return pytester.runpytest(
        f"--hpc-sysfs-root={root}", "--hpc-history=none", "-rs", "--import-mode=importlib", *args
    )


# ------------------------------------------------------ 1. iWARP, netdev/addresses unknown


def test_x722_iwarp_is_named_by_its_driver_and_says_what_is_unknown(
    tree_copy: Callable[[str], Path],
) -> None:
    root = tree_copy("ethernet-plain")
    (root.parent / "ip-addr.json").unlink()
    add_x722(root)
    inv = read_inventory(root)
    dev = inv.device("i40iw0")
    assert dev is not None and (dev.node_kind, dev.driver) == ("RNIC", "i40iw")
    sel = selected(select_fabric(inv, "iwarp"))
    assert (sel.device, sel.netdev, sel.address, sel.driver) == ("i40iw0", None, None, "i40iw")
    assert sel.description == "i40iw0 port 1 (iWARP via i40iw, netdev unknown, 10 Gb/sec (4X SDR))"


def test_iwarp_on_a_netdev_whose_addresses_are_unknown_does_not_claim_none(
    tree_copy: Callable[[str], Path],
) -> None:
    root = tree_copy("ethernet-plain")
    (root.parent / "ip-addr.json").unlink()
    add_x722(root, gid_netdev="eth0")
    sel = selected(select_fabric(read_inventory(root), "iwarp"))
    assert sel.netdev == "eth0"
    assert sel.description == (
        f"i40iw0 port 1 (iWARP via i40iw over eth0, {ADDRESS_UNKNOWN}, 10 Gb/sec (4X SDR))"
    )


@pytest.mark.parametrize(
    ("gid_netdev", "reason"),
    [
        (None, "i40iw0 port 1: sysfs does not say which netdev it uses"),
        ("eth0", ADDRESS_UNKNOWN),
    ],
)
def test_fabric_suite_skips_the_iwarp_address_check_when_it_cannot_be_known(
    pytester: pytest.Pytester, tree_copy: Callable[[str], Path], gid_netdev: str | None, reason: str
) -> None:
    root = tree_copy("ethernet-plain")
    (root.parent / "ip-addr.json").unlink()
    add_x722(root, gid_netdev)
    pytester.copy_example(str(SUITE))
    rec = pytester.inline_run(
        f"--hpc-sysfs-root={root}",
        "--hpc-history=none",
        "--import-mode=importlib",
        "--hpc-fabric=iwarp",
    )
    rec.assertoutcome(passed=1, skipped=5)
    (report,) = [
        r
        for r in rec.getreports("pytest_runtest_logreport")
        if "test_iwarp_device_is_an_rnic" in r.nodeid and r.skipped
    ]
    assert isinstance(report.longrepr, tuple), report
    assert report.longrepr[2].startswith(f"Skipped: {reason}"), report.longrepr


# ---------------------------------------------------------- 2. state codes, not their text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("4: ACTIVE", "PortConfigurationTraining"),  # the code decides, not the text beside it
        ("4: PortConfigurationTraining", "PortConfigurationTraining"),
        ("5: LinkUp", "LinkUp"),
        ("2: Polling", "Polling"),
        ("7: Phy Test", "Phy Test"),
        ("LinkUp", "LinkUp"),  # no code: the name
        ("9: Vendor", "Vendor"),  # a code IBTA does not define: the name
    ],
)
def test_phys_state_is_read_by_its_code(
    tree_copy: Callable[[str], Path], text: str, expected: str
) -> None:
    root = tree_copy("ib-edr-mlx5")
    write(root / MLX5_IB_PORT / "phys_state", text + "\n")
    port = read_inventory(root).rdma[0].ports[0]
    assert port.phys_state == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("4: PortConfigurationTraining", "ACTIVE"),
        ("1: LinkUp", "DOWN"),
        ("2: INIT", "INIT"),
        ("3: ARMED", "ARMED"),
        ("5: ACTIVE_DEFER", "ACTIVE_DEFER"),
        ("ACTIVE", "ACTIVE"),
    ],
)
def test_port_state_is_read_by_its_code(
    tree_copy: Callable[[str], Path], text: str, expected: str
) -> None:
    root = tree_copy("ib-edr-mlx5")
    write(root / MLX5_IB_PORT / "state", text + "\n")
    assert read_inventory(root).rdma[0].ports[0].state == expected


def test_fabric_suite_names_the_training_port(
    pytester: pytest.Pytester, tree_copy: Callable[[str], Path]
) -> None:
    root = tree_copy("ib-edr-mlx5")
    write(root / MLX5_IB_PORT / "phys_state", "4: ACTIVE\n")
    result = run_suite(pytester, root, "--hpc-fabric=ib", "--hpc-device=mlx5_0")
    result.assert_outcomes(passed=1, failed=1, skipped=4)
    result.stdout.fnmatch_lines(["*mlx5_0 port 1: phys_state PortConfigurationTraining*"])


# -------------------------------------------------------------------------- 3. IPoIB mode


def test_ipoib_mode_is_reported(tree_copy: Callable[[str], Path]) -> None:
    root = tree_copy("ib-edr-mlx5")
    write(root / IB0 / "mode", "connected\n")
    write(root / IB0 / "mtu", "65520\n")
    inv = read_inventory(root)
    assert inv.netdev("ib0").mode == "connected"  # type: ignore[union-attr]
    sel = selected(select_fabric(inv, "ipoib"))
    assert sel.description.startswith("ib0 (IPoIB connected on mlx5_0 port 1, ")
    assert "ib0 (IPoIB connected)" in describe_inventory(inv)
    # the mode bounds the MTU and moves the throughput: a baseline taken in datagram mode
    # must not judge a connected-mode run as like for like
    assert sel.ipoib_mode == "connected"
    assert fabric_fingerprint(sel)["ipoib_mode"] == "connected"
    write(root / IB0 / "mode", "datagram\n")
    write(root / IB0 / "mtu", "2044\n")
    other = selected(select_fabric(read_inventory(root), "ipoib"))
    assert fabric_fingerprint(other)["ipoib_mode"] == "datagram"
    assert ("ipoib_mode", "connected", "datagram") in fingerprint_diff(
        fabric_fingerprint(sel), fabric_fingerprint(other)
    )


@pytest.mark.parametrize(
    ("mode", "mtu", "active_mtu", "ok"),
    [
        ("datagram", 1020, 1024, True),  # a 1K partition: IB MTU 1024 - 4
        ("datagram", 2044, 1024, False),  # more than one 1K IB packet carries
        ("datagram", 4092, 4096, True),
        ("datagram", 4096, 4096, False),  # the 4-byte IPoIB header does not fit
        ("connected", IPOIB_CM_MTU, 4096, True),
        ("connected", IPOIB_CM_MTU + 1, 4096, False),
    ],
)
def test_ipoib_mtu_is_checked_against_its_mode(
    tree_copy: Callable[[str], Path], mode: str, mtu: int, active_mtu: int, ok: bool
) -> None:
    root = tree_copy("ib-edr-mlx5")
    write(root / IB0 / "mode", mode + "\n")
    write(root / IB0 / "mtu", f"{mtu}\n")
    enum = {1024: 3, 4096: 5}[active_mtu]
    devinfo = root.parent / "ibv_devinfo.txt"
    devinfo.write_text(
        devinfo.read_text().replace(
            "active_mtu:\t\t4096 (5)", f"active_mtu:\t\t{active_mtu} ({enum})"
        )
    )
    inv = read_inventory(root)
    port = inv.rdma[0].ports[0]
    assert port.active_mtu == active_mtu
    problem = mtu_problem(inv.netdev("ib0"), port)  # type: ignore[arg-type]
    assert (problem is None) == ok, problem


def test_fabric_suite_passes_ipoib_on_a_1k_datagram_partition(
    pytester: pytest.Pytester, tree_copy: Callable[[str], Path]
) -> None:
    root = tree_copy("ib-edr-mlx5")
    write(root / IB0 / "mtu", "1020\n")  # datagram, IB MTU 1024
    result = run_suite(pytester, root, "--hpc-fabric=ipoib")
    result.assert_outcomes(passed=2, skipped=4)


# ------------------------------------------------------------------ 4. reasons that are true


def test_roce_without_any_roce_device_says_so() -> None:
    reason = unavailable(select_fabric(inventory("ib-edr-mlx5"), "roce"))
    assert reason.startswith("no RoCE device: found mlx5_0 (InfiniBand)"), reason


def test_ipoib_without_any_ipoib_netdev_says_so() -> None:
    reason = unavailable(select_fabric(inventory("ethernet-plain"), "ipoib"))
    assert reason == "no IPoIB interface: found eth0 (Ethernet)"


def test_bonding_masters_is_not_an_interface(tree_copy: Callable[[str], Path]) -> None:
    root = tree_copy("ethernet-plain")
    write(root / "class" / "net" / "bonding_masters", "bond0\n")
    inv = read_inventory(root)
    assert inv.unreadable == ()
    assert [n.name for n in inv.netdevs] == ["eth0", "lo"]
    assert describe_inventory(inv) == "eth0 (Ethernet)"


def test_an_unreadable_netdev_is_not_said_to_be_absent(tree_copy: Callable[[str], Path]) -> None:
    root = tree_copy("ethernet-plain")
    lo = root / "class" / "net" / "lo"
    lo.unlink()
    os.symlink("../../devices/virtual/net/lo-not-recorded", lo)
    inv = read_inventory(root)
    why = "lo (class/net/lo leads to a missing directory)"
    assert inv.unreadable == (why,)
    for kind in ("ethernet", "ib", "ipoib"):
        reason = unavailable(select_fabric(inv, kind, netdev="lo"))
        assert reason == f"network interface lo is unreadable: {why}", (kind, reason)


def test_auto_with_a_down_netdev_says_it_is_down(tree_copy: Callable[[str], Path]) -> None:
    root = tree_copy("ethernet-plain")
    write(root / "class" / "net" / "eth0" / "operstate", "down\n")
    reason = unavailable(select_fabric(read_inventory(root), "auto", netdev="eth0"))
    assert reason.startswith("eth0 is down: no fabric can use it"), reason
