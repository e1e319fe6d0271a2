"""pytest plugin of the gRPC stack (pytest11: hpccomm_grpc): its options and fixtures.

More: docs/explanation/internals.md (pytest_hpccomm.stacks.grpc.plugin).
"""

from __future__ import annotations

import dataclasses
import functools
import operator
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_hpccomm.cluster.placement import HOSTS, LOOPBACK, NETNS
from pytest_hpccomm.cluster.virtual import VirtualCluster
from pytest_hpccomm.config import HpcConfig
from pytest_hpccomm.fabrics import TCP_FABRICS, FabricSelection
from pytest_hpccomm.fabrics.link_rate import discovered_link_rate, slowest
from pytest_hpccomm.fabrics.path_proof import Crossing, PathProbe, Reading, read
from pytest_hpccomm.fabrics.sysfs import SOFTWARE_DRIVERS
from pytest_hpccomm.fabrics.tcp_owners import OwnersUnavailable, TcpOwnersMeter
from pytest_hpccomm.measure.link import LinkRate
from pytest_hpccomm.measure.measurement import Measurement
from pytest_hpccomm.measure.pooling import JobPool
from pytest_hpccomm.proc.cpu_share import QuietRetry
from pytest_hpccomm.record import Record
from pytest_hpccomm.report.beside import beside
from pytest_hpccomm.session import hpc_session_of
from pytest_hpccomm.skips import fabric_reason
from pytest_hpccomm.stack_probes import ImportProbe, StackProbe
from pytest_hpccomm.stacks.contract import Point, judge_point
from pytest_hpccomm.stacks.grpc.build import (
    NativeBuild,
    NativeBuildError,
    NativeUnavailable,
    ensure_built,
    prebuilt,
    prefix_error,
)
from pytest_hpccomm.stacks.grpc.certs import TlsFiles, TlsUnavailable, make_tls
from pytest_hpccomm.stacks.grpc.conformance import SettingsFactory, property_settings
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
from pytest_hpccomm.stacks.grpc.options import GrpcOptions, add_options, parse_options
from pytest_hpccomm.stacks.grpc.runtimes import Runtime, RuntimeUnavailable, labels, resolve, uses
from pytest_hpccomm.stacks.grpc.tfbench import BENCHMARKS, measurement, payload_moved

OPTIONS_KEY = pytest.StashKey[GrpcOptions]()
SYSTEM = "system"  # --hpc-base grpc=system: the system's gRPC (libgrpc++-dev)
FRESH_SERVERS = 1000  # server indices of paired rounds: 1000 * (round + 1) + i


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


@pytest.hookimpl(optionalhook=True)  # the core plugin declares it; `-p no:hpccomm` does not
def pytest_hpccomm_stack_probes(config: pytest.Config) -> list[StackProbe]:
    return [
        ImportProbe(
            "grpc",
            ("grpc",),
            ("grpcio", "grpcio-tools", "protobuf"),
            (),
            "pip install 'pytest-hpccomm[grpc]'",
        )
    ]


@pytest.hookimpl(optionalhook=True)
def pytest_hpccomm_paired_stacks(config: pytest.Config) -> list[str]:
    return ["grpc"]  # the native peer built against two gRPC installations (--hpc-base grpc=)


@pytest.hookimpl(trylast=True)  # after the core plugin's, which builds the HpcConfig
def pytest_configure(config: pytest.Config) -> None:
    if not config.pluginmanager.has_plugin("hpccomm"):
        return  # `-p no:hpccomm`: the core plugin and its options are off
    opts = parse_options(config)  # bad values: usage error before tests
    sides = hpc_session_of(config).cfg.paired("grpc")
    if sides is not None:
        opts = paired_options(opts, bool(config.getoption("hpc_grpc_prefix")))
    check_named(opts, sides)
    config.stash[OPTIONS_KEY] = opts


def check_named(opts: GrpcOptions, sides: tuple[str, str] | None) -> None:
    """A gRPC installation or build the user names must be there: a usage error now, not a
    skip of every native item later (a skip would leave a merge gate green)."""
    if opts.prefix is not None:
        error = prefix_error(opts.prefix)
        if error:
            raise pytest.UsageError(f"--hpc-grpc-prefix {opts.prefix}: {error}")
    if opts.build is not None and not opts.build.is_dir():
        raise pytest.UsageError(f"--hpc-grpc-build {opts.build}: not a directory")
    for flag, impl in zip(("--hpc-base", "--hpc-candidate"), sides or ()):
        prefix = prefix_of(impl)
        error = prefix_error(prefix) if prefix is not None else None
        if error:
            raise pytest.UsageError(f"{flag} grpc={impl}: {error} (an install prefix or {SYSTEM})")


def prefix_of(impl: str) -> Path | None:
    """A paired run's gRPC implementation: `system` (the system's gRPC) or an install prefix."""
    return None if impl == SYSTEM else Path(impl).expanduser()


def paired_options(opts: GrpcOptions, prefix_given: bool) -> GrpcOptions:
    """A paired A/B run of gRPC swaps the native peer's gRPC: only that peer is measured (the
    python peer runs this interpreter's grpcio on both sides)."""
    if prefix_given:
        raise pytest.UsageError(
            "--hpc-grpc-prefix cannot be combined with a paired A/B run of "
            "grpc: --hpc-base/--hpc-candidate grpc=PREFIX|system name both"
        )
    if opts.build is not None or not opts.spec.stock:
        raise pytest.UsageError(
            "a paired A/B run of grpc builds both sides here, on stock "
            "gRPC: drop --hpc-grpc-build, --hpc-grpc-preset, --hpc-grpc-env"
        )
    if "native" not in opts.peers:
        raise pytest.UsageError(
            "a paired A/B run of grpc compares native peers: --hpc-grpc-peers must include native"
        )
    return dataclasses.replace(opts, peers=("native",), perf_peers=("native",))


def pytest_report_collectionfinish(config: pytest.Config) -> list[str]:
    opts = config.stash.get(OPTIONS_KEY, None)
    if opts is None or opts.perf_peers == opts.peers:
        return []
    return [
        f"hpccomm: quick profile: grpc perf items time the {', '.join(opts.perf_peers)} "
        "peer only (a Python peer's per-RPC cost hides the transport; conformance runs "
        "every peer; --hpc-profile=full or --hpc-grpc-peers times them)"
    ]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if OPTIONS_KEY not in metafunc.config.stash:
        return
    opts = metafunc.config.stash[OPTIONS_KEY]
    if "grpc_peer" in metafunc.fixturenames:
        perf = metafunc.definition.get_closest_marker("perf") is not None
        metafunc.parametrize("grpc_peer", opts.perf_peers if perf else opts.peers, scope="session")
    if "grpc_mode" in metafunc.fixturenames:
        metafunc.parametrize("grpc_mode", opts.modes, scope="session")
    if "grpc_client_kind" in metafunc.fixturenames:
        metafunc.parametrize("grpc_client_kind", opts.clients, scope="session")
    if "grpc_runtime" in metafunc.fixturenames and len(labels(opts.spec)) > 1:
        metafunc.parametrize("grpc_runtime", labels(opts.spec), scope="session")


Failure = GrpcRunError | NativeBuildError
Where = tuple[str, str, str, str, str]  # family, peer, mode, placement, runtime label


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
        # client runs per sweep, pooled (driver.merge_sweeps), grown for undecided verdicts
        self.pool = JobPool(merge_sweeps, repeats, max_repeats, (GrpcRunError, NativeBuildError))
        self.retry = QuietRetry()  # the contention guard's re-runs of disturbed client runs
        self.tmp = tmp
        self._native: NativeBuild | NativeUnavailable | NativeBuildError | None = None
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
            pytest.skip(
                f"gRPC runtime {got.describe()} runs in the native peers only: the "
                f"{peer} peer runs grpcio's bundled core"
            )
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
                )
            except GrpcRunError as e:
                got = e
            self._servers[key] = got
        if isinstance(got, ServerHandle):
            return got
        raise got

    @staticmethod
    def _hosts(site: Site) -> int:
        if isinstance(site, VirtualCluster):
            return len(site.hosts)
        return len(site.names) if isinstance(site, GrpcHosts) else 1

    def _server_hosts(self, site: Site) -> int:
        """Servers go on the first half of the hosts (the first when there is one)."""
        return max(1, self._hosts(site) // 2)

    def _quiet_run(self, where: Where, cluster: Any, first_server: int = 0) -> Sweep:
        """One client run, again while another process shared the cores (QuietRetry); a run
        that never had them is kept, marked, and its verdicts turn INCONCLUSIVE."""
        sweep, reruns = self.retry.run(
            lambda: self._run(where, cluster, first_server), lambda s: s.disturbed
        )
        sweep.reruns = reruns
        return sweep

    def _client_hosts(self, site: Site) -> list[int]:
        """Clients on the second half of the hosts, servers on the first: every RPC crosses
        the link between them (a veth, or the fabric)."""
        n = self._hosts(site)
        return list(range(n // 2, n)) if n > 1 else [0]

    # -- sweeps -----------------------------------------------------------------------------------
    def where(self, family: str, peer: str, mode: str, placement: str, runtime: str = "") -> Where:
        """The key of a sweep: the runtime by its label ("": the one under test)."""
        return (family, peer, mode, placement, runtime or self.opts.runtime)

    def sweep(self, where: Where, cluster: Any = None) -> Sweep:
        return self.pool.get(where, lambda: self._quiet_run(where, cluster))

    def more(self, where: Where, cluster: Any = None) -> Sweep | None:
        """The sweep with one more client run pooled in (adaptive repeats); None: no more."""
        return self.pool.more(where, lambda: self._quiet_run(where, cluster))

    def cost(self, where: Where) -> dict[str, Any]:
        return self.pool.cost(where)

    def sweep_paired(
        self, base: GrpcLab, where: Where, cluster: Any, rounds: int
    ) -> tuple[Sweep, Sweep]:
        """(this lab's, base's) sweeps of a paired A/B run, this lab being the candidate
        (JobPool.paired: one client run of each per round, alternating order). Each lab runs
        its own servers, fresh for every run, and its own slowdown (the canary stretches the
        candidate only)."""
        return self.pool.paired(
            where,
            lambda i: base._fresh_run(where, cluster, i),
            lambda i: self._fresh_run(where, cluster, i),
            rounds,
        )

    def _fresh_run(self, where: Where, cluster: Any, round_: int) -> Sweep:
        """One client run against servers of its own, started for it and stopped after it.
        A session-long server is not a neutral piece of the measurement: A against identical
        A with one server per side for the whole session (60 rounds, multi-MB payloads) put
        one side 10-15 % ahead, which side varying from session to session (memory placement
        of the server process), so rounds were not independent and 12-30 % of A-vs-A points
        were called regressions. A server per run puts that variance where the rounds see it."""
        first = FRESH_SERVERS * (round_ + 1)
        try:
            return self._quiet_run(where, cluster, first)
        finally:
            for key in [k for k in self._servers if k[2] >= first]:
                got = self._servers.pop(key)
                if isinstance(got, ServerHandle):
                    got.stop()

    def _run(self, where: Where, cluster: Any, first_server: int = 0) -> Sweep:
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
        if not self.opts.spec.rdma:
            reason = fabric_reason(TCP_FABRICS, hpc_session_of(config))
            if reason:
                pytest.skip(f"gRPC over kernel TCP (no RDMA runtime: --hpc-grpc-preset) ({reason})")

    def local_or_skip(self, placement: str) -> None:
        """An RDMA runtime (and its twin: a pair or none) runs over RDMA devices: this host's
        or the real hosts', never the virtual cluster's veths."""
        if self.opts.spec.rdma and placement == NETNS:
            pytest.skip(
                f"gRPC runtime {self.opts.runtime} runs over RDMA devices (placements "
                f"{LOOPBACK} and {HOSTS}); the virtual cluster's hosts have none"
            )

    def client_of(
        self, kind: str, target: str, mode: str, *, ca: Path | None = None, gzip: bool = False
    ) -> Any:
        """A TensorClient of `kind` (python: grpcio here; native: the native peer's relay in
        the runtime under test). grpcio is imported only here: the plugin loads without it."""
        import grpc

        from pytest_hpccomm.stacks.grpc.pyclient import TensorClient
        from pytest_hpccomm.stacks.grpc.relay import RelayChannel

        compression = grpc.Compression.Gzip if gzip else None
        if kind == "native":
            rt = self.runtime()
            return TensorClient(
                target,
                mode,
                channel=RelayChannel(self.native().peer, target, rt.env, ca=ca, gzip=gzip),
            )
        if not self.opts.spec.stock:
            pytest.skip(
                f"the python client is grpcio's bundled core in pytest, outside gRPC "
                f"runtime {self.runtime().describe()}: the native client "
                "(--hpc-grpc-clients=native) makes its calls inside it"
            )
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
                self.pool.pooled(where) or self._quiet_run(where, cluster),
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


@pytest.fixture(scope="session")
def grpc_options(pytestconfig: pytest.Config) -> GrpcOptions:
    return pytestconfig.stash[OPTIONS_KEY]


def _lab(
    side: str,
    grpc_options: GrpcOptions,
    hpc_config: HpcConfig,
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
) -> GrpcLab:
    """The lab of `side` ("": an unpaired run's; "candidate", "base"): both sides of a paired
    run are made alike (the fabric's selection, repeats, limits) and differ only in the gRPC
    they name and the canary, which slows the candidate only."""
    sides = hpc_config.paired("grpc")
    impl = None if sides is None else sides[0] if side == "base" else sides[1]
    opts = (
        grpc_options if impl is None else dataclasses.replace(grpc_options, prefix=prefix_of(impl))
    )
    sel = (
        request.getfixturevalue("hpc_rdma_fabric").local
        if opts.spec.rdma
        else hpc_session_of(request.config).selection
    )
    named = (
        f"--hpc-{side} grpc={impl}"
        if impl is not None
        else f"--hpc-grpc-prefix {opts.prefix}"
        if opts.prefix is not None
        else ""
    )
    return GrpcLab(
        opts,
        hpc_config.profile,
        1.0 if side == "base" else hpc_config.inject_slowdown,
        tmp_path_factory.mktemp(f"grpc-{side}" if side else "grpc"),
        hpc_config.repeats,
        hpc_config.repeat_limit,
        sel if isinstance(sel, FabricSelection) else None,
        hpc_config.fabric,
        named,
    )


@pytest.fixture(scope="session")
def grpc_lab(
    grpc_options: GrpcOptions,
    hpc_config: HpcConfig,
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[GrpcLab]:
    """The session's lab; in a paired A/B run of grpc, the candidate's. An RDMA runtime gets
    the fabric's RDMA port (on softroce/iwarp the core's hpc_rdma_fabric creates the link)."""
    side = "" if hpc_config.paired("grpc") is None else "candidate"
    lab = _lab(side, grpc_options, hpc_config, request, tmp_path_factory)
    try:
        yield lab
    finally:
        lab.close()


@pytest.fixture(scope="session")
def grpc_base_lab(
    grpc_options: GrpcOptions,
    hpc_config: HpcConfig,
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[GrpcLab | None]:
    """The base side's lab of a paired A/B run of grpc (None: not a paired run): its own
    native build and servers, never slowed by the canary."""
    if hpc_config.paired("grpc") is None:
        yield None
        return
    lab = _lab("base", grpc_options, hpc_config, request, tmp_path_factory)
    try:
        yield lab
    finally:
        lab.close()


@pytest.fixture(scope="session")
def grpc_server(grpc_peer: str, grpc_lab: GrpcLab, pytestconfig: pytest.Config) -> ServerHandle:
    """The local server of this peer kind (plaintext and TLS ports), started once: on
    127.0.0.1, or on the fabric's address under an RDMA runtime."""
    grpc_lab.on_tcp_or_skip(pytestconfig)
    try:
        return grpc_lab.server(grpc_peer)
    except GrpcRunError as e:
        pytest.fail(str(e), pytrace=False)


@pytest.fixture(scope="session")
def grpc_tls(grpc_lab: GrpcLab) -> TlsFiles:
    return grpc_lab.tls()


Connect = Callable[..., Any]  # grpc_connect: connect(target, mode, ca=, gzip=) -> TensorClient


@pytest.fixture
def grpc_connect(grpc_client_kind: str, grpc_lab: GrpcLab) -> Iterator[Connect]:
    """connect(target, mode="serialized", *, ca=None, gzip=False): a TensorClient of this
    item's client kind (GrpcLab.client_of), closed after the test."""
    made: list[Any] = []

    def connect(target: str, mode: str = "serialized", **kw: Any) -> Any:
        made.append(grpc_lab.client_of(grpc_client_kind, target, mode, **kw))
        return made[-1]

    try:
        yield connect
    finally:
        for c in made:
            c.close()


@pytest.fixture
def grpc_client(grpc_server: ServerHandle, grpc_mode: str, grpc_connect: Connect) -> Any:
    """A client of grpc_server in grpc_mode, of this item's kind, ready; if not in 10 s, the
    failure says whether the server still runs and what it and a relay said last."""
    import grpc  # the grpc extra: only here, where a client exists

    c = grpc_connect(grpc_server.target, grpc_mode)
    try:
        c.wait_ready(10)
    except grpc.FutureTimeoutError as e:
        server = "running" if grpc_server.alive() else f"ended: {grpc_server.stop().describe()}"
        out, err = grpc_server.job.peek_output()
        relay = f"; {c.channel.last_words()}" if getattr(c, "relayed", False) else ""
        pytest.fail(
            f"{e}: server {grpc_server.kind} at {grpc_server.target} {server}, "
            f"its last output: {(err or out).strip()[-600:]!r}{relay}",
            pytrace=False,
        )
    return c


@pytest.fixture(scope="session")
def grpc_settings(grpc_options: GrpcOptions) -> SettingsFactory:
    """settings(cap=None) for a property built inside a test, so its example budget follows
    the profile (--hpc-grpc-examples), at most `cap`."""
    return lambda cap=None: property_settings(grpc_options, cap)


BenchRun = Callable[[str, str], None]


def grpc_site(placement: str, request: pytest.FixtureRequest) -> Site:
    """Where the peers go: the virtual cluster (netns), the hosts of --hpc-hosts with the
    session's fabric on each (hosts: servers on the first half, clients on the second), none
    on loopback."""
    if placement == NETNS:
        cluster: VirtualCluster = request.getfixturevalue("hpc_virtual_cluster")
        return cluster
    if placement == HOSTS:
        fabric = request.getfixturevalue("hpc_rdma_fabric")
        if not fabric.spans_hosts:
            pytest.fail(
                "gRPC on hosts runs servers and clients on different hosts: "
                "--hpc-hosts must name at least 2",
                pytrace=False,
            )
        return GrpcHosts(fabric)
    return None


@pytest.fixture(scope="session")
def grpc_runtime(grpc_options: GrpcOptions) -> str:
    """The runtime's label (parametrized over it and its TCP twin when it has one)."""
    return grpc_options.runtime


@pytest.fixture
def grpc_bench(
    grpc_peer: str,
    grpc_mode: str,
    grpc_runtime: str,
    hpc_placement: str,
    grpc_lab: GrpcLab,
    grpc_base_lab: GrpcLab | None,
    grpc_options: GrpcOptions,
    hpc_record: Record,
    hpc_config: HpcConfig,
    request: pytest.FixtureRequest,
) -> BenchRun:
    """run(benchmark, scheme): the point of this item's (peer, mode, placement, runtime)
    sweep; its echoes and acknowledgements checked, an RDMA runtime's path proven by the
    counters, then recorded and judged (tfbench.measurement), beside its TCP twin. In a paired
    A/B run the candidate's point is judged against the base's of this session; on an emulated
    RDMA device a runtime's points are reported without verdicts."""
    grpc_lab.on_tcp_or_skip(request.config)
    rt = grpc_lab.runtime(grpc_runtime, grpc_peer)
    grpc_lab.local_or_skip(hpc_placement)

    def run(bench: str, scheme: str) -> None:
        family, name = BENCHMARKS[bench][:2]
        cluster = grpc_site(hpc_placement, request)
        where = grpc_lab.where(family, grpc_peer, grpc_mode, hpc_placement, rt.label)

        def records(sw: Sweep) -> list[Measurement]:
            try:
                pt = sw.get(name, scheme)
            except GrpcRunError as exc:
                pytest.fail(str(exc), pytrace=False)
            if pt["errors"]:
                pytest.fail(f"{bench} {scheme}: {pt['errors'][:3]}", pytrace=False)
            proven(sw, request)
            m = measurement(bench, scheme, sw, pt, rt.label, grpc_peer, grpc_mode, hpc_placement)
            return [with_twin(m, grpc_lab, rt)]

        rounds = hpc_config.ab_rounds
        judge_point(
            hpc_record,
            Point(
                get=lambda: grpc_lab.sweep(where, cluster),
                more=lambda: grpc_lab.more(where, cluster),
                cost=lambda: grpc_lab.cost(where),
                paired=None
                if grpc_base_lab is None
                else lambda: grpc_lab.sweep_paired(grpc_base_lab, where, cluster, rounds),
                fingerprint=lambda sw: {"grpc_runtime": rt.describe(), **sw.runtime_fingerprint},
            ),
            records,
            (GrpcRunError,),
            functional=grpc_lab.emulated(rt) or None,
        )

    return run


def proven(sweep: Sweep, request: pytest.FixtureRequest) -> None:
    """An RDMA runtime's client runs must show their payload on the RDMA port, not on TCP."""
    for i, crossing in enumerate(sweep.path):
        c = Crossing(**crossing)
        request.node.user_properties.append((f"hpccomm_path_{i}", c.describe()))
        problem = c.problem()
        if problem:
            pytest.fail(
                f"gRPC runtime {sweep.runtime}, client run {i + 1}: {problem}", pytrace=False
            )


def with_twin(m: Measurement, lab: GrpcLab, rt: Runtime) -> Measurement:
    """The runtime's point names its TCP twin's, for the side-by-side table."""
    twin = lab.twin_of(rt)
    if twin is None:
        return m
    params = {k: v for k, v in m.params.items()} | {"runtime": twin.label}
    return dataclasses.replace(
        m, extra={**m.extra, **beside("grpc", m.benchmark, params, f"{rt.label} vs {twin.label}")}
    )
