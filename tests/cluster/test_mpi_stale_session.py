"""Open MPI after a killed job, for real: its session directory /tmp/ompi.<mpirun PID> stays
behind, and once PIDs wrap (pid_max 32768 here) a later mpirun with that PID and the same
hostname (virtual hosts are h0, h1... in every cluster) dies at start: "The PMIx server's
listener thread failed to start", exit 213 within 0.1 s — every item of that sweep failed in
CI. The launchers give each job on this machine a session directory of its own
(MpirunLauncher(private_session=True)); this test plants the stale directories for the next
PIDs and runs a job both ways."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_hpccomm.cluster.hosts import Host
from pytest_hpccomm.cluster.launchers import LaunchSpec
from pytest_hpccomm.cluster.launchers.mpirun import MpirunLauncher
from pytest_hpccomm.proc.jobs import JobResult, run_job
from tests.cluster.clusterkit import mpi_env

pytestmark = pytest.mark.needs_root  # a UTS namespace, to run under the hostname h0
AHEAD = 400  # PIDs planted past the last one the kernel handed out
HOSTNAME = "h0"


def last_pid() -> int:
    return int(Path("/proc/loadavg").read_text().split()[-1])


@pytest.fixture
def stale_sessions() -> Iterator[range]:
    """/tmp/ompi.<pid> as a killed Open MPI 5 job under hostname h0 leaves it, for the next
    AHEAD PIDs; made in this process (no PID spent) and removed after, exactly those."""
    first = last_pid() + 1
    made = []
    try:
        for pid in range(first, first + AHEAD):
            d = Path(f"/tmp/ompi.{pid}")
            try:
                d.mkdir(mode=0o700)
            except FileExistsError:
                continue
            made.append(d)
            (d / f"pmix.{HOSTNAME}.tool").write_text("stale\n")
        yield range(first, first + AHEAD)
    finally:
        for d in made:
            shutil.rmtree(d, ignore_errors=True)


def run_as_h0(private_session: bool) -> tuple[JobResult, int]:
    env = mpi_env("openmpi")
    launch = MpirunLauncher(env.mpirun, private_session=private_session).command(
        LaunchSpec(["true"], [Host("localhost")], ranks_per_host=2, bind_none=True)
    )
    argv = ["unshare", "--uts", "sh", "-c", f'hostname {HOSTNAME} && exec "$@"', "sh", *launch.argv]
    before = last_pid()
    result = run_job(
        argv, launch.env, timeout=60, scratch=launch.scratch, label=f"mpirun as {HOSTNAME}"
    )
    return result, before


def test_a_private_session_directory_survives_stale_ones(stale_sessions: range) -> None:
    result, before = run_as_h0(private_session=True)
    assert before + 10 < stale_sessions.stop, "the planted PIDs were used up by others"
    assert result.ok, result.describe()


def test_without_it_a_stale_session_directory_kills_the_job(stale_sessions: range) -> None:
    """The hazard itself (should Open MPI stop tripping over it, this fails, and the private
    directories may go)."""
    result, before = run_as_h0(private_session=False)
    assert before + 10 < stale_sessions.stop, "the planted PIDs were used up by others"
    assert not result.ok and "listener thread failed to start" in result.describe(), (
        result.describe()
    )
