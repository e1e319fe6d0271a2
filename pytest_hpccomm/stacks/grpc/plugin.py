"""pytest plugin of the gRPC stack (pytest11: hpccomm_grpc): its options and fixtures.

Tests ask for
  grpc_peer, grpc_mode  parametrized over --hpc-grpc-peers / --hpc-grpc-modes (session scope)
  grpc_server           the session's loopback server of that peer kind (plaintext and TLS)
  grpc_client           a client of grpc_server in grpc_mode, ready, closed after the test
  grpc_settings         settings(cap=None): Hypothesis settings of a property built in a test
  grpc_tls              the test CA and certificates (grpc_server's TLS port trusts "ca")
  grpc_bench            run(benchmark, scheme): one TF-gRPC-Bench point, measured and judged
  grpc_lab              the session's GrpcLab: native build, servers anywhere, sweeps, all cached
  grpc_options          the parsed options (GrpcOptions)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_hpccomm.cluster.cpu_share import QuietRetry
from pytest_hpccomm.cluster.placement import LOOPBACK, NETNS
from pytest_hpccomm.baselines.adaptive import until_decided
from pytest_hpccomm.measure.pooling import JobPool
from pytest_hpccomm.stacks.grpc.build import (NativeBuild, NativeBuildError, NativeUnavailable,
                                              ensure_built)
from pytest_hpccomm.stacks.grpc.certs import TlsFiles, TlsUnavailable, make_tls
from pytest_hpccomm.stacks.grpc.conformance import SettingsFactory, property_settings
from pytest_hpccomm.stacks.grpc.driver import (BenchSettings, GrpcRunError, ServerHandle, Sweep,
                                               merge_sweeps, run_p2p, run_ps, start_server)
from pytest_hpccomm.stacks.grpc.options import GrpcOptions, add_options, parse_options
from pytest_hpccomm.stacks.grpc.tfbench import BENCHMARKS, measurement
from pytest_hpccomm.session import hpc_session_of
from pytest_hpccomm.stacks.registry import ImportProbe, StackProbe

OPTIONS_KEY = pytest.StashKey[GrpcOptions]()
SYSTEM = "system"  # --hpc-base grpc=system: the system's gRPC (libgrpc++-dev)
FRESH_SERVERS = 1000  # server indices of paired rounds: 1000 * (round + 1) + i


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


@pytest.hookimpl(optionalhook=True)  # the core plugin declares it; `-p no:hpccomm` does not
def pytest_hpccomm_stack_probes(config: pytest.Config) -> list[StackProbe]:
    return [ImportProbe("grpc", ("grpc",), ("grpcio", "grpcio-tools", "protobuf"), (),
                        "pip install 'pytest-hpccomm[grpc]'")]


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
    config.stash[OPTIONS_KEY] = opts


def prefix_of(impl: str) -> Path | None:
    """A paired run's gRPC implementation: `system` (the system's gRPC) or an install prefix."""
    return None if impl == SYSTEM else Path(impl).expanduser()


def paired_options(opts: GrpcOptions, prefix_given: bool) -> GrpcOptions:
    """A paired A/B run of gRPC swaps the native peer's gRPC: only that peer is measured (the
    python peer runs this interpreter's grpcio on both sides)."""
    if prefix_given:
        raise pytest.UsageError("--hpc-grpc-prefix cannot be combined with a paired A/B run of "
                                "grpc: --hpc-base/--hpc-candidate grpc=PREFIX|system name both")
    if "native" not in opts.peers:
        raise pytest.UsageError("a paired A/B run of grpc compares native peers: "
                                "--hpc-grpc-peers must include native")
    return dataclasses.replace(opts, peers=("native",))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if OPTIONS_KEY not in metafunc.config.stash:
        return
    opts = metafunc.config.stash[OPTIONS_KEY]
    if "grpc_peer" in metafunc.fixturenames:
        metafunc.parametrize("grpc_peer", opts.peers, scope="session")
    if "grpc_mode" in metafunc.fixturenames:
        metafunc.parametrize("grpc_mode", opts.modes, scope="session")


Failure = GrpcRunError | NativeBuildError


class GrpcLab:
    """Session state: the native build, running servers, finished sweeps. Failures are cached
    too, so every item that needs a broken piece reports the same error without retrying."""

    def __init__(self, opts: GrpcOptions, profile: str, slowdown: float, tmp: Path,
                 repeats: int = 1, max_repeats: int = 0) -> None:
        self.opts = opts
        self.settings = BenchSettings.for_profile(profile)
        self.slowdown = slowdown
        # client runs per sweep, pooled (driver.merge_sweeps), grown for undecided verdicts
        self.pool = JobPool(merge_sweeps, repeats, max_repeats, (GrpcRunError, NativeBuildError))
        self.retry = QuietRetry()  # the contention guard's re-runs of disturbed client runs
        self.tmp = tmp
        self._native: NativeBuild | NativeUnavailable | NativeBuildError | None = None
        self._tls: TlsFiles | TlsUnavailable | None = None
        self._servers: dict[tuple[str, str, int], ServerHandle | Failure] = {}

    # -- pieces ---------------------------------------------------------------------------------
    def native(self) -> NativeBuild:
        """The built native peer; skips (no toolchain) or fails (build error)."""
        if self._native is None:
            try:
                self._native = ensure_built(self.opts.prefix)
            except (NativeUnavailable, NativeBuildError) as e:
                self._native = e
        if isinstance(self._native, NativeUnavailable):
            pytest.skip(str(self._native))
        if isinstance(self._native, NativeBuildError):
            pytest.fail(str(self._native), pytrace=False)
        return self._native

    def build_for(self, peer: str) -> NativeBuild | None:
        return self.native() if peer == "native" else None

    def tls(self) -> TlsFiles:
        if self._tls is None:
            try:
                self._tls = make_tls(self.tmp / "tls")
            except TlsUnavailable as e:
                self._tls = e
        if isinstance(self._tls, TlsUnavailable):
            pytest.skip(str(self._tls))
        return self._tls

    def server(self, peer: str, placement: str = LOOPBACK, index: int = 0,
               cluster: Any = None) -> ServerHandle:
        """A session server: loopback ones also listen with TLS (the conformance suite's)."""
        key = (peer, placement, index)
        got = self._servers.get(key)
        if isinstance(got, ServerHandle) and not got.alive():
            got = GrpcRunError(f"gRPC {peer} server died: {got.job.wait().describe()}")
            self._servers[key] = got
        if got is None:
            build = self.build_for(peer)
            tls = self.tls() if placement == LOOPBACK else None
            host = index % max(1, self._hosts(cluster) // 2) if placement == NETNS else 0
            try:
                got = start_server(peer, build, placement, cluster, host, tls=tls,
                                   max_message=self.opts.max_message,
                                   lifetime=self.settings.lifetime,
                                   drop_last=self.opts.plant_bug == "drop-last-buffer")
            except GrpcRunError as e:
                got = e
            self._servers[key] = got
        if isinstance(got, ServerHandle):
            return got
        raise got

    @staticmethod
    def _hosts(cluster: Any) -> int:
        return len(cluster.hosts) if cluster is not None else 1

    def _quiet_run(self, family: str, peer: str, mode: str, placement: str,
                   cluster: Any, first_server: int = 0) -> Sweep:
        """One client run, again while another process shared the cores (QuietRetry); a run
        that never had them is kept, marked, and its verdicts turn INCONCLUSIVE."""
        sweep, reruns = self.retry.run(
            lambda: self._run(family, peer, mode, placement, cluster, first_server),
            lambda s: s.disturbed)
        sweep.reruns = reruns
        return sweep

    def _client_hosts(self, cluster: Any) -> list[int]:
        """Clients on the second half of the virtual hosts, servers on the first: every RPC
        crosses a veth."""
        n = self._hosts(cluster)
        return list(range(n // 2, n)) if n > 1 else [0]

    # -- sweeps -----------------------------------------------------------------------------------
    def sweep(self, family: str, peer: str, mode: str, placement: str,
              cluster: Any = None) -> Sweep:
        return self.pool.get((family, peer, mode, placement),
                             lambda: self._quiet_run(family, peer, mode, placement, cluster))

    def more(self, family: str, peer: str, mode: str, placement: str,
             cluster: Any = None) -> Sweep | None:
        """The sweep with one more client run pooled in (adaptive repeats); None: no more."""
        return self.pool.more((family, peer, mode, placement),
                              lambda: self._quiet_run(family, peer, mode, placement, cluster))

    def cost(self, family: str, peer: str, mode: str, placement: str) -> dict[str, Any]:
        return self.pool.cost((family, peer, mode, placement))

    def sweep_paired(self, base: GrpcLab, family: str, peer: str, mode: str, placement: str,
                     cluster: Any, rounds: int) -> tuple[Sweep, Sweep]:
        """(this lab's, base's) sweeps of a paired A/B run, this lab being the candidate
        (JobPool.paired: one client run of each per round, alternating order). Each lab runs
        its own servers, fresh for every run, and its own slowdown (the canary stretches the
        candidate only)."""
        return self.pool.paired(
            (family, peer, mode, placement),
            lambda i: base._fresh_run(family, peer, mode, placement, cluster, i),
            lambda i: self._fresh_run(family, peer, mode, placement, cluster, i), rounds)

    def _fresh_run(self, family: str, peer: str, mode: str, placement: str, cluster: Any,
                   round_: int) -> Sweep:
        """One client run against servers of its own, started for it and stopped after it.
        A session-long server is not a neutral piece of the measurement: A against identical
        A with one server per side for the whole session (60 rounds, multi-MB payloads) put
        one side 10-15 % ahead, which side varying from session to session (memory placement
        of the server process), so rounds were not independent and 12-30 % of A-vs-A points
        were called regressions. A server per run puts that variance where the rounds see it."""
        first = FRESH_SERVERS * (round_ + 1)
        try:
            return self._quiet_run(family, peer, mode, placement, cluster, first)
        finally:
            for key in [k for k in self._servers if k[2] >= first]:
                got = self._servers.pop(key)
                if isinstance(got, ServerHandle):
                    got.stop()

    def _run(self, family: str, peer: str, mode: str, placement: str, cluster: Any,
             first_server: int = 0) -> Sweep:
        build = self.build_for(peer)
        hosts = self._client_hosts(cluster) if placement == NETNS else [0]
        if family == "p2p":
            srv = self.server(peer, placement, first_server, cluster)
            return run_p2p(peer, build, srv, mode, self.opts.layouts, self.settings,
                           self.slowdown, cluster, hosts[0])
        servers = [self.server(peer, placement, first_server + i, cluster)
                   for i in range(self.opts.ps)]
        return run_ps(peer, build, servers, mode, self.opts.layouts, self.settings,
                      self.opts.workers, self.slowdown, cluster, hosts)

    def p2p_across(self, peer: str, mode: str, cluster: Any) -> tuple[Sweep, ServerHandle]:
        """The p2p sweep across the virtual cluster and the server it ran against; fails the
        item on a run error."""
        try:
            return (self.sweep("p2p", peer, mode, NETNS, cluster),
                    self.server(peer, NETNS, 0, cluster))
        except GrpcRunError as exc:
            pytest.fail(str(exc), pytrace=False)

    def close(self) -> None:
        for got in self._servers.values():
            if isinstance(got, ServerHandle):
                got.stop()
        self._servers.clear()


@pytest.fixture(scope="session")
def grpc_options(pytestconfig: pytest.Config) -> GrpcOptions:
    return pytestconfig.stash[OPTIONS_KEY]


@pytest.fixture(scope="session")
def grpc_lab(grpc_options: GrpcOptions, hpc_config: Any,
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[GrpcLab]:
    """The session's lab; in a paired A/B run of grpc, the candidate's."""
    sides = hpc_config.paired("grpc")
    opts = grpc_options if sides is None else dataclasses.replace(grpc_options,
                                                                  prefix=prefix_of(sides[1]))
    lab = GrpcLab(opts, hpc_config.profile, hpc_config.inject_slowdown,
                  tmp_path_factory.mktemp("grpc"), hpc_config.repeats, hpc_config.repeat_limit)
    try:
        yield lab
    finally:
        lab.close()


@pytest.fixture(scope="session")
def grpc_base_lab(grpc_options: GrpcOptions, hpc_config: Any,
                  tmp_path_factory: pytest.TempPathFactory) -> Iterator[GrpcLab | None]:
    """The base side's lab of a paired A/B run of grpc (None: not a paired run): its own
    native build and servers, never slowed by the canary."""
    sides = hpc_config.paired("grpc")
    if sides is None:
        yield None
        return
    lab = GrpcLab(dataclasses.replace(grpc_options, prefix=prefix_of(sides[0])),
                  hpc_config.profile, 1.0, tmp_path_factory.mktemp("grpc-base"),
                  hpc_config.repeats)
    try:
        yield lab
    finally:
        lab.close()


@pytest.fixture(scope="session")
def grpc_server(grpc_peer: str, grpc_lab: GrpcLab) -> ServerHandle:
    """The loopback server of this peer kind (plaintext and TLS ports), started once."""
    try:
        return grpc_lab.server(grpc_peer)
    except GrpcRunError as e:
        pytest.fail(str(e), pytrace=False)


@pytest.fixture(scope="session")
def grpc_tls(grpc_lab: GrpcLab) -> TlsFiles:
    return grpc_lab.tls()


@pytest.fixture
def grpc_client(grpc_server: ServerHandle, grpc_mode: str) -> Iterator[Any]:
    """A TensorClient of grpc_server in grpc_mode, ready (grpcio is imported only here: the
    plugin loads without it)."""
    from pytest_hpccomm.stacks.grpc.pyclient import TensorClient

    with TensorClient(grpc_server.target, grpc_mode) as c:
        c.wait_ready(10)
        yield c


@pytest.fixture(scope="session")
def grpc_settings(grpc_options: GrpcOptions) -> SettingsFactory:
    """settings(cap=None) for a property built inside a test, so its example budget follows
    the profile (--hpc-grpc-examples), at most `cap`."""
    return lambda cap=None: property_settings(grpc_options, cap)


BenchRun = Callable[[str, str], None]


@pytest.fixture
def grpc_bench(grpc_peer: str, grpc_mode: str, hpc_placement: str, grpc_lab: GrpcLab,
               grpc_base_lab: GrpcLab | None, grpc_options: GrpcOptions, hpc_record: Any,
               hpc_config: Any, request: pytest.FixtureRequest) -> BenchRun:
    """run(benchmark, scheme): the point of this item's (peer, mode, placement) sweep; its
    echoes and acknowledgements checked, then recorded and judged (tfbench.measurement). In
    a paired A/B run the candidate's point is judged against the base's of this session."""
    if hpc_placement not in (LOOPBACK, NETNS):
        pytest.skip(f"gRPC peers run on loopback and the virtual cluster; placement "
                    f"{hpc_placement!r} (real hosts) is not implemented for this stack yet")

    def run(bench: str, scheme: str) -> None:
        family, name = BENCHMARKS[bench][:2]
        cluster = request.getfixturevalue("hpc_virtual_cluster") \
            if hpc_placement == NETNS else None
        base: Any = None
        where = (family, grpc_peer, grpc_mode, hpc_placement)
        try:
            if grpc_base_lab is None:
                sweep = grpc_lab.sweep(*where, cluster)
            else:
                sweep, base_sweep = grpc_lab.sweep_paired(
                    grpc_base_lab, family, grpc_peer, grpc_mode, hpc_placement, cluster,
                    hpc_config.ab_rounds)
                base_point = base_sweep.get(name, scheme)
                assert not base_point["errors"], \
                    f"base: {bench} {scheme}: {base_point['errors'][:3]}"
                base = measurement(bench, scheme, base_sweep, base_point, grpc_options.runtime,
                                   grpc_peer, grpc_mode, hpc_placement)
            point = sweep.get(name, scheme)
        except GrpcRunError as exc:
            pytest.fail(str(exc), pytrace=False)
        assert not point["errors"], f"{bench} {scheme}: {point['errors'][:3]}"

        def record_of(sw: Sweep, pt: dict[str, Any]) -> Any:
            return measurement(bench, scheme, sw, pt, grpc_options.runtime, grpc_peer,
                               grpc_mode, hpc_placement)

        finger = {"grpc_runtime": grpc_options.runtime, **sweep.runtime_fingerprint}
        def grow() -> list[Any] | None:
            try:
                grown = grpc_lab.more(*where, cluster)
            except GrpcRunError as exc:
                pytest.fail(f"adaptive repeat: {exc}", pytrace=False)
            if grown is None:
                return None
            again = grown.get(name, scheme)
            assert not again["errors"], f"{bench} {scheme}: {again['errors'][:3]}"
            return [record_of(grown, again)]

        m = record_of(sweep, point)
        if base is None:  # adaptive repeats: more client runs while the verdict is undecided
            [m] = until_decided([m], lambda r: hpc_record.undecided(r, finger), grow,
                                lambda: grpc_lab.cost(*where))
        hpc_record(m, finger, base)

    return run
