"""The contention guard's meter on real processes: a neighbour's busy loop counts as foreign,
the job's own work (and its children's) does not."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from pytest_hpccomm import retries
from pytest_hpccomm.proc.cpu_share import CpuShare, JobsCpu, QuietRetry, evidence, of_jobs
from pytest_hpccomm.proc.jobs import TAG_VAR, run_job, start_job
from tests.neighbour import BUSY, busy_neighbour


@pytest.fixture
def neighbour() -> Iterator[int]:
    with busy_neighbour(60.0) as pid:
        yield pid


def test_a_neighbours_busy_loop_marks_the_job_disturbed(neighbour: int) -> None:
    res = run_job([sys.executable, "-c", BUSY.format(s=1.5)], timeout=30, label="busy job")
    assert res.ok and res.cpu is not None
    # the neighbour had at least a third of the 2+ cores' time (3 runnable loops on 2 cores)
    assert res.cpu.foreign_cores >= 0.3, res.cpu
    assert res.cpu.disturbed.startswith("cores shared: other processes used ")
    # the machine's own account goes with it: load average and runnable tasks
    assert "load average" in res.cpu.disturbed and "runnable" in res.cpu.disturbed
    # and who it was: the neighbour first among the busiest, by PID and command line
    assert res.cpu.others and res.cpu.others[0][0].startswith(f"{neighbour} "), res.cpu.others
    assert "time.monotonic" in res.cpu.others[0][0] and res.cpu.others[0][1] >= 0.3
    assert f"busiest: {neighbour} " in res.cpu.disturbed


def test_a_reading_keeps_load_run_queue_and_clock() -> None:
    res = run_job([sys.executable, "-c", BUSY.format(s=0.3)], timeout=30, label="short job")
    assert res.ok and res.cpu is not None
    got = res.cpu.to_json()
    assert isinstance(got["load1"], float) and got["load1"] >= 0
    start, end = got["run_queue"]
    assert start >= 1 and end >= 1  # this process was running when it read them
    assert got["mhz"] is None or got["mhz"] > 0
    ev = evidence([got], "", 0)
    assert ev["load1"] == [got["load1"]] and ev["run_queue"] == [[start, end]]


def test_the_jobs_own_work_and_its_childrens_count_as_own() -> None:
    # a shell that starts a busy child (reaped by the shell, the shell by the shim); the child
    # prints the CPU time it really got, whatever else the machine was doing meanwhile
    busy = BUSY.format(s=1.5) + "\nprint(time.process_time())"
    res = run_job(
        ["sh", "-c", f"{sys.executable} -c '{busy}'; true"], timeout=30, label="busy child"
    )
    assert res.ok and res.cpu is not None
    child_cpu = float(res.stdout.split()[-1])
    assert res.cpu.own_cores * res.cpu.wall >= 0.9 * child_cpu, (res.cpu, child_cpu)


def test_disturbed_needs_more_than_the_quiet_share() -> None:
    quiet = CpuShare(wall=2.0, cpus=2, busy_cores=1.05, own_cores=1.0, steal_cores=0.0)
    assert quiet.disturbed == ""
    loud = CpuShare(wall=2.0, cpus=2, busy_cores=1.6, own_cores=1.0, steal_cores=0.2)
    assert loud.disturbed == (
        "cores shared: other processes used 0.60 of 2 cores over 2.0 s, "
        "0.20 stolen by the hypervisor (quiet: <= 0.10)"
    )
    named = CpuShare(
        wall=2.0,
        cpus=2,
        busy_cores=1.6,
        own_cores=1.0,
        steal_cores=0.0,
        others=(("812 python3 peer.py", 0.5), ("9 [ksoftirqd/1]", 0.08)),
    )
    assert named.disturbed.endswith(
        "; busiest: 812 python3 peer.py (0.50), 9 [ksoftirqd/1] (0.08) (quiet: <= 0.10)"
    )
    assert named.to_json()["others"] == [["812 python3 peer.py", 0.5], ["9 [ksoftirqd/1]", 0.08]]
    wide = CpuShare(wall=2.0, cpus=128, busy_cores=3.0, own_cores=1.0, steal_cores=0.0)
    assert wide.quiet_limit == pytest.approx(2.56) and wide.disturbed == ""
    assert evidence([quiet.to_json(), loud.to_json()], loud.disturbed, 1) == {
        "foreign_cores": [0.05, 0.6],
        "disturbed": loud.disturbed,
        "reruns": 1,
        "load1": [None, None],
        "run_queue": [[None, None], [None, None]],
        "mhz": [None, None],
        "others": [[], []],
    }


def test_retries_stop_while_the_machine_stays_loaded_and_rearm_once_it_is_quiet(
    retry_ledger: list[retries.Retry],
) -> None:
    # its own ledger: these stand-in re-runs had made every run of the test command report 4
    # "cores shared" retries that no job needed
    retry = QuietRetry(reruns=2, streak=3)
    loads = iter(["busy", "", "busy", "busy", "busy", "busy", "", "busy", ""])
    runs = [retry.run(lambda: next(loads), lambda why: why) for _ in range(5)]
    # job 1: one re-run got quiet cores; job 2: 2 re-runs, all loaded (streak 3 reached);
    # job 3: loaded, no re-run while the streak lasts; job 4: quiet; job 5: re-run again
    assert runs == [("", 1), ("busy", 2), ("busy", 0), ("", 0), ("", 1)]
    assert retry.extra_runs == 4
    assert [(r.cause, r.reason) for r in retry_ledger] == [(retries.CONTENTION, "busy")] * 4


def test_of_jobs_keeps_each_jobs_share_and_the_first_disturbed_reason() -> None:
    quiet = CpuShare(wall=1.0, cpus=2, busy_cores=1.0, own_cores=1.0, steal_cores=0.0)
    shared = CpuShare(wall=1.0, cpus=2, busy_cores=2.0, own_cores=1.0, steal_cores=0.0)
    got = of_jobs([quiet, None, shared])
    assert got.shares == (quiet.to_json(), shared.to_json())
    assert got.disturbed == shared.disturbed and got.disturbed.startswith("cores shared")
    assert of_jobs([None]) == JobsCpu() and of_jobs([quiet]).disturbed == ""


def test_a_sibling_job_that_ended_unreaped_is_not_a_neighbour() -> None:
    # parallel workers of one measurement are finished (reaped) in order: when the first is
    # read, the second has ended but is not reaped yet; its CPU time is ours all the same
    # (it was counted as a neighbour's before: every gRPC ps/mimic point came out disturbed)
    first = start_job([sys.executable, "-c", BUSY.format(s=0.5)], timeout=30, label="worker 0")
    second = start_job([sys.executable, "-c", BUSY.format(s=0.5)], timeout=30, label="worker 1")
    time.sleep(2.0)  # both end (0.5 s of work each on 2 cores); neither is reaped (no poll)
    a, b = first.wait(), second.wait()
    assert a.ok and b.ok and a.cpu is not None and b.cpu is not None
    assert a.cpu.disturbed == "", a.cpu
    assert b.cpu.disturbed == "", b.cpu


def _reparented_busy_loop(seconds: float, env: dict[str, str], title: str = "") -> float:
    """CPU seconds of a busy loop that ran outside this process tree (sh exits at once, the
    loop is reparented; its output is read to its end), `title` as its argv[0]."""
    loop = BUSY.format(s=seconds) + "\nprint(time.process_time())"
    exe = f"exec -a '{title}' {sys.executable}" if title else sys.executable
    out = subprocess.run(
        ["bash", "-c", f"{exe} -c '{loop}' &"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
        env=env,
        start_new_session=True,
    )
    return float(out.stdout.split()[-1])


@pytest.mark.parametrize("outside_cpu", [True, False])
def test_the_jobs_tagged_processes_outside_this_tree_count_as_own_when_sampled(
    outside_cpu: bool,
) -> None:
    """srun's tasks on this node are slurmstepd's children, not ours, yet carry the job's tag
    (srun --export=ALL): with outside_cpu they are the job's own work, as for the hosts
    placement; without, they are a neighbour's. A reparented busy loop with the job's tag
    stands in for such a task (what is under test is the guard's accounting; the real srun
    case is tests/ci/test_nightly_sbatch.py)."""
    job = start_job(["sleep", "1.5"], timeout=30, label="waits", outside_cpu=outside_cpu)
    task_cpu = _reparented_busy_loop(0.6, {**os.environ, TAG_VAR: job.tag})
    res = job.wait()
    assert res.ok and res.cpu is not None
    counted = res.cpu.own_cores * res.cpu.wall
    if outside_cpu:
        assert counted >= 0.8 * task_cpu, (res.cpu, task_cpu)
    else:
        assert counted < 0.3 * task_cpu, (res.cpu, task_cpu)


def test_this_slurm_jobs_step_daemons_count_as_own_another_jobs_do_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Inside SLURM job 77, "slurmstepd: [77.3]" (which starts and serves the job's tasks) is
    the job's own work; "slurmstepd: [778.0]" is another job's, a neighbour."""
    monkeypatch.setenv("SLURM_JOB_ID", "77")
    env = {k: v for k, v in os.environ.items() if k != TAG_VAR}
    job = start_job(["sleep", "1.5"], timeout=30, label="waits", outside_cpu=True)
    ours = _reparented_busy_loop(0.5, env, "slurmstepd: [77.3]")
    theirs = _reparented_busy_loop(0.5, env, "slurmstepd: [778.0]")
    res = job.wait()
    assert res.ok and res.cpu is not None
    counted = res.cpu.own_cores * res.cpu.wall
    assert counted >= 0.8 * ours, (res.cpu, ours)
    assert counted < ours + 0.3 * theirs, (res.cpu, ours, theirs)
    assert res.cpu.foreign_cores * res.cpu.wall >= 0.7 * theirs, (res.cpu, theirs)
