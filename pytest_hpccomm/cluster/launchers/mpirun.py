"""mpirun / mpiexec of Open MPI (4 and 5) and MPICH (Hydra): command lines per flavor.

More: docs/explanation/internals.md (pytest_hpccomm.cluster.launchers.mpirun).
"""

from __future__ import annotations

import dataclasses
import os
import re
import secrets
import tempfile
import time
from typing import Callable, Mapping

from pytest_hpccomm.cluster.launchers.spec import Launch, LaunchSpec, base_env, interface_env
from pytest_hpccomm.cluster.mpi import ROOT_ENV, MpiFlavor, detect_mpi
from pytest_hpccomm.proc.jobs import JobResult, PidsHook, TimeoutHook, start_job

TCP_ONLY_MPICH_ENV = {
    "MPIR_CVAR_NOLOCAL": "1",
    "MPIR_CVAR_CH4_NETMOD": "ofi",
    "FI_PROVIDER": "tcp",
    # an MPICH built with ch4:ucx alone (Debian's) ignores the netmod: its UCX would carry the
    # ranks' bytes over shared memory, not over the fabric's interface (UCX_NET_DEVICES)
    "UCX_TLS": "tcp,self",
}
TCP_ONLY_OMPI_ENV = {"UCX_TLS": "tcp,self"}  # in case a UCX component is still picked


class MpirunLauncher:
    """Builds `mpirun` command lines; `rsh_agent` replaces ssh (used by the netns launcher)."""

    name = "mpirun"

    def __init__(
        self,
        mpirun: str | os.PathLike[str],
        flavor: MpiFlavor | None = None,
        *,
        rsh_agent: str | None = None,
        as_root: bool | None = None,
        base: Mapping[str, str] | None = None,
        prefix: bool = False,
        private_session: bool = False,
    ) -> None:
        self.mpirun = os.fspath(mpirun)
        self._flavor = flavor
        self.rsh_agent = rsh_agent
        self.as_root = os.geteuid() == 0 if as_root is None else as_root
        self._base = base  # environment to start from (default: os.environ at command time)
        # Open MPI --prefix: remote daemons (prted/orted) and libraries are found under mpirun's
        # installation even when the remote login shell's PATH lacks it (real hosts over ssh)
        self.prefix = prefix
        # a session directory per job (module docstring); only where every daemon shares this
        # machine's /tmp: loopback and the virtual cluster
        self.private_session = private_session

    @property
    def flavor(self) -> MpiFlavor:
        if self._flavor is None:
            self._flavor = detect_mpi(self.mpirun)
        return self._flavor

    def command(self, spec: LaunchSpec) -> Launch:
        rank_env = dict(spec.env)
        rank_env.update(interface_env(spec.interface))
        scratch = None
        if self.flavor.vendor == "openmpi":
            if spec.tcp_only:
                rank_env.update(TCP_ONLY_OMPI_ENV)
            if self.private_session:
                scratch = os.path.join(
                    tempfile.gettempdir(), f"hpccomm-mpi-{os.getpid()}-{secrets.token_hex(4)}"
                )
            argv = self._openmpi(spec, sorted(rank_env), scratch)
            launcher_env = dict(ROOT_ENV) if self.as_root else {}
        else:
            if spec.tcp_only:
                rank_env.update(TCP_ONLY_MPICH_ENV)
            argv = self._hydra(spec, sorted(rank_env))
            launcher_env = {}
        env = base_env({**launcher_env, **rank_env}, self._base)
        # the remote side (agent, daemons) finds orted/prted/hydra_pmi_proxy on PATH
        bindir = os.path.dirname(self.mpirun)
        if bindir:
            env["PATH"] = bindir + os.pathsep + env.get("PATH", os.defpath)
        return Launch(argv + list(spec.argv), env, scratch)

    def _hostlist(self, spec: LaunchSpec) -> str:
        return ",".join(f"{h.name}:{spec.ranks_per_host}" for h in spec.hosts)

    def _openmpi(self, spec: LaunchSpec, forward: list[str], session: str | None) -> list[str]:
        v5 = self.flavor.major >= 5
        argv = [
            self.mpirun,
            "--host",
            self._hostlist(spec),
            "-np",
            str(spec.n_ranks),
            "--map-by",
            f"ppr:{spec.ranks_per_host}:node",
        ]
        if self.prefix:
            argv += ["--prefix", os.path.dirname(os.path.dirname(os.path.abspath(self.mpirun)))]
        if spec.bind_none:
            argv += ["--bind-to", "none"]
        if self.rsh_agent:
            argv += (
                ["--prtemca", "plm_ssh_agent", self.rsh_agent]
                if v5
                else ["--mca", "plm_rsh_agent", self.rsh_agent]
            )
        if spec.tcp_only:
            argv += ["--mca", "pml", "ob1", "--mca", "btl", "tcp,self"]
        if spec.interface:
            argv += ["--mca", "btl_tcp_if_include", spec.interface]
            # the daemons' out-of-band channel belongs to PRRTE in Open MPI 5
            argv += ["--prtemca" if v5 else "--mca", "oob_tcp_if_include", spec.interface]
        if session:  # the runtime's session directories go under it (daemons too)
            argv += (
                ["--prtemca", "prte_tmpdir_base", session]
                if v5
                else ["--mca", "orte_tmpdir_base", session]
            )
        for name in forward:
            argv += ["-x", name]
        return argv

    def _hydra(self, spec: LaunchSpec, forward: list[str]) -> list[str]:
        argv = [
            self.mpirun,
            "-hosts",
            self._hostlist(spec),
            "-n",
            str(spec.n_ranks),
            "-ppn",
            str(spec.ranks_per_host),
        ]
        if spec.bind_none:
            argv += ["-bind-to", "none"]
        if self.rsh_agent:
            argv += ["-launcher", "ssh", "-launcher-exec", self.rsh_agent]
        if spec.interface:
            argv += ["-iface", spec.interface]
        if forward:
            argv += ["-genvlist", ",".join(forward)]
        return argv


INIT_FAILURE = "Fatal error in internal_Init_thread"  # MPICH's MPI_Init abort
# libfabric's tcp provider without a RUNNING interface: MPICH 4.2 and later's words, then
# 3.4-4.1's ("OFI EP enable failed (ofi_init.c:998:create_vni_context:Bad file descriptor)")
NO_RUNNING_INTERFACE = re.compile(r"(?:ep_enable|EP enable) failed \(.*Bad file descriptor\)")


def init_failure_diagnosis(stderr: str, interface: str | None = None) -> str:
    """Why MPICH's MPI_Init failed, where the words name a known cause; "" otherwise.

    "OFI call ep_enable failed (default nic=tcp: Bad file descriptor)" means libfabric's tcp
    provider found no interface up and RUNNING (FI_TCP_IFACE's): it then hands out an entry
    without a source address and fi_enable calls listen(-1). A veth reads RUNNING up to ~1 s
    after `link set up` (the virtual cluster waits for it); on real hosts, a link down."""
    if not NO_RUNNING_INTERFACE.search(stderr):
        return ""
    which = f"FI_TCP_IFACE={interface}" if interface else "FI_TCP_IFACE's interface"
    return (
        f"MPICH's MPI_Init found {which} not RUNNING on a host (down, without carrier or "
        "absent at launch): libfabric's tcp provider reports that as 'ep_enable failed ... "
        "Bad file descriptor' (docs: the defects catalogue)"
    )


def diagnosed(result: JobResult, env: Mapping[str, str]) -> JobResult:
    """`result` with its MPI_Init failure's known cause (init_failure_diagnosis) as its
    diagnosis; `env`: the launch's, which names the interface."""
    why = init_failure_diagnosis(result.stderr, env.get("FI_TCP_IFACE"))
    return dataclasses.replace(result, diagnosis=why) if why else result


def run_ending_at_init_failure(
    launch: Launch,
    *,
    timeout: float,
    grace: float = 2.0,
    netns_pids_hook: PidsHook | None = None,
    on_start: Callable[[int], None] | None = None,
    label: str = "",
    outside_cpu: bool = False,
    on_timeout: TimeoutHook | None = None,
) -> JobResult:
    """Run an MPI job to completion. When MPICH's MPI_Init aborts, mpiexec often hangs instead
    of exiting: the job is ended as soon as those words show in stderr, and the result names
    the cause where it is known (init_failure_diagnosis). Nothing is retried."""
    job = start_job(
        launch.argv,
        launch.env,
        timeout=timeout,
        grace=grace,
        netns_pids_hook=netns_pids_hook,
        on_start=on_start,
        label=label,
        scratch=launch.scratch,
        outside_cpu=outside_cpu,
        on_timeout=on_timeout,
    )
    deadline = time.monotonic() + timeout
    while job.poll() is None and time.monotonic() < deadline:
        if INIT_FAILURE in job.peek_output()[1]:
            job.stop(grace=0.5)
            break
        time.sleep(0.05)
    return diagnosed(job.wait(), launch.env)
