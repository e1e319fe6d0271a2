"""A real SLURM on a virtual cluster: Debian's munged, slurmctld and one slurmd per host.

    with VirtualCluster(2) as vc, VirtualSlurm(vc, tmp_path) as slurm:
        slurm.run(0, ["srun", "-N2", "hostname"], timeout=30)

More: docs/explanation/internals.md (tests.virtual_slurm).
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Mapping, Sequence

from pytest_hpccomm.cluster.virtual import IFACE, VirtualCluster, VirtualHost
from pytest_hpccomm.proc.jobs import JobResult, RunningJob, run_job

PACKAGES = ("slurmctld", "slurmd", "slurm-client", "munge")  # Debian 12: SLURM 22.05
_SBIN = "/usr/sbin:/usr/bin:/sbin:/bin"
_TOOLS = {
    "munged": "munge",
    "slurmctld": "slurmctld",
    "slurmd": "slurmd",
    "srun": "slurm-client",
    "sinfo": "slurm-client",
    "sbatch": "slurm-client",
    "salloc": "slurm-client",
    "scontrol": "slurm-client",
}
CTLD_PORT, SLURMD_PORT = 6817, 6818  # free by construction: the namespaces are ours alone
MESSAGE_TIMEOUT = 5  # s; SLURM's default 10 would let a client wait out longer on a dead peer


class SlurmUnavailable(RuntimeError):
    """SLURM or munge is not installed here: a skip reason naming the packages."""


class SlurmError(RuntimeError):
    """A daemon did not come up, or died: names it and quotes the tail of its log."""


def _which(tool: str) -> str | None:
    return shutil.which(tool, path=os.environ.get("PATH", "") + ":" + _SBIN)


def unavailable_reason() -> str | None:
    """Why SLURM cannot run here (a missing program, with its Debian package), or None."""
    missing = sorted({pkg for tool, pkg in _TOOLS.items() if _which(tool) is None})
    if missing:
        return (
            f"SLURM on the virtual cluster needs Debian's {', '.join(missing)}: "
            f"apt-get install --no-install-recommends {' '.join(PACKAGES)}"
        )
    return None


def slurm_conf(
    hosts: Sequence[VirtualHost],
    workdir: Path,
    munge_socket: Path,
    *,
    cpus: int = 1,
    message_timeout: int = MESSAGE_TIMEOUT,
) -> str:
    """slurm.conf for `hosts` (the first runs slurmctld); paths under workdir, %n per node."""
    ctld, w = hosts[0], workdir
    lines = [
        "ClusterName=hpccomm",
        f"SlurmctldHost={ctld.name}({ctld.address})",
        f"SlurmctldPort={CTLD_PORT}",
        f"SlurmdPort={SLURMD_PORT}",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={munge_socket}",
        f"StateSaveLocation={w}/ctld/state",
        f"SlurmctldPidFile={w}/ctld/slurmctld.pid",
        f"SlurmctldLogFile={w}/ctld/slurmctld.log",
        f"SlurmdSpoolDir={w}/%n/spool",
        f"SlurmdPidFile={w}/%n/slurmd.pid",
        f"SlurmdLogFile={w}/%n/slurmd.log",
        f"TmpFS={w}/%n/tmp",
        "SlurmctldDebug=info",
        "SlurmdDebug=info",
        # no cgroups in the namespaces (see the module docstring), no accounting daemon
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        "SwitchType=switch/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_CPU",
        "SchedulerType=sched/backfill",
        "MpiDefault=none",
        # a request the partition can never satisfy is refused at once, not left pending
        "EnforcePartLimits=ALL",
        # a node that was down (its slurmd restarted) comes back when it registers again
        "ReturnToService=2",
        # short: a dead controller or slurmd fails a client within seconds, not minutes
        f"MessageTimeout={message_timeout}",
        "TCPTimeout=2",
        "SlurmctldTimeout=10",
        "SlurmdTimeout=30",
        "KillWait=2",
        "InactiveLimit=0",
        # SLURM's default. An ended job is purged MinJobAge after it ends, and sbatch --wait
        # polls at growing intervals up to 32 s: a shorter age let a job vanish before the
        # poll, and sbatch then returns 0 whatever the job's status ("Job N no longer found")
        "MinJobAge=300",
    ]
    lines += [
        f"NodeName={h.name} NodeAddr={h.address} NodeHostname={h.name} CPUs={cpus} State=UNKNOWN"
        for h in hosts
    ]
    lines.append(
        f"PartitionName=virtual Nodes={','.join(h.name for h in hosts)} Default=YES "
        "MaxTime=INFINITE State=UP"
    )
    return "\n".join(lines) + "\n"


def log_lines(path: Path, lines: int = 12) -> list[str]:
    """The last `lines` lines of a daemon's log, or one line saying why there are none."""
    try:
        text = path.read_text(errors="replace")
    except OSError as e:
        return [f"(no log at {path}: {e.strerror})"]
    return text.strip().splitlines()[-lines:] or [f"(empty log {path})"]


def log_tail(path: Path, lines: int = 12) -> str:
    return " | ".join(log_lines(path, lines))


class VirtualSlurm:
    """SLURM on `cluster`'s hosts; a context manager (see the module docstring).

    daemon_timeout caps every daemon's life (they are jobs with a hard timeout); start_timeout
    bounds the wait for every node to be idle. startup_seconds / teardown_seconds are measured.
    """

    def __init__(
        self,
        cluster: VirtualCluster,
        workdir: str | os.PathLike[str],
        *,
        daemon_timeout: float = 3600.0,
        start_timeout: float = 30.0,
        cpus: int = 1,
        message_timeout: int = MESSAGE_TIMEOUT,
    ) -> None:
        self.cluster = cluster
        self.workdir = Path(workdir).resolve()
        self.conf_path = self.workdir / "slurm.conf"
        self.munge_dir = self.workdir / "munge"
        self.munge_socket = self.munge_dir / "munge.socket"
        self.daemon_timeout = daemon_timeout
        self.start_timeout = start_timeout
        self.cpus = cpus
        self.message_timeout = message_timeout
        self.daemons: dict[str, RunningJob] = {}  # "munged", "slurmctld", "slurmd@h0", ...
        self.startup_seconds: float | None = None
        self.teardown_seconds: float | None = None
        self.stop_seconds: dict[str, float] = {}  # per daemon, by the last stop()

    # -- lifecycle ------------------------------------------------------------------------
    def __enter__(self) -> VirtualSlurm:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        reason = unavailable_reason()
        if reason:
            raise SlurmUnavailable(reason)
        t0 = time.monotonic()
        try:
            self._write_files()
            self._start_munged()
            self._start(
                "slurmctld", 0, [_path("slurmctld"), "-D", "-c", "-i", "-f", str(self.conf_path)]
            )
            for h in self.cluster.hosts:
                self._start(
                    f"slurmd@{h.name}",
                    h,
                    [_path("slurmd"), "-D", "-f", str(self.conf_path), "-N", h.name],
                )
            self.wait_idle(self.start_timeout)
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - t0

    def stop(self) -> float:
        """Stop every daemon by PID (slurmds, then slurmctld, then munged) and reap them.
        Idempotent; returns (and keeps) the seconds it took."""
        t0 = time.monotonic()
        running = bool(self.daemons)
        for name in sorted(
            self.daemons, key=lambda n: (not n.startswith("slurmd@"), n == "munged")
        ):
            t = time.monotonic()
            self.daemons[name].stop(grace=3.0)
            self.stop_seconds[name] = time.monotonic() - t
        self.daemons.clear()
        if running or self.teardown_seconds is None:
            self.teardown_seconds = time.monotonic() - t0
        return self.teardown_seconds

    def _write_files(self) -> None:
        w = self.workdir
        for d in [w / "ctld" / "state"] + [
            w / h.name / sub for h in self.cluster.hosts for sub in ("spool", "tmp")
        ]:
            d.mkdir(parents=True, exist_ok=True)
        w.chmod(0o755)  # slurmstepd and munged walk it
        self.munge_dir.mkdir(exist_ok=True)
        self.munge_dir.chmod(0o755)  # 0700: clients fail "execute permissions for all required"
        key = w / "munge.key"
        key.unlink(missing_ok=True)
        fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400)  # munged: 0400/0600
        with os.fdopen(fd, "wb") as f:
            f.write(os.urandom(1024))
        self.conf_path.write_text(
            slurm_conf(
                self.cluster.hosts,
                w,
                self.munge_socket,
                cpus=self.cpus,
                message_timeout=self.message_timeout,
            )
        )
        (w / "cgroup.conf").write_text("CgroupPlugin=cgroup/v1\n")  # loads without a mount

    def _start_munged(self) -> None:
        w = self.workdir
        self._start(
            "munged",
            0,
            [
                # --force: munged wants every directory above its socket open to all, and a run's
                # temp dir (pytest's) is 0700: more private, not less ("Socket is inaccessible:
                # execute permissions for all required on /tmp/pytest-of-root/pytest-N"). The key
                # (0400) and the socket directory (0755) are made here, so nothing else is let go.
                _path("munged"),
                "--foreground",
                "--force",  # logs to stderr (the job's)
                f"--socket={self.munge_socket}",
                f"--key-file={w / 'munge.key'}",
                f"--pid-file={w / 'munged.pid'}",
                f"--seed-file={w / 'munged.seed'}",
                "--num-threads=2",
            ],
        )
        deadline = time.monotonic() + self.start_timeout
        while not self.munge_socket.is_socket():
            self._check_alive()
            if time.monotonic() > deadline:
                raise SlurmError(
                    f"munged: no socket {self.munge_socket} after "
                    f"{self.start_timeout:.0f}s; {self._describe('munged')}"
                )
            time.sleep(0.05)

    def _start(self, name: str, host: int | str | VirtualHost, argv: list[str]) -> None:
        self.daemons[name] = self.cluster.start_job(
            host, argv, self._env(), timeout=self.daemon_timeout, grace=3.0
        )

    # -- state ----------------------------------------------------------------------------
    def log_path(self, daemon: str) -> Path | None:
        """The daemon's log file (None for munged: its log is its stderr, the job's)."""
        if daemon.startswith("slurmd@"):
            return self.workdir / daemon.partition("@")[2] / "slurmd.log"
        if daemon == "slurmctld":
            return self.workdir / "ctld" / "slurmctld.log"
        return None

    def _describe(self, daemon: str) -> str:
        log = self.log_path(daemon)
        return self._state(daemon) + (f"; log {log}: {log_tail(log)}" if log is not None else "")

    def _state(self, daemon: str) -> str:
        """The daemon, running or not, and what it last said on its own output."""
        job = self.daemons.get(daemon)
        said = ""
        if job is not None:
            out, err = job.peek_output()
            said = " | ".join((err or out).strip().splitlines()[-3:])[-400:]  # one line
            state = "running" if job.poll() is None else f"exited {job.poll()}"
        else:
            state = "not started"
        return f"{daemon} {state}; said: {said or '(nothing)'}"

    def _check_alive(self) -> None:
        for name, job in self.daemons.items():
            if job.poll() is not None:
                raise SlurmError(f"died: {self._describe(name)}")

    def node_states(self, timeout: float = 15.0) -> dict[str, str]:
        """{node: state} as sinfo reports it (from h0); raises SlurmError if sinfo fails."""
        r = self.run(0, [_path("sinfo"), "-h", "-N", "-o", "%N %T"], timeout=timeout)
        if not r.ok:
            raise SlurmError(f"sinfo: {r.describe()}")
        return dict(line.split(None, 1) for line in r.stdout.splitlines() if line.strip())

    def diagnosis(self, lines: int = 20) -> str:
        """What to read when a job on this SLURM misbehaved: every node's state with the
        controller's reason (a node set DOWN revokes its jobs), and each daemon's state and the
        tail of its log. Never raises: it goes into a failing test's message."""
        try:
            r = self.run(0, [_path("sinfo"), "-h", "-N", "-o", "%N %T %E"], timeout=15)
            nodes = "; ".join(r.stdout.strip().splitlines()) if r.ok else r.describe()
        except Exception as e:  # the message must still be written
            nodes = f"(sinfo: {e})"
        parts = [f"SLURM nodes: {nodes or '(none listed)'}"]
        for name in sorted(self.daemons):
            parts.append(self._state(name))
            log = self.log_path(name)
            if log is not None:
                parts += [f"  {log}:"] + [f"    {line}" for line in log_lines(log, lines)]
        return "\n".join(parts + self.network())

    def network(self) -> list[str]:
        """The fabric as the hosts see it: whether h0 reaches every other host (a TCP connect),
        each host's link with its counters, neighbours, qdisc and firewall, the switch's
        ports. Tells a stack that cannot talk from a network that does not carry."""
        c, ip = self.cluster, shutil.which("ip") or "ip"
        first, *others = c.hosts
        out = ["network:"]

        def run(ns: str, argv: list[str]) -> str:
            try:
                r = run_job([ip, "netns", "exec", ns, *argv], timeout=10, label=argv[0])
            except Exception as e:  # the message must still be written
                return f"({argv[0]}: {e})"
            text = " | ".join(line.strip() for line in (r.stdout + r.stderr).splitlines())
            return text if r.ok else f"{r.describe()}: {text}"

        for h in others:  # a TCP connect to the host's slurmd (bash's /dev/tcp: no ping here)
            probe = f"timeout 3 bash -c 'exec 3<>/dev/tcp/{h.address}/{SLURMD_PORT}' && echo ok"
            got = run(first.netns, ["sh", "-c", probe])
            out.append(
                f"  {first.name} -> {h.name} {h.address}:{SLURMD_PORT} connect: {got[-300:]}"
            )
        for h in c.hosts:
            for argv in (
                ["ip", "-s", "link", "show", "dev", IFACE],
                ["ip", "-br", "addr"],
                ["ip", "neigh"],
                ["tc", "qdisc", "show", "dev", IFACE],
                ["nft", "list", "ruleset"],
            ):
                out.append(f"  {h.name} {' '.join(argv[:2])}: {run(h.netns, argv)[-400:]}")
        for argv in (["bridge", "link"], ["tc", "qdisc", "show"]):
            out.append(f"  switch {argv[0]}: {run(c.switch_netns, argv)[-600:]}")
        return out

    def wait_idle(self, timeout: float) -> None:
        """Until sinfo shows every node idle; a dead daemon or the deadline raises SlurmError
        naming the daemons concerned and quoting their logs."""
        want = {h.name for h in self.cluster.hosts}
        deadline = time.monotonic() + timeout
        states: dict[str, str] = {}
        problem = ""
        while True:
            self._check_alive()
            try:
                states = self.node_states(timeout=max(5.0, 2.0 * self.message_timeout))
                problem = ""
            except SlurmError as e:
                problem = str(e)
            if not problem and all(states.get(n) == "idle" for n in want):
                return
            if time.monotonic() > deadline:
                break
            time.sleep(0.2)
        late = sorted(n for n in want if states.get(n) != "idle")
        names = ["slurmctld"] + [f"slurmd@{n}" for n in late]
        raise SlurmError(
            f"SLURM not up after {timeout:.0f}s: nodes {states or '(none listed)'}"
            + (f", {problem}" if problem else "")
            + "; "
            + "; ".join(self._describe(n) for n in names)
        )

    # -- using it -------------------------------------------------------------------------
    def env(self) -> dict[str, str]:
        """What a SLURM client (srun, salloc, sbatch, sinfo, scontrol) needs beyond os.environ,
        run inside a virtual host: the config (which names munge's socket)."""
        return {
            "SLURM_CONF": str(self.conf_path),
            "PATH": os.environ.get("PATH", os.defpath) + ":" + _SBIN,
        }

    def _env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        return {**os.environ, **self.env(), **(extra or {})}

    def start_job(
        self,
        host: int | str | VirtualHost,
        argv: Sequence[str],
        *,
        timeout: float,
        env: Mapping[str, str] | None = None,
    ) -> RunningJob:
        """argv on a virtual host, with the SLURM clients configured (env laid over it)."""
        return self.cluster.start_job(host, argv, self._env(env), timeout=timeout)

    def run(
        self,
        host: int | str | VirtualHost,
        argv: Sequence[str],
        *,
        timeout: float,
        env: Mapping[str, str] | None = None,
    ) -> JobResult:
        """Run argv on a virtual host to completion or timeout; always reaped."""
        job = self.start_job(host, argv, timeout=timeout, env=env)
        try:
            return job.wait()
        finally:
            job.stop()


def _path(tool: str) -> str:
    path = _which(tool)
    if path is None:
        raise SlurmUnavailable(unavailable_reason() or f"{tool} not found")
    return path
