"""The Horovod suites' fixtures (loaded by the Horovod plugin's pytest_plugins): the Horovod
under test (and a paired run's base), the session's peers, where ranks go, and one benchmark
point judged through the stack contract.

Tests ask for
  horovod_env          the Horovod to test: the cached build (built now if missing) or the
                       user's (--hpc-horovod-python); skips only when opted out or when the
                       toolchain is absent, fails with the build log's tail when a build fails
  horovod_peers        the session's long-lived peers for (controller, placement)
  horovod_site         where the ranks go for this placement (virtual cluster, real hosts)
(horovod_controller and the sizes are the plugin's parametrization.)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pytest_hpccomm.cluster.placement import (
    HOSTS,
    LOOPBACK,
    NETNS,
    hosts_fabric_error,
    placement_reason,
)
from pytest_hpccomm.cluster.virtual import VirtualCluster
from pytest_hpccomm.fabrics import FabricSelection
from pytest_hpccomm.fabrics.counters import TrafficMeter
from pytest_hpccomm.measure.measurement import Measurement
from pytest_hpccomm.record import Record
from pytest_hpccomm.session import HpcSession
from pytest_hpccomm.stacks.contract import Point, judge_point
from pytest_hpccomm.stacks.horovod.conformance import LOOPBACK_RANKS as CONFORMANCE_LOOPBACK_RANKS
from pytest_hpccomm.stacks.horovod.driver import (
    HorovodError,
    HorovodPeers,
    HostsSite,
    Site,
)
from pytest_hpccomm.stacks.horovod.env import HorovodEnv
from pytest_hpccomm.stacks.horovod.perf import (
    BENCHMARK,
    S,
    Sweep,
    SweepFailed,
    Sweeps,
    TrainSweep,
    allreduce_sweeps,
    bench_sizes,
    measurements,
    train_measurements,
    train_sweeps,
)
from pytest_hpccomm.stacks.horovod.plugin import IMPLS, STACK, horovod_python

LIVE_PEERS = pytest.StashKey[list[HorovodPeers]]()  # the session's conformance peers


@pytest.fixture(scope="session")
def horovod_env(pytestconfig: pytest.Config, hpc_session: HpcSession) -> HorovodEnv:
    """The Horovod under test; in a paired A/B run of horovod, the candidate's."""
    return IMPLS.under_test(hpc_session, STACK, horovod_python(pytestconfig))


@pytest.fixture(scope="session")
def horovod_base_env(hpc_session: HpcSession) -> HorovodEnv | None:
    """The base side's Horovod of a paired A/B run of horovod (None: not a paired run)."""
    return IMPLS.base(hpc_session, STACK)


@pytest.fixture(scope="session")
def horovod_plant(pytestconfig: pytest.Config) -> str | None:
    plant: str | None = pytestconfig.getoption("hpc_horovod_plant", None)
    return plant


@pytest.fixture(scope="session")
def horovod_peers(
    horovod_env: HorovodEnv,
    horovod_controller: str,
    hpc_placement: str,
    horovod_plant: str | None,
    hpc_session: HpcSession,
    request: pytest.FixtureRequest,
) -> Iterator[HorovodPeers]:
    """The session's peers for (controller, placement), reaped at session end, also when a
    test or the start fails."""
    site = site_for(hpc_placement, hpc_session, request)
    peers = HorovodPeers(
        horovod_env,
        horovod_controller,
        hpc_placement,
        site,
        plant=horovod_plant,
        job_timeout=hpc_session.cfg.session_job_timeout,
        loopback_ranks=CONFORMANCE_LOOPBACK_RANKS,
    )
    live = request.config.stash.setdefault(LIVE_PEERS, [])
    live.append(peers)
    try:
        try:
            peers.start()
        except HorovodError as exc:
            pytest.fail(str(exc), pytrace=False)
        yield peers
    finally:
        live.remove(peers)
        peers.close()


def _park_conformance_peers(config: pytest.Config) -> None:
    """Before a timed job: the conformance peers' background loops wake every cycle and would
    take the measured ranks' cores on a small machine; a later conformance item starts them
    again (HorovodPeers.park)."""
    for peers in config.stash.get(LIVE_PEERS, []):
        peers.park()


@pytest.fixture
def horovod_site(
    hpc_placement: str, hpc_session: HpcSession, request: pytest.FixtureRequest
) -> Site:
    """Where this item's ranks go (site_for), for tests that start peers of their own."""
    return site_for(hpc_placement, hpc_session, request)


def _allreduce_store(
    hvd: HorovodEnv,
    hpc_session: HpcSession,
    config: pytest.Config,
    slowdown: float,
    base: Sweeps[Sweep] | None = None,
) -> Sweeps[Sweep]:
    cfg = hpc_session.cfg
    return allreduce_sweeps(
        hvd,
        bench_sizes(cfg.message_sizes),
        cfg.profile,
        slowdown,
        cfg.repeats,
        cfg.repeat_limit,
        lambda: _park_conformance_peers(config),
        base,
    )


@pytest.fixture(scope="session")
def horovod_sweeps(
    horovod_env: HorovodEnv,
    horovod_base_env: HorovodEnv | None,
    hpc_session: HpcSession,
    pytestconfig: pytest.Config,
) -> Sweeps[Sweep]:
    """The allreduce sweeps of the Horovod under test (a paired run's candidate: the canary
    stretches these), with a paired run's base store inside (never stretched)."""
    base = None
    if horovod_base_env is not None:
        base = _allreduce_store(horovod_base_env, hpc_session, pytestconfig, 1.0)
    return _allreduce_store(
        horovod_env, hpc_session, pytestconfig, hpc_session.cfg.inject_slowdown, base
    )


AllreduceRun = Callable[[int, str], None]


@pytest.fixture
def horovod_allreduce(
    horovod_sweeps: Sweeps[Sweep],
    horovod_controller: str,
    hpc_placement: str,
    hpc_session: HpcSession,
    hpc_record: Record,
    request: pytest.FixtureRequest,
) -> AllreduceRun:
    """run(size, knobs): the point of this (controller, placement, knobs) sweep, validated
    (every element is the number of ranks) and judged, latency then busbw; an undecided
    verdict pools one more job at a time (adaptive repeats); in a paired run, judged against
    the base Horovod's jobs of the same rounds."""
    return _allreduce_runner(
        horovod_sweeps, horovod_controller, hpc_placement, hpc_session, hpc_record, request
    )


@pytest.fixture
def horovod_allreduce_loopback(
    horovod_sweeps: Sweeps[Sweep],
    horovod_controller: str,
    hpc_session: HpcSession,
    hpc_record: Record,
    request: pytest.FixtureRequest,
) -> AllreduceRun:
    """As horovod_allreduce, on loopback only (the knobs: each setting is its own jobs)."""
    return _allreduce_runner(
        horovod_sweeps, horovod_controller, LOOPBACK, hpc_session, hpc_record, request
    )


def _train_store(
    hvd: HorovodEnv,
    hpc_session: HpcSession,
    config: pytest.Config,
    slowdown: float,
    scratch: Path,
    base: Sweeps[TrainSweep] | None = None,
) -> Sweeps[TrainSweep]:
    cfg = hpc_session.cfg
    return train_sweeps(
        hvd,
        slowdown,
        cfg.repeats,
        cfg.repeat_limit,
        scratch,
        lambda: _park_conformance_peers(config),
        base,
    )


@pytest.fixture(scope="session")
def horovod_train_sweeps(
    horovod_env: HorovodEnv,
    horovod_base_env: HorovodEnv | None,
    hpc_session: HpcSession,
    tmp_path_factory: pytest.TempPathFactory,
    pytestconfig: pytest.Config,
) -> Sweeps[TrainSweep]:
    """The synthetic training sweeps of the Horovod under test, a paired run's base inside."""
    base = None
    if horovod_base_env is not None:
        scratch = tmp_path_factory.mktemp("horovod-timeline-base")
        base = _train_store(horovod_base_env, hpc_session, pytestconfig, 1.0, scratch)
    return _train_store(
        horovod_env,
        hpc_session,
        pytestconfig,
        hpc_session.cfg.inject_slowdown,
        tmp_path_factory.mktemp("horovod-timeline"),
        base,
    )


SyntheticRun = Callable[[str], None]


@pytest.fixture
def horovod_synthetic(
    horovod_train_sweeps: Sweeps[TrainSweep],
    horovod_controller: str,
    hpc_placement: str,
    hpc_session: HpcSession,
    hpc_record: Record,
    request: pytest.FixtureRequest,
) -> SyntheticRun:
    """run(model): Horovod's synthetic training benchmark on this (controller, placement):
    images/s per rank judged; negotiation and reduction ms per step (the timeline) recorded
    and judged beside it."""

    def run(model: str) -> None:
        params = {"controller": horovod_controller, "placement": hpc_placement, "model": model}
        _pooled_run(
            horovod_train_sweeps,
            (horovod_controller, hpc_placement, model),
            lambda sw: train_measurements(sw, params),
            hpc_session,
            hpc_record,
            request,
        )

    return run


def site_for(placement: str, hpc_session: HpcSession, request: pytest.FixtureRequest) -> Site:
    """Where the ranks go: the virtual cluster (netns), the hosts of --hpc-hosts (hosts: the
    ranks dial home to this host's fabric address, Horovod's TCP pinned to its netdev), None
    on loopback; skips where the placement cannot carry the session's fabric."""
    fabric = hpc_session.selection
    reason = placement_reason(placement, fabric)
    if reason:
        pytest.skip(reason)
    assert isinstance(fabric, FabricSelection)
    if placement == NETNS:
        cluster: VirtualCluster = request.getfixturevalue("hpc_virtual_cluster")
        return cluster
    if placement == HOSTS:
        cfg = hpc_session.cfg
        error = hosts_fabric_error(fabric, [h.name for h in cfg.host_list])
        if error:
            pytest.fail(error, pytrace=False)
        if not (fabric.netdev and fabric.address):
            pytest.fail(
                f"Horovod ranks on hosts dial home to this host's fabric address and "
                f"pin TCP to its netdev; {fabric.description} has none",
                pytrace=False,
            )
        return HostsSite(
            tuple(cfg.host_list),
            fabric.address,
            fabric.netdev,
            cfg.rsh_agent,
            "srun" if cfg.launcher == "srun" else "mpirun",
            cfg.bind == "none",
        )
    return None


def _allreduce_runner(
    sweeps: Sweeps[Sweep],
    horovod_controller: str,
    hpc_placement: str,
    hpc_session: HpcSession,
    hpc_record: Record,
    request: pytest.FixtureRequest,
) -> AllreduceRun:
    def run(size: int, knobs: str) -> None:
        params = {"controller": horovod_controller, "placement": hpc_placement, "knobs": knobs}

        def records(sw: Sweep) -> list[Measurement]:
            if not sw.points[size]["valid"]:
                pytest.fail(f"{BENCHMARK} {size} B: a rank's result was not the sum", pytrace=False)
            return measurements(sw, size, params)

        _pooled_run(
            sweeps,
            (horovod_controller, hpc_placement, knobs),
            records,
            hpc_session,
            hpc_record,
            request,
        )

    return run


def _pooled_run(
    sweeps: Sweeps[S],
    where: tuple[str, str, str],
    records: Callable[[S], list[Measurement]],
    hpc_session: HpcSession,
    hpc_record: Record,
    request: pytest.FixtureRequest,
) -> None:
    """The (controller, placement, variant) sweep's point judged (contract.judge_point)."""
    placement = where[1]
    site = site_for(placement, hpc_session, request)
    rounds = hpc_session.cfg.ab_rounds
    judge_point(
        hpc_record,
        Point(
            get=lambda: sweeps.get(where, site),
            more=lambda: sweeps.more(where, site),
            cost=lambda: sweeps.cost(where),
            paired=None if sweeps.base is None else lambda: sweeps.paired(where, rounds, site),
        ),
        records,
        (SweepFailed,),
    )


def traffic(peers: HorovodPeers) -> TrafficMeter:
    """What the peers' collectives send on the network their placement names
    (fabrics.counters.TrafficMeter): every virtual host's veth (netns), this host's fabric
    netdev (hosts), lo (loopback)."""
    return TrafficMeter(
        peers.placement,
        None if peers.hosts is None else peers.hosts.netdev,
        None if peers.cluster is None else peers.cluster.all_counters,
    )
