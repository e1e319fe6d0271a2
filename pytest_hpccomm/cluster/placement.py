"""Where a test's peers run, as a test parameter: loopback, a virtual cluster, or real hosts.

On one machine with --hpc-launcher=auto both loopback and the virtual cluster run (the two
cross-host code paths CI can exercise); an explicit launcher picks exactly one. In the quick
profile an item marked quick_placements(*kept) runs at the kept ones only: a stack that talks
TCP at every placement (gRPC, TensorFlow, Horovod) runs the same code over lo as over a veth,
so the second placement times the kernel's path, not the stack (the full profile runs both).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

from pytest_hpccomm.fabrics import FabricSelection, FabricUnavailable

LOOPBACK, NETNS, HOSTS = "loopback", "netns", "hosts"


def placement_reason(placement: str, fabric: FabricSelection | FabricUnavailable) -> str | None:
    """Why a placement cannot carry the session's fabric (one line; None: it can): an
    unavailable fabric's own reason, or the virtual cluster's veths on a fabric that is not
    Ethernet. Stacks skip with it when their fixtures start; `hpccomm doctor` foresees it."""
    if isinstance(fabric, FabricUnavailable):
        return fabric.reason
    if placement == NETNS and fabric.kind != "ethernet":
        return (
            f"the virtual cluster's links are veths (Ethernet); fabric {fabric.kind} runs on "
            f"{LOOPBACK} and on real hosts (--hpc-hosts)"
        )
    return None


def hosts_fabric_error(fabric: FabricSelection, hosts: Sequence[str]) -> str | None:
    """Why ranks placed on `hosts` cannot meet over the session's fabric (None: they can): it
    is this host's loopback while they span hosts, so each rank would reach only itself and
    wait for its peers until the job's timeout. A failure, not a skip: the run named hosts."""
    address = fabric.address or ""
    try:
        loopback = fabric.netdev == "lo" or ipaddress.ip_address(address).is_loopback
    except ValueError:
        loopback = fabric.netdev == "lo"
    if loopback and len(set(hosts)) > 1:
        return (
            f"ranks on {','.join(hosts)} cannot meet over {fabric.description}: it is "
            f"loopback (was the hosts' interface down when this session looked? "
            f"--hpc-netdev names it)"
        )
    return None


def placements(launcher: str, on_cluster: bool) -> list[str]:
    """Where peers run for --hpc-launcher `launcher`; `on_cluster`: hosts were named."""
    if launcher == "local":
        return [LOOPBACK]
    if launcher == "netns":
        return [NETNS]
    if launcher in ("mpirun", "srun") or on_cluster:
        return [HOSTS]
    return [LOOPBACK, NETNS]


def kept_in_profile(where: list[str], kept: Sequence[str] | None, profile: str) -> list[str]:
    """The placements of an item marked quick_placements(*kept): in the quick profile those of
    `where` it keeps, when `where` offers a choice and they leave one; `where` otherwise."""
    if profile != "quick" or kept is None or len(where) < 2:
        return where
    return [p for p in where if p in kept] or where
