"""Orchestrator side of the Horovod stack: launch the peers with the project's launchers (never
horovodrun, so the transport stays pinned to the fabric), talk to every rank, end them.

MPI controller: one MPI job of peers under the mpirun of the MPI Horovod was linked against
(loopback: ranks here, TCP over lo; netns: one rank per virtual host, TCP over fab0; hosts: one
rank per host of --hpc-hosts, started by mpirun over the remote shell or by srun, TCP pinned to
the fabric's netdev). Gloo controller: a rendezvous server (peer/rendezvous.py,
bound to loopback, the first virtual host's address or this host's fabric address) and one
process per rank with Horovod's variables, HOROVOD_GLOO_IFACE = lo, fab0 or the fabric's netdev
(on hosts, each rank started over the remote shell, its variables on stdin). Every rank dials
home: a Unix socket here and in the virtual cluster, TCP to this host's fabric address from real
hosts. Controller and CPU operations always match: `mpi` with HOROVOD_CPU_OPERATIONS=gloo
segfaults in Horovod 0.28.1.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from pytest_hpccomm.cluster.hosts import Host
from pytest_hpccomm.cluster.mpi import detect_mpi, replay_flags
from pytest_hpccomm.cluster.peer_env import PROJECT_ROOT, peer_env
from pytest_hpccomm.cluster.placed_launch import PlacementError, mpi_launch, process_launch
from pytest_hpccomm.cluster.placement import HOSTS, LOOPBACK, NETNS
from pytest_hpccomm.cluster.remote_shell import RemoteShell, is_this_host
from pytest_hpccomm.cluster.virtual import IFACE, VirtualCluster
from pytest_hpccomm.files import atomic_write
from pytest_hpccomm.peer.channel import (
    Channel,
    ChannelClosed,
    ControlServer,
    MessageError,
    RemoteError,
)
from pytest_hpccomm.proc import stacks
from pytest_hpccomm.proc.jobs import RunningJob
from pytest_hpccomm.stacks.horovod.conformance import describe_case
from pytest_hpccomm.stacks.horovod.env import HorovodEnv
from pytest_hpccomm.stacks.horovod.wire import (
    CONTROLLER_ENV,
    CONTROLLERS,
    CPUS_VAR,
    PLANT_VAR,
    PLANTS,
    SIZE_VAR,
    WAIT_VAR,
)

PEER_MODULE = "pytest_hpccomm.stacks.horovod.peer"
RENDEZVOUS_MODULE = "pytest_hpccomm.stacks.horovod.peer.rendezvous"
LOOPBACK_RANKS = 2
# failing cases, for replay; one directory per user (another's would not be writable)
CASE_DIR = Path(tempfile.gettempdir()) / f"hpccomm-horovod-cases-{os.getuid()}"
MAX_STARTS = 3  # per peer and session: a peer that keeps dying is a failure, not a loop
GLOO_TIMEOUT_VAR = "HOROVOD_GLOO_TIMEOUT_SECONDS"
STALL_CHECK_VAR = "HOROVOD_STALL_CHECK_TIME_SECONDS"


# Horovod names an op given no name after the rank's own count of op handles
NONAME_HINT = (
    "  an unnamed op (<op>.noname.<handle>) waits for ranks that gave it another number: an "
    "earlier case had the ranks take different numbers of op handles (an op some ranks sat "
    "out, or a refused call: it takes a handle too)"
)


class HorovodError(Exception):
    """The peers could not be started, or keep dying (one line; a test failure)."""


class PeerLost(BaseException):
    """A rank hung or died during a case. BaseException: Hypothesis must not shrink on it
    (every shrink step would cost a timeout and a restart)."""


@dataclass(frozen=True)
class RankInfo:
    rank: int
    host: str
    pid: int  # in the rank's own PID namespace view: the same as ours (namespaces share PIDs)
    controller: str
    horovod: str
    process_sets: list[list[int]]
    cpus: tuple[int, ...] = ()  # the CPUs it may run on (wire.CPUS_VAR)
    size: int = 0  # hvd.size() as the rank reported it
    initialized: bool = False  # hvd.is_initialized() after init
    # the rank and size its launcher gave it (wire.RANK_VARS, SIZE_VARS); None: not given
    launcher_rank: int | None = None
    launcher_size: int | None = None
    wait: str = "spin"  # how it waits for an op (wire.WAIT_VAR)


@dataclass(frozen=True)
class Outcome:
    """One rank's fate after a request that may end ranks (HorovodPeers.outcomes)."""

    kind: str  # "replied", "error" (it answered with an error), "closed" (its channel closed:
    #            the process ended), "silent" (nothing within the timeout)
    reply: Any = None
    why: str = ""

    def __str__(self) -> str:
        return f"{self.kind}: {self.reply if self.kind == 'replied' else self.why}"


@dataclass(frozen=True)
class HostsSite:
    """Real hosts for the 'hosts' placement: one rank per host, in order, dialing home over TCP
    to `listen` (this host's fabric address); Horovod's traffic pinned to `netdev` (the same
    name on every host, as mpirun's btl_tcp_if_include assumes too)."""

    hosts: tuple[Host, ...]
    listen: str
    netdev: str
    rsh_agent: str | None = None
    launcher: str = "mpirun"  # or srun (MPI controller; Gloo ranks take the remote shell)
    bind_none: bool = False

    @property
    def shell(self) -> RemoteShell:
        return RemoteShell.from_option(self.rsh_agent)


@dataclass(frozen=True)
class TcpPins:
    """placed_launch.Pins of a TCP fabric: MPI's TCP transport on the fabric's netdev only."""

    interface: str
    tcp_only: bool = True
    env: Mapping[str, str] = field(default_factory=dict)


Site = VirtualCluster | HostsSite | None  # where the ranks go: the virtual cluster, real hosts


class HorovodPeers:
    """The session's peers for one (controller, placement). `with` starts and always reaps."""

    def __init__(
        self,
        hvd: HorovodEnv,
        controller: str,
        placement: str,
        site: Site = None,
        *,
        plant: str | None = None,
        env: Mapping[str, str] | None = None,
        job_timeout: float = 1800.0,
        case_timeout: float = 60.0,
        start_timeout: float = 120.0,
        loopback_ranks: int = LOOPBACK_RANKS,
    ) -> None:
        if controller not in CONTROLLERS:
            raise ValueError(f"unknown controller {controller!r} (known: {CONTROLLERS})")
        if plant is not None and plant not in PLANTS:
            raise ValueError(f"unknown plant {plant!r} (known: {', '.join(PLANTS)})")
        if placement not in (LOOPBACK, NETNS, HOSTS):
            raise HorovodError(
                f"placement {placement!r}: the Horovod peers run on {LOOPBACK}, {NETNS} or {HOSTS}"
            )
        if placement == NETNS and not isinstance(site, VirtualCluster):
            raise HorovodError("netns placement needs the session's virtual cluster")
        if placement == HOSTS and not (isinstance(site, HostsSite) and len(site.hosts) >= 2):
            raise HorovodError("hosts placement needs at least 2 hosts (--hpc-hosts)")
        if controller not in hvd.controllers:
            raise HorovodError(
                f"{hvd.python}: Horovod {hvd.version} was built without the "
                f"{controller} controller (has: {', '.join(hvd.controllers)})"
            )
        self.hvd, self.controller = hvd, controller
        self.placement = placement
        self.cluster = site if isinstance(site, VirtualCluster) else None
        self.hosts = site if isinstance(site, HostsSite) else None
        self.plant, self.extra_env = plant, dict(env or {})
        self.job_timeout, self.case_timeout, self.start_timeout = (
            job_timeout,
            case_timeout,
            start_timeout,
        )
        self.loopback_ranks = loopback_ranks
        self.starts = 0
        self._server: ControlServer | None = None
        self._jobs: list[RunningJob] = []
        self._channels: list[Channel] = []
        self._dumps = stacks.StackDumps()  # the ranks' Python stacks, when a case hangs
        self.ranks: list[RankInfo] = []

    @property
    def size(self) -> int:
        if not self.ranks:
            self.start()
        return len(self.ranks)

    def __enter__(self) -> HorovodPeers:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def describe(self) -> str:
        return f"horovod/{self.controller} {self.placement}" + (
            f" plant={self.plant}" if self.plant else ""
        )

    # -- start -----------------------------------------------------------------------------
    def n_ranks(self) -> int:
        if self.cluster is not None:
            return len(self.cluster.hosts)
        if self.hosts is not None:
            return len(self.hosts.hosts)
        return self.loopback_ranks

    def _env(self, n: int) -> dict[str, str]:
        assert self._server is not None
        env = {
            SIZE_VAR: str(n),
            **CONTROLLER_ENV[self.controller],
            **self._server.env(),
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": os.environ.get("HOME", "/tmp"),
            **self._dumps.env(),
            **self.extra_env,
        }
        if self.plant:
            env[PLANT_VAR] = self.plant
        cpus = sorted(os.sched_getaffinity(0))
        if self.hosts is None and n <= len(cpus):  # all ranks on this host's cores: one each
            env.setdefault(CPUS_VAR, ",".join(map(str, cpus)))  # a user's "" turns it off
        # more ranks than this host's cores (loopback, or a virtual cluster on it): a rank
        # that waits sleeps instead of spinning (wire.WAIT_VAR), as Open MPI's yield_when_idle
        env.setdefault(WAIT_VAR, "sleep" if self.hosts is None and n > len(cpus) else "spin")
        # Horovod's stall inspector (rank 0 names the tensors some ranks submitted and others
        # did not) speaks before the harness gives up on a case, not at its default 60 s
        env.setdefault(STALL_CHECK_VAR, str(max(5, int(self.case_timeout / 3))))
        if self.controller == "gloo":
            # Gloo's timeout (Horovod's default 30 s) bounds its connect and every receive:
            # below this harness's it aborts every rank first ("Application timeout caused pair
            # closure", seen once in a cold CI), so the harness's timeouts and reports decide
            env.setdefault(GLOO_TIMEOUT_VAR, str(int(self.job_timeout)))
        if self.controller == "mpi" and n > (os.cpu_count() or 1):
            # more ranks than cores: Open MPI's busy polling would starve the rank with work
            env.setdefault("OMPI_MCA_mpi_yield_when_idle", "1")
        return peer_env(env)

    def start(self) -> None:
        if self.ranks:
            return
        if self.starts >= MAX_STARTS:
            raise HorovodError(
                f"{self.describe()}: peers lost {self.starts} times; not restarting them again"
            )
        self.starts += 1
        # real hosts dial home over TCP to this host's fabric address; here and in the virtual
        # cluster (one file system) a Unix socket
        self._server = self._server or ControlServer(
            None if self.hosts is None else (self.hosts.listen, 0)
        )
        n = self.n_ranks()
        argv = [str(self.hvd.python), "-m", PEER_MODULE]
        try:
            if self.controller == "mpi":
                self._start_mpi(argv, n)
            else:
                self._start_gloo(argv, n)
            self._await_hellos(n)
        except BaseException as exc:
            tail = self._drop()
            if isinstance(exc, (HorovodError, PlacementError)):
                raise HorovodError(f"{self.describe()}: {exc}; {tail}") from None
            raise

    def _start_mpi(self, argv: list[str], n: int) -> None:
        if self.hvd.mpirun is None:
            raise HorovodError(f"{self.hvd.python}: no mpirun found for the MPI Horovod links")
        site = self.hosts
        placed = mpi_launch(
            self.placement,
            argv,
            self._env(n),
            self.hvd.mpirun,
            detect_mpi(self.hvd.mpirun),
            cluster=self.cluster,
            loopback_ranks=n,
            hosts=site.hosts if site else None,
            pins=TcpPins(site.netdev) if site else None,
            launcher=site.launcher if site else "mpirun",
            rsh_agent=site.rsh_agent if site else None,
            bind_none=site.bind_none if site else False,
        )
        self._jobs.append(placed.start(self.job_timeout, label=f"{self.describe()} peers"))

    def _start_gloo(self, argv: list[str], n: int) -> None:
        env = self._env(n)
        if self.cluster is not None:
            bind, iface = self.cluster.hosts[0].address, IFACE
            spec = ",".join(f"{h.name}:1" for h in self.cluster.hosts)
        elif self.hosts is not None:
            bind, iface = self.hosts.listen, self.hosts.netdev
            spec = ",".join(f"{h.name}:1" for h in self.hosts.hosts)
        else:
            bind, iface, spec = "127.0.0.1", "lo", f"localhost:{n}"
        # the rendezvous server runs here on hosts (bound to this host's fabric address)
        rdv = process_launch(
            NETNS if self.cluster else LOOPBACK,
            [str(self.hvd.python), "-m", RENDEZVOUS_MODULE, "--bind", bind, "--hosts", spec],
            env,
            cluster=self.cluster,
            host=0,
            label=f"{self.describe()} rendezvous",
        ).start(self.job_timeout)
        self._jobs.append(rdv)
        plan = self._read_plan(rdv)
        for slot in plan["slots"]:
            rank = int(slot["rank"])
            genv = {
                **env,
                "HOROVOD_GLOO_RENDEZVOUS_ADDR": bind,
                "HOROVOD_GLOO_RENDEZVOUS_PORT": str(plan["port"]),
                "HOROVOD_GLOO_IFACE": iface,
                "HOROVOD_HOSTNAME": slot["hostname"],
                **{
                    f"HOROVOD_{k.upper()}": str(slot[k])
                    for k in (
                        "rank",
                        "size",
                        "local_rank",
                        "local_size",
                        "cross_rank",
                        "cross_size",
                    )
                },
            }
            label = f"{self.describe()} rank {rank}"
            if self.hosts is not None and not is_this_host(slot["hostname"]):
                # Horovod's variables and the channel's key travel on stdin, never in argv
                self._jobs.append(
                    self.hosts.shell.start(slot["hostname"], argv, genv, self.job_timeout, label)
                )
                continue
            host = rank if self.cluster is not None else 0
            self._jobs.append(
                process_launch(
                    NETNS if self.cluster else LOOPBACK,
                    argv,
                    genv,
                    cluster=self.cluster,
                    host=host,
                    label=label,
                ).start(self.job_timeout)
            )

    def _read_plan(self, job: RunningJob) -> dict[str, Any]:
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            out, _ = job.peek_output()
            for line in out.splitlines():
                if line.startswith("{"):
                    plan: dict[str, Any] = json.loads(line)
                    return plan
            if job.poll() is not None:
                raise HorovodError("the Gloo rendezvous server ended before listening")
            time.sleep(0.05)
        raise HorovodError(
            f"the Gloo rendezvous server did not listen within {self.start_timeout:.0f}s"
        )

    def _await_hellos(self, n: int) -> None:
        assert self._server is not None
        deadline = time.monotonic() + self.start_timeout

        def gone() -> str:
            ended = any(job.poll() is not None for job in self._jobs)
            return "a peer process ended before dialing home" if ended else ""

        try:
            channels = self._server.accept_peers(n, self.start_timeout, gone)
        except (TimeoutError, ChannelClosed) as exc:
            raise HorovodError(f"ranks did not dial home: {exc}") from None
        self._channels = channels  # reaped with the peers from here on
        hellos = []
        for ch in channels:
            try:
                hellos.append(ch.recv(max(1.0, deadline - time.monotonic())))
            except (TimeoutError, ChannelClosed, MessageError) as exc:
                raise HorovodError(f"no hello from a rank: {exc}") from None
        order = sorted(range(n), key=lambda i: int(hellos[i].get("rank", -1)))
        self._channels = [channels[i] for i in order]
        self.ranks = [
            RankInfo(
                int(h["rank"]),
                str(h["host"]),
                int(h["pid"]),
                str(h["controller"]),
                str(h["horovod"]),
                list(h["process_sets"]),
                tuple(int(c) for c in h.get("cpus", ())),
                int(h.get("size", 0)),
                bool(h.get("initialized")),
                h.get("launcher_rank"),
                h.get("launcher_size"),
                str(h.get("wait", "spin")),
            )
            for h in (hellos[i] for i in order)
        ]
        if [r.rank for r in self.ranks] != list(range(n)):
            raise HorovodError(f"ranks said hello as {[r.rank for r in self.ranks]}")
        if {r.controller for r in self.ranks} != {self.controller}:
            raise HorovodError(
                f"asked for the {self.controller} controller, ranks run "
                f"{sorted({r.controller for r in self.ranks})}"
            )

    # -- requests --------------------------------------------------------------------------
    def request(self, msg: Mapping[str, Any], timeout: float | None = None) -> list[Any]:
        """Send msg to every rank, then collect every rank's reply (rank order). PeerLost if a
        rank does not answer in time or dies, HorovodError if one answers with an error; the
        peers are then reaped (the others may wait in a collective that rank never joined)
        and the next request starts new ones."""
        limit = timeout or self.case_timeout
        outs = self.outcomes(msg, limit)
        if all(o.kind == "replied" for o in outs):
            return [o.reply for o in outs]
        lost = next((o for o in outs if o.kind in ("closed", "silent")), None)
        where = self.where_hung(outs) if any(o.kind == "silent" for o in outs) else ""
        tail = self._drop()
        if lost is None:
            errors = "; ".join(o.why for o in outs if o.kind == "error")
            raise HorovodError(f"{self.describe()}: {errors}; {tail}")
        why = f"no reply within {limit:.0f}s" if lost.kind == "silent" else lost.why
        raise PeerLost(
            f"{self.describe()}: peers lost during {msg.get('op')}: {why}; {tail}{where}"
        )

    def where_hung(self, outs: Sequence[Outcome]) -> str:
        """Where the silent ranks are, asked before they are ended: every thread's Python
        stack (the peers' faulthandler), the native stacks of Horovod's threads where gdb is
        installed, and what Horovod's stall inspector said; the whole text goes to a file
        beside the replay cases."""
        ours = {p.pid for job in self._jobs for p in job.processes()}  # alive, and ours alone
        silent = [
            r
            for r, o in zip(self.ranks, outs)
            if o.kind == "silent" and r.pid in ours and (self.hosts is None or is_this_host(r.host))
        ]
        lines = [f"where the silent ranks were ({', '.join(str(r.rank) for r in silent)}):"]
        for job in self._jobs:  # the stall inspector's warning and the ranks it names
            err = job.peek_output()[1].splitlines()
            at = [i for i, ln in enumerate(err) if "stall_inspector" in ln][-1:]
            lines += [f"  {job.label}: {ln.strip()[:300]}" for i in at for ln in err[i : i + 3]]
        if any(".noname." in ln for ln in lines):
            lines.append(NONAME_HINT)
        named = {f"rank {r.rank}": r.pid for r in silent}
        lines += stacks.where_they_wait(self._dumps, named, CASE_DIR, ("horovod", "gloo", "mpi"))
        return "\n" + "\n".join(lines)

    def outcomes(self, msg: Mapping[str, Any], timeout: float) -> list[Outcome]:
        """Send msg to every rank; each rank's Outcome within `timeout` (a request that ends
        ranks judges the others' fate by them). Nothing is restarted or reaped here."""
        self.start()
        deadline = time.monotonic() + timeout
        sent: list[int | Outcome] = []
        for ch in self._channels:
            try:
                sent.append(ch.send_request(msg))
            except (ChannelClosed, MessageError) as exc:
                sent.append(Outcome("closed", why=str(exc)))
        out: list[Outcome] = []
        for ch, rid in zip(self._channels, sent):
            if isinstance(rid, Outcome):
                out.append(rid)
                continue
            try:
                out.append(
                    Outcome(
                        "replied",
                        ch.await_reply(
                            rid, max(0.01, deadline - time.monotonic()), str(msg.get("op"))
                        ),
                    )
                )
            except TimeoutError as exc:
                out.append(Outcome("silent", why=str(exc)))
            except (ChannelClosed, MessageError) as exc:
                out.append(Outcome("closed", why=str(exc)))
            except RemoteError as exc:
                out.append(Outcome("error", why=str(exc)))
        return out

    def pids(self) -> list[int]:
        return [r.pid for r in self.ranks]

    def run(self, case: Mapping[str, Any], timeout: float | None = None) -> list[dict[str, Any]]:
        """Every rank's report of the case, in rank order."""
        try:
            return self.request({"op": "case", "case": dict(case)}, timeout)
        except PeerLost as exc:
            raise PeerLost(f"{exc}\n{self.replay_hint(case)}") from None

    def context(self, case: dict[str, Any]) -> str:
        """What a failed property's message ends with: the case, decoded, and its replay."""
        return f"\ncase: {describe_case(case)}\n{self.replay_hint(case)}"

    def replay_hint(self, case: Mapping[str, Any]) -> str:
        """A command that runs the case under mpirun alone (every rank's input is in the case
        file, written here content-addressed; the plant, if any, is part of the command)."""
        text = json.dumps(dict(case), sort_keys=True)
        CASE_DIR.mkdir(parents=True, exist_ok=True)
        path = CASE_DIR / f"{hashlib.sha256(text.encode()).hexdigest()[:16]}.json"
        atomic_write(path, text)
        # the controller's variables too: an inherited HOROVOD_CPU_OPERATIONS=gloo under
        # mpirun segfaults Horovod 0.28.1
        env = (
            " ".join(
                [
                    f"PYTHONPATH={PROJECT_ROOT}",
                    *(f"{k}={v}" for k, v in CONTROLLER_ENV["mpi"].items()),
                    *([f"{PLANT_VAR}={self.plant}"] if self.plant else []),
                ]
            )
            + " "
        )
        n = len(self.ranks) or self.n_ranks()
        flags = replay_flags()
        return (
            f"replay without pytest (MPI controller): {env}{SIZE_VAR}={n} "
            f"{self.hvd.mpirun or 'mpirun'} {flags}-n {n} {self.hvd.python} -m "
            f"{PEER_MODULE} --case {path}"
        )

    # -- stop ------------------------------------------------------------------------------
    def _drop(self) -> str:
        """End every process of the peers, whatever their state; their last words."""
        for ch in self._channels:
            ch.close()
        self._channels, self.ranks = [], []
        words = [job.stop(grace=1.0).describe() for job in self._jobs]
        self._jobs = []
        return "; ".join(w for w in words if w) or "no job"

    def park(self) -> None:
        """Close the ranks for now; the next request starts new ones, and that start is not
        counted against MAX_STARTS (nothing was lost)."""
        if self.ranks:
            self.close()
            self.starts -= 1

    def close(self) -> None:
        try:
            if self._channels:
                try:
                    self.request({"op": "shutdown"}, timeout=15.0)
                    for job in self._jobs[1 if self.controller == "gloo" else 0 :]:
                        job.wait(timeout=15.0)
                except (PeerLost, HorovodError, TimeoutError):
                    pass
            self._drop()
        finally:
            if self._server is not None:
                self._server.close()
                self._server = None
            self._dumps.close()


def controller_list(value: str) -> list[str]:
    """--hpc-horovod-controllers: a comma list of CONTROLLERS (ValueError names the bad one)."""
    names = [v.strip() for v in value.split(",") if v.strip()]
    bad = [v for v in names if v not in CONTROLLERS]
    if bad or not names:
        raise ValueError(
            f"controllers must be a comma list of {', '.join(CONTROLLERS)}"
            + (f", not {', '.join(bad)}" if bad else "")
        )
    return names


def bench_times(replies: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per size and batch: the ranks' mean seconds per operation (nccl-tests' default
    `-a 1`, and OSU's "Avg Latency": what the OSU allreduce beside it reports), the slowest
    rank's (`max_samples`), and whether every rank validated; `unstretched` (the canary's own
    work) likewise averaged, where the ranks sent it."""
    points = []
    for per_rank in zip(*(r["points"] for r in replies)):
        batches = list(zip(*(p["samples"] for p in per_rank)))
        point = {
            "bytes": per_rank[0]["bytes"],
            "valid": all(p["valid"] for p in per_rank),
            "samples": [sum(b) / len(b) for b in batches],
            "max_samples": [max(b) for b in batches],
        }
        if "unstretched" in per_rank[0]:
            point["unstretched"] = [
                sum(b) / len(b) for b in zip(*(p["unstretched"] for p in per_rank))
            ]
        points.append(point)
    return points
