"""MPI across the virtual cluster (--hpc-launcher=netns), for real: Open MPI 4 and 5, MPICH.

Each test proves with the veths' byte counters that the ranks' traffic crossed the fabric
(MPICH would otherwise move it through /dev/shm, which the namespaces share)."""

from __future__ import annotations

import dataclasses
import json
import re
import time

import pytest

from pytest_hpccomm.cluster.hosts import Host
from pytest_hpccomm.cluster.launchers import LaunchSpec
from pytest_hpccomm.cluster.launchers.mpirun import (
    INIT_FAILURE,
    MpirunLauncher,
    run_ending_at_init_failure,
)
from pytest_hpccomm.cluster.launchers.netns import NetnsLauncher
from pytest_hpccomm.cluster.netns_teardown import run_command
from pytest_hpccomm.cluster.virtual import VirtualCluster
from pytest_hpccomm.proc.jobs import start_job
from tests.cluster.clusterkit import HERE, MpiEnv, Snapshot, mpi_env

pytestmark = pytest.mark.needs_root
PROBE = str(HERE / "mpi_probe.py")
NBYTES = 20_000_000
NO_CARRIER = "hpcnocarrier"


def ranks(stdout: str) -> list[dict[str, object]]:
    # mpirun forwards each rank's output as it comes: two ranks' lines can share one line
    found = (json.loads(m) for m in re.findall(r'\{"rank":[^{}]*\}', stdout))
    return sorted(found, key=lambda r: int(r["rank"]))


@pytest.mark.parametrize("name", ["openmpi", "openmpi4", "mpich"])
def test_one_rank_per_virtual_host(no_leaks: Snapshot, name: str) -> None:
    env = mpi_env(name)
    with VirtualCluster(3) as vc:
        launcher = NetnsLauncher(vc, env.mpirun)
        before = vc.all_counters()
        res = launcher.run(
            LaunchSpec([env.python, PROBE, str(NBYTES)], launcher.hosts()), timeout=60
        )
        after = vc.all_counters()
    assert res.ok, res.describe() + "\n" + res.stderr[-2000:]
    got = ranks(res.stdout)
    assert [r["rank"] for r in got] == [0, 1, 2]
    assert [r["hostname"] for r in got] == ["h0", "h1", "h2"]  # distinct hostnames, one rank each
    # rank 0 on h0 sent NBYTES to h1 and h2 and got them back: each link carried both ways
    for h in ("h1", "h2"):
        rx, tx = (after[h][i] - before[h][i] for i in (0, 1))
        assert rx >= NBYTES and tx >= NBYTES, (
            f"{name}: {h} rx={rx} tx={tx}: traffic did not cross the veth"
        )
    rx0, tx0 = (after["h0"][i] - before["h0"][i] for i in (0, 1))
    assert rx0 >= 2 * NBYTES and tx0 >= 2 * NBYTES


def test_counters_catch_mpich_shared_memory(cluster_ok: None) -> None:
    """The instrument itself: unpinned, MPICH moves the bytes through /dev/shm and the veth sees
    almost nothing; this is why the netns launcher pins it to TCP."""
    env = mpi_env("mpich")
    with VirtualCluster(2) as vc:
        unpinned = MpirunLauncher(env.mpirun, rsh_agent=vc.agent_path).command(
            LaunchSpec([env.python, PROBE, str(NBYTES)], [Host("h0"), Host("h1")], bind_none=True)
        )
        before = vc.counters(1)[0]
        res = run_ending_at_init_failure(
            dataclasses.replace(unpinned, argv=vc.exec_argv(0, unpinned.argv)),
            timeout=60,
            netns_pids_hook=vc.pids,
            label="unpinned MPICH on h0,h1",
        )
        crossed = vc.counters(1)[0] - before
    assert res.ok, res.describe()
    # both ranks exchanged their NBYTES, one on each host: the bytes had a veth to cross
    assert [r["hostname"] for r in ranks(res.stdout)] == ["h0", "h1"], res.stdout
    assert crossed < NBYTES / 10, (
        f"unpinned MPICH put {crossed} bytes on the veth: field note outdated?"
    )


def test_mpich_init_without_a_running_interface_ends_at_once_naming_it(
    no_leaks: Snapshot,
) -> None:
    """FI_TCP_IFACE names a link that is up without carrier on every host: MPICH's MPI_Init
    fails in libfabric's tcp provider with 'ep_enable failed ... Bad file descriptor' (the
    defects catalogue), after which mpiexec often hangs. The job must end within seconds, not
    at its timeout, and say which interface was not RUNNING; nothing retries it."""
    env = mpi_env("mpich")
    with VirtualCluster(2) as vc:
        for h in vc.hosts:  # its peer stays down: up, never RUNNING
            run_command(["ip", "-n", h.netns, "link", "add", NO_CARRIER, "type", "veth"])
            run_command(["ip", "-n", h.netns, "link", "set", NO_CARRIER, "up"])
        launcher = NetnsLauncher(vc, env.mpirun)
        launch = launcher.command(LaunchSpec([env.python, PROBE, "8"], launcher.hosts()))
        res = run_ending_at_init_failure(
            dataclasses.replace(launch, env={**launch.env, "FI_TCP_IFACE": NO_CARRIER}),
            timeout=60,
            netns_pids_hook=vc.pids,
            on_start=vc.register_pid,
            label=f"MPICH with FI_TCP_IFACE={NO_CARRIER} on h0,h1",
        )
    assert not res.ok and not res.timed_out, res.describe()
    assert INIT_FAILURE in res.stderr, res.describe()
    assert res.elapsed < 30, f"not ended at the MPI_Init abort: {res.describe()}"
    assert f"FI_TCP_IFACE={NO_CARRIER} not RUNNING" in res.describe(), res.describe()


def run_with_fault(
    vc: VirtualCluster, env: MpiEnv, fault: str, timeout: float
) -> tuple[float, str]:
    """Start a long MPI job, inject the fault once every rank runs; return (elapsed, describe)."""
    launcher = NetnsLauncher(vc, env.mpirun)
    launch = launcher.command(LaunchSpec([env.python, PROBE, "1000", "60"], launcher.hosts()))
    t0 = time.monotonic()
    job = start_job(
        launch.argv,
        launch.env,
        timeout=timeout,
        grace=1.0,
        netns_pids_hook=launcher.pids_hook,
        on_start=vc.register_pid,
        label=f"{launcher.flavor} job with {fault} on h1",
        scratch=launch.scratch,
    )
    while job.peek_output()[0].count('{"rank"') < len(vc.hosts) and job.poll() is None:
        if time.monotonic() - t0 > timeout:
            break
        time.sleep(0.02)
    if job.poll() is None:
        if fault == "cut":
            vc.cut(1)
        else:
            vc.loss(1, 100)
    res = job.wait()
    elapsed = time.monotonic() - t0
    assert not res.ok, "the job survived the fault"
    return elapsed, res.describe()


@pytest.mark.parametrize("name, fault", [("openmpi", "cut"), ("mpich", "loss")])
def test_fault_ends_the_job_within_twice_its_timeout(
    no_leaks: Snapshot, name: str, fault: str
) -> None:
    env = mpi_env(name)
    timeout = 4.0
    with VirtualCluster(2) as vc:
        elapsed, why = run_with_fault(vc, env, fault, timeout)
    print(f"{name} {fault}: ended after {elapsed:.2f}s: {why}")
    assert elapsed < 2 * timeout
    assert f"{fault} on h1" in why and ("timed out" in why or "exit" in why)


@pytest.mark.slow
def test_twenty_faults_in_a_row_leak_nothing(no_leaks: Snapshot) -> None:
    envs = [mpi_env("openmpi"), mpi_env("mpich")]
    timeout = 2.5
    worst = 0.0
    for i in range(20):
        with VirtualCluster(2) as vc:
            elapsed, why = run_with_fault(vc, envs[i % 2], "cut" if i % 4 < 2 else "loss", timeout)
        worst = max(worst, elapsed)
        assert elapsed < 2 * timeout, f"fault {i}: {why}"
    print(f"20 faults: worst end {worst:.2f}s for a {timeout}s timeout")
    # no_leaks checks: namespaces, /etc/netns, manifests, root links, job processes, zombies
