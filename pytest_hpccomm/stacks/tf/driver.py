"""Orchestrator side of the TensorFlow stack: the session's tasks, one long-lived process each,
started with the project's launchers and reaped at the end.

A task's process takes 20-35 s to start on 2 cores (TensorFlow's import), so a session starts
its tasks once per (placement, layout) and reuses them. Loopback: every task here, on
127.0.0.1 at a free port held until the tasks end (cluster/ports.py; a TensorFlow server binds
all interfaces, it has no bind address option). netns: task i on virtual host i mod n, on that
host's address, so a tensor between tasks on different hosts crosses the veths (their counters
prove it); every task dials home over a Unix socket (the namespaces share the file system).
hosts: task i on host i mod n of --hpc-hosts at its fabric address, started over the remote
shell (peer/stdin_env.py ends it with its session), dialing home over TCP to this host's fabric
address. TensorFlow servers cannot be stopped: "shutdown" makes each task end its process
(os._exit), and the job reaper ends any that does not. A TensorFlow server listens on every
interface and asks no credentials: on a shared cluster, its ports are open to whoever reaches
them while it runs.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from typing import Any, Mapping

from pytest_hpccomm.cluster.peer_env import peer_env
from pytest_hpccomm.cluster.placed_launch import PlacementError, process_launch
from pytest_hpccomm.cluster.placement import HOSTS, LOOPBACK, NETNS
from pytest_hpccomm.cluster.ports import PortHold
from pytest_hpccomm.cluster.remote_shell import RemoteShell, is_this_host
from pytest_hpccomm.cluster.virtual import VirtualCluster
from pytest_hpccomm.peer.channel import (
    Channel,
    ChannelClosed,
    ControlServer,
    MessageError,
    RemoteError,
)
from pytest_hpccomm.proc.jobs import RunningJob
from pytest_hpccomm.stacks.tf.env import TfEnv
from pytest_hpccomm.stacks.tf.wire import (
    CLIENT,
    CLUSTER_VAR,
    COLLECTIVE,
    KNOB_VAR,
    KNOBS,
    MODE_VAR,
    SESSION,
    TASK_VAR,
)

PEER_MODULE = "pytest_hpccomm.stacks.tf.peer"
NETNS_PORT = 2222  # TensorFlow's customary port, plus the task's index and the instance's block
_PORT_BLOCKS = itertools.count()  # two sets of tasks on one virtual host must not share ports
MAX_STARTS = 3  # per session: tasks that keep dying are a failure, not a loop


class TfError(Exception):
    """The tasks could not be started, or a request failed (one line; a test failure)."""


class TaskLost(TfError):
    """A task died or did not answer in time; the tasks are reaped and restart on demand."""


@dataclass(frozen=True)
class Layout:
    """How many tasks of each job (tasks are ps:0.., then worker:0.., then chief:0), and who is
    the client: worker:0 (the default), each worker running collectives, or a chief
    coordinating the workers (ParameterServerStrategy)."""

    ps: int = 1
    workers: int = 1
    collective: bool = False
    coordinator: bool = False
    knob: str = "default"  # wire.KNOBS: the collective workers' gRPC settings
    session: bool = False  # v1: every worker a server, one Session's graph across them

    @property
    def mode(self) -> str:
        """The peers' mode (wire.MODE_VAR)."""
        return SESSION if self.session else COLLECTIVE if self.collective else CLIENT

    @property
    def tasks(self) -> list[str]:
        return (
            [f"ps:{i}" for i in range(self.ps)]
            + self.workers_tasks
            + (["chief:0"] if self.coordinator else [])
        )

    @property
    def workers_tasks(self) -> list[str]:
        return [f"worker:{i}" for i in range(self.workers)]

    def __str__(self) -> str:
        if self.session:
            return f"{self.workers}w-session"
        if self.collective:
            return f"{self.workers}w-collective" + (
                "" if self.knob == "default" else f"-{self.knob}"
            )
        return f"{self.ps}ps-{self.workers}w" + ("-coordinator" if self.coordinator else "")


RING = Layout(ps=0, workers=2, collective=True)  # the ring all-reduce's two workers
PS_CLUSTER = Layout(ps=2, workers=2, coordinator=True)  # the quick 2 x 2


@dataclass(frozen=True)
class TfHosts:
    """Real hosts (--hpc-hosts): task i on names[i mod n], its server on addresses[i mod n]
    (that host's fabric address); started over the remote shell (here when the host is this
    machine); every task dials home over TCP to `listen`, this host's fabric address. The
    checkout, the TensorFlow venv and the orchestrator's Python are at the same paths on
    every host (a cluster's shared file system)."""

    names: tuple[str, ...]
    addresses: tuple[str, ...]
    listen: str
    rsh_agent: str | None = None

    @property
    def shell(self) -> RemoteShell:
        return RemoteShell.from_option(self.rsh_agent)


Site = VirtualCluster | TfHosts | None


class TfTasks:
    """The session's tasks for one (placement, layout). `with` starts and always reaps."""

    def __init__(
        self,
        tf: TfEnv,
        placement: str,
        site: Site = None,
        layout: Layout = Layout(),
        *,
        job_timeout: float = 3600.0,
        start_timeout: float = 240.0,
        request_timeout: float = 120.0,
    ) -> None:
        if placement not in (LOOPBACK, NETNS, HOSTS):
            raise TfError(
                f"placement {placement!r}: the TensorFlow tasks run on {LOOPBACK}, "
                f"{NETNS} or {HOSTS}"
            )
        if placement == NETNS and not isinstance(site, VirtualCluster):
            raise TfError("netns placement needs the session's virtual cluster")
        if placement == HOSTS and not (isinstance(site, TfHosts) and len(site.names) >= 2):
            raise TfError("hosts placement needs at least 2 hosts (--hpc-hosts)")
        if layout.knob not in KNOBS:
            raise TfError(f"knob {layout.knob!r}: one of {', '.join(KNOBS)}")
        self.tf, self.placement, self.layout = tf, placement, layout
        self.cluster = site if isinstance(site, VirtualCluster) else None
        self.remote = site if isinstance(site, TfHosts) else None
        self.job_timeout, self.start_timeout = job_timeout, start_timeout
        self.request_timeout = request_timeout
        self.starts = 0
        self.spec: dict[str, list[str]] = {}
        self.hosts: dict[str, int] = {}  # task -> host index (netns, hosts)
        self._server: ControlServer | None = None
        self._held: PortHold | None = None  # loopback: the tasks' ports, until they end
        self._jobs: list[RunningJob] = []
        self._channels: dict[str, Channel] = {}
        self.hellos: dict[str, dict[str, Any]] = {}
        self.ended = ""  # how the tasks ended after the last failed request (their jobs' words)
        # fixed ports per task (a free port cannot be probed on another host); on real hosts
        # offset by this process, so two sessions do not collide; below the ephemeral range
        block = next(_PORT_BLOCKS) + (os.getpid() if self.remote else 0)
        self._ports = NETNS_PORT + 32 * (block % 900)
        # the tasks' TMPDIR: TensorFlow's autograph writes a module per function there and
        # removes them at exit, which os._exit skips
        self._tmp: str | None = None

    def __enter__(self) -> TfTasks:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def describe(self) -> str:
        return f"tensorflow {self.layout} {self.placement}"

    # -- start -----------------------------------------------------------------------------
    def _plan(self) -> None:
        spec: dict[str, list[str]] = {"ps": [], "worker": []}
        if self.layout.coordinator:
            spec["chief"] = []
        addresses = (
            [h.address for h in self.cluster.hosts]
            if self.cluster is not None
            else list(self.remote.addresses)
            if self.remote is not None
            else []
        )
        if not addresses:
            self._release_ports()
            self._held = PortHold(len(self.layout.tasks))
        for i, task in enumerate(self.layout.tasks):
            job = task.split(":")[0]
            if self._held is not None:
                spec[job].append(f"127.0.0.1:{self._held.ports[i]}")
                continue
            host = i % len(addresses)
            self.hosts[task] = host
            address = addresses[host]
            address = f"[{address}]" if ":" in address else address
            spec[job].append(f"{address}:{self._ports + i}")
        self.spec = spec

    def start(self) -> None:
        if self._channels:
            return
        if self.starts >= MAX_STARTS:
            raise TfError(
                f"{self.describe()}: tasks lost {self.starts} times; not restarting them again"
            )
        self.starts += 1
        self._server = self._server or ControlServer(
            None if self.remote is None else (self.remote.listen, 0)
        )
        self._tmp = self._tmp or tempfile.mkdtemp(prefix="hpccomm-tf-")
        self._plan()
        tasks = self.layout.tasks
        try:
            for task in tasks:
                env = peer_env(
                    {
                        CLUSTER_VAR: json.dumps(self.spec),
                        TASK_VAR: task,
                        MODE_VAR: self.layout.mode,
                        KNOB_VAR: self.layout.knob,
                        "TMPDIR": self._tmp,
                        "TF_CPP_MIN_LOG_LEVEL": "2",
                        **self._server.env(),
                        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                        "HOME": os.environ.get("HOME", "/tmp"),
                    }
                )
                remote = self.remote
                launch = process_launch(
                    self.placement,
                    [str(self.tf.python), "-m", PEER_MODULE],
                    env,
                    cluster=self.cluster,
                    host=self.hosts.get(task, 0),
                    label=f"{self.describe()} {task}",
                    hosts=remote.names if remote else (),
                    shell=remote.shell if remote else None,
                )
                self._jobs.append(launch.start(self.job_timeout))
            self._await_hellos(tasks)
        except BaseException as exc:
            tail = self._drop()
            if isinstance(exc, (TfError, PlacementError)):
                raise TfError(f"{self.describe()}: {exc}; {tail}") from None
            raise

    def _await_hellos(self, tasks: list[str]) -> None:
        assert self._server is not None
        deadline = time.monotonic() + self.start_timeout

        def gone() -> str:
            ended = [job for job in self._jobs if job.poll() is not None]
            return "a task's process ended before dialing home" if ended else ""

        try:
            channels = self._server.accept_peers(len(tasks), self.start_timeout, gone)
        except (TimeoutError, ChannelClosed) as exc:
            raise TfError(f"tasks did not dial home: {exc}") from None
        for ch in channels:
            try:
                hello = ch.recv(max(1.0, deadline - time.monotonic()))
            except (TimeoutError, ChannelClosed, MessageError) as exc:
                for other in channels:
                    other.close()
                raise TfError(f"no hello from a task: {exc}") from None
            self._channels[str(hello.get("task"))] = ch
            self.hellos[str(hello.get("task"))] = hello
        if sorted(self._channels) != sorted(tasks):
            raise TfError(f"tasks said hello as {sorted(self._channels)}, expected {tasks}")

    # -- requests --------------------------------------------------------------------------
    def request(self, task: str, msg: Mapping[str, Any], timeout: float | None = None) -> Any:
        """One task's reply. A remote error (the op raised in TensorFlow) is TfError and the
        tasks live on; a task that dies or stays silent is TaskLost and the tasks are reaped
        (the next request starts new ones)."""
        self.start()
        limit = timeout or self.request_timeout
        ch = self._channels[task]
        try:
            return ch.request(dict(msg), limit)
        except RemoteError as exc:
            raise TfError(f"{self.describe()}: {task} {msg.get('op')}: {exc}") from None
        except (TimeoutError, ChannelClosed, MessageError) as exc:
            tail = self._drop()
            raise TaskLost(
                f"{self.describe()}: {task} lost during {msg.get('op')}: {exc}; {tail}"
            ) from None

    def request_all(
        self, msgs: Mapping[str, Mapping[str, Any]], timeout: float | None = None
    ) -> dict[str, Any]:
        """Each task's reply to its message, the messages sent at once (a collective needs every
        worker in it). Any failure ends the tasks (the next request starts new ones): a failed
        collective aborts the task's collective executor for good. TfError (TaskLost when a task
        died or stayed silent) names every task's failure."""
        replies = self.request_each(msgs, timeout)
        failed = [str(r) for r in replies.values() if isinstance(r, TfError)]
        if failed:
            raise TfError(
                f"{self.describe()}: {'; '.join(failed)}; tasks ended ({self.ended}); "
                f"cluster {json.dumps(self.spec)}"  # a server that could not start: its port
            )
        return replies

    def request_each(
        self, msgs: Mapping[str, Mapping[str, Any]], timeout: float | None = None
    ) -> dict[str, Any]:
        """As request_all, but a task's remote error (the op raised in TensorFlow) is a TfError
        in its place among the replies: what each worker saw of a collective that is to fail.
        Any failure ends the tasks (`ended` says how); a task that died or stayed silent is
        TaskLost, raised."""
        self.start()
        limit = timeout or self.request_timeout
        try:
            sent = {
                task: self._channels[task].send_request(dict(msg)) for task, msg in msgs.items()
            }
        except (ChannelClosed, OSError) as exc:
            tail = self._drop()
            raise TaskLost(f"{self.describe()}: a task is gone: {exc}; {tail}") from None
        replies: dict[str, Any] = {}
        lost: list[str] = []
        deadline = time.monotonic() + limit
        for task, rid in sent.items():
            op = msgs[task].get("op")
            try:
                replies[task] = self._channels[task].await_reply(
                    rid, max(0.1, deadline - time.monotonic()), str(op)
                )
            except RemoteError as exc:
                replies[task] = TfError(f"{task} {op}: {exc}")
            except (TimeoutError, ChannelClosed, MessageError) as exc:
                lost.append(f"{task} lost during {op}: {exc}")
        failed = [str(r) for r in replies.values() if isinstance(r, TfError)] + lost
        if failed:
            self.end()
        if lost:
            raise TaskLost(f"{self.describe()}: {'; '.join(failed)}; tasks ended ({self.ended})")
        return replies

    def pids(self) -> dict[str, int]:
        return {task: int(h["pid"]) for task, h in self.hellos.items()}

    def local_pids(self) -> dict[str, int]:
        """The tasks' PIDs on this machine (on real hosts, the others are other machines')."""
        if self.remote is None:
            return self.pids()
        names = self.remote.names
        return {
            t: pid
            for t, pid in self.pids().items()
            if is_this_host(names[self.hosts[t] % len(names)])
        }

    # -- stop ------------------------------------------------------------------------------
    def end(self) -> str:
        """Ends the tasks now (the next request starts new ones): how each ended, its exit
        status and last words (also in `ended`): what a task that died on its own shows."""
        self.ended = self._drop()
        return self.ended

    def _drop(self) -> str:
        for ch in self._channels.values():
            ch.close()
        self._channels, self.hellos = {}, {}
        words = [job.stop(grace=1.0).describe() for job in self._jobs]
        self._jobs = []
        self._release_ports()
        return "; ".join(w for w in words if w) or "no job"

    def _release_ports(self) -> None:
        if self._held is not None:
            self._held.close()
            self._held = None

    def close(self) -> None:
        try:
            for ch in self._channels.values():
                try:
                    ch.request({"op": "shutdown"}, 10.0)
                except (TimeoutError, ChannelClosed, MessageError, RemoteError):
                    pass
            for job in self._jobs:
                job.wait(timeout=10.0)  # ended by os._exit; stopped past the timeout
            self._drop()
        finally:
            if self._server is not None:
                self._server.close()
                self._server = None
            if self._tmp is not None:
                shutil.rmtree(self._tmp, ignore_errors=True)
                if self.remote is not None:  # the tasks made it on their hosts
                    for name in set(self.remote.names):
                        if not is_this_host(name):
                            self.remote.shell.run(name, ["rm", "-rf", "--", self._tmp], 30.0)
                self._tmp = None
