"""Real hosts for the 'hosts' placement on one machine: sshd inside each virtual-cluster host.

Every host of a VirtualCluster gets its own OpenSSH daemon listening only on its fabric address
(inside its namespace), with keys made for this run. The returned agent is what a cluster user
passes as --hpc-rsh-agent: `ssh -F <config>` with that key. mpirun then reaches the hosts by
name over real ssh, exactly as on a cluster; nothing listens outside the namespaces.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from pytest_hpccomm.cluster.virtual import VirtualCluster
from pytest_hpccomm.proc.jobs import RunningJob

SSHD = "/usr/sbin/sshd"
PRIVSEP = Path("/run/sshd")  # sshd refuses to start without its privilege separation dir


def unavailable_reason() -> str | None:
    missing = [tool for tool in (SSHD, "ssh", "ssh-keygen") if not shutil.which(tool)]
    return (
        f"OpenSSH missing ({', '.join(missing)}): apt-get install openssh-server openssh-client"
        if missing
        else None
    )


def _keygen(path: Path) -> None:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)],
        check=True,
        timeout=30,
        capture_output=True,
    )


@contextmanager
def sshd_on_hosts(cluster: VirtualCluster, workdir: Path, timeout: float = 900.0) -> Iterator[Path]:
    """Start sshd on every host of `cluster`; yield the agent script; stop them (by PID)."""
    workdir.mkdir(parents=True, exist_ok=True)
    _keygen(workdir / "hostkey")
    _keygen(workdir / "id")
    (workdir / "authorized_keys").write_text((workdir / "id.pub").read_text())
    client = workdir / "ssh_config"
    client.write_text(
        f"Host *\n  IdentityFile {workdir / 'id'}\n  User root\n"
        "  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n"
        "  BatchMode yes\n  LogLevel ERROR\n  ConnectTimeout 10\n"
    )
    agent = workdir / "ssh-agent-wrapper"
    agent.write_text(f'#!/bin/sh\nexec ssh -F {client} "$@"\n')
    agent.chmod(0o755)
    made_privsep = not PRIVSEP.exists()
    PRIVSEP.mkdir(mode=0o755, exist_ok=True)
    jobs: list[RunningJob] = []
    try:
        for h in cluster.hosts:
            config = workdir / f"sshd_{h.name}"
            config.write_text(
                f"ListenAddress {h.address}\nPort 22\nHostKey {workdir / 'hostkey'}\n"
                f"AuthorizedKeysFile {workdir / 'authorized_keys'}\nPidFile none\n"
                "StrictModes no\nUsePAM no\nPermitRootLogin prohibit-password\n"
                "PasswordAuthentication no\nKbdInteractiveAuthentication no\n"
                "X11Forwarding no\nLogLevel ERROR\n"
            )
            jobs.append(
                cluster.start_job(h, [SSHD, "-D", "-e", "-f", str(config)], timeout=timeout)
            )
        _wait_reachable(cluster, agent, jobs)
        yield agent
    finally:
        for job in jobs:
            job.stop(grace=1.0)
        if made_privsep:
            shutil.rmtree(PRIVSEP, ignore_errors=True)


def _wait_reachable(cluster: VirtualCluster, agent: Path, jobs: list[RunningJob]) -> None:
    """Every host answers `ssh host hostname` with its own name (from the first host)."""
    deadline = time.monotonic() + 20
    for h in cluster.hosts:
        while True:
            got = cluster.run_job(0, [str(agent), h.name, "hostname"], timeout=15)
            if got.ok and got.stdout.strip() == h.name:
                break
            if time.monotonic() > deadline or any(j.poll() is not None for j in jobs):
                raise RuntimeError(
                    f"sshd on {h.name} unreachable: {got.describe()}; sshd: "
                    + "; ".join(j.peek_output()[1][-200:] for j in jobs)
                )
            time.sleep(0.2)


@contextmanager
def ssh_virtual_hosts(workdir: Path, n: int = 2) -> Iterator[tuple[VirtualCluster, Path]]:
    """A virtual cluster of n hosts, each with its own sshd: (cluster, the rsh agent); torn
    down on leaving. Skips (pytest) with the reason where namespaces or OpenSSH are absent."""
    import pytest

    from pytest_hpccomm.cluster.virtual import ClusterUnavailable
    from pytest_hpccomm.cluster.virtual import unavailable_reason as no_cluster

    reason = no_cluster() or unavailable_reason()
    if reason:
        pytest.skip(reason)
    cluster = VirtualCluster(n)
    try:
        cluster.start()
    except ClusterUnavailable as exc:
        pytest.skip(f"virtual cluster unavailable: {exc}")
    try:
        with sshd_on_hosts(cluster, workdir) as agent:
            yield cluster, agent
    finally:
        cluster.teardown()


def still_running(
    cluster: VirtualCluster, proc_file: str, marks: Sequence[bytes], grace: float = 10.0
) -> list[int]:
    """Processes of the virtual hosts whose /proc/PID/`proc_file` (cmdline, environ) holds one
    of `marks`, once `grace` seconds passed without them all ending (remote peers end with
    their ssh sessions, a moment after the job that started them)."""

    def matching() -> list[int]:
        found = []
        for pid in cluster.pids():
            try:
                data = Path(f"/proc/{pid}/{proc_file}").read_bytes()
            except OSError:
                continue
            if any(m in data for m in marks):
                found.append(pid)
        return found

    deadline = time.monotonic() + grace
    while (left := matching()) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left
