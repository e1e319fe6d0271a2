"""netns launcher: an MPI job across the hosts of a VirtualCluster (--hpc-launcher=netns).

mpirun runs on the first host (inside its namespace, as on a real cluster's first node: the
root namespace has no route to the fabric) and reaches the others through the cluster's agent,
which stands in for ssh and enters the host's namespace under its own hostname. Transports are
always pinned to TCP over fab0: namespaces share /dev/shm, and MPICH's default UCX netmod
silently moves every byte through it (measured: ~20 KB on the veth for 50 MB sent).

MPICH 5.0.2's libfabric TCP endpoint setup fails in MPI_Init in ~2-5 % of launches here
("OFI call ep_enable failed (default nic=tcp: Bad file descriptor)": it sometimes picks a
provider entry without a source address and calls listen(-1)); UCX's TCP transport fails at a
similar rate ("Destination is unreachable"), Open MPI never (0 of 60). mpiexec then often
hangs instead of exiting. run() recognises that signature in stderr, ends the attempt at once
and retries; any other failure is returned as it is.
"""

from __future__ import annotations

import dataclasses
import os
import time

from pytest_hpccomm.cluster.hosts import Host
from pytest_hpccomm.cluster.jobs import JobResult, start_job
from pytest_hpccomm.cluster.launchers import Launch, LaunchSpec
from pytest_hpccomm.cluster.launchers.mpirun import MpirunLauncher
from pytest_hpccomm.cluster.mpi import MpiFlavor
from pytest_hpccomm.cluster.virtual import IFACE, VirtualCluster


INIT_FLAKE = "Fatal error in internal_Init_thread"  # MPICH's MPI_Init abort, see above


class NetnsLauncher:
    name = "netns"

    def __init__(
        self,
        cluster: VirtualCluster,
        mpirun: str | os.PathLike[str],
        flavor: MpiFlavor | None = None,
    ) -> None:
        self.cluster = cluster
        self.mpirun = MpirunLauncher(mpirun, flavor, rsh_agent=cluster.agent_path)
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
        return Launch(self.cluster.exec_argv(spec.hosts[0].name, inner.argv), inner.env)

    def run(self, spec: LaunchSpec, *, timeout: float, grace: float = 2.0,
            attempts: int = 3) -> JobResult:
        """Run spec to completion across the cluster; retries only MPICH's MPI_Init flake."""
        launch = self.command(spec)
        label = f"{self.flavor} job on {','.join(h.name for h in spec.hosts)}"
        for attempt in range(1, attempts + 1):
            job = start_job(launch.argv, launch.env, timeout=timeout, grace=grace,
                            netns_pids_hook=self.pids_hook, on_start=self.cluster.register_pid,
                            label=label)
            deadline = time.monotonic() + timeout
            while job.poll() is None and time.monotonic() < deadline:
                if INIT_FLAKE in job.peek_output()[1]:
                    job.stop(grace=0.5)
                    break
                time.sleep(0.05)
            result = job.wait()
            if attempt == attempts or INIT_FLAKE not in result.stderr:
                return result
        raise AssertionError("unreachable")
