"""srun launcher (inside a SLURM allocation): srun starts the ranks itself, wired by PMIx/PMI2.

srun does not know which MPI the program uses, so transport pinning is set for both by
environment (OMPI_MCA_* for Open MPI, MPIR_CVAR_* / FI_PROVIDER for MPICH); each ignores the
other's. srun --export=ALL forwards the whole environment, so values stay off the command line.
"""

from __future__ import annotations

from typing import Mapping, Sequence

from pytest_hpccomm.cluster.launchers.mpirun import TCP_ONLY_MPICH_ENV, TCP_ONLY_OMPI_ENV
from pytest_hpccomm.cluster.launchers.spec import Launch, LaunchSpec, base_env, interface_env


def mpi_plugin_for(vendor: str | None) -> str:
    """srun's --mpi for an MPI: pmi2 for MPICH, pmix otherwise (Open MPI 4 and 5). Measured on
    SLURM 22.05 (Debian 12, libpmix 4.2) with the project's wheels: the MPICH wheel aborts under
    pmix ("Runtime environment uses unsupported PMI version PMIx"); under pmi2 Open MPI 4 dies in
    MPI_Init ("OPAL ERROR: Unreachable") and Open MPI 5 quietly starts every rank as a
    singleton of size 1 (exit 0)."""
    return "pmi2" if vendor == "mpich" else "pmix"


class SrunLauncher:
    name = "srun"

    def __init__(
        self,
        srun: str = "srun",
        *,
        mpi: str | None = "pmix",  # srun --mpi: mpi_plugin_for(the MPI's vendor)
        extra: Sequence[str] = (),
        base: Mapping[str, str] | None = None,
    ) -> None:
        self.srun = srun
        self.mpi = mpi
        self.extra = list(extra)
        self._base = base

    def command(self, spec: LaunchSpec) -> Launch:
        argv = [
            self.srun,
            f"--nodes={len(spec.hosts)}",
            f"--ntasks={spec.n_ranks}",
            f"--ntasks-per-node={spec.ranks_per_host}",
            f"--nodelist={','.join(h.name for h in spec.hosts)}",
            "--kill-on-bad-exit=1",  # one dead rank ends the step instead of hanging it
            "--export=ALL",
        ]
        if self.mpi:
            argv.append(f"--mpi={self.mpi}")
        if spec.bind_none:
            argv.append("--cpu-bind=none")
        argv += self.extra
        env = dict(spec.env)
        env.update(interface_env(spec.interface))
        if spec.interface:
            env["OMPI_MCA_btl_tcp_if_include"] = spec.interface
            env["OMPI_MCA_oob_tcp_if_include"] = spec.interface
        if spec.tcp_only:
            env.update({"OMPI_MCA_pml": "ob1", "OMPI_MCA_btl": "tcp,self"})
            env.update(TCP_ONLY_OMPI_ENV)
            env.update(TCP_ONLY_MPICH_ENV)
        return Launch(argv + list(spec.argv), base_env(env, self._base))
