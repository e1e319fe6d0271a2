"""Which MPI runs the peers: a per-MPI environment from the cache, or a system mpirun.

`--hpc-mpi openmpi,mpich` (names of environments made by `python -m pytest_hpccomm.cluster.mpi
create ...`) or a path to a system `mpirun` (then this Python must import mpi4py built for it).
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from pytest_hpccomm.cluster.mpi import MPI_ENVS, MpiDetectError, MpiFlavor, detect_mpi, mpi_prefix


@dataclass(frozen=True)
class MpiRuntime:
    name: str  # "openmpi", "mpich", or "system"
    mpirun: Path
    python: Path  # a Python whose mpi4py is built against that MPI
    flavor: MpiFlavor


class MpiUnavailable(Exception):
    """One line saying why this MPI cannot run here; becomes a skip reason."""


def resolve(spec: str) -> MpiRuntime:
    if spec in MPI_ENVS:
        prefix = mpi_prefix(spec)
        mpirun, python = prefix / "bin" / "mpirun", prefix / "bin" / "python"
        if not (mpirun.is_file() and python.is_file()):
            raise MpiUnavailable(f"MPI environment {spec!r} not found at {prefix}: create it with "
                                 f"`python -m pytest_hpccomm.cluster.mpi create {spec}`")
        name = spec
    else:
        found = shutil.which(spec) if os.sep not in spec else spec
        if not found or not os.access(found, os.X_OK):
            raise MpiUnavailable(f"--hpc-mpi {spec!r}: neither an MPI environment name "
                                 f"({', '.join(MPI_ENVS)}) nor an executable mpirun")
        mpirun, python, name = Path(found), Path(sys.executable), "system"
    try:
        flavor = detect_mpi(mpirun)
    except MpiDetectError as exc:
        raise MpiUnavailable(str(exc)) from None
    return MpiRuntime(name, mpirun, python, flavor)
