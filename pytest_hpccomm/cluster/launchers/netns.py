"""netns launcher: an MPI job across the hosts of a VirtualCluster (--hpc-launcher=netns).

mpirun runs on the first host (inside its namespace, as on a real cluster's first node: the
root namespace has no route to the fabric) and reaches the others through the cluster's agent,
which stands in for ssh and enters the host's namespace under its own hostname. Transports are
always pinned to TCP over fab0: namespaces share /dev/shm, and MPICH's default UCX netmod
silently moves every byte through it (measured: ~20 KB on the veth for 50 MB sent).

run() ends a job at MPICH's MPI_Init abort and names a known cause
(mpirun.run_ending_at_init_failure).
"""

from __future__ import annotations

import dataclasses
import os

from pytest_hpccomm.cluster.hosts import Host
from pytest_hpccomm.cluster.launchers.mpirun import MpirunLauncher, run_ending_at_init_failure
from pytest_hpccomm.cluster.launchers.spec import Launch, LaunchSpec
from pytest_hpccomm.cluster.mpi import MpiFlavor
from pytest_hpccomm.cluster.virtual import IFACE, VirtualCluster
from pytest_hpccomm.proc.jobs import JobResult


class NetnsLauncher:
    name = "netns"

    def __init__(
        self,
        cluster: VirtualCluster,
        mpirun: str | os.PathLike[str],
        flavor: MpiFlavor | None = None,
    ) -> None:
        self.cluster = cluster
        self.mpirun = MpirunLauncher(
            mpirun, flavor, rsh_agent=cluster.agent_path, private_session=True
        )
        self.pids_hook = cluster.pids  # for run_job/start_job(netns_pids_hook=...)

    @property
    def flavor(self) -> MpiFlavor:
        return self.mpirun.flavor

    def hosts(self) -> list[Host]:
        return [Host(h.name) for h in self.cluster.hosts]

    def command(self, spec: LaunchSpec) -> Launch:
        for h in spec.hosts:
            self.cluster.host(h.name)  # KeyError names a host that is not in the cluster
        # ranks of different virtual hosts share the real cores: never bind them
        pinned = dataclasses.replace(spec, interface=IFACE, tcp_only=True, bind_none=True)
        inner = self.mpirun.command(pinned)
        return Launch(
            self.cluster.exec_argv(spec.hosts[0].name, inner.argv), inner.env, inner.scratch
        )

    def run(self, spec: LaunchSpec, *, timeout: float, grace: float = 2.0) -> JobResult:
        """Run spec to completion across the cluster (ended at MPICH's MPI_Init abort)."""
        return run_ending_at_init_failure(
            self.command(spec),
            timeout=timeout,
            grace=grace,
            netns_pids_hook=self.pids_hook,
            on_start=self.cluster.register_pid,
            label=f"{self.flavor} job on {','.join(h.name for h in spec.hosts)}",
        )
