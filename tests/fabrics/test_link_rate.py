"""Which link rates discovery vouches for (fabrics/link_rate.py), on the recorded trees: a
hardware port's rate or a real NIC's speed; never loopback, a veth or a paravirtual NIC."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_hpccomm.fabrics import FabricSelection, select_fabric
from pytest_hpccomm.fabrics.link_rate import discovered_link_rate, slowest
from pytest_hpccomm.fabrics.sysfs import read_inventory
from pytest_hpccomm.measure.link import LinkRate
from tests.fabrics._fabric_trees import inventory

# (tree, fabric) -> (Gbit/s, source), or None where the rate is unknown
EXPECTED: dict[tuple[str, str], tuple[float, str] | None] = {
    ("ib-edr-mlx5", "ib"): (100.0, "port rate mlx5_0/1"),
    ("ib-edr-mlx5", "ipoib"): (100.0, "port rate mlx5_0/1"),
    ("roce-v2-mlx5", "roce"): (25.0, "port rate mlx5_0/1"),
    ("ethernet-plain", "ethernet"): (1.0, "netdev eth0 speed"),  # e1000e
    ("ib-port-down", "ethernet"): (1.0, "netdev eth0 speed"),
    # rxe/siw report "2.5 Gb/sec" derived from a virtio NIC whose speed is -1: fiction
    ("softroce-rxe", "softroce"): None,
    ("iwarp-siw", "iwarp"): None,
    ("softroce-rxe", "ethernet"): None,  # the virtio NIC itself
}


def selection(tree: str, kind: str, netdev: str | None = None) -> FabricSelection:
    sel = select_fabric(inventory(tree), kind, netdev=netdev)
    assert isinstance(sel, FabricSelection), sel
    return sel


@pytest.mark.parametrize(("tree", "kind"), sorted(EXPECTED))
def test_discovered_rate_per_tree(tree: str, kind: str) -> None:
    got = discovered_link_rate(selection(tree, kind), inventory(tree))
    want = EXPECTED[(tree, kind)]
    assert (None if got is None else (got.gbps, got.source)) == want


@pytest.mark.parametrize(("tree", "kind"), sorted(k for k, v in EXPECTED.items() if v))
def test_the_selection_alone_gives_the_same_rate(tree: str, kind: str) -> None:
    """On another host only its selection travels back (fabrics/on_host.py)."""
    sel = selection(tree, kind)
    got = discovered_link_rate(sel)
    assert got is not None and got.gbps == EXPECTED[(tree, kind)][0]  # type: ignore[index]


def test_loopback_has_no_link() -> None:
    sel = selection("ethernet-plain", "ethernet", netdev="lo")
    assert sel.link_layer == "loopback"
    assert discovered_link_rate(sel, inventory("ethernet-plain")) is None
    assert discovered_link_rate(sel) is None


def test_a_veth_speed_is_fiction(tree_copy: Callable[[str], Path]) -> None:
    """A veth says `speed` 10000 (the fingerprint keeps it), but has no device behind it."""
    root = tree_copy("ethernet-plain")
    veth = root / "devices" / "virtual" / "net" / "veth0"
    veth.mkdir(parents=True)
    for name, text in (
        ("type", "1"),
        ("operstate", "up"),
        ("mtu", "1500"),
        ("speed", "10000"),
        ("flags", "0x1003"),
    ):
        (veth / name).write_text(text + "\n")
    os.symlink("../../devices/virtual/net/veth0", root / "class" / "net" / "veth0")
    inv = read_inventory(root)
    sel = select_fabric(inv, "ethernet", netdev="veth0")
    assert isinstance(sel, FabricSelection) and sel.rate_gbps == 10.0 and sel.driver is None
    assert discovered_link_rate(sel, inv) is None
    assert discovered_link_rate(sel) is None


def test_paravirtual_nic_speed_is_fiction() -> None:
    sel = selection("ethernet-plain", "ethernet")
    nic = dataclasses.replace(sel, driver="virtio_net", rate_gbps=10.0)
    assert discovered_link_rate(nic) is None


def test_softroce_on_a_real_nic_takes_the_nic_speed() -> None:
    inv = inventory("softroce-rxe")
    sel = selection("softroce-rxe", "softroce")
    [eth0] = [n for n in inv.netdevs if n.name == "eth0"]
    real = dataclasses.replace(
        inv,
        netdevs=tuple(
            dataclasses.replace(n, driver="ice", speed_mbps=25000) if n.name == "eth0" else n
            for n in inv.netdevs
        ),
    )
    assert eth0.driver == "virtio_net"
    got = discovered_link_rate(sel, real)
    assert got == LinkRate(25.0, "netdev eth0 speed")
    assert discovered_link_rate(sel) is None  # without the netdev nothing vouches for it


def test_slowest_link_needs_every_rate() -> None:
    a, b = LinkRate(100.0, "port rate mlx5_0/1 on a"), LinkRate(25.0, "port rate mlx5_0/1 on b")
    assert slowest([a, b]) == b
    assert slowest([a, None]) is None
    assert slowest([]) is None
