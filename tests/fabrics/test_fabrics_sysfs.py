"""Discovery from recorded sysfs trees: every field a fabric choice depends on."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_hpccomm.fabrics import describe_inventory, not_in_sysfs
from pytest_hpccomm.fabrics.not_in_sysfs import parse_ibv_devinfo
from pytest_hpccomm.fabrics.sysfs import (
    Gid,
    Inventory,
    parse_rate,
    read_inventory,
)
from tests.fabrics._fabric_trees import FIXTURES, TREES, inventory, write

MLX5_IB = "devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0/infiniband/mlx5_0"
MLX5_ROCE = "devices/pci0000:5d/0000:5d:00.0/0000:5e:00.0/infiniband/mlx5_0"
RXE = "devices/virtual/infiniband/rxe0"
SIW = "devices/virtual/infiniband/siw0"


@pytest.mark.parametrize(
    ("text", "gbps"),
    [
        ("100 Gb/sec (4X EDR)", 100.0),
        ("25 Gb/sec (1X EDR)", 25.0),
        ("2.5 Gb/sec (1X SDR)", 2.5),
        ("10 Gb/sec (1X QDR)", 10.0),
        ("200 Gb/sec (4X HDR)", 200.0),
        ("56 Gb/sec (4X FDR)", 56.0),
        ("", None),
        (None, None),
        ("fast", None),
        ("Gb/sec (4X EDR)", None),
    ],
)
def test_parse_rate(text: str | None, gbps: float | None) -> None:
    assert parse_rate(text) == gbps


def test_every_tree_is_read() -> None:
    assert set(TREES) >= {
        "ib-edr-mlx5",
        "ib-port-down",
        "roce-v2-mlx5",
        "softroce-rxe",
        "iwarp-siw",
        "ethernet-plain",
    }
    for name in TREES:
        inv = inventory(name)
        assert isinstance(inv, Inventory)
        if name in RECORDED_WITHOUT_LO:
            continue
        assert inv.netdev("lo") is not None and inv.netdev("lo").is_up  # type: ignore[union-attr]


RECORDED_WITHOUT_LO = {"procfs-opa-mlx4-mlx5"}  # a public recording of class/net/eth0 only


def test_ib_edr_mlx5() -> None:
    inv = inventory("ib-edr-mlx5")
    (dev,) = inv.rdma
    assert (dev.name, dev.driver, dev.node_type, dev.node_kind) == (
        "mlx5_0",
        "mlx5_core",
        "1: CA",
        "CA",
    )
    assert (dev.fw_ver, dev.hca_type, dev.board_id) == ("16.35.2000", "MT4119", "MT_0000000008")
    assert dev.node_guid == "0c42:a103:0012:3456"
    assert not dev.is_software
    assert dev.netdevs == ("ib0",)
    (port,) = dev.ports
    assert (port.num, port.state, port.phys_state, port.link_layer) == (
        1,
        "ACTIVE",
        "LinkUp",
        "InfiniBand",
    )
    assert (port.rate_gbps, port.rate_text) == (100.0, "100 Gb/sec (4X EDR)")
    assert port.active_mtu == 4096  # from the recorded ibv_devinfo, not the IPoIB MTU
    assert (port.lid, port.sm_lid) == (0x1A, 0x1)
    assert port.gids == (
        Gid(0, "fe80:0000:0000:0000:0c42:a103:0012:3456", "IB", None),
    )  # the zero GID at index 1 is skipped
    assert port.netdev == "ib0"
    ib0 = inv.netdev("ib0")
    assert ib0 is not None
    assert (ib0.type, ib0.operstate, ib0.mtu, ib0.speed_mbps, ib0.driver) == (
        32,
        "up",
        2044,
        100000,
        "mlx5_core",
    )
    assert ib0.addresses == ("192.0.2.11", "fe80::c42:a103:12:3456")
    eth0 = inv.netdev("eth0")
    assert eth0 is not None and (eth0.type, eth0.driver, eth0.speed_mbps) == (1, "e1000e", 1000)
    lo = inv.netdev("lo")
    assert lo is not None and (lo.type, lo.operstate, lo.speed_mbps, lo.driver) == (
        772,
        "unknown",
        None,
        None,
    )


def test_ib_active_mtu_derived_from_ipoib_without_ibv_devinfo(
    tree_copy: Callable[[str], Path],
) -> None:
    root = tree_copy("ib-edr-mlx5")
    (root.parent / "ibv_devinfo.txt").unlink()
    port = read_inventory(root).rdma[0].ports[0]
    assert port.active_mtu == 2048  # datagram-mode ib0 MTU 2044 + 4-byte IPoIB header


def test_ib_port_down() -> None:
    inv = inventory("ib-port-down")
    port = inv.rdma[0].ports[0]
    assert (port.state, port.phys_state, port.is_active) == ("DOWN", "Polling", False)
    assert port.active_mtu is None
    ib0 = inv.netdev("ib0")
    assert ib0 is not None and not ib0.is_up and ib0.speed_mbps is None and ib0.addresses == ()


def test_roce_v2_mlx5() -> None:
    inv = inventory("roce-v2-mlx5")
    (dev,) = inv.rdma
    assert (dev.driver, dev.hca_type, dev.netdevs) == ("mlx5_core", "MT4117", ("ens1f0",))
    (port,) = dev.ports
    assert (port.link_layer, port.rate_gbps, port.lid, port.sm_lid) == (
        "Ethernet",
        25.0,
        None,
        None,
    )
    assert port.active_mtu == 4096  # netdev MTU 9000 minus RoCE headers (iboe_get_mtu)
    assert [(g.index, g.type) for g in port.gids] == [
        (0, "RoCE v1"),
        (1, "RoCE v2"),
        (2, "RoCE v1"),
        (3, "RoCE v2"),
        (4, "RoCE v1"),
        (5, "RoCE v2"),
    ]
    assert {g.netdev for g in port.gids} == {"ens1f0"}
    g3 = port.gid(3)
    assert g3 is not None and g3.is_ipv4_mapped and g3.ipv4 == "198.51.100.10"
    g1 = port.gid(1)
    assert g1 is not None and g1.is_link_local and not g1.is_ipv4_mapped and g1.ipv4 is None
    g5 = port.gid(5)
    assert g5 is not None and g5.short == "2001:db8::a"
    ens = inv.netdev("ens1f0")
    assert ens is not None and (ens.mtu, ens.speed_mbps, ens.driver) == (9000, 25000, "mlx5_core")
    assert ens.ipv4 == ("198.51.100.10",)


def test_softroce_rxe() -> None:
    inv = inventory("softroce-rxe")
    (dev,) = inv.rdma
    assert (dev.name, dev.driver, dev.node_kind, dev.is_software) == ("rxe0", "rxe", "CA", True)
    assert (dev.fw_ver, dev.hca_type, dev.board_id) == (None, None, None)  # rxe has none
    assert dev.netdevs == ("eth0",)
    (port,) = dev.ports
    assert (port.link_layer, port.rate_gbps, port.netdev) == ("Ethernet", 2.5, "eth0")
    assert port.active_mtu == 1024  # 1500 - RXE_MAX_HDR_LENGTH (80) -> 1024
    eth0 = inv.netdev("eth0")
    assert eth0 is not None and (eth0.driver, eth0.speed_mbps) == ("virtio_net", None)  # -1


def test_rxe_found_by_name_without_parent(tree_copy: Callable[[str], Path]) -> None:
    root = tree_copy("softroce-rxe")
    (root / RXE / "parent").unlink()
    dev = read_inventory(root).rdma[0]
    assert (dev.driver, dev.netdevs, dev.ports[0].netdev) == ("rxe", ("eth0",), "eth0")


def test_iwarp_siw() -> None:
    inv = inventory("iwarp-siw")
    (dev,) = inv.rdma
    assert (dev.name, dev.driver, dev.node_type, dev.node_kind) == (
        "siw0",
        "siw",
        "4: RNIC",
        "RNIC",
    )
    (port,) = dev.ports
    # rdma-core reads "IB/RoCE v1" on an Ethernet link layer as RoCE v1, even for iWARP.
    assert port.gids == (Gid(0, "5254:0012:3457:0000:0000:0000:0000:0000", "RoCE v1", "eth0"),)
    assert (port.netdev, port.active_mtu, port.lid) == ("eth0", 1024, None)


def test_siw_netdev_from_mac_before_linux_6_4(tree_copy: Callable[[str], Path]) -> None:
    root = tree_copy("iwarp-siw")
    shutil.rmtree(root / SIW / "ports/1/gid_attrs/ndevs")
    dev = read_inventory(root).rdma[0]
    assert (dev.ports[0].netdev, dev.netdevs) == ("eth0", ("eth0",))


def test_siw_with_nic_as_parent_device_before_linux_5_12(
    tree_copy: Callable[[str], Path],
) -> None:
    # Older siw hung its ib_device off the NIC: device/driver then names virtio_net.
    root = tree_copy("iwarp-siw")
    os.symlink("../../../pci0000:00/0000:00:03.0/virtio0", root / SIW / "device")
    dev = read_inventory(root).rdma[0]
    assert (dev.driver, dev.netdevs) == ("siw", ("eth0",))


def test_ethernet_plain_has_no_rdma() -> None:
    inv = inventory("ethernet-plain")
    assert inv.rdma == ()
    assert [n.name for n in inv.netdevs] == ["eth0", "lo"]
    assert not (FIXTURES / "ethernet-plain/sys/class/infiniband").exists()


def test_missing_root_is_a_value_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="does-not-exist"):
        read_inventory(tmp_path / "does-not-exist")


def test_empty_root_is_an_empty_inventory(tmp_path: Path) -> None:
    assert read_inventory(tmp_path) == Inventory(rdma=(), netdevs=(), addresses_known=False)


def test_garbled_files_are_unknown(tree_copy: Callable[[str], Path]) -> None:
    root = tree_copy("roce-v2-mlx5")
    port = root / MLX5_ROCE / "ports/1"
    write(port / "rate", "fast\n")
    write(port / "state", "garbage")
    (port / "phys_state").unlink()
    write(port / "lid", "0xzz")
    write(port / "gids/3", "not-a-gid")
    write(port / "gid_attrs/types/5", "RoCE v9")
    (port / "gid_attrs/ndevs/1").unlink()
    (port / "link_layer").unlink()
    write(root / MLX5_ROCE / "node_type", "")
    (root / MLX5_ROCE / "fw_ver").unlink()
    (root / MLX5_ROCE / "fw_ver").mkdir()  # reading a directory fails: unreadable attribute
    netdir = root / "class/net/ens1f0"
    write(netdir / "mtu", "abc")
    write(netdir / "type", "\x00\xff")
    write(netdir / "speed", "-1")
    write(netdir / "flags", "0xqq")
    write(root.parent / "ip-addr.json", "{not json")
    inv = read_inventory(root)
    dev = inv.rdma[0]
    p = dev.ports[0]
    assert (p.rate_gbps, p.rate_text, p.state, p.phys_state) == (
        None,
        "fast",
        "garbage",
        "<unknown>",
    )
    assert (p.lid, p.link_layer, dev.fw_ver, dev.node_type) == (None, "Unknown", None, "<unknown>")
    assert [g.index for g in p.gids] == [0, 1, 2, 4]  # 3 unparsable, 5 of unknown type
    assert p.gid(1) is not None and p.gid(1).netdev is None  # type: ignore[union-attr]
    ens = inv.netdev("ens1f0")
    assert ens is not None
    assert (ens.mtu, ens.type, ens.speed_mbps, ens.flags) == (None, None, None, None)
    assert ens.addresses == ()
    assert all(n.addresses == () for n in inv.netdevs)


def test_nul_padding_is_ignored(tree_copy: Callable[[str], Path]) -> None:
    root = tree_copy("softroce-rxe")
    (root / RXE / "parent").write_bytes(b"eth0\n\x00\x00\x00")
    assert read_inventory(root).rdma[0].netdevs == ("eth0",)


def test_links_leaving_the_tree_are_ignored(tree_copy: Callable[[str], Path]) -> None:
    root = tree_copy("ethernet-plain")
    os.symlink("/sys/class/net/lo", root / "class/net/escape")
    os.symlink("../../devices/nowhere", root / "class/net/dangling")
    inv = read_inventory(root)
    assert [n.name for n in inv.netdevs] == ["eth0", "lo"]
    # the dangling one is said, not dropped silently; the escaping one is never followed
    assert inv.unreadable == ("dangling (class/net/dangling leads to a missing directory)",)
    assert (
        "unreadable: dangling (class/net/dangling leads to a missing directory)"
        in describe_inventory(inv)
    )


def test_missing_ip_addr_json_means_addresses_unknown(tree_copy: Callable[[str], Path]) -> None:
    root = tree_copy("ethernet-plain")
    assert read_inventory(root).addresses_known
    (root.parent / "ip-addr.json").unlink()
    inv = read_inventory(root)
    assert all(n.addresses == () for n in inv.netdevs) and not inv.addresses_known


def test_live_root_without_ip_tool_has_unknown_addresses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(not_in_sysfs.shutil, "which", lambda name: None)
    assert not_in_sysfs.read_addresses(Path("/sys")) is None


def test_parse_ibv_devinfo() -> None:
    text = (FIXTURES / "ib-edr-mlx5/ibv_devinfo.txt").read_text()
    assert parse_ibv_devinfo(text) == {("mlx5_0", 1): 4096}
    assert parse_ibv_devinfo("hca_id:\tx\n\t\tport:\t2\n\t\t\tactive_mtu:\t\t1024 (3)\n") == {
        ("x", 2): 1024
    }
    assert parse_ibv_devinfo("garbage\n\t\t\tactive_mtu:\t\t4096 (5)\n") == {}


def test_live_sysfs_reads() -> None:
    inv = read_inventory()
    lo = inv.netdev("lo")
    assert lo is not None and lo.type == 772 and lo.is_up
    if shutil.which("ip") is None:  # addresses come from `ip -j addr`
        pytest.skip("no `ip` command (iproute2) on this machine: addresses unknown")
    assert "127.0.0.1" in lo.addresses
