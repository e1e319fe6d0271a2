"""cluster.placement's rules that need no cluster: hosts-placed ranks never meet over loopback."""

from __future__ import annotations

import dataclasses

import pytest

from pytest_hpccomm.cluster.placement import hosts_fabric_error
from pytest_hpccomm.fabrics import FabricSelection

LO = FabricSelection(
    kind="ethernet", device=None, port=None, gid_index=None, gid=None, netdev="lo",
    address="127.0.0.1", rate_gbps=None, mtu=65536, firmware=None, driver=None,
    link_layer=None, description="lo (loopback, 127.0.0.1)",
)  # fmt: skip
FAB0 = dataclasses.replace(LO, netdev="fab0", address="10.218.208.1", description="fab0")


@pytest.mark.parametrize("fabric", [LO, dataclasses.replace(LO, netdev=None, address="::1")])
def test_ranks_on_two_hosts_over_loopback_fail_naming_them(fabric: FabricSelection) -> None:
    error = hosts_fabric_error(fabric, ["h0", "h1"])
    assert error is not None and "h0,h1" in error and "loopback" in error


def test_one_host_named_twice_or_a_real_interface_is_fine() -> None:
    assert hosts_fabric_error(LO, ["node1", "node1"]) is None
    assert hosts_fabric_error(FAB0, ["h0", "h1"]) is None
