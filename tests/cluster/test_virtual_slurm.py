"""A real SLURM (Debian's munge, slurmctld, slurmd) on the virtual cluster, no mocks.

Checked: srun places one task per host and each says its own name; sbatch --wait gives back
the batch script's exit status; the allocation's SLURM_JOB_NODELIST / SLURM_TASKS_PER_NODE,
as SLURM itself sets them, parse with the project's parser to h0,h1; bad input (more nodes
than exist, a dead controller) fails fast naming the cause; nothing of SLURM or munge outlives
the context, and the cluster's teardown or a crash of the owner still ends the daemons.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pytest_hpccomm.cluster.hosts import Host, hosts_from_slurm
from pytest_hpccomm.cluster.virtual import (
    ClusterUnavailable,
    VirtualCluster,
    cleanup_leftovers,
    pids_in_netns,
)
from pytest_hpccomm.cluster.virtual import unavailable_reason as no_cluster
from tests.cluster.clusterkit import Snapshot, live
from tests.virtual_slurm import SLURMD_PORT, SlurmError, VirtualSlurm, slurm_conf
from tests.virtual_slurm import unavailable_reason as no_slurm

pytestmark = pytest.mark.needs_root
ROOT = Path(__file__).resolve().parents[2]


def _skip_unless_possible() -> None:
    reason = no_cluster() or no_slurm()
    if reason:
        pytest.skip(reason)


@pytest.fixture(scope="class")
def slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VirtualSlurm]:
    _skip_unless_possible()
    try:
        cluster = VirtualCluster(2).__enter__()
    except ClusterUnavailable as exc:
        pytest.skip(f"virtual cluster unavailable: {exc}")
    try:
        with VirtualSlurm(cluster, tmp_path_factory.mktemp("slurm"), daemon_timeout=900) as s:
            print(f"SLURM up in {s.startup_seconds:.2f}s")
            yield s
        print(f"SLURM down in {s.teardown_seconds:.2f}s: {s.stop_seconds}")
    finally:
        cluster.teardown()


class TestOneSharedCluster:
    """On one cluster for the class (torn down before the leak-checked tests below)."""

    def test_srun_runs_one_task_on_each_host(self, slurm: VirtualSlurm) -> None:
        r = slurm.run(0, ["srun", "-N2", "-l", "hostname"], timeout=60)
        assert r.ok, r.describe()
        assert sorted(r.stdout.split()) == ["0:", "1:", "h0", "h1"], r.stdout
        assert r.elapsed < 10, r.elapsed

    def test_the_diagnosis_names_each_node_and_quotes_the_daemons_logs(
        self, slurm: VirtualSlurm
    ) -> None:
        d = slurm.diagnosis()
        assert "SLURM nodes: h0 idle" in d and "h1 idle" in d, d
        for daemon in ("slurmctld", "slurmd@h0", "slurmd@h1", "munged"):
            assert f"{daemon} running" in d, d
        assert str(slurm.log_path("slurmd@h1")) in d and "slurmd started" in d, d
        # the fabric: h0 reaches h1 by TCP, and each host's link with its counters
        assert "h0 -> h1" in d and "connect: ok" in d, d
        assert "h1 ip -s: " in d and "RX:" in d and "switch bridge:" in d, d

    def test_sbatch_wait_returns_the_scripts_status(
        self, slurm: VirtualSlurm, tmp_path: Path
    ) -> None:
        out = tmp_path / "job.out"
        script = tmp_path / "job.sh"
        script.write_text(
            "#!/bin/sh\nsrun hostname | sort | tr '\\n' ' '\n"
            'echo "nodes=$SLURM_JOB_NODELIST"\nexit "$1"\n'
        )
        script.chmod(0o755)
        ok = slurm.run(0, ["sbatch", "-N2", "--wait", "-o", str(out), str(script), "0"], timeout=90)
        assert ok.ok, ok.describe()
        assert out.read_text().split() == ["h0", "h1", "nodes=h[0-1]"], out.read_text()
        failed = slurm.run(
            0, ["sbatch", "-N2", "--wait", "-o", str(out), str(script), "3"], timeout=90
        )
        assert failed.returncode == 3 and not failed.timed_out, failed.describe()

    def test_allocation_variables_parse_with_our_parser(self, slurm: VirtualSlurm) -> None:
        r = slurm.run(1, ["salloc", "-N2", "--immediate=10", "env", "-0"], timeout=60)
        assert r.ok, r.describe()
        env = dict(item.split("=", 1) for item in r.stdout.split("\0") if "=" in item)
        assert env["SLURM_JOB_NODELIST"] == "h[0-1]" and env["SLURM_TASKS_PER_NODE"] == "1(x2)"
        assert hosts_from_slurm(env) == [Host("h0", 1), Host("h1", 1)]

    def test_an_allocation_larger_than_the_cluster_fails_naming_why(
        self, slurm: VirtualSlurm
    ) -> None:
        r = slurm.run(0, ["srun", "-N3", "--immediate=10", "hostname"], timeout=60)
        assert r.returncode != 0 and not r.timed_out, r.describe()
        # refused at submission (EnforcePartLimits=ALL), not left pending until --immediate
        assert (
            "Unable to allocate resources: More processors requested than permitted" in r.stderr
        ), r.stderr
        assert r.elapsed < 5, r.elapsed

    def test_a_failing_srun_step_is_a_failure(self, slurm: VirtualSlurm) -> None:
        r = slurm.run(
            0,
            [
                "srun",
                "-N2",
                "--kill-on-bad-exit=1",
                "sh",
                "-c",
                'test "$SLURM_NODEID" = 0 || exit 7',
            ],
            timeout=60,
        )
        assert r.returncode == 7, r.describe()
        assert "exited with exit code 7" in r.stderr.lower(), r.stderr


def _daemon_pids(s: VirtualSlurm) -> set[int]:
    pids = set()
    for job in s.daemons.values():
        pids.add(job.pid)
        pids |= {p.pid for p in job.processes()}
    return pids


def test_lifecycle_dead_controller_and_nothing_left(
    no_leaks: Snapshot, tmp_path: Path, record_property: Callable[[str, object], None]
) -> None:
    """Start-up and teardown timed; with slurmctld stopped srun fails within seconds saying
    so; on leaving, no daemon of ours is alive and the namespaces are empty."""
    _skip_unless_possible()
    with VirtualCluster(2) as vc:
        with VirtualSlurm(vc, tmp_path, daemon_timeout=300) as s:
            assert set(s.daemons) == {"munged", "slurmctld", "slurmd@h0", "slurmd@h1"}
            pids = _daemon_pids(s)
            assert s.run(1, ["srun", "-N2", "true"], timeout=30).ok
            s.daemons["slurmctld"].stop()
            r = s.run(1, ["srun", "-N2", "hostname"], timeout=60)
            assert r.returncode != 0 and not r.timed_out, r.describe()
            assert "Unable to contact slurm controller" in r.stderr, r.stderr
            assert r.elapsed < 3 * s.message_timeout + 5, r.elapsed
        assert s.startup_seconds is not None and s.teardown_seconds is not None
        print(
            f"start-up {s.startup_seconds:.2f}s, teardown {s.teardown_seconds:.2f}s, "
            f"srun against a dead controller failed after {r.elapsed:.1f}s"
        )
        record_property("slurm_startup_s", round(s.startup_seconds, 3))
        record_property("slurm_teardown_s", round(s.teardown_seconds, 3))
        assert s.startup_seconds < 20 and s.teardown_seconds < 15
        assert not [p for p in pids if live(p)]
        assert vc.pids() == []
        assert not s.daemons


BUSY_PORT = """
import socket, sys, time
s = socket.socket()
s.bind(("0.0.0.0", int(sys.argv[1])))
s.listen()
print("ready", flush=True)
time.sleep(120)
"""


def test_a_daemon_that_cannot_start_is_named_with_its_log(
    no_leaks: Snapshot, tmp_path: Path
) -> None:
    """h1's slurmd port taken: start-up fails at once naming slurmd@h1 and quoting its log,
    and stops what it had started."""
    _skip_unless_possible()
    with VirtualCluster(2) as vc:
        squatter = vc.start_job(1, [sys.executable, "-c", BUSY_PORT, str(SLURMD_PORT)], timeout=120)
        deadline = time.monotonic() + 10
        while "ready" not in squatter.peek_output()[0] and time.monotonic() < deadline:
            time.sleep(0.05)
        s = VirtualSlurm(vc, tmp_path, daemon_timeout=300, start_timeout=20)
        t0 = time.monotonic()
        with pytest.raises(SlurmError) as err:
            s.start()
        assert time.monotonic() - t0 < 15
        assert "died: slurmd@h1 exited 1" in str(err.value), err.value
        assert f"Unable to bind listen port ({SLURMD_PORT})" in str(err.value), err.value
        assert not s.daemons
        squatter.stop()
        assert vc.pids() == []


def test_cluster_teardown_ends_daemons_left_running(no_leaks: Snapshot, tmp_path: Path) -> None:
    """An owner that never stops SLURM (an exception between the two `with`s): the cluster's
    teardown kills the daemons by PID from its manifest and namespaces."""
    _skip_unless_possible()
    vc = VirtualCluster(2).__enter__()
    s = VirtualSlurm(vc, tmp_path, daemon_timeout=300)
    try:
        s.start()
        pids = _daemon_pids(s)
        assert len(pids) >= 8  # 4 shims + 4 daemons
        vc.teardown()
        assert not [p for p in pids if live(p)]
    finally:
        vc.teardown()
        s.stop()  # reaps the shims the teardown killed


HOLDER = """
import sys, time
from pathlib import Path
from pytest_hpccomm.cluster.virtual import VirtualCluster
from tests.virtual_slurm import VirtualSlurm
vc = VirtualCluster(2, state_dir=sys.argv[1]).__enter__()
s = VirtualSlurm(vc, Path(sys.argv[2]), daemon_timeout=300).__enter__()
print(vc.prefix, *[p.pid for j in s.daemons.values() for p in j.processes()], flush=True)
time.sleep(300)
"""


def test_a_killed_owner_leaves_no_daemon_and_cleanup_removes_the_rest(
    no_leaks: Snapshot, tmp_path: Path
) -> None:
    _skip_unless_possible()
    state = tmp_path / "state"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(state), str(tmp_path / "w")],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        preexec_fn=lambda: signal.signal(signal.SIGTERM, signal.SIG_DFL),
    )
    try:
        assert holder.stdout is not None
        words = holder.stdout.readline().split()
        assert len(words) >= 5, f"holder did not start SLURM: {words}"
        prefix, pids = words[0], [int(w) for w in words[1:]]
        holder.kill()  # no handler, no atexit, no stop()
        holder.wait(10)
        deadline = time.monotonic() + 15  # the job shims' PDEATHSIG ends them
        while [p for p in pids if live(p)] and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not [p for p in pids if live(p)]
        assert cleanup_leftovers(state) == [prefix]
        assert pids_in_netns([f"{prefix}-h0", f"{prefix}-h1"]) == []
    finally:
        if holder.poll() is None:
            holder.kill()
        holder.wait(10)
        cleanup_leftovers(state)


def test_conf_names_every_host_once_with_its_address(tmp_path: Path) -> None:
    from pytest_hpccomm.cluster.virtual import VirtualHost

    hosts = [VirtualHost("h0", "10.1.2.1", "x-h0", 0), VirtualHost("h1", "10.1.2.2", "x-h1", 1)]
    conf = slurm_conf(hosts, tmp_path, tmp_path / "m.sock")
    assert "SlurmctldHost=h0(10.1.2.1)" in conf
    assert "NodeName=h1 NodeAddr=10.1.2.2 NodeHostname=h1 CPUs=1" in conf
    assert f"TmpFS={tmp_path}/%n/tmp" in conf and f"AuthInfo=socket={tmp_path}/m.sock" in conf
    assert "Nodes=h0,h1 Default=YES" in conf
