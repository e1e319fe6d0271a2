"""The Horovod suite's 'hosts' placement on real hosts reached by real ssh.

The hosts are the namespaces of a virtual cluster, each running its own sshd on its fabric
address (tests/sshd_hosts.py). pytest runs on the first host, as a user runs it on a cluster's
first node: `pytest --hpc-fabric=ethernet --hpc-hosts=h0,h1 --hpc-rsh-agent=...`. The MPI
controller's ranks start under mpirun over ssh, TCP pinned to the fabric's netdev; the Gloo
ranks start over the remote shell with Horovod's variables (and the channel's key) on stdin;
every rank dials home over TCP to h0's fabric address. Checked: conformance, a killed rank and
the allreduce sweep pass for both controllers, results carry placement=hosts, and the bytes
crossed the far host's link.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from hpccomm_suites import DIR as SUITES_DIR
from pytest_hpccomm.cluster.mpi import CACHE_VAR as MPI_CACHE_VAR
from pytest_hpccomm.cluster.mpi import mpi_cache
from pytest_hpccomm.cluster.virtual import VirtualCluster
from pytest_hpccomm.stacks.horovod.env import CACHE_VAR, HorovodEnv, cache_root

ROOT = Path(__file__).resolve().parents[3]
CACHES = {MPI_CACHE_VAR: str(mpi_cache()), CACHE_VAR: str(cache_root())}
ITEMS = (
    "(test_hvd_allreduce and not knobs) or test_allreduce_matches_numpy or "
    "test_traffic_takes_the_fabric or test_peers_report_their_controller or "
    "test_a_killed_rank_ends_the_job"
)

pytestmark = [pytest.mark.needs_root, pytest.mark.slow]


def test_horovod_suite_runs_on_hosts_over_ssh(
    horovod_env: HorovodEnv, ssh_cluster: tuple[VirtualCluster, Path], tmp_path: Path
) -> None:
    cluster, agent = ssh_cluster
    results = tmp_path / "results.json"
    argv = [
        sys.executable,
        "-m",
        "pytest",
        str(SUITES_DIR / "horovod"),
        "-q",
        "-rs",
        "-p",
        "no:cacheprovider",
        "--import-mode=importlib",
        "-k",
        ITEMS,
        "--hpc-fabric=ethernet",
        "--hpc-hosts=h0,h1",
        f"--hpc-rsh-agent={agent}",
        "--hpc-bind=none",
        "--hpc-sizes=16,64K",
        "--hpc-history=none",
        f"--hpc-baselines={tmp_path / 'bl'}",
        f"--hpc-results={results}",
        "--hpc-system=hosts-test",
    ]
    before = cluster.counters(1)
    job = cluster.run_job(
        0, argv, env={**os.environ, **CACHES, "PYTHONPATH": str(ROOT)}, timeout=1200
    )
    rx, tx = (a - b for a, b in zip(cluster.counters(1), before))
    assert job.ok, job.describe() + job.stdout[-4000:]
    summary = job.stdout.strip().splitlines()[-1]
    assert "skipped" not in summary and "passed" in summary, job.stdout[-3000:]
    records = [r["measurement"] for r in json.loads(results.read_text())["results"]]
    assert {m["params"]["placement"] for m in records} == {"hosts"}
    points = {(m["params"]["controller"], m["params"]["size"]) for m in records}
    assert points == {(c, s) for c in ("mpi", "gloo") for s in (16, 65536)}, points
    # every item above moves bytes between the hosts; the 4 MiB traffic check alone sends
    # h0 -> h1 2 MiB per controller
    assert rx > 4 * 2**20 and tx > 4 * 2**20, (rx, tx)
