"""Is any MPI usable here? Cheap: looks for the per-MPI environments and a system mpirun."""

from __future__ import annotations

import shutil

from pytest_hpccomm.cluster.mpi import MPI_ENVS, mpirun_path


class MpiProbe:
    name = "mpi"

    def unavailable_reason(self) -> str | None:
        if any(mpirun_path(n) for n in MPI_ENVS) or shutil.which("mpirun"):
            return None
        return (
            "stack 'mpi' not available: no MPI environment and no mpirun on PATH (create "
            "one: hpccomm mpi create openmpi mpich)"
        )

    def versions(self) -> dict[str, str]:
        return {}  # the peers report the MPI library they actually ran (runtime fingerprint)
