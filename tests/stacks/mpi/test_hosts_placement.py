"""The MPI suite's 'hosts' placement on real hosts reached by real ssh.

The hosts are the namespaces of a virtual cluster, each running its own sshd on its fabric
address (tests/sshd_hosts.py). pytest runs on the first host, as a user runs it on a cluster's
first node: `pytest --hpc-fabric=ethernet --hpc-hosts=h0,h1 --hpc-rsh-agent=...`; mpirun
(Open MPI and MPICH) starts the far rank over ssh, with TCP pinned to the fabric's netdev.
Checked: the items pass with verdicts recorded under placement=hosts, the fingerprint names
the transport and both hosts, and the bytes crossed the far host's link.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hpccomm_suites import DIR as SUITES_DIR
from pytest_hpccomm.cluster.mpi import mpi_cache, mpirun_path
from pytest_hpccomm.cluster.virtual import VirtualCluster

ROOT = Path(__file__).resolve().parents[3]
MPI_CACHE = mpi_cache()
MPIS = [m for m in ("openmpi", "mpich") if mpirun_path(m) is not None]

pytestmark = [
    pytest.mark.needs_root,
    pytest.mark.slow,
    pytest.mark.skipif(not MPIS, reason="no MPI environment created (ci/bootstrap.sh makes them)"),
]


def test_suite_runs_on_hosts_over_ssh(
    ssh_cluster: tuple[VirtualCluster, Path], tmp_path: Path
) -> None:
    cluster, agent = ssh_cluster
    results = tmp_path / "results.json"
    argv = [
        sys.executable,
        "-m",
        "pytest",
        str(SUITES_DIR / "mpi" / "test_perf_osu.py"),
        "-q",
        "-p",
        "no:cacheprovider",
        "--import-mode=importlib",
        "-k",
        "osu_latency or osu_bw or osu_allreduce",
        "--hpc-fabric=ethernet",
        "--hpc-hosts=h0,h1",
        f"--hpc-rsh-agent={agent}",
        "--hpc-bind=none",
        f"--hpc-mpi={','.join(MPIS)}",
        "--hpc-sizes=8,64K",
        "--hpc-history=none",
        f"--hpc-baselines={tmp_path / 'bl'}",
        f"--hpc-results={results}",
        "--hpc-system=hosts-test",
    ]
    env = {"HPCCOMM_MPI_CACHE": str(MPI_CACHE), "PYTHONPATH": str(ROOT)}
    before = cluster.counters(1)
    job = cluster.run_job(0, argv, env=_env(env), timeout=600)
    rx, tx = (a - b for a, b in zip(cluster.counters(1), before))
    assert job.ok, job.describe() + job.stdout[-3000:]
    doc = json.loads(results.read_text())
    records = doc["results"]
    items = {
        (
            r["measurement"]["params"]["mpi"],
            r["measurement"]["benchmark"],
            r["measurement"]["params"].get("size"),
            r["measurement"]["params"].get("metric"),
        )
        for r in records
    }
    for mpi in MPIS:
        for bench in ("osu_latency", "osu_bw", "osu_allreduce"):
            for size in (8, 65536):
                assert (mpi, bench, size, None) in items, (mpi, bench, size)
    for r in records:
        m = r["measurement"]
        assert m["params"]["placement"] == "hosts"
        assert r["verdict"]["outcome"] == "new"
        fingerprint = r.get("fingerprint") or doc["session"]["fingerprint"]
        assert fingerprint["mpi_transport"] == "tcp over fab0"
        assert fingerprint["hosts"] == "h0,h1"
    # osu_bw alone sends h0 -> h1 >= 10 windows x 64 x 64 KiB per batch, >= 10 batches, per
    # MPI (measured ~1 GB received by h1 for both MPIs); latency pings and allreduce come back
    assert rx > 200 * 2**20 * len(MPIS), (rx, tx)
    assert tx > 2**20 * len(MPIS), (rx, tx)


def test_unreachable_host_fails_with_its_name(
    ssh_cluster: tuple[VirtualCluster, Path], tmp_path: Path
) -> None:
    """A host that does not answer ssh fails the items, naming the MPI job's error, well
    inside the job's timeout (no hang)."""
    cluster, agent = ssh_cluster
    argv = [
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
        "--hpc-hosts=h0,10.255.255.1",
        f"--hpc-rsh-agent={agent}",
        "--hpc-bind=none",
        f"--hpc-mpi={MPIS[0]}",
        "--hpc-sizes=8",
        "--hpc-history=none",
        f"--hpc-baselines={tmp_path / 'bl'}",
        "--hpc-system=hosts-test",
    ]
    env = {"HPCCOMM_MPI_CACHE": str(MPI_CACHE), "PYTHONPATH": str(ROOT)}
    job = cluster.run_job(0, argv, env=_env(env), timeout=300)
    assert job.returncode == 1, job.describe() + job.stdout[-2000:]
    assert "MPI job failed" in job.stdout, job.stdout[-2000:]


def _env(extra: dict[str, str]) -> dict[str, str]:
    return {**os.environ, **extra}


def test_agent_reaches_each_host_by_name(ssh_cluster: tuple[VirtualCluster, Path]) -> None:
    cluster, agent = ssh_cluster
    got = subprocess.run(
        cluster.exec_argv(0, [str(agent), "h1", "cat /proc/net/dev"]),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert got.returncode == 0 and "fab0" in got.stdout, got.stderr
