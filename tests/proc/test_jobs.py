"""Jobs: hard timeouts, and nothing a job started outlives it (no root needed)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_hpccomm.proc import proctree
from pytest_hpccomm.proc.jobs import TAG_VAR, last_words, run_job, start_job
from tests.cluster.clusterkit import our_zombies, tagged_processes


def gone(pid: int) -> bool:
    p = proctree.proc_of(pid)
    return p is None or not proctree.alive(p)


def test_output_returncode_env_cwd(tmp_path: object) -> None:
    r = run_job(
        ["sh", "-c", 'echo "$X" $PWD; echo err >&2; exit 3'],
        {"X": "hello", "PATH": os.defpath},
        timeout=10,
        cwd="/tmp",
    )
    assert (r.returncode, r.stdout, r.stderr, r.timed_out) == (3, "hello /tmp\n", "err\n", False)
    assert not r.ok and "exit 3" in r.describe()


def test_timeout_is_hard_and_reported() -> None:
    t0 = time.monotonic()
    r = run_job(["sleep", "30"], timeout=1.0, grace=0.5)
    assert r.timed_out and r.returncode == -signal.SIGTERM
    assert time.monotonic() - t0 < 3.0
    assert "timed out after 1." in r.describe()


def test_a_timed_out_job_says_what_it_printed_before_it_was_ended() -> None:
    # srun, ended by a timeout, says last what the kill made its tasks do; the hang is above
    script = (
        "for i in 1 2 3 4 5 6; do echo line$i >&2; done; "
        "trap 'echo killed >&2; exit 1' TERM; sleep 30 & wait"
    )
    r = run_job(["sh", "-c", script], timeout=1.0, grace=2.0)
    assert r.timed_out, r
    assert r.describe().endswith("line4 | line5 | line6 | killed"), r.describe()


def test_term_ignoring_job_is_killed_after_grace() -> None:
    t0 = time.monotonic()
    r = run_job(["sh", "-c", "trap '' TERM; while :; do sleep 0.05; done"], timeout=0.5, grace=0.5)
    assert r.timed_out and r.returncode == -signal.SIGKILL
    assert time.monotonic() - t0 < 3.0
    assert not tagged_processes() and not our_zombies()


def test_daemons_that_leave_the_group_are_reaped() -> None:
    # what Open MPI's daemons do: setsid + double fork, outliving the command that started them
    r = run_job(["sh", "-c", "setsid sh -c 'sleep 300 & echo $!' & sleep 0.3"], timeout=10)
    assert r.ok
    assert gone(int(r.stdout.split()[0]))
    assert not tagged_processes() and not our_zombies()


def test_long_lived_job_stop_and_processes() -> None:
    with start_job(["sh", "-c", "sleep 300 & sleep 300 & echo ready; wait"], timeout=60) as job:
        deadline = time.monotonic() + 10
        while "ready" not in job.peek_output()[0] and time.monotonic() < deadline:
            time.sleep(0.02)
        procs = job.processes()
        assert len(procs) == 3 and job.poll() is None
    res = job.stop()  # idempotent after the with block
    assert not res.timed_out and all(not proctree.alive(p) for p in procs)
    assert res.stdout == "ready\n"


def test_hook_pids_are_killed_only_if_tagged() -> None:
    stranger = subprocess.Popen(["sleep", "300"])  # not ours: the hook may list it, it survives
    try:
        with start_job(["sh", "-c", "sleep 300"], netns_pids_hook=lambda: [stranger.pid]) as job:
            time.sleep(0.2)
        # the shell dies of our TERM (-15) or, when its child's TERM lands first, exits
        # 128 + 15 as a shell does for a child killed by a signal: ended by us either way
        assert job.stop().returncode in (-signal.SIGTERM, 128 + signal.SIGTERM)
        assert stranger.poll() is None
    finally:
        stranger.kill()
        stranger.wait()


def test_missing_program() -> None:
    r = run_job(["/nonexistent/prog"], timeout=5)
    assert r.returncode == 127 and "cannot run" in r.stderr


def test_job_dies_with_its_owner() -> None:
    # the owner is SIGKILLed (no cleanup code runs): the shim's PDEATHSIG still ends the job
    code = (
        "import sys, time; from pytest_hpccomm.proc.jobs import start_job;"
        "j = start_job(['sleep', '300']); time.sleep(0.3);"
        "print([p.pid for p in j.processes()][0], flush=True); time.sleep(300)"
    )
    owner = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert owner.stdout is not None
        sleeper = int(owner.stdout.readline())
        assert not gone(sleeper)
    finally:
        owner.kill()
        owner.wait()
    deadline = time.monotonic() + 5
    while not gone(sleeper) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert gone(sleeper)


def test_tag_is_in_the_job_environment() -> None:
    r = run_job(["sh", "-c", f'echo "${TAG_VAR}"'], timeout=5)
    owner, _, rand = r.stdout.strip().partition(".")
    assert owner == str(os.getpid()) and len(rand) == 16


PRRTE_HELP = """--------------------------------------------------------------------------
prterun was unable to find the specified executable file, and therefore did
not launch the job.

   Executable: nope
--------------------------------------------------------------------------
"""


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("warming up\nfatal: no route\n", "fatal: no route"),
        (
            PRRTE_HELP,
            "prterun was unable to find the specified executable file, and therefore did "
            "not launch the job. Executable: nope",
        ),
        ("----\n----\n", ""),
        ("", ""),
    ],
)
def test_last_words_reads_inside_open_mpis_help_block(text: str, said: str) -> None:
    assert last_words(text) == said


def test_scratch_is_made_for_the_job_and_removed_once_it_is_reaped(tmp_path: Path) -> None:
    scratch = tmp_path / "session" / "dir"
    code = "import os, sys; open(os.path.join(sys.argv[1], 'f'), 'w').write('x'); print('ok')"
    r = run_job([sys.executable, "-c", code, str(scratch)], timeout=30, scratch=scratch)
    assert r.ok and r.stdout.strip() == "ok"
    assert not scratch.exists()
    job = start_job(
        [sys.executable, "-c", "import time; time.sleep(60)"], timeout=30, scratch=scratch
    )
    assert scratch.is_dir() and (scratch.stat().st_mode & 0o777) == 0o700
    job.stop(grace=0.2)  # killed: what it left there goes too
    assert not scratch.exists()


def test_on_timeout_sees_the_live_processes_before_any_signal() -> None:
    seen: list[set[str]] = []

    def where(procs: set[proctree.Proc]) -> str:
        seen.append({proctree.name(p.pid) for p in procs})
        return "sleep 30 was still there"

    r = run_job(["sleep", "30"], timeout=0.5, grace=0.5, on_timeout=where)
    assert r.timed_out and r.hung == "sleep 30 was still there", r
    assert seen == [{"sleep 30"}], seen  # called once, while the job was whole
    done = run_job(["true"], timeout=30, on_timeout=where)
    assert done.ok and done.hung == "" and len(seen) == 1  # a job that ends is not asked


def test_an_on_timeout_that_raises_still_ends_the_job() -> None:
    def broken(procs: set[proctree.Proc]) -> str:
        raise RuntimeError("gdb exploded")

    r = run_job(["sleep", "30"], timeout=0.5, grace=0.5, on_timeout=broken)
    assert r.timed_out and "could not be read: RuntimeError('gdb exploded')" in r.hung, r
