"""Orchestrator side of the gRPC stack: start servers, run benchmark clients, read results.

Servers are long-lived jobs (one per peer kind, placement and index, for the session); they
bind to 127.0.0.1, to their virtual host's fabric address or to their real host's, port 0,
and print a READY line with the ports they got. Clients are jobs that run a whole sweep
(every benchmark x layout) and print one JSON document. Parameter-server runs start W worker
jobs that begin their batches at a common start (StartFiles), so batch b of every worker covers
the same window.
"""

from __future__ import annotations

import dataclasses
import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from pytest_hpccomm.cluster.host_fabrics import ClusterFabric
from pytest_hpccomm.cluster.peer_env import peer_env as cluster_peer_env
from pytest_hpccomm.cluster.placed_launch import PlacedLaunch, PlacementError, process_launch
from pytest_hpccomm.cluster.placement import HOSTS, LOOPBACK, NETNS
from pytest_hpccomm.cluster.remote_shell import RemoteShell, is_this_host
from pytest_hpccomm.cluster.virtual import VirtualCluster
from pytest_hpccomm.measure.link import LinkRate, shaped_fingerprint
from pytest_hpccomm.measure.pooling import pool_point
from pytest_hpccomm.proc import cpu_share
from pytest_hpccomm.proc.cpu_share import CpuShare
from pytest_hpccomm.proc.jobs import JobResult, RunningJob
from pytest_hpccomm.stacks.grpc import wire
from pytest_hpccomm.stacks.grpc.build import NativeBuild
from pytest_hpccomm.stacks.grpc.certs import TlsFiles

PEERS = ("python", "python-aio", "native")
READY_TIMEOUT = 30.0


class GrpcRunError(Exception):
    """A server or client job failed: a test failure with the job's own words."""


@dataclass(frozen=True)
class GrpcHosts:
    """Real hosts (--hpc-hosts) with the session's fabric on each: a server listens on its
    host's fabric address; peers start over the remote shell (here when the host is this
    machine). The checkout, the native build and Python are at the same paths on every host
    (a cluster's shared file system, the guests' 9p share)."""

    fabric: ClusterFabric

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(h.host for h in self.fabric.hosts)

    def address(self, host: int) -> str:
        return self.fabric.hosts[host % len(self.fabric.hosts)].address

    def name(self, host: int) -> str:
        return self.names[host % len(self.names)]


Site = VirtualCluster | GrpcHosts | None  # where netns / hosts placements put the peers


@dataclass(frozen=True)
class BenchSettings:
    batches: int
    batch_seconds: float
    warmup_seconds: float
    lifetime: float  # session servers stop by themselves after this

    @classmethod
    def for_profile(cls, profile: str) -> BenchSettings:
        if profile == "full":
            return cls(batches=50, batch_seconds=0.1, warmup_seconds=1.0, lifetime=4 * 3600)
        return cls(batches=10, batch_seconds=0.02, warmup_seconds=0.05, lifetime=3600)

    @property
    def planned_seconds(self) -> float:
        """Of one (benchmark, layout) when a batch is not longer than planned."""
        return self.warmup_seconds + self.batches * self.batch_seconds


def peer_env() -> dict[str, str]:
    """A peer's whole environment: this one's, with the project on PYTHONPATH."""
    return cluster_peer_env(inherit=True)


def hostport(address: str, port: int) -> str:
    return f"[{address}]:{port}" if ":" in address else f"{address}:{port}"


def peer_command(
    kind: str, native: NativeBuild | None, role: str, python: str = sys.executable
) -> list[str]:
    """A peer's argv: the native build's program, or the Python peer run by `python` (this
    interpreter, or the Python --hpc-grpc-python names: python_env)."""
    if kind == "native":
        if native is None:
            raise GrpcRunError("native peer requested without a build")
        return [str(native.peer), role]
    if kind not in PEERS:
        raise GrpcRunError(f"unknown gRPC peer kind {kind!r} (choose from {', '.join(PEERS)})")
    return [
        python,
        "-m",
        "pytest_hpccomm.stacks.grpc.peer",
        role,
        "--kind",
        "sync" if kind == "python" else "aio",
    ]


# -- servers ------------------------------------------------------------------------------------


@dataclass
class ServerHandle:
    kind: str
    placement: str
    address: str  # what it is bound to
    host: str  # "local" or the virtual host's name
    info: dict[str, Any]  # its READY document
    job: RunningJob

    @property
    def target(self) -> str:
        return hostport(self.address, int(self.info["port"]))

    @property
    def tls_target(self) -> str:
        return hostport(self.address, int(self.info["tls_port"]))

    @property
    def max_message(self) -> int:
        return int(self.info["max_message"])

    def alive(self) -> bool:
        return not self.job.done

    def stop(self) -> JobResult:
        return self.job.stop()


def start_server(
    kind: str,
    native: NativeBuild | None,
    placement: str = LOOPBACK,
    site: Site = None,
    host: int = 0,
    *,
    tls: TlsFiles | None = None,
    max_message: int = wire.MAX_MESSAGE,
    lifetime: float = 3600.0,
    drop_last: bool = False,
    env: Mapping[str, str] | None = None,
    bind: str = "",
    python: str = sys.executable,
) -> ServerHandle:
    """Start a server and wait for its READY line; never binds all interfaces. `env`: the
    runtime's (over the peer's own); `bind`: a local address other than 127.0.0.1 (an RDMA
    runtime listens on the fabric's address, which its device serves)."""
    if placement == NETNS:
        if not isinstance(site, VirtualCluster):
            raise GrpcRunError("netns placement needs a virtual cluster")
        vhost = site.host(host)
        address, host_name = vhost.address, vhost.name
    elif placement == HOSTS:
        if not isinstance(site, GrpcHosts):
            raise GrpcRunError("hosts placement needs the hosts of --hpc-hosts")
        address, host_name = site.address(host), site.name(host)
    else:
        address, host_name = bind or "127.0.0.1", "local"
    argv = peer_command(kind, native, "server", python) + [
        "--bind",
        hostport(address, 0),
        "--max-message",
        str(max_message),
        "--lifetime",
        str(lifetime),
    ]
    if tls is not None:
        argv += [
            "--tls-bind",
            hostport(address, 0),
            "--tls-cert",
            str(tls.cert),
            "--tls-key",
            str(tls.key),
        ]
    if drop_last:
        argv.append("--drop-last-buffer")
    timeout = lifetime + 60.0  # the job's hard cap, past the server's own
    job = _placed(placement, argv, site, host, f"grpc {kind} server", env).start(timeout)
    deadline = time.monotonic() + READY_TIMEOUT
    while time.monotonic() < deadline:
        info = wire.parse_ready(job.peek_output()[0])
        if info is not None:
            return ServerHandle(kind, placement, address, host_name, info, job)
        if job.done:
            res = job.wait()
            raise GrpcRunError(
                f"gRPC {kind} server did not start: {res.describe()}{grpc_cause(res.stderr)}"
            )
        time.sleep(0.02)
    res = job.stop()
    raise GrpcRunError(
        f"gRPC {kind} server printed no READY line within {READY_TIMEOUT:.0f}s: {res.describe()}"
    )


_OS_ERROR = re.compile(r'(?:os_error:"([^"]*)"|syscall:"([^"]*)"|errno:(\d+))')


def grpc_cause(stderr: str) -> str:
    """The innermost system call error of gRPC's last error log line that has one, e.g.
    '; gRPC: fcntl: Operation not supported (errno 95)' ("": none). A peer's own last words
    say only that it could not listen; gRPC logged why, nested in its status."""
    for line in reversed(stderr.splitlines()):
        if not line.startswith("E") or "os_error" not in line or "SO_REUSEPORT" in line:
            continue
        # the fields of one error come together; the innermost error comes last
        found: dict[str, str] = {}
        for os_error, syscall, errno in _OS_ERROR.findall(line):
            key, value = (
                ("os_error", os_error)
                if os_error
                else ("syscall", syscall)
                if syscall
                else ("errno", errno)
            )
            if key in found and len(found) == 3:
                found = {}
            found[key] = value
        if found:
            return (
                f"; gRPC: {found.get('syscall', '?')}: {found.get('os_error', '?')}"
                f" (errno {found.get('errno', '?')})"
            )
    return ""


# -- clients ------------------------------------------------------------------------------------

Layouts = Sequence[tuple[str, Sequence[int]]]


def client_argv(
    kind: str,
    native: NativeBuild | None,
    targets: Sequence[str],
    mode: str,
    benchmarks: Sequence[str],
    layouts: Layouts,
    s: BenchSettings,
    slowdown: float = 1.0,
    start_file: str = "",
    python: str = sys.executable,
) -> list[str]:
    argv = peer_command(kind, native, "client", python) + [
        "--targets",
        ",".join(targets),
        "--mode",
        mode,
        "--benchmark",
        ",".join(benchmarks),
        "--batches",
        str(s.batches),
        "--batch-seconds",
        repr(s.batch_seconds),
        "--warmup-seconds",
        repr(s.warmup_seconds),
        "--slowdown",
        repr(slowdown),
    ]
    if start_file:
        argv += ["--start-file", start_file]
    for name, sizes in layouts:
        argv += ["--layout", f"{name}={','.join(map(str, sizes))}"]
    return argv


def client_timeout(
    layouts: Layouts, benchmarks: Sequence[str], s: BenchSettings, targets: int
) -> float:
    """Generous but finite: start-up, the planned time x 4, and 5 MB/s for every byte a
    slow peer might move (a batch holds at least one operation whatever its planned length)."""
    planned = len(layouts) * len(benchmarks) * (s.planned_seconds + 0.1)
    moved = (
        sum(sum(sizes) for _, sizes in layouts) * len(benchmarks) * targets * 2 * (s.batches + 10)
    )
    return 60.0 + 4 * planned + moved / 5e6


def _placed(
    placement: str,
    argv: Sequence[str],
    site: Site,
    host: int,
    label: str,
    env: Mapping[str, str] | None = None,
) -> PlacedLaunch:
    where: dict[str, Any] = {}
    if isinstance(site, VirtualCluster):
        where = {"cluster": site}
    elif isinstance(site, GrpcHosts) and placement == HOSTS:
        label = f"{label} on {site.name(host)}"
        where = {"hosts": site.names, "shell": site.fabric.shell}
    try:
        return process_launch(
            placement, argv, {**peer_env(), **(env or {})}, host=host, label=label, **where
        )
    except PlacementError as exc:
        raise GrpcRunError(str(exc)) from None


def start_client(
    argv: Sequence[str],
    placement: str,
    site: Site,
    host: int,
    timeout: float,
    env: Mapping[str, str] | None = None,
) -> RunningJob:
    return _placed(placement, argv, site, host, "grpc client", env).start(timeout)


def finish_client(job: RunningJob, what: str) -> tuple[dict[str, Any], CpuShare | None]:
    """The client's document, and the contention guard's reading of its run."""
    res = job.wait()
    if not res.ok:
        raise GrpcRunError(f"{what} failed: {res.describe()}")
    try:
        doc = wire.parse_result(res.stdout)
    except ValueError as e:
        raise GrpcRunError(f"{what}: unreadable output ({e}): {res.stdout[-300:]!r}") from None
    return doc, res.cpu


# -- sweeps -------------------------------------------------------------------------------------


@dataclass
class Sweep:
    """Per (benchmark, layout name): samples (aggregated over workers), warm-up, errors."""

    family: str  # "p2p" or "ps" (ps and mimic)
    peer: str
    mode: str
    placement: str
    results: dict[tuple[str, str], dict[str, Any]]
    grpc_version: str
    workers: int = 1
    servers: int = 1
    veth: dict[str, int] = field(default_factory=dict)  # client host's fab0 byte deltas
    cpu: list[dict[str, float]] = field(default_factory=list)  # per client job (cpu_share.py)
    disturbed: str = ""  # why a client run's timings are not its own ("": cores were ours)
    reruns: int = 0  # client runs repeated because another process shared the cores
    runtime: str = ""  # the gRPC runtime's label (env.py)
    path: list[dict[str, Any]] = field(default_factory=list)  # per client run: path.py
    link: LinkRate | None = None  # the link between servers and clients (None: unknown)

    def get(self, benchmark: str, name: str) -> dict[str, Any]:
        try:
            return self.results[(benchmark, name)]
        except KeyError:
            raise GrpcRunError(f"no result for {benchmark} {name}") from None

    @property
    def runtime_fingerprint(self) -> dict[str, Any]:
        return {"grpc_peer_version": self.grpc_version, **shaped_fingerprint(self.link)}


def _index(docs: Sequence[dict[str, Any]], combine: str) -> dict[tuple[str, str], dict[str, Any]]:
    """Merge the workers' documents: per batch, rates add up ("sum") or times average."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for doc in docs:
        for r in doc["results"]:
            key = (r["benchmark"], r["name"])
            r = {k: v for k, v in r.items() if k != "unstretched" or v}  # [] unless the canary
            if key not in out:
                out[key] = {
                    **r,
                    "samples": list(r["samples"]),
                    "per_worker": [r["samples"]],
                    "errors": list(r["errors"]),
                }
                continue
            m = out[key]
            n = min(len(m["samples"]), len(r["samples"]))
            for series in ("samples", "unstretched"):
                if series in m and series in r:
                    m[series] = [a + b for a, b in zip(m[series][:n], r[series][:n])]
            m["per_worker"].append(r["samples"])
            m["errors"] += r["errors"]
            m["warmup"] += r["warmup"]
    if combine == "mean":
        for m in out.values():
            for series in ("samples", "unstretched"):
                if series in m:
                    m[series] = [x / len(m["per_worker"]) for x in m[series]]
    return out


def merge_sweeps(sweeps: Sequence[Sweep]) -> Sweep:
    """One Sweep from independent client runs (--hpc-repeats) against the same servers: per
    (benchmark, layout) the batches of every run in run order, warm-up summed, all errors,
    each run's median kept as `job_medians` (measure/pooling.py); veth deltas add up."""
    if len(sweeps) == 1:
        return sweeps[0]
    first = sweeps[0]
    results: dict[tuple[str, str], dict[str, Any]] = {}
    for key in first.results:
        parts = [sw.results[key] for sw in sweeps if key in sw.results]
        if len(parts) < len(sweeps):
            continue
        results[key] = pool_point(
            parts, ("samples", "unstretched", "per_worker", "errors", "iterations")
        )
    veth = {k: sum(sw.veth.get(k, 0) for sw in sweeps) for k in first.veth}
    return dataclasses.replace(
        first,
        results=results,
        veth=veth,
        cpu=[c for sw in sweeps for c in sw.cpu],
        path=[p for sw in sweeps for p in sw.path],
        disturbed=next((sw.disturbed for sw in sweeps if sw.disturbed), ""),
        reruns=sum(sw.reruns for sw in sweeps),
        link=first.link if all(sw.link == first.link for sw in sweeps) else None,
    )


def _counters(site: Site, host: int) -> tuple[int, int] | None:
    return site.counters(host) if isinstance(site, VirtualCluster) else None


def run_p2p(
    kind: str,
    native: NativeBuild | None,
    server: ServerHandle,
    mode: str,
    layouts: Layouts,
    s: BenchSettings,
    slowdown: float = 1.0,
    site: Site = None,
    client_host: int = 1,
    env: Mapping[str, str] | None = None,
    python: str = sys.executable,
) -> Sweep:
    """Latency (echo) and bandwidth (acknowledged sends) over every layout, one client job."""
    benchmarks = ("latency", "bandwidth")
    argv = client_argv(
        kind, native, [server.target], mode, benchmarks, layouts, s, slowdown, python=python
    )
    before = _counters(site, client_host)
    job = start_client(
        argv, server.placement, site, client_host, client_timeout(layouts, benchmarks, s, 1), env
    )
    doc, share = finish_client(job, f"gRPC {kind} {mode} p2p client")
    cpu = cpu_share.of_jobs([share])
    sweep = Sweep(
        "p2p",
        kind,
        mode,
        server.placement,
        _index([doc], "sum"),
        str(doc.get("grpc_version", "")),
        cpu=list(cpu.shares),
        disturbed=cpu.disturbed,
    )
    after = _counters(site, client_host)
    if before is not None and after is not None:
        sweep.veth = {"rx": after[0] - before[0], "tx": after[1] - before[1]}
    return sweep


# a segment's start on another host: "now" by that host's clock, renamed into place
_WRITE_NOW = 'mkdir -p "${1%/*}" && date +%s.%N > "$1.tmp" && mv "$1.tmp" "$1"'
REMOTE_TIMEOUT = 60.0


@dataclass(frozen=True)
class StartFiles:
    """Where the workers of a PS run read each segment's start: `path`.SEGMENT here, and the
    same path on each other host a worker runs on, written there over the remote shell as
    that host's "now" (its workers start as they read it; clocks need not agree)."""

    path: str
    site: Site = None
    remote: tuple[str, ...] = ()  # names of the other hosts with workers

    @classmethod
    def for_workers(cls, path: str, site: Site, hosts: Sequence[int]) -> StartFiles:
        if not isinstance(site, GrpcHosts):
            return cls(path)
        names = dict.fromkeys(site.name(h) for h in hosts)
        return cls(path, site, tuple(n for n in names if not is_this_host(n)))

    def give(self, segment: int) -> None:
        path = f"{self.path}.{segment}"
        with open(path + ".tmp", "w") as f:
            f.write(repr(time.time() + 0.01))
        os.rename(path + ".tmp", path)  # atomic: a worker never reads half a number
        for host in self.remote:
            res = self._shell().run(
                host,
                ["sh", "-c", _WRITE_NOW, "sh", path],
                REMOTE_TIMEOUT,
                label=f"start of segment {segment} on {host}",
            )
            if not res.ok:
                raise GrpcRunError(
                    f"the start of segment {segment} could not be written on "
                    f"{host}: {res.describe()}"
                )

    def remove(self) -> None:
        for host in self.remote:  # the local directory goes with its TemporaryDirectory
            self._shell().run(host, ["rm", "-rf", os.path.dirname(self.path)], REMOTE_TIMEOUT)

    def _shell(self) -> RemoteShell:
        assert isinstance(self.site, GrpcHosts)
        return self.site.fabric.shell


def _barrier(
    jobs: Sequence[RunningJob], segment: int, start: StartFiles, deadline: float, kind: str
) -> None:
    """Wait until every worker has said READY for `segment`, then give them a common start."""
    waiting = list(jobs)
    while waiting:
        waiting = [j for j in waiting if wire.count_ready(j.peek_output()[0]) <= segment]
        for j in waiting:
            if j.done:
                raise GrpcRunError(
                    f"gRPC {kind} worker ended before segment {segment}: {j.wait().describe()}"
                )
        if waiting and time.monotonic() > deadline:
            raise GrpcRunError(
                f"{len(waiting)} gRPC {kind} workers not at segment {segment} in time"
            )
        time.sleep(0.005)  # not faster: this process shares the cores with the measurement
    start.give(segment)


def run_ps(
    kind: str,
    native: NativeBuild | None,
    servers: Sequence[ServerHandle],
    mode: str,
    layouts: Layouts,
    s: BenchSettings,
    workers: int,
    slowdown: float = 1.0,
    site: Site = None,
    worker_hosts: Sequence[int] = (1,),
    env: Mapping[str, str] | None = None,
    python: str = sys.executable,
) -> Sweep:
    """Parameter-server throughput and the mimic step: W worker jobs, each calling every server
    in every step. Each (benchmark, layout) starts on all workers at once (a barrier through
    files: workers say READY, the orchestrator writes the start time). Rates add up over
    workers; mimic step times average."""
    placement = servers[0].placement
    targets = [srv.target for srv in servers]
    benchmarks = ("ps", "mimic")
    timeout = client_timeout(layouts, benchmarks, s, len(targets)) + READY_TIMEOUT
    jobs: list[RunningJob] = []
    hosts = [worker_hosts[w % len(worker_hosts)] for w in range(workers)]
    with tempfile.TemporaryDirectory(prefix="hpccomm-grpc-") as tmp:
        start = StartFiles.for_workers(os.path.join(tmp, "start"), site, hosts)
        try:
            for host in hosts:
                argv = client_argv(
                    kind,
                    native,
                    targets,
                    mode,
                    benchmarks,
                    layouts,
                    s,
                    slowdown,
                    start.path,
                    python,
                )
                jobs.append(start_client(argv, placement, site, host, timeout, env))
            deadline = time.monotonic() + timeout
            for segment in range(len(benchmarks) * len(layouts)):
                _barrier(jobs, segment, start, deadline, kind)
            finished = [
                finish_client(job, f"gRPC {kind} {mode} worker {i}") for i, job in enumerate(jobs)
            ]
        finally:
            for job in jobs:
                job.stop()
            start.remove()
    docs = [doc for doc, _ in finished]
    cpu = cpu_share.of_jobs(share for _, share in finished)
    ps = _index(docs, "sum")
    mimic = _index(docs, "mean")
    merged = {k: v for k, v in ps.items() if k[0] == "ps"}
    merged.update({k: v for k, v in mimic.items() if k[0] == "mimic"})
    return Sweep(
        "ps",
        kind,
        mode,
        placement,
        merged,
        str(docs[0].get("grpc_version", "")),
        workers=workers,
        servers=len(servers),
        cpu=list(cpu.shares),
        disturbed=cpu.disturbed,
    )
