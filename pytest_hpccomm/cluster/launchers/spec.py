"""What every launcher shares: the spec of a launch, the command it becomes, the Protocol."""

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
    # a directory private to the job that the command names (the MPI runtime's session
    # directory): run_job/start_job(scratch=...) create it and remove it once the job is reaped
    scratch: str | None = None


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
