"""Fabric sanity, in the spirit of ibv_devinfo / ibstat checks before any benchmark runs.

Each test is bound to the fabric kinds it checks; on any other fabric it skips with what was
found. On machines without RDMA hardware these tests run against recorded sysfs trees
(tests/suites/test_fabric_suite_on_trees.py passes --hpc-sysfs-root for each tree).
"""

from __future__ import annotations

import ipaddress

import pytest

from pytest_hpccomm.fabrics import FabricSelection, ipoib
from pytest_hpccomm.fabrics.sysfs import ADDRESS_UNKNOWN, ARPHRD_INFINIBAND, Port
from pytest_hpccomm.session import HpcSession

pytestmark = pytest.mark.conformance


def port_of(hpc_session: HpcSession, sel: FabricSelection) -> Port:
    assert sel.device is not None and sel.port is not None, sel
    dev = hpc_session.inventory.device(sel.device)
    assert dev is not None
    port = dev.port(sel.port)
    assert port is not None
    return port


@pytest.mark.fabric("ib")
def test_ib_port_is_active_and_addressed(
    hpc_session: HpcSession, hpc_fabric: FabricSelection
) -> None:
    port = port_of(hpc_session, hpc_fabric)
    where = f"{hpc_fabric.device} port {port.num}"
    assert port.state == "ACTIVE", f"{where}: state {port.state}"
    assert port.phys_state == "LinkUp", f"{where}: phys_state {port.phys_state}"
    assert hpc_fabric.rate_gbps and hpc_fabric.rate_gbps > 0
    if port.lid is None and port.sm_lid is None and not port.gids:
        # the kernel always has these files for an IB port: only a partial recording lacks them
        pytest.skip(
            f"{hpc_fabric.device} port {port.num}: the tree records no lid, sm_lid "
            "or gids (a partial recording): addressing cannot be checked"
        )
    assert port.lid not in (None, 0, 0xFFFF), "an active IB port has a unicast LID from the SM"
    assert port.sm_lid not in (None, 0), "no subnet manager has swept this port"
    gid0 = port.gid(0)
    assert gid0 is not None and gid0.type == "IB"
    assert gid0.is_link_local, "GID 0 carries the default subnet prefix fe80::/64"


@pytest.mark.fabric("roce", "softroce")
def test_roce_gid_is_v2_and_matches_its_netdev(
    hpc_session: HpcSession, hpc_fabric: FabricSelection
) -> None:
    port = port_of(hpc_session, hpc_fabric)
    assert port.link_layer == "Ethernet" and port.is_active
    assert hpc_fabric.gid_index is not None
    gid = port.gid(hpc_fabric.gid_index)
    assert gid is not None and gid.type == "RoCE v2", "RoCE v2 GIDs are routable (UDP 4791)"
    netdev = hpc_session.inventory.netdev(gid.netdev or "")
    assert netdev is not None and netdev.is_up
    if gid.ipv4:
        assert gid.ipv4 in netdev.ipv4, "the GID must mirror an address of its netdev"
    assert netdev.mtu is not None, f"{netdev.name}: sysfs gives no mtu"
    assert port.active_mtu is not None, (
        "an ACTIVE RoCE port has an active MTU (ibv_devinfo's, or derived from its netdev's)"
    )
    assert port.active_mtu <= netdev.mtu, "RoCE frames carry the IB MTU inside the netdev's"


@pytest.mark.fabric("iwarp")
def test_iwarp_device_is_an_rnic_on_an_addressed_netdev(
    hpc_session: HpcSession, hpc_fabric: FabricSelection
) -> None:
    dev = hpc_session.inventory.device(hpc_fabric.device or "")
    assert dev is not None and dev.node_kind == "RNIC"
    if hpc_fabric.netdev is None:
        # sysfs pairs an RNIC port with its netdev only through a GID's ndev, dev_port or
        # the PCI function's single netdev; a recording without them cannot say which
        pytest.skip(
            f"{dev.name} port {hpc_fabric.port}: sysfs does not say which netdev it "
            "uses (no GID netdev, no dev_port): its address cannot be checked"
        )
    netdev = hpc_session.inventory.netdev(hpc_fabric.netdev)
    assert netdev is not None and netdev.is_up, f"{hpc_fabric.netdev} is not up"
    skip_if_addresses_unknown(hpc_session)
    assert netdev.addresses, "iWARP runs over TCP: its netdev needs an IP address"


@pytest.mark.fabric("ipoib")
def test_ipoib_netdev_is_up_with_address(
    hpc_session: HpcSession, hpc_fabric: FabricSelection
) -> None:
    netdev = hpc_session.inventory.netdev(hpc_fabric.netdev or "")
    assert netdev is not None and netdev.type == ARPHRD_INFINIBAND and netdev.is_up
    # what the mode defines: datagram <= IB MTU - 4 (1020 on a 1K partition), connected <= 65520
    port = port_of(hpc_session, hpc_fabric) if hpc_fabric.port is not None else None
    problem = ipoib.mtu_problem(netdev, port)
    assert problem is None, problem
    skip_if_addresses_unknown(hpc_session)
    assert netdev.ipv4 or netdev.ipv6


@pytest.mark.fabric("ethernet")
def test_ethernet_netdev_is_usable(hpc_session: HpcSession, hpc_fabric: FabricSelection) -> None:
    netdev = hpc_session.inventory.netdev(hpc_fabric.netdev or "")
    assert netdev is not None and netdev.is_up
    assert netdev.mtu is not None and netdev.mtu >= 1280, "IPv6 minimum MTU"
    skip_if_addresses_unknown(hpc_session)
    assert hpc_fabric.address is not None
    ipaddress.ip_address(hpc_fabric.address)


def test_fingerprint_names_the_fabric(hpc_session: HpcSession) -> None:
    fp = hpc_session.fingerprint
    assert fp["fabric"] == hpc_session.selection.kind
    for key in ("kernel", "cpu_model", "cpu_cores", "python", "system"):
        assert fp.get(key), key


def skip_if_addresses_unknown(hpc_session: HpcSession) -> None:
    """A tree recorded without ip-addr.json cannot say whether an interface has an address:
    the address checks skip with that reason instead of failing."""
    if not hpc_session.inventory.addresses_known:
        pytest.skip(ADDRESS_UNKNOWN)
