"""A real SLURM on two virtual-cluster hosts, for tests that submit jobs to it as a user does.

    with slurm_virtual_hosts(workdir) as slurm:       # skips with the reason when impossible
        slurm.run(0, ["sbatch", "--wait", script], timeout=300, env=job_env())

VirtualSlurm (tests/virtual_slurm.py) runs munged, slurmctld and one slurmd per host inside
the namespaces; this wraps the skip reasons (not root, no SLURM or libpmix-dev installed, no
MPI environment) and the teardown, and gives the environment a job needs to find this
checkout and the MPI environments from inside the cluster.
"""

from __future__ import annotations

import glob
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from pytest_hpccomm.cluster.mpi import mpi_cache, mpirun_path
from pytest_hpccomm.cluster.virtual import ClusterUnavailable, VirtualCluster
from pytest_hpccomm.cluster.virtual import unavailable_reason as no_cluster
from tests.virtual_slurm import VirtualSlurm
from tests.virtual_slurm import unavailable_reason as no_slurm

ROOT = Path(__file__).resolve().parents[1]
# SLURM's mpi/pmix plugin dlopens an unversioned libpmix.so, which only libpmix-dev ships
NO_PMIX = (
    ""
    if glob.glob("/usr/lib/*/pmix2/lib/libpmix.so")
    else ("srun --mpi=pmix (Open MPI) needs libpmix.so: apt-get install libpmix-dev")
)


def skip_reason(mpi: str | None = "openmpi", pmix: bool = True) -> str | None:
    """Why SLURM jobs cannot run here (not root, SLURM missing, with `pmix` srun --mpi=pmix
    unusable, the MPI environment `mpi` not created), or None."""
    reason = no_cluster() or no_slurm() or (NO_PMIX if pmix else None)
    if reason:
        return reason
    if mpi and mpirun_path(mpi) is None:
        return (
            f"MPI environment {mpi!r} not created (ci/bootstrap.sh makes it: "
            f"python -m pytest_hpccomm mpi create {mpi})"
        )
    return None


@contextmanager
def slurm_virtual_hosts(
    workdir: Path, *, mpi: str | None = "openmpi", pmix: bool = True, daemon_timeout: float = 1200.0
) -> Iterator[VirtualSlurm]:
    """SLURM on a fresh two-host virtual cluster (skips saying why when it cannot be had, see
    skip_reason); its daemons and the cluster are gone when the block is left."""
    reason = skip_reason(mpi, pmix)
    if reason:
        pytest.skip(reason)
    try:
        cluster = VirtualCluster(2).__enter__()
    except ClusterUnavailable as exc:
        pytest.skip(f"virtual cluster unavailable: {exc}")
    try:
        with VirtualSlurm(cluster, workdir, daemon_timeout=daemon_timeout) as s:
            yield s
    finally:
        cluster.teardown()


def job_env(**extra: str) -> dict[str, str]:
    """What a job on the virtual cluster needs to use this checkout and its MPI environments
    (the job inherits sbatch's environment: SLURM's --export=ALL)."""
    return {"HPCCOMM_MPI_CACHE": str(mpi_cache()), "PYTHONPATH": str(ROOT), **extra}
