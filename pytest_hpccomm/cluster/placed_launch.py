"""A placement (placement.py: loopback, netns, hosts) turned into the command that starts a
program there, and the way to run it.

Two shapes: an MPI job (mpi_launch: ranks here, on the virtual cluster's hosts, or on real
hosts through mpirun/srun) and one plain process (process_launch: here, on one virtual host,
or on one real host over the remote shell). A job inside the virtual cluster carries its
hooks, so the cluster's teardown finds and ends its processes whatever happens to this one.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pytest_hpccomm.cluster.hosts import Host
from pytest_hpccomm.cluster.launchers.mpirun import MpirunLauncher, run_ending_at_init_failure
from pytest_hpccomm.cluster.launchers.netns import NetnsLauncher
from pytest_hpccomm.cluster.launchers.spec import Launch, LaunchSpec
from pytest_hpccomm.cluster.launchers.srun import SrunLauncher, mpi_plugin_for
from pytest_hpccomm.cluster.mpi import MpiFlavor
from pytest_hpccomm.cluster.placement import HOSTS, LOOPBACK, NETNS
from pytest_hpccomm.cluster.remote_shell import RemoteShell, is_this_host
from pytest_hpccomm.cluster.virtual import VirtualCluster
from pytest_hpccomm.proc.jobs import (
    JobResult,
    PidsHook,
    RunningJob,
    TimeoutHook,
    run_job,
    start_job,
)

# TCP over loopback: the fabric under test is the network stack, not shared memory. Pinned by
# variables: Open MPI refuses `oob_tcp_if_include lo` (its out-of-band channel needs a
# non-loopback interface even when every rank is local).
LOOPBACK_TCP_ENV = {"OMPI_MCA_btl_tcp_if_include": "lo", "FI_TCP_IFACE": "lo"}


class PlacementError(ValueError):
    """The program cannot be launched at that placement as asked (a one-line reason)."""


class Pins(Protocol):
    """How MPI is pinned to the session's fabric (stacks/mpi/transport.Transport)."""

    @property
    def env(self) -> Mapping[str, str]: ...

    @property
    def interface(self) -> str | None: ...

    @property
    def tcp_only(self) -> bool: ...


@dataclass(frozen=True)
class RemoteTarget:
    """Where a process of the hosts placement runs when it is not this host."""

    shell: RemoteShell
    host: str


@dataclass(frozen=True)
class PlacedLaunch:
    """A command for a placement; start() or run*() it."""

    launch: Launch
    ranks: int  # processes of the program (MPI ranks, or 1)
    label: str  # what the job is, for its messages
    netns_pids_hook: PidsHook | None = None
    on_start: Callable[[int], None] | None = None
    # hosts: over the remote shell, launch.env on its stdin (the remote timeout is the job's)
    remote: RemoteTarget | None = None
    # hosts: ranks on this node may run outside this process tree (srun's tasks are
    # slurmstepd's children): their CPU time is the job's own (outside_cpu.py)
    outside_cpu: bool = False
    on_timeout: TimeoutHook | None = None  # e.g. where the ranks wait (proc/stacks.py)

    def hooks(self) -> dict[str, Any]:
        """start_job/run_job keyword arguments that tie the job to its virtual cluster and
        account for a timeout."""
        return {
            "netns_pids_hook": self.netns_pids_hook,
            "on_start": self.on_start,
            "on_timeout": self.on_timeout,
        }

    def start(self, timeout: float, label: str = "") -> RunningJob:
        if self.remote is not None:
            return self.remote.shell.start(
                self.remote.host, self.launch.argv, self.launch.env, timeout, label or self.label
            )
        return start_job(
            self.launch.argv,
            self.launch.env,
            timeout=timeout,
            label=label or self.label,
            scratch=self.launch.scratch,
            outside_cpu=self.outside_cpu,
            **self.hooks(),
        )

    def run(self, timeout: float) -> JobResult:
        return run_job(
            self.launch.argv,
            self.launch.env,
            timeout=timeout,
            label=self.label,
            scratch=self.launch.scratch,
            outside_cpu=self.outside_cpu,
            **self.hooks(),
        )

    def run_ending_at_init_failure(self, timeout: float) -> JobResult:
        """run(), ended at MPICH's MPI_Init abort with its known cause (launchers/mpirun.py)."""
        return run_ending_at_init_failure(
            self.launch,
            timeout=timeout,
            label=self.label,
            outside_cpu=self.outside_cpu,
            **self.hooks(),
        )

    def with_mpirun_args(self, args: Sequence[str], mpirun: str | os.PathLike[str]) -> PlacedLaunch:
        """The same command with `args` right after mpirun (e.g. `--with-ft ulfm`)."""
        argv = self.launch.argv
        at = argv.index(os.fspath(mpirun)) + 1
        return dataclasses.replace(
            self, launch=dataclasses.replace(self.launch, argv=argv[:at] + list(args) + argv[at:])
        )


def mpi_launch(
    placement: str,
    argv: Sequence[str],
    env: Mapping[str, str],
    mpirun: str | os.PathLike[str],
    flavor: MpiFlavor | None = None,
    *,
    hosts: Sequence[Host] | None = None,
    cluster: VirtualCluster | None = None,
    loopback_ranks: int = 2,
    pins: Pins | None = None,
    launcher: str = "mpirun",
    rsh_agent: str | None = None,
    bind_none: bool = False,
    mpirun_args: Sequence[str] = (),
) -> PlacedLaunch:
    """The MPI job running argv in every rank, with `env` for every rank:

    loopback: `loopback_ranks` ranks here, bound to no core; TCP over lo (LOOPBACK_TCP_ENV),
      or through the HCA when `pins` name an RDMA transport (its variables, no shared memory).
    netns: one rank per host of `cluster` (`hosts`: a subset), mpirun on the first and TCP over
      fab0 (launchers/netns.py); `pins` do not apply.
    hosts: one rank per host of `hosts`, pinned to the fabric by `pins` (required), started by
      mpirun over `rsh_agent` (default ssh) with --prefix (Open MPI's daemons are then found on
      hosts whose login shell lacks the MPI on PATH), or by srun (`launcher`).
    """
    if placement == LOOPBACK:
        placed = _loopback(argv, env, mpirun, flavor, loopback_ranks, pins)
    elif placement == NETNS:
        placed = _netns(argv, env, mpirun, flavor, cluster, hosts)
    elif placement == HOSTS:
        placed = _hosts(
            argv, env, mpirun, flavor, hosts or (), pins, launcher, rsh_agent, bind_none
        )
    else:
        raise PlacementError(f"unknown placement {placement!r}")
    return placed.with_mpirun_args(mpirun_args, mpirun) if mpirun_args else placed


def _label(flavor: MpiFlavor | None, hosts: Sequence[Host]) -> str:
    return f"{flavor or 'MPI'} job on {','.join(h.name for h in hosts)}"


def _loopback(
    argv: Sequence[str],
    env: Mapping[str, str],
    mpirun: str | os.PathLike[str],
    flavor: MpiFlavor | None,
    ranks: int,
    pins: Pins | None,
) -> PlacedLaunch:
    here = [Host("localhost")]
    if pins is not None and not pins.tcp_only:
        spec = LaunchSpec(argv, here, ranks_per_host=ranks, env={**env, **pins.env}, bind_none=True)
    else:
        spec = LaunchSpec(
            argv,
            here,
            ranks_per_host=ranks,
            env={**env, **LOOPBACK_TCP_ENV},
            tcp_only=True,
            bind_none=True,
        )
    launcher = MpirunLauncher(mpirun, flavor, private_session=True)
    return PlacedLaunch(launcher.command(spec), ranks, _label(flavor, here))


def _netns(
    argv: Sequence[str],
    env: Mapping[str, str],
    mpirun: str | os.PathLike[str],
    flavor: MpiFlavor | None,
    cluster: VirtualCluster | None,
    hosts: Sequence[Host] | None,
) -> PlacedLaunch:
    if cluster is None:
        raise PlacementError("netns placement needs a virtual cluster")
    netns = NetnsLauncher(cluster, mpirun, flavor)
    chosen = list(hosts) if hosts is not None else netns.hosts()
    launch = netns.command(LaunchSpec(argv, chosen, env=env))
    return PlacedLaunch(
        launch, len(chosen), _label(flavor, chosen), netns.pids_hook, cluster.register_pid
    )


def _hosts(
    argv: Sequence[str],
    env: Mapping[str, str],
    mpirun: str | os.PathLike[str],
    flavor: MpiFlavor | None,
    hosts: Sequence[Host],
    pins: Pins | None,
    launcher: str,
    rsh_agent: str | None,
    bind_none: bool,
) -> PlacedLaunch:
    if pins is None:
        raise PlacementError("hosts placement needs the fabric's transport")
    if not hosts:
        raise PlacementError("hosts placement needs hosts")
    spec = LaunchSpec(
        argv,
        hosts,
        env={**env, **pins.env},
        interface=pins.interface,
        tcp_only=pins.tcp_only,
        bind_none=bind_none,
    )
    if launcher == "srun":
        vendor = flavor.vendor if flavor is not None else None
        launch = SrunLauncher(mpi=mpi_plugin_for(vendor)).command(spec)
    else:
        launch = MpirunLauncher(mpirun, flavor, rsh_agent=rsh_agent, prefix=True).command(spec)
    return PlacedLaunch(launch, len(hosts), _label(flavor, hosts), outside_cpu=True)


def process_launch(
    placement: str,
    argv: Sequence[str],
    env: Mapping[str, str],
    *,
    cluster: VirtualCluster | None = None,
    host: int = 0,
    label: str = "",
    hosts: Sequence[str] = (),
    shell: RemoteShell | None = None,
) -> PlacedLaunch:
    """One process running argv with exactly `env`: here (loopback), on virtual host `host`
    of `cluster` (netns: its namespace and hostname), or on `hosts[host]` (hosts: here when
    that is this machine, else over `shell`, with `env` laid over the remote login's and
    start() only: the remote side's timeout is the job's)."""
    if placement == LOOPBACK:
        return PlacedLaunch(Launch(list(argv), dict(env)), 1, label)
    if placement == NETNS:
        if cluster is None:
            raise PlacementError("netns placement needs a virtual cluster")
        return PlacedLaunch(
            Launch(cluster.exec_argv(host, argv), dict(env)),
            1,
            label,
            cluster.pids,
            cluster.register_pid,
        )
    if placement == HOSTS:
        if not hosts:
            raise PlacementError("hosts placement needs the hosts (--hpc-hosts)")
        name = hosts[host % len(hosts)]
        placed = PlacedLaunch(Launch(list(argv), dict(env)), 1, label or f"{argv[0]} on {name}")
        return (
            placed
            if is_this_host(name)
            else dataclasses.replace(placed, remote=RemoteTarget(shell or RemoteShell(), name))
        )
    raise PlacementError(
        f"placement {placement!r}: one process runs on {LOOPBACK}, {NETNS} or {HOSTS}"
    )
