"""The remote shell's own logic: the command it builds, the environment it passes on stdin
(never in argv), the bound on the far side, and the JSON the host-fabric helpers read back.

The agent here is a local stand-in for ssh (`agent HOST COMMAND` runs COMMAND with sh, as
sshd runs it with the user's shell): what is tested is this side's logic; ssh itself runs
between the two guests of ci/guest/run.sh --hosts 2 (tests/stacks/verbs/test_verbs_guest.py).
"""

from __future__ import annotations

import json
import stat
import subprocess
import sys
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
    job = agent.start("h1", [sys.executable, "-c", code],
                      {"HPCCOMM_SECRET": "s3cret", "PYTHONPATH": "/x"}, timeout=30)
    assert all("s3cret" not in a for a in job.argv)
    result = job.wait(60)
    assert result.ok, result.describe()
    assert result.stdout.split() == ["s3cret", "/x"]


def test_remote_timeout_ends_a_stuck_program(agent: RemoteShell) -> None:
    result = agent.run("h1", ["sleep", "30"], timeout=1)
    assert result.returncode == 124 and result.elapsed < 15  # timeout's own status


def test_stdin_env_rejects_what_is_not_json() -> None:
    got = subprocess.run([sys.executable, "-m", "pytest_hpccomm.peer.stdin_env", "--", "true"],
                         input="not json\n", capture_output=True, text=True, timeout=30,
                         cwd=PROJECT_ROOT)
    assert got.returncode == 2 and "not JSON" in got.stderr


def test_host_fabric_is_read_on_the_host(agent: RemoteShell) -> None:
    hf = _remote(agent, "h1", "ethernet", None, None)
    assert hf.host == "h1" and not hf.local and hf.created is None
    assert hf.selection.kind == "ethernet" and hf.selection.netdev


def test_errors_on_the_host_are_one_line(agent: RemoteShell) -> None:
    with pytest.raises(FabricNotReady, match=r"^h1: select: no InfiniBand port"):
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
