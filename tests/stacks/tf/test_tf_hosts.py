"""The TensorFlow suite's 'hosts' placement on real hosts reached by real ssh.

The hosts are the namespaces of a virtual cluster, each running its own sshd on its fabric
address (tests/sshd_hosts.py). pytest runs on the first host, as a user runs it on a cluster's
first node: `pytest --hpc-fabric=ethernet --hpc-hosts=h0,h1 --hpc-rsh-agent=...`. Task i runs
on host i mod 2 at its fabric address: h0's tasks start here, h1's over ssh with their
variables (the channel's key) on stdin, and every task dials home over TCP to h0's fabric
address. Checked: bit-exact transfers and a killed ps task, the ring all-reduce, the
parameter-server training and the RecvTensor sweep pass with results carrying placement=hosts,
the bytes crossed h1's link, and no task is left on either host.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from hpccomm_suites import DIR as SUITES_DIR
from pytest_hpccomm.cluster.virtual import VirtualCluster
from pytest_hpccomm.stacks.tf.env import CACHE_VAR, TfEnv, cache_root
from pytest_hpccomm.stacks.tf.wire import TASK_VAR
from tests.sshd_hosts import still_running

ROOT = Path(__file__).resolve().parents[3]
ITEMS = (
    "test_traffic_takes_the_fabric or test_tensor_over_4_mib_crosses_bit_exact or "
    "test_a_killed_task_is_an_error_not_a_hang or test_allreduce_traffic_takes_the_fabric "
    "or test_coordinated_training_matches_one_process or test_tf_recv_tensor"
)

pytestmark = [pytest.mark.needs_root, pytest.mark.slow]


def test_tf_suite_runs_on_hosts_over_ssh(
    tf_env: TfEnv, ssh_cluster: tuple[VirtualCluster, Path], tmp_path: Path
) -> None:
    cluster, agent = ssh_cluster
    results = tmp_path / "results.json"
    argv = [
        sys.executable,
        "-m",
        "pytest",
        str(SUITES_DIR / "tf"),
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
        "--hpc-sizes=16,64K",
        "--hpc-history=none",
        f"--hpc-baselines={tmp_path / 'bl'}",
        f"--hpc-results={results}",
        "--hpc-system=hosts-test",
    ]
    before = cluster.counters(1)
    job = cluster.run_job(
        0,
        argv,
        env={**os.environ, CACHE_VAR: str(cache_root()), "PYTHONPATH": str(ROOT)},
        timeout=900,
    )
    rx, tx = (a - b for a, b in zip(cluster.counters(1), before))
    assert job.ok, job.describe() + job.stdout[-4000:]
    summary = job.stdout.strip().splitlines()[-1]
    # 2 transfers, a killed task, the ring, 2 trainings, 2 sweep points
    assert "skipped" not in summary and "8 passed" in summary, job.stdout[-3000:]
    records = [r["measurement"] for r in json.loads(results.read_text())["results"]]
    assert {m["params"]["placement"] for m in records} == {"hosts"}
    assert {m["params"]["size"] for m in records} == {16, 65536}
    # 2 MiB and 5 MiB each way between ps:0 (h0) and worker:0 (h1), and a 4 MiB ring
    assert rx > 8 * 2**20 and tx > 8 * 2**20, (rx, tx)
    left = still_running(cluster, "environ", [f"{TASK_VAR}=".encode()])  # h1's end with ssh
    assert not left, f"TensorFlow tasks left on the hosts: {left}"
