"""Which transport an MPI job uses on each fabric, so a result is always of the fabric named.

| fabric           | Open MPI                                   | MPICH (ch4)                          |
|------------------|--------------------------------------------|--------------------------------------|
| ethernet, ipoib  | ob1 + btl tcp,self on the fabric's netdev  | ofi, FI_PROVIDER=tcp, FI_TCP_IFACE   |
| ib, roce         | pml ucx, UCX_NET_DEVICES=dev:port          | netmod ucx, UCX_NET_DEVICES=dev:port |
| softroce         | as roce (UCX drives rxe through rc_verbs)  | as roce                              |
| iwarp            | pml cm + mtl ofi, FI_PROVIDER=verbs;ofi_rxm | ofi, FI_PROVIDER=verbs;ofi_rxm      |

More: docs/explanation/internals.md (pytest_hpccomm.stacks.mpi.transport).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from pytest_hpccomm.fabrics import TCP_FABRICS, FabricSelection

UCX_FABRICS = ("ib", "roce", "softroce")
OFI_VERBS_FABRICS = ("iwarp",)


class NoTransport(Exception):
    """One line: why MPI cannot be pinned to this fabric (becomes a skip reason)."""


@dataclass(frozen=True)
class Transport:
    fabric: str
    summary: str  # for fingerprints and reports: "ucx on mlx5_0:1", "tcp over eth0"
    interface: str | None = None  # netdev for LaunchSpec.interface (TCP btl / libfabric tcp)
    tcp_only: bool = False  # LaunchSpec.tcp_only: ob1 + btl tcp,self / ofi tcp
    env: Mapping[str, str] = field(default_factory=dict)  # for every rank


def transport_for(fabric: FabricSelection, vendor: str) -> Transport:
    """vendor: 'openmpi' or 'mpich' (MpiFlavor.vendor)."""
    kind = fabric.kind
    if kind in TCP_FABRICS:
        if not fabric.netdev:
            raise NoTransport(f"{kind} fabric without a network interface: {fabric.description}")
        return Transport(kind, f"tcp over {fabric.netdev}", interface=fabric.netdev, tcp_only=True)
    if not fabric.device or fabric.port is None:
        raise NoTransport(f"{kind} fabric without an RDMA device and port: {fabric.description}")
    devport = f"{fabric.device}:{fabric.port}"
    if kind in UCX_FABRICS:
        env = {"UCX_NET_DEVICES": devport, "UCX_TLS": "rc,ud,self"}
        if kind != "ib" and fabric.gid_index is not None:
            env["UCX_IB_GID_INDEX"] = str(fabric.gid_index)
        if fabric.driver == "rxe":
            # UCX 1.13's UD checks each packet's destination GID where mlx5 reports the RoCE
            # packet type; rxe does not, every UD packet between two rxe hosts was dropped
            # silently and the job died after 30 s ("UD endpoint ... unhandled timeout error")
            env["UCX_UD_ETH_DGID_CHECK"] = "n"
        env |= (
            {"OMPI_MCA_pml": "ucx"}
            if vendor == "openmpi"
            else {"MPIR_CVAR_CH4_NETMOD": "ucx", "MPIR_CVAR_NOLOCAL": "1"}
        )
        return Transport(kind, f"ucx on {devport}", env=env)
    if kind in OFI_VERBS_FABRICS:
        env = {"FI_PROVIDER": "verbs;ofi_rxm"}
        if fabric.netdev:
            env["FI_VERBS_IFACE"] = fabric.netdev
        env |= (
            {"OMPI_MCA_pml": "cm", "OMPI_MCA_mtl": "ofi"}
            if vendor == "openmpi"
            else {"MPIR_CVAR_CH4_NETMOD": "ofi", "MPIR_CVAR_NOLOCAL": "1"}
        )
        return Transport(kind, f"ofi verbs;ofi_rxm on {devport}", env=env)
    raise NoTransport(f"no MPI transport known for fabric {kind!r}")
