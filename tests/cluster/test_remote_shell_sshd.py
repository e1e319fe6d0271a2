"""Over real ssh (sshd in the virtual cluster's hosts): a program started on another host
through the remote shell ends when its session does, here the local ssh client being killed
as a stopped job's is. Before peer/stdin_env.py watched the session, the program ran on under
the remote `timeout` (reparented to init when sshd's session exited) until that expired.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import pytest

from pytest_hpccomm.cluster.peer_env import PROJECT_ROOT
from tests.sshd_hosts import ssh_virtual_hosts

pytestmark = [pytest.mark.needs_root]

# run in h0: start a stuck program on h1 over the agent, kill the ssh client, report whether
# the program (h1 shares the PID namespace) is gone within 15 s (the watcher polls twice a
# second and gives TERM 2 s before KILL: the rest is margin for a loaded machine)
PROBE = r"""
import json, subprocess, sys, time
from pytest_hpccomm.cluster.remote_shell import RemoteShell
shell = RemoteShell((sys.argv[1],))
stuck = "import os, time; print(os.getpid(), flush=True); time.sleep(300)"
argv = shell.argv("h1", [sys.executable, "-c", stuck], 120, with_env=True)
ssh = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
ssh.stdin.write(b"{}\n"); ssh.stdin.close()
pid = int(ssh.stdout.readline())
ssh.kill(); ssh.wait(10)
deadline = time.monotonic() + 15
def alive():
    try:
        return open(f"/proc/{pid}/stat").read().split()[2] != "Z"
    except OSError:  # gone, or exiting while read (ESRCH)
        return False
while alive() and time.monotonic() < deadline:
    time.sleep(0.05)
print(json.dumps({"pid": pid, "alive": alive()}))
"""


def test_a_remote_program_ends_with_its_ssh_session(tmp_path: Path) -> None:
    with ssh_virtual_hosts(tmp_path / "ssh") as (cluster, agent):
        job = cluster.run_job(
            0,
            [sys.executable, "-c", PROBE, str(agent)],
            env={"PYTHONPATH": str(PROJECT_ROOT), "PATH": "/usr/bin:/bin"},
            timeout=60,
        )
    assert job.ok, f"{job.describe()}\n{job.stdout[-2000:]}\n{job.stderr[-2000:]}"
    got = json.loads(job.stdout.strip().splitlines()[-1])
    if got["alive"]:  # the program this test started: never left running
        os.kill(int(got["pid"]), signal.SIGKILL)
    assert not got["alive"], f"the program outlived its ssh session: {got}"
