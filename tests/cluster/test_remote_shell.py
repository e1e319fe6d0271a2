"""The remote shell's own logic: the command it builds, the environment it passes on stdin
(never in argv), the bound on the far side, and the JSON the host-fabric helpers read back.

The agent here is a local stand-in for ssh (`agent HOST COMMAND` runs COMMAND with sh, as
sshd runs it with the user's shell): what is tested is this side's logic; ssh itself runs
between the two guests of ci/guest/run.sh --hosts 2 (tests/stacks/verbs/test_verbs_guest.py).
"""

from __future__ import annotations

import json
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_hpccomm.cluster.host_fabrics import FabricNotReady, _ask, _remote
from pytest_hpccomm.cluster.peer_env import PROJECT_ROOT
from pytest_hpccomm.cluster.remote_shell import RemoteShell, is_this_host


@pytest.fixture
def agent(tmp_path: Path) -> RemoteShell:
    script = tmp_path / "fake-ssh"
    script.write_text('#!/bin/sh\nhost=$1; shift\nexec sh -c "$1"\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return RemoteShell((str(script),))


def test_command_runs_from_the_project_root_under_a_remote_timeout() -> None:
    argv = RemoteShell.from_option("ssh -o BatchMode=yes").argv("h1", ["echo", "a b"], 30)
    assert argv[:3] == ["ssh", "-o", "BatchMode=yes"] and argv[3] == "h1"
    assert argv[4] == f"cd {PROJECT_ROOT} && exec timeout -k 5 30 echo 'a b'"


def test_environment_travels_on_stdin_not_in_argv(agent: RemoteShell) -> None:
    code = "import os; print(os.environ['HPCCOMM_SECRET'], os.environ['PYTHONPATH'])"
    job = agent.start(
        "h1",
        [sys.executable, "-c", code],
        {"HPCCOMM_SECRET": "s3cret", "PYTHONPATH": "/x"},
        timeout=30,
    )
    assert all("s3cret" not in a for a in job.argv)
    result = job.wait(60)
    assert result.ok, result.describe()
    assert result.stdout.split() == ["s3cret", "/x"]


def test_remote_timeout_ends_a_stuck_program(agent: RemoteShell) -> None:
    result = agent.run("h1", ["sleep", "30"], timeout=1)
    assert result.returncode == 124 and result.elapsed < 15  # timeout's own status


def test_stdin_env_rejects_what_is_not_json() -> None:
    got = subprocess.run(
        [sys.executable, "-m", "pytest_hpccomm.peer.stdin_env", "--", "true"],
        input="not json\n",
        capture_output=True,
        text=True,
        timeout=30,
        cwd=PROJECT_ROOT,
    )
    assert got.returncode == 2 and "not JSON" in got.stderr


STUCK = "import os, time; print(os.getpid(), flush=True); time.sleep(300)"


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:  # gone, or exiting while read (ESRCH)
        return False


def test_a_program_ends_with_its_remote_session() -> None:
    """The session's end (sshd gone: the read end of the program's stdout closes) ends the
    program within seconds, though its parent (the remote `timeout`, here the watcher's own
    parent) lives on. Before the watcher it ran on until the remote timeout."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest_hpccomm.peer.stdin_env", "--", sys.executable, "-c", STUCK],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=PROJECT_ROOT,
    )
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(b"{}\n")
        proc.stdin.close()
        program = int(proc.stdout.readline())
        assert program != proc.pid and _alive(program)  # the program runs beside its watcher
        proc.stdout.close()  # the session is gone
        status = proc.wait(timeout=10)
        deadline = time.monotonic() + 5
        while _alive(program) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(program), "the program outlived its session"
        assert status == 128 + signal.SIGTERM, status
    finally:
        proc.kill()
        proc.wait(timeout=10)


def test_the_watcher_passes_signals_and_status_on() -> None:
    """The remote `timeout`'s TERM reaches the program; the watcher exits with its status."""
    code = (
        "import os, signal, sys, time; signal.signal(signal.SIGTERM, lambda *a: "
        "sys.exit(7)); print(os.getpid(), flush=True); time.sleep(300)"
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest_hpccomm.peer.stdin_env", "--", sys.executable, "-c", code],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=PROJECT_ROOT,
    )
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(b"{}\n")
        proc.stdin.close()
        int(proc.stdout.readline())
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 7
    finally:
        proc.kill()
        proc.wait(timeout=10)


def test_host_fabric_is_read_on_the_host(agent: RemoteShell) -> None:
    hf = _remote(agent, "h1", "ethernet", None, None)
    assert hf.host == "h1" and not hf.local and hf.created is None
    assert hf.selection.kind == "ethernet" and hf.selection.netdev


def test_errors_on_the_host_are_one_line(agent: RemoteShell) -> None:
    with pytest.raises(FabricNotReady, match=r"^h1: select: no InfiniBand device: found "):
        _ask(agent, "h1", ["select", "--fabric", "ib"])
    with pytest.raises(FabricNotReady, match="^h1: bogus: "):
        _ask(agent, "h1", ["bogus"])


def test_counters_of_a_missing_device_are_empty(agent: RemoteShell) -> None:
    out = _ask(agent, "h1", ["counters", "--device", "nosuch0", "--port", "1"])
    assert out["port"] == {} and json.dumps(out)


def test_this_host_is_recognised() -> None:
    import socket

    assert is_this_host(socket.gethostname()) and is_this_host("localhost")
    assert not is_this_host("h-that-is-not-here")
