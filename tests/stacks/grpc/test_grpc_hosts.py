"""The gRPC perf suite's 'hosts' placement on real hosts reached by real ssh.

The hosts are the namespaces of a virtual cluster, each running its own sshd on its fabric
address (tests/sshd_hosts.py). pytest runs on h0 as a user runs it on a cluster's first node:
`pytest --hpc-fabric=ethernet --hpc-hosts=h0,h1 --hpc-rsh-agent=...`. Servers start on h0 at
its fabric address, clients on h1 over ssh (their environment on stdin); the PS workers on h1
get each segment's start written there over ssh. Checked: the p2p and PS items of the native
and python peers pass with results carrying placement=hosts, the bandwidth payload crossed h1's
link, no peer is left on either host; with one host the items fail saying why.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from hpccomm_suites import DIR as SUITES_DIR
from pytest_hpccomm.cluster.virtual import VirtualCluster
from pytest_hpccomm.proc.jobs import JobResult
from pytest_hpccomm.stacks.grpc.build import NativeBuild
from tests.native_grpc import native_build_or_skip
from tests.sshd_hosts import still_running

ROOT = Path(__file__).resolve().parents[3]
SUITE = SUITES_DIR / "grpc" / "test_perf_tf_grpc_bench.py"
PEER_MARKS = ("hpcc_grpc_peer", "pytest_hpccomm.stacks.grpc.peer")

pytestmark = [pytest.mark.needs_root, pytest.mark.slow]


@pytest.fixture(scope="module")
def native() -> NativeBuild:
    return native_build_or_skip()


def suite_on_h0(
    cluster: VirtualCluster, agent: Path, tmp_path: Path, hosts: str, *args: str
) -> JobResult:
    argv = [
        sys.executable,
        "-m",
        "pytest",
        str(SUITE),
        "-q",
        "-rs",
        "-p",
        "no:cacheprovider",
        "--import-mode=importlib",
        "--hpc-fabric=ethernet",
        f"--hpc-hosts={hosts}",
        f"--hpc-rsh-agent={agent}",
        "--hpc-grpc-modes=raw",
        "--hpc-history=none",
        f"--hpc-baselines={tmp_path / 'bl'}",
        "--hpc-system=hosts-test",
        *args,
    ]
    return cluster.run_job(0, argv, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=900)


def test_grpc_suite_runs_on_hosts_over_ssh(
    native: NativeBuild, ssh_cluster: tuple[VirtualCluster, Path], tmp_path: Path
) -> None:
    cluster, agent = ssh_cluster
    results = tmp_path / "results.json"
    before = cluster.counters(1)
    job = suite_on_h0(
        cluster,
        agent,
        tmp_path,
        "h0,h1",
        "-k",
        "test_tf_grpc_bench and uniform-medium",
        "--hpc-grpc-peers=native,python",
        f"--hpc-grpc-build={native.directory}",
        f"--hpc-results={results}",
    )
    rx, tx = (a - b for a, b in zip(cluster.counters(1), before))
    assert job.ok, job.describe() + job.stdout[-4000:]
    summary = job.stdout.strip().splitlines()[-1]
    # p2p latency and bandwidth, PS throughput, mimic step; two peer kinds
    assert "skipped" not in summary and "8 passed" in summary, job.stdout[-3000:]
    records = [r["measurement"] for r in json.loads(results.read_text())["results"]]
    assert {m["params"]["placement"] for m in records} == {"hosts"}
    assert len(records) == 8, [m["benchmark"] for m in records]
    sent = sum(
        m["params"]["bytes"] * sum(m["extra"]["iterations_per_sample"])
        for m in records
        if m["benchmark"] == "tf_grpc_p2p_bandwidth"
    )
    assert sent > 0 and tx >= sent, (tx, sent)  # the clients were on h1, the servers away
    assert rx > 0, rx
    left = still_running(cluster, "cmdline", [m.encode() for m in PEER_MARKS])
    assert not left, f"gRPC peers left on the hosts: {left}"


def test_one_host_is_a_clear_failure(
    ssh_cluster: tuple[VirtualCluster, Path], tmp_path: Path
) -> None:
    cluster, agent = ssh_cluster
    job = suite_on_h0(
        cluster,
        agent,
        tmp_path,
        "h0",
        "-k",
        "test_tf_grpc_bench and p2p_latency and uniform-medium",
        "--hpc-grpc-peers=python",
    )
    assert job.returncode == 1, job.describe() + job.stdout[-3000:]
    assert "1 failed" in job.stdout and "--hpc-hosts must name at least 2" in job.stdout, (
        job.stdout[-3000:]
    )
