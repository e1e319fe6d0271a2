"""The gRPC suites' fixtures (loaded by the gRPC plugin's pytest_plugins): the session's lab
(and a paired run's base lab), servers, TLS, clients, Hypothesis settings and one benchmark
point judged through the stack contract.

More: docs/explanation/internals.md (pytest_hpccomm.stacks.grpc.plugin).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from pytest_hpccomm.cluster.placement import HOSTS, NETNS
from pytest_hpccomm.cluster.virtual import VirtualCluster
from pytest_hpccomm.config import HpcConfig
from pytest_hpccomm.fabrics import FabricSelection
from pytest_hpccomm.fabrics.path_proof import Crossing
from pytest_hpccomm.measure.measurement import Measurement
from pytest_hpccomm.record import Record
from pytest_hpccomm.report.beside import beside
from pytest_hpccomm.session import hpc_session_of
from pytest_hpccomm.stacks.contract import Point, judge_point
from pytest_hpccomm.stacks.grpc.certs import TlsFiles
from pytest_hpccomm.stacks.grpc.conformance import SettingsFactory, property_settings
from pytest_hpccomm.stacks.grpc.driver import (
    GrpcHosts,
    GrpcRunError,
    ServerHandle,
    Site,
    Sweep,
)
from pytest_hpccomm.stacks.grpc.env import Runtime
from pytest_hpccomm.stacks.grpc.lab import GrpcLab
from pytest_hpccomm.stacks.grpc.options import GrpcOptions
from pytest_hpccomm.stacks.grpc.perf import BENCHMARKS, measurement
from pytest_hpccomm.stacks.grpc.plugin import OPTIONS_KEY, prefix_of
from pytest_hpccomm.stacks.grpc.python_env import is_release


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
        grpc_options
        if impl is None
        else dataclasses.replace(grpc_options, python=impl)
        if is_release(impl)
        else dataclasses.replace(grpc_options, prefix=prefix_of(impl))
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
    counters, then recorded and judged (perf.measurement), beside its TCP twin. In a paired
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

        rounds, sweeps = hpc_config.ab_rounds, grpc_lab.sweeps
        base = None if grpc_base_lab is None else grpc_base_lab.sweeps
        judge_point(
            hpc_record,
            Point(
                get=lambda: sweeps.get(where, cluster),
                more=lambda: sweeps.more(where, cluster),
                cost=lambda: sweeps.cost(where),
                paired=None
                if base is None
                else lambda: sweeps.paired(where, rounds, cluster, base=base),
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
