"""Ethernet: TCP/IP over an up Ethernet netdev; loopback keeps it available everywhere."""

from __future__ import annotations

from pytest_hpccomm.fabrics import (
    FabricSelection,
    FabricUnavailable,
    describe_inventory,
    netdev_kind,
)
from pytest_hpccomm.fabrics._common import best_address, speed_gbps, speed_text
from pytest_hpccomm.fabrics.probe_base import NetdevProbe
from pytest_hpccomm.fabrics.sysfs import (
    ADDRESS_UNKNOWN,
    ARPHRD_ETHER,
    ARPHRD_LOOPBACK,
    Inventory,
    NetDev,
)

LABEL = "Ethernet"


def _rank(nd: NetDev, addresses_known: bool = True) -> tuple[int, float]:
    """Lower is better: IPv4 first, then a routable IPv6, then loopback, then no address.
    With addresses unknown (a tree without ip-addr.json) an up Ethernet interface comes
    before loopback: that it shows no address says nothing."""
    address = best_address(nd)
    speed = -(nd.speed_mbps or 0)  # faster first among equals
    if nd.type == ARPHRD_LOOPBACK:
        return 2, speed
    if nd.ipv4 or not addresses_known:
        return 0, speed
    if address and not address.lower().startswith("fe80:"):
        return 1, speed
    return 3, speed


class EthernetProbe(NetdevProbe):
    kind = "ethernet"
    auto_rank = 60
    label = LABEL
    netdev_types = (ARPHRD_ETHER, ARPHRD_LOOPBACK)

    def choose(
        self,
        inv: Inventory,
        named: NetDev | None,
        allowed: set[str] | None,
        device: str | None,
    ) -> FabricSelection | FabricUnavailable:
        if named is not None:
            return self._selection(named, True, inv.addresses_known)
        candidates = [
            n
            for n in inv.netdevs
            if n.is_up
            and (n.type == ARPHRD_ETHER or (n.type == ARPHRD_LOOPBACK and allowed is None))
            and (allowed is None or n.name in allowed)
        ]
        if not candidates and allowed is not None:
            dev_netdevs = [inv.netdev(n) for n in sorted(allowed)]
            shown = ", ".join(f"{n.name} ({netdev_kind(n.type)})" for n in dev_netdevs if n)
            return FabricUnavailable(
                self.kind,
                f"{device} has no Ethernet interface that is up: its netdevs are {shown or 'none'}",
            )
        if not candidates:
            return FabricUnavailable(
                self.kind,
                f"no Ethernet interface is up (nor loopback): found {describe_inventory(inv)}",
            )
        # min() is stable: ties keep sysfs order
        best = min(candidates, key=lambda n: _rank(n, inv.addresses_known))
        return self._selection(best, False, inv.addresses_known)

    def _selection(
        self, nd: NetDev, chosen_by_user: bool, addresses_known: bool
    ) -> FabricSelection:
        address = best_address(nd)
        loopback = nd.type == ARPHRD_LOOPBACK
        if loopback:
            why = "loopback"
            if not chosen_by_user:
                why += ": no Ethernet interface is up with an address"
            what = f"{nd.name} ({why}, {address}, MTU {nd.mtu})"
        else:
            shown = address or ("no IP address" if addresses_known else ADDRESS_UNKNOWN)
            what = f"{nd.name} ({LABEL}, {shown}, MTU {nd.mtu}, {speed_text(nd)})"
        return FabricSelection(
            kind=self.kind,
            device=None,
            port=None,
            gid_index=None,
            gid=None,
            netdev=nd.name,
            address=address,
            rate_gbps=speed_gbps(nd),
            mtu=nd.mtu,
            firmware=None,
            driver=nd.driver,
            link_layer="loopback" if loopback else LABEL,
            description=what,
        )


PROBE = EthernetProbe()
