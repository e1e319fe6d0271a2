"""The MPI suite's 'hosts' placement inside a real SLURM allocation, ranks placed by srun.

SLURM (Debian's munge, slurmctld, one slurmd per host) runs on a virtual cluster
(tests/virtual_slurm.py). pytest runs as a user runs it on a cluster's first node:
`salloc -N2 pytest --hpc-launcher=srun hpccomm_suites/mpi ...`, with no host list given, so the hosts
come from SLURM_JOB_NODELIST / SLURM_TASKS_PER_NODE as SLURM set them. srun starts the ranks
with --mpi=pmix for Open MPI 4 and 5, --mpi=pmi2 for MPICH (launchers/srun.py says why).
Checked: the items pass for every MPI with placement=hosts, the fingerprint names h0,h1 and
TCP over fab0, the bytes crossed h1's link; an allocation smaller than the placement fails
naming it, well inside the job's timeout.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from hpccomm_suites import DIR as SUITES_DIR
from pytest_hpccomm.cluster.mpi import mpirun_path
from tests.slurm_hosts import job_env, slurm_virtual_hosts
from tests.virtual_slurm import VirtualSlurm

ROOT = Path(__file__).resolve().parents[3]
MPIS = [m for m in ("openmpi", "openmpi4", "mpich") if mpirun_path(m) is not None]

pytestmark = [pytest.mark.needs_root, pytest.mark.slow]


@pytest.fixture(scope="module")
def slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VirtualSlurm]:
    if not MPIS:
        pytest.skip("no MPI environment created (ci/bootstrap.sh makes them)")
    # the MPIs are checked above; srun --mpi=pmix still needs libpmix-dev (checked there)
    with slurm_virtual_hosts(tmp_path_factory.mktemp("slurm"), mpi=None) as s:
        yield s


def _pytest(tmp_path: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "pytest",
        str(SUITES_DIR / "mpi" / "test_perf_osu.py"),
        "-q",
        "-p",
        "no:cacheprovider",
        "--import-mode=importlib",
        "-k",
        "osu_latency",
        "--hpc-fabric=ethernet",
        "--hpc-launcher=srun",
        "--hpc-bind=none",
        "--hpc-history=none",
        f"--hpc-baselines={tmp_path / 'bl'}",
        "--hpc-system=slurm-test",
        *extra,
    ]


def _env() -> dict[str, str]:
    return job_env()


def test_suite_runs_in_an_allocation_with_srun(slurm: VirtualSlurm, tmp_path: Path) -> None:
    results = tmp_path / "results.json"
    argv = _pytest(
        tmp_path, f"--hpc-mpi={','.join(MPIS)}", "--hpc-sizes=8,64K", f"--hpc-results={results}"
    )
    before = slurm.cluster.counters(1)
    job = slurm.run(0, ["salloc", "-N2", "--immediate=30", *argv], timeout=900, env=_env())
    rx, tx = (a - b for a, b in zip(slurm.cluster.counters(1), before))
    header = "\n".join(ln for ln in job.stdout.splitlines() if ln.startswith("hpccomm"))
    assert job.ok, "\n".join([job.describe(), header, job.stdout[-3000:], slurm.diagnosis()])
    assert f"{2 * len(MPIS)} passed" in job.stdout.strip().splitlines()[-1], job.stdout[-3000:]
    doc = json.loads(results.read_text())
    items = {
        (r["measurement"]["params"]["mpi"], r["measurement"]["params"]["size"])
        for r in doc["results"]
    }
    assert items == {(m, s) for m in MPIS for s in (8, 65536)}, items
    for r in doc["results"]:
        assert r["measurement"]["params"]["placement"] == "hosts"
        fingerprint = r.get("fingerprint") or doc["session"]["fingerprint"]
        assert fingerprint["hosts"] == "h0,h1"  # from SLURM_JOB_NODELIST: no host list given
        assert fingerprint["mpi_transport"] == "tcp over fab0"
    # 64 KiB ping-pongs for >= 10 batches per job, 3 jobs: measured 59-83 MB each way on h1's
    # link per MPI; srun's own traffic is tens of KB
    assert rx > 8 * 2**20 * len(MPIS) and tx > 8 * 2**20 * len(MPIS), (rx, tx)


def test_an_allocation_smaller_than_the_placement_fails_naming_it(
    slurm: VirtualSlurm, tmp_path: Path
) -> None:
    mpi = f"--hpc-mpi={MPIS[0]}"
    one = slurm.run(
        0,
        ["salloc", "-N1", "--immediate=30", *_pytest(tmp_path, mpi, "--hpc-sizes=8")],
        timeout=300,
        env=_env(),
    )
    assert one.returncode == 1, one.describe() + one.stdout[-2000:]
    assert "hosts placement needs at least 2 hosts, got h0" in one.stdout, one.stdout[-2000:]
    # two hosts named, one allocated: srun refuses, and the item says so
    named = slurm.run(
        0,
        [
            "salloc",
            "-N1",
            "--immediate=30",
            *_pytest(tmp_path, mpi, "--hpc-sizes=8", "--hpc-hosts=h0,h1"),
        ],
        timeout=300,
        env=_env(),
    )
    assert named.returncode == 1, named.describe() + named.stdout[-2000:]
    assert "MPI job failed" in named.stdout, named.stdout[-2000:]
    assert "srun: error: Only allocated 1 nodes asked for 2" in named.stdout, named.stdout[-2000:]
    assert one.elapsed < 120 and named.elapsed < 120, (one.elapsed, named.elapsed)


def test_no_rank_is_left_after_the_allocation(slurm: VirtualSlurm) -> None:
    """Only the daemons live in the namespaces once the allocations are over."""
    daemons = {p.pid for job in slurm.daemons.values() for p in job.processes()}
    shims = {job.pid for job in slurm.daemons.values()}
    left = [pid for pid in slurm.cluster.pids() if pid not in daemons | shims]
    assert not left, [
        Path(f"/proc/{p}/cmdline").read_bytes()[:200] for p in left if os.path.exists(f"/proc/{p}")
    ]
