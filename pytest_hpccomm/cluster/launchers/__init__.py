"""Launchers: how peers are started on hosts, one module each behind the Launcher Protocol.

A launcher only builds a command (argument list + environment); jobs.run_job/start_job runs
it. Nothing here goes through a shell, so no host name is ever parsed by one. Values of
variables for the ranks travel in the launcher's environment and are forwarded by NAME
(`-x NAME`, `-genvlist NAME`, srun --export=ALL): secrets such as the control channel's key
never appear on a command line, where `ps` shows them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Mapping, Protocol, Sequence, runtime_checkable

from pytest_hpccomm.cluster.hosts import Host


@dataclass(frozen=True)
class LaunchSpec:
    argv: Sequence[str]  # the program every rank runs
    hosts: Sequence[Host]
    ranks_per_host: int = 1
    env: Mapping[str, str] = field(default_factory=dict)  # for every rank
    interface: str | None = None  # pin MPI's traffic to this netdev (e.g. "ib0", "fab0")
    tcp_only: bool = False  # no shared memory, no RDMA: every byte crosses `interface` by TCP
    bind_none: bool = False  # ranks share cores (e.g. virtual hosts on one machine)

    def __post_init__(self) -> None:
        if not self.argv:
            raise ValueError("LaunchSpec.argv is empty")
        if not self.hosts:
            raise ValueError("LaunchSpec.hosts is empty")
        if self.ranks_per_host < 1:
            raise ValueError(f"ranks_per_host must be >= 1, not {self.ranks_per_host}")

    @property
    def n_ranks(self) -> int:
        return len(self.hosts) * self.ranks_per_host


@dataclass(frozen=True)
class Launch:
    argv: list[str]  # what run_job / start_job runs
    env: dict[str, str]  # its whole environment


@runtime_checkable
class Launcher(Protocol):
    name: str

    def command(self, spec: LaunchSpec) -> Launch: ...


def interface_env(interface: str | None) -> dict[str, str]:
    """Variables that pin UCX and libfabric (used by Open MPI and MPICH alike) to one netdev."""
    if not interface:
        return {}
    return {"UCX_NET_DEVICES": interface, "FI_TCP_IFACE": interface}


def base_env(extra: Mapping[str, str], base: Mapping[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ if base is None else base)
    env.update(extra)
    return env


def get_launcher(name: str, **kwargs: object) -> Launcher:
    """Registry by --hpc-launcher name: local, mpirun, srun, netns."""
    if name == "local":
        from pytest_hpccomm.cluster.launchers.local import LocalLauncher
        return LocalLauncher(**kwargs)  # type: ignore[arg-type]
    if name == "mpirun":
        from pytest_hpccomm.cluster.launchers.mpirun import MpirunLauncher
        return MpirunLauncher(**kwargs)  # type: ignore[arg-type]
    if name == "srun":
        from pytest_hpccomm.cluster.launchers.srun import SrunLauncher
        return SrunLauncher(**kwargs)  # type: ignore[arg-type]
    if name == "netns":
        from pytest_hpccomm.cluster.launchers.netns import NetnsLauncher
        return NetnsLauncher(**kwargs)  # type: ignore[arg-type]
    raise ValueError(f"unknown launcher {name!r} (known: local, mpirun, srun, netns)")
