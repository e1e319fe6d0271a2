"""Programs on other hosts of --hpc-hosts, started over the remote shell mpirun uses.

`--hpc-rsh-agent` (default `ssh`) reaches a host by name, as mpirun's plm_rsh_agent does. A
program there runs from the same project checkout and Python path as here (a cluster's
shared file system, or the guests' common 9p share), under `timeout` on that host, so it ends
even when this side cannot reach it any more. Its extra environment (a control channel's key)
travels on stdin to `peer/stdin_env.py`, never in a command line, whose watcher also ends the
program when its remote shell session goes away (a stopped job, a dropped connection).
"""

from __future__ import annotations

import json
import shlex
import socket
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pytest_hpccomm.cluster.peer_env import PROJECT_ROOT
from pytest_hpccomm.proc.jobs import JobResult, RunningJob, run_job, start_job

STDIN_ENV = "pytest_hpccomm.peer.stdin_env"
KILL_AFTER = 5  # seconds between the remote timeout's TERM and its KILL


@dataclass(frozen=True)
class RemoteShell:
    agent: tuple[str, ...] = ("ssh",)

    @classmethod
    def from_option(cls, rsh_agent: str | None) -> RemoteShell:
        return cls(tuple(shlex.split(rsh_agent)) if rsh_agent else ("ssh",))

    def argv(
        self, host: str, argv: Sequence[str], timeout: float, with_env: bool = False
    ) -> list[str]:
        """The local command that runs argv on host from the project root, bounded there."""
        cmd = [str(a) for a in argv]
        if with_env:
            cmd = [sys.executable, "-m", STDIN_ENV, "--", *cmd]
        remote = shlex.join(["timeout", "-k", str(KILL_AFTER), f"{timeout:g}", *cmd])
        return [*self.agent, host, f"cd {shlex.quote(str(PROJECT_ROOT))} && exec {remote}"]

    def run(self, host: str, argv: Sequence[str], timeout: float, label: str = "") -> JobResult:
        # the local job outlives the remote one by a margin: the remote timeout fires first
        return run_job(
            self.argv(host, argv, timeout),
            timeout=timeout + KILL_AFTER + 15,
            label=label or f"{argv[0]} on {host}",
        )

    def start(
        self,
        host: str,
        argv: Sequence[str],
        env: Mapping[str, str],
        timeout: float,
        label: str = "",
    ) -> RunningJob:
        """A long-lived program on host with `env` added to its environment."""
        data = (json.dumps(dict(env)) + "\n").encode()
        return start_job(
            self.argv(host, argv, timeout, with_env=True),
            timeout=timeout + KILL_AFTER + 15,
            label=label or f"{argv[0]} on {host}",
            stdin=data,
        )


def is_this_host(name: str) -> bool:
    """Whether a --hpc-hosts entry names the machine this runs on."""
    if name in ("localhost", "127.0.0.1", "::1"):
        return True
    here = {socket.gethostname(), socket.getfqdn()}
    if name in here or name.split(".")[0] in {h.split(".")[0] for h in here}:
        return True
    return False


def address_of(name: str) -> str:
    """The IPv4 address a host name resolves to (its fabric address on the guests)."""
    return socket.gethostbyname(name)
