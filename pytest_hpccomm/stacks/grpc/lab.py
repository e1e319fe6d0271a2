"""The gRPC stack's session lab: the native build, the runtimes, TLS, servers, where they
run, the pooled sweeps (stored and paired) and the path proof (orchestrator side).

More: docs/explanation/internals.md (pytest_hpccomm.stacks.grpc.plugin).
"""

from __future__ import annotations

import dataclasses
import functools
import operator
from pathlib import Path
from typing import Any

import pytest

from pytest_hpccomm.cluster.placement import HOSTS, LOOPBACK, NETNS
from pytest_hpccomm.cluster.virtual import VirtualCluster
from pytest_hpccomm.fabrics import FabricSelection
from pytest_hpccomm.fabrics.link_rate import discovered_link_rate, slowest
from pytest_hpccomm.fabrics.path_proof import PathProbe, Reading, read
from pytest_hpccomm.fabrics.sysfs import SOFTWARE_DRIVERS
from pytest_hpccomm.fabrics.tcp_owners import OwnersUnavailable, TcpOwnersMeter
from pytest_hpccomm.measure.link import LinkRate
from pytest_hpccomm.session import hpc_session_of
from pytest_hpccomm.stacks.contract import SessionStore
from pytest_hpccomm.stacks.grpc.build import (
    NativeBuild,
    NativeBuildError,
    NativeUnavailable,
    ensure_built,
    prebuilt,
)
from pytest_hpccomm.stacks.grpc.certs import TlsFiles, TlsUnavailable, make_tls
from pytest_hpccomm.stacks.grpc.driver import (
    BenchSettings,
    GrpcHosts,
    GrpcRunError,
    ServerHandle,
    Site,
    Sweep,
    merge_sweeps,
    run_p2p,
    run_ps,
    start_server,
)
from pytest_hpccomm.stacks.grpc.env import Runtime, RuntimeUnavailable, resolve, uses
from pytest_hpccomm.stacks.grpc.options import GrpcOptions
from pytest_hpccomm.stacks.grpc.perf import payload_moved
from pytest_hpccomm.stacks.grpc.python_env import PythonEnvError, peer_python
from pytest_hpccomm.stacks.grpc.skips import (
    netns_reason,
    on_tcp_reason,
    python_client_reason,
    python_peer_reason,
)

Failure = GrpcRunError | NativeBuildError
Where = tuple[str, str, str, str, str]  # family, peer, mode, placement, runtime label
FRESH_SERVERS = 1000  # server indices of paired rounds: 1000 * (round + 1) + i


class GrpcLab:
    """Session state: the native build, running servers, finished sweeps. Failures are cached
    too, so every item that needs a broken piece reports the same error without retrying."""

    def __init__(
        self,
        opts: GrpcOptions,
        profile: str,
        slowdown: float,
        tmp: Path,
        repeats: int = 1,
        max_repeats: int = 0,
        selection: FabricSelection | None = None,
        fabric: str = "",
        named: str = "",
    ) -> None:
        self.opts = opts
        # the option that named this lab's gRPC ("": the default, the system's): when named,
        # a missing toolchain fails the native items instead of skipping them
        self.named = named
        self.selection, self.fabric = selection, fabric
        self._runtimes: dict[str, Runtime] | RuntimeUnavailable | None = None
        self.settings = BenchSettings.for_profile(profile)
        self.slowdown = slowdown
        self.sweeps = GrpcSweeps(self, repeats, max_repeats)  # pooled client runs per Where
        self.tmp = tmp
        self._native: NativeBuild | NativeUnavailable | NativeBuildError | None = None
        self._python: tuple[str, str] | PythonEnvError | None = None
        self._tls: TlsFiles | TlsUnavailable | None = None
        self._servers: dict[tuple[str, str, int, str], ServerHandle | Failure] = {}
        self._owners: TcpOwnersMeter | OwnersUnavailable | None = None

    # -- pieces ---------------------------------------------------------------------------------
    def native(self) -> NativeBuild:
        """The built native peer; skips (no toolchain, none named) or fails (build error, or
        the gRPC an option named cannot be built here)."""
        if self._native is None:
            try:
                self._native = (
                    prebuilt(self.opts.build)
                    if self.opts.build is not None
                    else ensure_built(self.opts.prefix)
                )
            except (NativeUnavailable, NativeBuildError) as e:
                self._native = e
        if isinstance(self._native, NativeUnavailable):
            if self.named:
                pytest.fail(f"{self.named}: {self._native}", pytrace=False)
            pytest.skip(str(self._native))
        if isinstance(self._native, NativeBuildError):
            pytest.fail(str(self._native), pytrace=False)
        return self._native

    def build_for(self, peer: str) -> NativeBuild | None:
        return self.native() if peer == "native" else None

    def python_peers(self) -> tuple[str, str]:
        """(the Python, its grpcio) the Python peers run: a release's venv is made on first
        use; one that cannot be made fails every Python-peer item, naming the option."""
        if self._python is None:
            try:
                self._python = peer_python(self.opts.python)
            except PythonEnvError as e:
                self._python = e
        if isinstance(self._python, PythonEnvError):
            paired = self.named.endswith(f"grpc={self.opts.python}")
            where = self.named if paired else f"--hpc-grpc-python {self.opts.python}"
            pytest.fail(f"{where}: {self._python}", pytrace=False)
        return self._python

    def runtime(self, label: str = "", peer: str = "native") -> Runtime:
        """A runtime of this session by label ("": the one under test); skips when the fabric
        lacks what it needs, or for a Python peer under anything but stock gRPC."""
        if self._runtimes is None:
            compat = (
                self.native().rsocket_compat if uses(self.opts.spec, "rsocket_compat") else None
            )
            try:
                self._runtimes = {
                    r.label: r
                    for r in resolve(self.opts.spec, self.selection, self.fabric, compat=compat)
                }
            except RuntimeUnavailable as e:
                self._runtimes = e
        if isinstance(self._runtimes, RuntimeUnavailable):
            pytest.skip(str(self._runtimes))
        got = self._runtimes[label or self.opts.runtime]
        if peer != "native" and got.env:
            pytest.skip(python_peer_reason(got.label, peer))
        return got

    def twin_of(self, rt: Runtime) -> Runtime | None:
        """The TCP twin of the runtime under test (None for the twin itself, or none)."""
        if rt.twin_of or not isinstance(self._runtimes, dict):
            return None
        return next((r for r in self._runtimes.values() if r.twin_of == rt.label), None)

    def emulated(self, rt: Runtime) -> str:
        """Why an RDMA runtime's timings (and its twin's) get no verdict here ("": they do)."""
        sel = self.selection
        if not self.opts.spec.rdma or sel is None or sel.driver not in SOFTWARE_DRIVERS:
            return ""
        return (
            f"emulated RDMA device {sel.device} ({sel.driver}): its timings say nothing "
            "about a fabric"
        )

    def bind_address(self) -> str:
        """Where local servers listen ("": 127.0.0.1): an RDMA runtime's device serves the
        fabric's address, and its TCP twin listens there too (over IPoIB or the RoCE netdev
        on a fabric, as AR-gRPC is compared with gRPC over IPoIB)."""
        if self.opts.spec.rdma and self.selection is not None and self.selection.address:
            return self.selection.address
        return ""

    def tls_files(self) -> TlsFiles | None:
        """The test CA and a server certificate for loopback and the runtime's address (None:
        no openssl CLI; servers then listen without TLS and only the TLS property skips)."""
        if self._tls is None:
            ips = ("127.0.0.1", *([self.bind_address()] if self.bind_address() else []))
            try:
                self._tls = make_tls(self.tmp / "tls", ips)
            except TlsUnavailable as e:
                self._tls = e
        return None if isinstance(self._tls, TlsUnavailable) else self._tls

    def tls(self) -> TlsFiles:
        got = self.tls_files()
        if got is None:
            pytest.skip(str(self._tls))
        return got

    def server(
        self,
        peer: str,
        placement: str = LOOPBACK,
        index: int = 0,
        site: Site = None,
        runtime: str = "",
    ) -> ServerHandle:
        """A session server: loopback ones also listen with TLS (the conformance suite's)."""
        rt = self.runtime(runtime, peer)
        key = (peer, placement, index, rt.label)
        got = self._servers.get(key)
        if isinstance(got, ServerHandle) and not got.alive():
            got = GrpcRunError(f"gRPC {peer} server died: {got.job.wait().describe()}")
            self._servers[key] = got
        if got is None:
            build = self.build_for(peer)
            bind = self.bind_address()
            tls = self.tls_files() if placement == LOOPBACK else None
            host = index % self._server_hosts(site) if placement in (NETNS, HOSTS) else 0
            try:
                got = start_server(
                    peer,
                    build,
                    placement,
                    site,
                    host,
                    tls=tls,
                    max_message=self.opts.max_message,
                    lifetime=self.settings.lifetime,
                    drop_last=self.opts.plant_bug == "drop-last-buffer",
                    env=rt.env,
                    bind=bind,
                    **self._python_kw(peer),
                )
            except GrpcRunError as e:
                got = e
            self._servers[key] = got
        if isinstance(got, ServerHandle):
            return got
        raise got

    def _python_kw(self, peer: str) -> dict[str, str]:
        return {"python": self.python_peers()[0]} if peer != "native" else {}

    @staticmethod
    def _hosts(site: Site) -> int:
        if isinstance(site, VirtualCluster):
            return len(site.hosts)
        return len(site.names) if isinstance(site, GrpcHosts) else 1

    def _server_hosts(self, site: Site) -> int:
        """Servers go on the first half of the hosts (the first when there is one)."""
        return max(1, self._hosts(site) // 2)

    def _client_hosts(self, site: Site) -> list[int]:
        """Clients on the second half of the hosts, servers on the first: every RPC crosses
        the link between them (a veth, or the fabric)."""
        n = self._hosts(site)
        return list(range(n // 2, n)) if n > 1 else [0]

    # -- sweeps -----------------------------------------------------------------------------------
    def where(self, family: str, peer: str, mode: str, placement: str, runtime: str = "") -> Where:
        """The key of a sweep: the runtime by its label ("": the one under test)."""
        return (family, peer, mode, placement, runtime or self.opts.runtime)

    def _fresh_run(self, where: Where, cluster: Any, round_: int) -> Sweep:
        """One client run against servers of its own, started for it and stopped after it.
        A session-long server is not a neutral piece of the measurement: A against identical
        A with one server per side for the whole session (60 rounds, multi-MB payloads) put
        one side 10-15 % ahead, which side varying from session to session (memory placement
        of the server process), so rounds were not independent and 12-30 % of A-vs-A points
        were called regressions. A server per run puts that variance where the rounds see it."""
        first = FRESH_SERVERS * (round_ + 1)
        try:
            return self.sweeps.one_job(where, cluster, first)
        finally:
            for key in [k for k in self._servers if k[2] >= first]:
                got = self._servers.pop(key)
                if isinstance(got, ServerHandle):
                    got.stop()

    def _run(self, where: Where, cluster: Any, first_server: int = 0) -> Sweep:
        """One client run of the sweep `where` (a job of GrpcSweeps), against the servers
        numbered from `first_server`."""
        family, peer, mode, placement, label = where
        rt = self.runtime(label, peer)
        build = self.build_for(peer)
        hosts = self._client_hosts(cluster) if placement in (NETNS, HOSTS) else [0]
        servers = [
            self.server(peer, placement, first_server + i, cluster, rt.label)
            for i in range(1 if family == "p2p" else self.opts.ps)
        ]
        probe = self.path_probe(rt, placement, cluster)
        before = probe.read() if probe else None
        clients = hosts[:1] if family == "p2p" else hosts[: self.opts.workers]
        link = self.link_between(placement, cluster, servers, clients)
        if family == "p2p":
            sweep = run_p2p(
                peer,
                build,
                servers[0],
                mode,
                self.opts.layouts,
                self.settings,
                self.slowdown,
                cluster,
                hosts[0],
                rt.env,
                **self._python_kw(peer),
            )
        else:
            sweep = run_ps(
                peer,
                build,
                servers,
                mode,
                self.opts.layouts,
                self.settings,
                self.opts.workers,
                self.slowdown,
                cluster,
                hosts,
                rt.env,
                **self._python_kw(peer),
            )
        sweep.runtime = rt.label
        # shaping changed during the run: no one rate describes it
        sweep.link = (
            link if link == self.link_between(placement, cluster, servers, clients) else None
        )
        if probe is not None and before is not None:
            sweep.path = [probe.crossing(before, payload_moved(sweep)).as_dict()]
        return sweep

    @staticmethod
    def link_between(
        placement: str, site: Site, servers: list[ServerHandle], client_hosts: list[int]
    ) -> LinkRate | None:
        """The rate of the links between the servers' and the clients' hosts: the virtual
        cluster's shaping, or each real host's discovered rate (the slowest; unknown if one
        is); loopback crosses no link."""
        if placement == NETNS and isinstance(site, VirtualCluster):
            return site.link_rate([s.host for s in servers] + list(client_hosts))
        if placement != HOSTS or not isinstance(site, GrpcHosts):
            return None
        names = {s.host for s in servers} | {site.name(h) for h in client_hosts}
        rates = []
        for h in (h for h in site.fabric.hosts if h.host in names):
            r = discovered_link_rate(h.selection)
            rates.append(None if r is None else LinkRate(r.gbps, f"{r.source} on {h.host}"))
        return slowest(rates)

    def on_tcp_or_skip(self, config: pytest.Config) -> None:
        """Stock gRPC runs over kernel TCP: off a TCP fabric its items skip, saying so."""
        reason = on_tcp_reason(self.opts.spec, hpc_session_of(config))
        if reason:
            pytest.skip(reason)

    def local_or_skip(self, placement: str) -> None:
        """An RDMA runtime (and its twin: a pair or none) runs over RDMA devices: this host's
        or the real hosts', never the virtual cluster's veths."""
        reason = netns_reason(self.opts.spec, self.opts.runtime, placement)
        if reason:
            pytest.skip(reason)

    def client_of(
        self, kind: str, target: str, mode: str, *, ca: Path | None = None, gzip: bool = False
    ) -> Any:
        """A TensorClient of `kind` (python: grpcio here; native: the native peer's relay in
        the runtime under test). grpcio is imported only here: the plugin loads without it."""
        import grpc

        from pytest_hpccomm.stacks.grpc.peer.pyclient import TensorClient
        from pytest_hpccomm.stacks.grpc.peer.relay import RelayChannel

        compression = grpc.Compression.Gzip if gzip else None
        if kind == "native":
            rt = self.runtime()
            return TensorClient(
                target,
                mode,
                channel=RelayChannel(self.native().peer, target, rt.env, ca=ca, gzip=gzip),
            )
        outside = python_client_reason(self.opts.spec)
        if outside:
            pytest.skip(outside)
        creds = None if ca is None else grpc.ssl_channel_credentials(ca.read_bytes())
        return TensorClient(target, mode, credentials=creds, compression=compression)

    def path_probe(self, rt: Runtime, placement: str, site: Site = None) -> PathProbe | None:
        """Reads the RDMA port's and TCP's counters around an RDMA runtime's client run: this
        host's (loopback), or those of the hosts its servers run on (hosts). None: the runtime
        runs over kernel TCP."""
        sel = self.selection
        if not rt.rdma:
            return None
        if sel is None or not sel.device or sel.port is None:
            raise GrpcRunError(f"gRPC runtime {rt.label}: the session has no RDMA port")
        if placement == LOOPBACK:
            device, port, owners = sel.device, sel.port, self._tcp_owners(sel)
            return PathProbe(device, lambda: read(device, port, owners=owners), sel.mtu)
        if placement != HOSTS or not isinstance(site, GrpcHosts):
            raise GrpcRunError(
                f"gRPC runtime {rt.label} over RDMA runs on {LOOPBACK} or "
                f"{HOSTS}; placement {placement} has no RDMA device"
            )
        fabric = site.fabric
        servers = fabric.hosts[: self._server_hosts(site)]
        # whose TCP it was (siw) is metered on this host only
        owners = self._tcp_owners(sel) if all(h.local for h in servers) else None

        def reading() -> Reading:
            got = [
                Reading.of(c["port"], c.get("tcp_out_segments"))
                for c in map(fabric.counters, servers)
            ]
            total: Reading = functools.reduce(operator.add, got)
            return dataclasses.replace(total, tcp_bytes=owners.read()) if owners else total

        names = ", ".join(f"{h.selection.device} on {h.host}" for h in servers)
        mtus = [h.selection.mtu for h in servers if h.selection.mtu]  # ports' active MTUs
        return PathProbe(names, reading, max(mtus) if len(mtus) == len(servers) else None)

    def _tcp_owners(self, sel: FabricSelection) -> TcpOwnersMeter | None:
        """siw's path is told apart by whose TCP it was: a meter for the session (None: not
        siw, or no nftables; then its items fail as unprovable, saying so)."""
        if sel.driver != "siw":
            return None
        if self._owners is None:
            try:
                self._owners = TcpOwnersMeter()
            except OwnersUnavailable as e:
                self._owners = e
        return self._owners if isinstance(self._owners, TcpOwnersMeter) else None

    def p2p_across(self, peer: str, mode: str, cluster: Any) -> tuple[Sweep, ServerHandle]:
        """The p2p sweep across the virtual cluster (the timed one if the profile timed it,
        else one client run: proving the path needs no pooled jobs) and the server it ran
        against; fails the item on a run error."""
        self.local_or_skip(NETNS)
        where = self.where("p2p", peer, mode, NETNS)
        try:
            return (
                self.sweeps.pool.pooled(where) or self.sweeps.one_job(where, cluster),
                self.server(peer, NETNS, 0, cluster),
            )
        except GrpcRunError as exc:
            pytest.fail(str(exc), pytrace=False)

    def close(self) -> None:
        for got in self._servers.values():
            if isinstance(got, ServerHandle):
                got.stop()
        self._servers.clear()
        if isinstance(self._owners, TcpOwnersMeter):
            self._owners.close()


class GrpcSweeps(SessionStore[Where, Sweep]):
    """One lab's pooled sweeps (contract.SessionStore): one per Where, each job one client
    run (GrpcLab._run; context: the site), pooled by driver.merge_sweeps and grown for
    undecided verdicts, each run under the contention guard (a run that never had the cores
    to itself is kept, marked, and its verdicts turn INCONCLUSIVE). A paired run's rounds
    run against servers started for each (GrpcLab._fresh_run): the base is the other
    side's lab's store, given to `paired` (each lab runs its own servers and slowdown)."""

    def __init__(self, lab: GrpcLab, repeats: int, max_repeats: int) -> None:
        self.lab = lab
        failures = (GrpcRunError, NativeBuildError)
        super().__init__(lab._run, merge_sweeps, repeats, max_repeats, failures)

    def paired_job(self, key: Where, round_: int, *context: Any) -> Sweep:
        cluster = context[0] if context else None  # the site, as for every job
        return self.lab._fresh_run(key, cluster, round_)
