"""Two bases for fabric probes, so a kind's module says only what is particular to it.

`PortProbe` is for kinds that run on an RDMA port (ib, roce, softroce, iwarp): the template
`select` finds the devices of the kind (or the one --hpc-device names), says why there are
none, and leaves the choice among their ports to `choose`. `NetdevProbe` is for kinds that run
on a network interface (ethernet, ipoib): the template checks --hpc-device and --hpc-netdev and
leaves the choice among interfaces to `choose`.

The bases are a convenience: the registry needs only the `FabricProbe` protocol (`kind`,
`auto_rank`, `select`), and a plugin's probe may follow it without subclassing either.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from pytest_hpccomm.fabrics import FabricSelection, FabricUnavailable
from pytest_hpccomm.fabrics._common import (
    PortRef,
    active_ports,
    named_netdev,
    pick_devices,
    restrict_to_device,
)
from pytest_hpccomm.fabrics.sysfs import Inventory, NetDev, RdmaDevice


class PortProbe(ABC):
    """A fabric kind on a port of an RDMA device."""

    kind: str
    auto_rank: int  # lower = preferred by --hpc-fabric=auto
    label: str  # the kind in reasons about its ports: "no <label> port in state ACTIVE"
    # what the kind is called where --hpc-device names another: "mlx5_0 is RoCE, not <this>"
    wanted_label: str

    @abstractmethod
    def wanted(self, dev: RdmaDevice) -> bool:
        """Whether `dev` is a device of this kind."""

    def none_found(self, inv: Inventory) -> FabricUnavailable | None:
        """Why the kind is unavailable when no device is of it; None lets `choose` say it
        (with no ports to choose from)."""
        return None

    @abstractmethod
    def choose(
        self, inv: Inventory, devs: list[RdmaDevice], netdev: str | None
    ) -> FabricSelection | FabricUnavailable:
        """The port to use among those of `devs` (the wanted devices, or the one named), or
        why none fits; `netdev` is --hpc-netdev."""

    def active_ports(
        self, inv: Inventory, refs: list[PortRef], netdev: str | None
    ) -> list[PortRef] | FabricUnavailable:
        """The ACTIVE ones of `refs` that use `netdev` (if named), or why none is left."""
        return active_ports(self.kind, inv, refs, netdev, self.label)

    def select(
        self, inv: Inventory, device: str | None, netdev: str | None
    ) -> FabricSelection | FabricUnavailable:
        devs = pick_devices(self.kind, inv, device, self.wanted, self.wanted_label)
        if isinstance(devs, FabricUnavailable):
            return devs
        if not devs:
            missing = self.none_found(inv)
            if missing is not None:
                return missing
        return self.choose(inv, devs, netdev)


class NetdevProbe(ABC):
    """A fabric kind on a network interface (TCP/IP)."""

    kind: str
    auto_rank: int  # lower = preferred by --hpc-fabric=auto
    label: str  # "eth1 is IPoIB, not <label>"
    netdev_types: tuple[int, ...]  # the ARPHRD types an interface named by --hpc-netdev may have

    @abstractmethod
    def choose(
        self,
        inv: Inventory,
        named: NetDev | None,
        allowed: set[str] | None,
        device: str | None,
    ) -> FabricSelection | FabricUnavailable:
        """The interface to use, or why none fits. `named` is the one --hpc-netdev names,
        already found to be of `netdev_types` and up (None: not named); `allowed` the netdevs
        of the RDMA device --hpc-device names (None: any), `device` that name."""

    def select(
        self, inv: Inventory, device: str | None, netdev: str | None
    ) -> FabricSelection | FabricUnavailable:
        allowed = restrict_to_device(self.kind, inv, device)
        if isinstance(allowed, FabricUnavailable):
            return allowed
        named: NetDev | None = None
        if netdev is not None:
            found = named_netdev(self.kind, inv, netdev, self.netdev_types, self.label)
            if isinstance(found, FabricUnavailable):
                return found
            named = found
        return self.choose(inv, named, allowed, device)
