"""The link rate discovery can vouch for: an RDMA port's rate, a physical NIC's speed.

`FabricSelection.rate_gbps` is what sysfs says, for the fingerprint; a virtual interface says
things too (a veth's `speed` is 10000 or -1, a paravirtual NIC's is whatever the hypervisor
chose), and a bandwidth divided by such a number is a fiction. So a link rate is known only
where the hardware reports it: an RDMA HCA's port, a NIC with a bound device driver. Loopback
has no link; SoftRoCE and siw ride on a netdev and are as real as its speed.
"""

from __future__ import annotations

from collections.abc import Iterable

from pytest_hpccomm.fabrics import FabricSelection
from pytest_hpccomm.fabrics.sysfs import SOFTWARE_DRIVERS, Inventory, NetDev
from pytest_hpccomm.measure.link import LinkRate

# netdev drivers whose `speed` is made up: paravirtual NICs report what the host configured
# (virtio_net: -1 or a `speed=` property; vmxnet3, hv_netvsc, xen: a fixed 10G), and purely
# virtual devices (veth, bridge, tun, dummy, lo) have no `device/driver` link at all
VIRTUAL_NETDEV_DRIVERS = frozenset(
    {
        "virtio_net",
        "vmxnet3",
        "hv_netvsc",
        "vif",
        "xen-netfront",
        "veth",
        "tun",
        "dummy",
        "bridge",
        "ifb",
    }
)


def netdev_link_rate(nd: NetDev) -> LinkRate | None:
    """A NIC's speed when a real device stands behind it (None: virtual, or no speed)."""
    if nd.driver is None or nd.driver in VIRTUAL_NETDEV_DRIVERS or not nd.speed_mbps:
        return None
    return LinkRate(nd.speed_mbps / 1000, f"netdev {nd.name} speed")


def discovered_link_rate(sel: FabricSelection, inv: Inventory | None = None) -> LinkRate | None:
    """The rate of the session fabric's link here, or None when nothing real reports one.
    `inv` (this host's inventory) lets SoftRoCE/siw borrow their netdev's speed."""
    if sel.link_layer == "loopback":
        return None
    nd = inv.netdev(sel.netdev) if inv is not None and sel.netdev else None
    if sel.device and sel.port is not None:
        if sel.driver in SOFTWARE_DRIVERS:  # their "port rate" is derived from the netdev's
            return netdev_link_rate(nd) if nd is not None else None
        dev = inv.device(sel.device) if inv is not None else None
        port = dev.port(sel.port) if dev is not None else None
        # the port's own rate (IPoIB's selection may carry its netdev's speed instead)
        rate = port.rate_gbps if port is not None else sel.rate_gbps
        if rate:
            return LinkRate(rate, f"port rate {sel.device}/{sel.port}")
    if nd is not None:
        return netdev_link_rate(nd)
    # no inventory: an Ethernet/IPoIB selection names its netdev's driver and speed itself
    if sel.driver is None or sel.driver in VIRTUAL_NETDEV_DRIVERS or not sel.rate_gbps:
        return None
    return LinkRate(sel.rate_gbps, f"netdev {sel.netdev} speed")


def slowest(rates: Iterable[LinkRate | None]) -> LinkRate | None:
    """The bottleneck of several links, when every one of them is known (None otherwise)."""
    got = list(rates)
    if not got or any(r is None for r in got):
        return None
    return min((r for r in got if r is not None), key=lambda r: r.gbps)
