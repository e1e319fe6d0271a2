"""IPoIB: an InfiniBand netdev (ARPHRD 32) that is up with an address; TCP/IP over IB."""

from __future__ import annotations

from pytest_hpccomm.fabrics import FabricSelection, FabricUnavailable, describe_inventory
from pytest_hpccomm.fabrics._common import best_address, port_of_netdev, speed_gbps, speed_text
from pytest_hpccomm.fabrics.probe_base import NetdevProbe
from pytest_hpccomm.fabrics.sysfs import (
    ADDRESS_UNKNOWN,
    ARPHRD_INFINIBAND,
    IB_MTUS,
    IPOIB_ENCAP_LEN,
    Inventory,
    NetDev,
    Port,
)

LABEL = "IPoIB"
IPOIB_CM_MTU = 65520  # connected mode's largest MTU (drivers/infiniband/ulp/ipoib: IPOIB_CM_MTU)


def mtu_problem(nd: NetDev, port: Port | None) -> str | None:
    """What is wrong with an IPoIB netdev's MTU for its mode, or None.  Datagram mode carries
    one IB packet per IP packet: MTU <= IB MTU - 4 (the IPoIB header), the IB MTU being at most
    the port's active MTU (a partition's may be lower: 1020 on a 1K partition is right);
    connected mode: up to 65520.  An unknown mode is held to the looser of the two."""
    if nd.mtu is None:
        return f"{nd.name}: sysfs gives no mtu"
    ib_mtu = port.active_mtu if port is not None and port.active_mtu else max(IB_MTUS)
    limit = ib_mtu - IPOIB_ENCAP_LEN if nd.mode == "datagram" else IPOIB_CM_MTU
    if nd.mtu > limit:
        why = (
            f"datagram mode: IB MTU {ib_mtu} - {IPOIB_ENCAP_LEN}"
            if nd.mode == "datagram"
            else f"{nd.mode or 'unknown'} mode: IPOIB_CM_MTU"
        )
        return f"{nd.name}: MTU {nd.mtu} is above {limit} ({why})"
    return None


class IpoibProbe(NetdevProbe):
    kind = "ipoib"
    auto_rank = 50
    label = LABEL
    netdev_types = (ARPHRD_INFINIBAND,)

    def choose(
        self,
        inv: Inventory,
        named: NetDev | None,
        allowed: set[str] | None,
        device: str | None,
    ) -> FabricSelection | FabricUnavailable:
        if named is not None:
            candidates = [named]
        else:
            candidates = [n for n in inv.netdevs if n.type == ARPHRD_INFINIBAND]
        if allowed is not None:
            candidates = [n for n in candidates if n.name in allowed]
        # a tree recorded without ip-addr.json: addresses unknown, not absent
        usable = [n for n in candidates if n.is_up and (best_address(n) or not inv.addresses_known)]
        if not usable:
            return self._unavailable(inv, candidates)
        usable.sort(key=lambda n: not n.ipv4)  # IPv4 first, then as listed
        return self._selection(inv, usable[0])

    def _unavailable(self, inv: Inventory, candidates: list[NetDev]) -> FabricUnavailable:
        if not candidates:  # not "none is up with an address": there is none at all
            return FabricUnavailable(
                self.kind, f"no IPoIB interface: found {describe_inventory(inv)}"
            )
        head = "no IPoIB interface that is up with an address"
        states = "; ".join(
            f"{n.name} is {n.operstate}" if not n.is_up else f"{n.name} has no address"
            for n in candidates
        )
        return FabricUnavailable(self.kind, f"{head}: {states}")

    def _selection(self, inv: Inventory, nd: NetDev) -> FabricSelection:
        ref = port_of_netdev(inv, nd.name)
        dev, port = ref if ref else (None, None)
        address = best_address(nd)
        on = f" on {dev.name} port {port.num}" if dev and port else ""
        mode = f" {nd.mode}" if nd.mode else ""  # connected/datagram: what bounds its MTU
        return FabricSelection(
            kind=self.kind,
            device=dev.name if dev else None,
            port=port.num if port else None,
            gid_index=None,
            gid=None,
            netdev=nd.name,
            address=address,
            # an IPoIB netdev's `speed` is often empty: the port's rate is the link's
            rate_gbps=speed_gbps(nd)
            if nd.speed_mbps is not None
            else (port.rate_gbps if port else None),
            mtu=nd.mtu,
            firmware=dev.fw_ver if dev else None,
            driver=dev.driver if dev else nd.driver,
            link_layer="InfiniBand",
            ipoib_mode=nd.mode,
            description=(
                f"{nd.name} ({LABEL}{mode}{on}, {address or ADDRESS_UNKNOWN}, MTU {nd.mtu}, "
                f"{speed_text(nd) if nd.speed_mbps or not port else port.rate_text or speed_text(nd)})"
            ),
        )


PROBE = IpoibProbe()
