"""The MPI suites' fixtures (loaded by the MPI plugin's pytest_plugins).

Tests ask for
  mpi_name               parametrized over --hpc-mpi (session scope; plugin.py parametrizes it)
  mpi_runtime            that MPI, resolved once (skips when it is not installed)
  mpi_osu                run(benchmark, size): one OSU point, from the session's sweep of this
                         (MPI, placement), validated and judged (test_perf_osu.py)
  mpi_conformance_peer   the long-lived peer the conformance properties drive
  mpi_ulfm               run(): the ULFM job of its own (it kills a rank) on this placement
  mpi_rdma_traffic       run(): an osu_bw job across two hosts and what their RDMA ports and
                         TCP counted meanwhile (rdma_path.py)
  mpi_cut_job            run(): a long job across two hosts, its RDMA path cut under it
Underneath: `mpi_sweeps` (the session's store of sweeps, perf.MpiSweeps) and `mpi_osu_selected`
(the benchmarks this session's items ask for, so one job runs just those).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from pytest_hpccomm.cluster.host_fabrics import ClusterFabric
from pytest_hpccomm.cluster.placement import (
    HOSTS,
    LOOPBACK,
    NETNS,
    hosts_fabric_error,
    placement_reason,
)
from pytest_hpccomm.fabrics import RDMA_KINDS, FabricSelection, FabricUnavailable
from pytest_hpccomm.fabrics.link_rate import discovered_link_rate
from pytest_hpccomm.fabrics.sysfs import (
    SOFTWARE_DRIVERS,
)  # emulated: timings say nothing of a fabric
from pytest_hpccomm.record import Record
from pytest_hpccomm.session import HpcSession
from pytest_hpccomm.stacks.contract import (
    BASE_FLAG,
    CANDIDATE_FLAG,
    Point,
    judge_point,
    sides,
    validate_point,
)
from pytest_hpccomm.stacks.mpi import perf
from pytest_hpccomm.stacks.mpi.conformance import (
    ConformanceError,
    ConformancePeer,
    UlfmOutcome,
    run_ulfm,
)
from pytest_hpccomm.stacks.mpi.driver import SweepFailed, SweepTarget, job_groups
from pytest_hpccomm.stacks.mpi.env import MpiRuntime
from pytest_hpccomm.stacks.mpi.libfabric import verbs_provider_reason
from pytest_hpccomm.stacks.mpi.perf import MpiSweeps
from pytest_hpccomm.stacks.mpi.plugin import (
    IMPLS,
    OsuRun,
    UlfmRun,
    conformance_placement,
    ulfm_placement,
    ulfm_reason,
)
from pytest_hpccomm.stacks.mpi.rdma_path import (
    CutOutcome,
    RdmaTraffic,
    cut_under_job,
    measure_traffic,
)
from pytest_hpccomm.stacks.mpi.transport import OFI_VERBS_FABRICS, NoTransport, transport_for

# sweep timeouts are sized for real fabrics; rxe/siw between two TCG guests took 91 s and more
# for osu_bw's 1 B-64 KiB points, which a hardware job finishes in seconds
EMULATED_TIMEOUT_SCALE = 10.0


def sweep_target(
    placement: str, runtime: MpiRuntime, hpc_session: HpcSession, request: pytest.FixtureRequest
) -> SweepTarget:
    """Where and over what this session's sweeps run; skips (one line) when the placement
    cannot carry the session's fabric."""
    cfg = hpc_session.cfg
    if cfg.fabric in RDMA_KINDS:  # the rxe/siw links, here and on every host, made if missing
        request.getfixturevalue("hpc_rdma_fabric")
    fabric = hpc_session.selection
    if isinstance(fabric, FabricUnavailable):
        pytest.skip(fabric.reason)
    try:
        transport = transport_for(fabric, runtime.flavor.vendor)
    except NoTransport as exc:
        pytest.skip(str(exc))
    if fabric.kind in OFI_VERBS_FABRICS:
        reason = verbs_provider_reason()
        if reason:
            pytest.skip(f"MPI on {fabric.kind} ({fabric.device}): {reason}")
    reason = placement_reason(placement, fabric)
    if reason:
        pytest.skip(reason)
    if placement == NETNS:
        return SweepTarget(NETNS, cluster=request.getfixturevalue("hpc_virtual_cluster"))
    if placement == HOSTS:
        error = hosts_fabric_error(fabric, [h.name for h in cfg.host_list])
        if error:
            pytest.fail(error, pytrace=False)
        launcher = "srun" if cfg.launcher == "srun" else "mpirun"
        return SweepTarget(
            HOSTS,
            hosts=tuple(cfg.host_list),
            transport=transport,
            launcher=launcher,
            rsh_agent=cfg.rsh_agent,
            bind_none=cfg.bind == "none",
            timeout_scale=EMULATED_TIMEOUT_SCALE if fabric.driver in SOFTWARE_DRIVERS else 1.0,
            link=discovered_link_rate(fabric, hpc_session.inventory),
        )
    # loopback: TCP over lo on TCP fabrics, through the HCA on RDMA ones
    return SweepTarget(LOOPBACK, transport=None if transport.tcp_only else transport)


def runtime_of(spec: str, named_by: str | None = None) -> MpiRuntime:
    """The MPI `spec` names, resolved once per process (contract.Implementations): skips when
    it is absent here (only an environment name of the default --hpc-mpi list gets here
    absent: pytest_configure refuses the others), fails when it is installed but broken or
    when a side of a paired run (`named_by`) is absent."""
    return IMPLS(spec, named_by)


@pytest.fixture(scope="session")
def mpi_runtime(mpi_name: str, hpc_session: HpcSession) -> MpiRuntime:
    paired = sides(hpc_session, "mpi")
    return runtime_of(mpi_name, None if paired is None else f"{CANDIDATE_FLAG} mpi")


@pytest.fixture(scope="session")
def mpi_base_runtime(hpc_session: HpcSession) -> MpiRuntime | None:
    """The base side's MPI of a paired A/B run of mpi (None: not a paired run)."""
    paired = sides(hpc_session, "mpi")
    return None if paired is None else runtime_of(paired[0], f"{BASE_FLAG} mpi")


@pytest.fixture(scope="session")
def mpi_sweeps(hpc_session: HpcSession, mpi_base_runtime: MpiRuntime | None) -> MpiSweeps:
    """The session's store of OSU sweeps (perf.MpiSweeps); in a paired A/B run of mpi, the
    candidate's, holding the base's store (the base MPI, never slowed by the canary) and
    sharing its contention guard with it."""
    cfg = hpc_session.cfg
    base = (
        None
        if mpi_base_runtime is None
        else MpiSweeps(
            cfg.profile,
            cfg.message_sizes,
            1.0,
            cfg.repeats,
            max_repeats=cfg.repeat_limit,
            runtime=mpi_base_runtime,
        )
    )
    return MpiSweeps(
        cfg.profile,
        cfg.message_sizes,
        cfg.inject_slowdown,
        cfg.repeats,
        max_repeats=cfg.repeat_limit,
        base=base,
        retry=None if base is None else base.retry,
    )


@pytest.fixture(scope="session")
def mpi_osu_selected(request: pytest.FixtureRequest) -> perf.Selected:
    return perf.selected(request.session.items)


@pytest.fixture
def mpi_osu(
    hpc_placement: str,
    mpi_runtime: MpiRuntime,
    mpi_base_runtime: MpiRuntime | None,
    mpi_sweeps: MpiSweeps,
    mpi_osu_selected: perf.Selected,
    hpc_session: HpcSession,
    hpc_record: Record,
    request: pytest.FixtureRequest,
) -> OsuRun:
    """run(benchmark, size): the point of this item's (MPI, placement) sweep, judged. The
    sweep's job runs every selected benchmark it can share a job with (driver.job_groups).
    In a paired A/B run the sweep is the candidate's, judged against the base's jobs of the
    same session."""

    def run(benchmark: str, size: int) -> None:
        if size == 0 and benchmark in perf.BANDWIDTH:
            pytest.skip(perf.ZERO_BYTES)
        target = sweep_target(hpc_placement, mpi_runtime, hpc_session, request)
        wanted = mpi_osu_selected.get((mpi_runtime.name, hpc_placement), set()) | {benchmark}
        hosts = len(target.hosts) if target.hosts else hpc_session.cfg.vhosts
        group = next(g for g in job_groups(wanted, hpc_placement, hosts) if benchmark in g)
        key, rounds = MpiSweeps.key(mpi_runtime, target, ",".join(group)), hpc_session.cfg.ab_rounds
        point = Point(
            get=lambda: mpi_sweeps.get_part(key, benchmark, mpi_runtime, target),
            more=lambda: mpi_sweeps.more_of(key, benchmark, mpi_runtime, target),
            cost=lambda: mpi_sweeps.cost(key, benchmark),
            paired=None
            if mpi_base_runtime is None
            else lambda: mpi_sweeps.paired(key, rounds, mpi_runtime, target),
            fingerprint=lambda sweep: sweep.runtime_fingerprint,
        )
        records = perf.records_of(
            benchmark, size, {"mpi": mpi_runtime.name, "placement": hpc_placement}
        )
        fabric = hpc_session.selection
        if isinstance(fabric, FabricSelection) and fabric.driver in SOFTWARE_DRIVERS:
            validate_point(point, records, (SweepFailed,))  # emulated: a functional pass
            return
        judge_point(hpc_record, point, records, (SweepFailed,))

    return run


@pytest.fixture(scope="session")
def mpi_conformance_plant(pytestconfig: pytest.Config) -> str | None:
    """The planted bug to pass to the peer (None: none). Overridable by a fixture."""
    plant: str | None = pytestconfig.getoption("hpc_mpi_plant", None)
    return plant


@pytest.fixture(scope="session")
def mpi_conformance_peer(
    mpi_runtime: MpiRuntime,
    hpc_placement: str,
    mpi_conformance_plant: str | None,
    hpc_session: HpcSession,
    request: pytest.FixtureRequest,
) -> Iterator[ConformancePeer]:
    """The session's conformance peer for (mpi_name, hpc_placement); reaped at session end,
    also when a test or the start fails."""
    if hpc_placement not in (LOOPBACK, NETNS):
        pytest.skip(conformance_placement(hpc_placement))
    cluster = request.getfixturevalue("hpc_virtual_cluster") if hpc_placement == NETNS else None
    peer = ConformancePeer(
        mpi_runtime,
        hpc_placement,
        cluster,
        plant=mpi_conformance_plant,
        job_timeout=hpc_session.cfg.session_job_timeout,
    )
    try:
        try:
            _ = peer.info  # starts it
        except ConformanceError as exc:
            pytest.fail(str(exc), pytrace=False)
        yield peer
    finally:
        peer.close()


@pytest.fixture
def mpi_ulfm(
    mpi_runtime: MpiRuntime, hpc_placement: str, request: pytest.FixtureRequest
) -> UlfmRun:
    """run(): the ULFM job, a short-lived one of its own (it kills a rank, which would end the
    session's conformance peer); skips where the MPI or the placement cannot run it."""
    reason = ulfm_reason(mpi_runtime)
    if reason:
        pytest.skip(reason)
    if hpc_placement not in (LOOPBACK, NETNS):
        pytest.skip(ulfm_placement(hpc_placement))
    cluster = request.getfixturevalue("hpc_virtual_cluster") if hpc_placement == NETNS else None

    def run() -> UlfmOutcome:
        try:
            return run_ulfm(mpi_runtime, hpc_placement, cluster)
        except ConformanceError as exc:
            pytest.fail(str(exc), pytrace=False)

    return run


@pytest.fixture
def mpi_rdma_traffic(
    mpi_runtime: MpiRuntime,
    hpc_placement: str,
    hpc_session: HpcSession,
    request: pytest.FixtureRequest,
) -> Callable[[], RdmaTraffic]:
    """run(): one osu_bw job from the first host to the second, with what both hosts' RDMA
    ports and TCP counted meanwhile (rdma_path.RdmaTraffic); skips where the port counts
    nothing, fails when the job fails."""
    target = sweep_target(hpc_placement, mpi_runtime, hpc_session, request)
    fabric: ClusterFabric = request.getfixturevalue("hpc_rdma_fabric")
    return lambda: measure_traffic(mpi_runtime, target, fabric)


@pytest.fixture
def mpi_cut_job(
    mpi_runtime: MpiRuntime,
    hpc_placement: str,
    hpc_session: HpcSession,
    request: pytest.FixtureRequest,
) -> Callable[[], CutOutcome]:
    """run(): a long osu_bw job across two hosts with the RDMA path cut under it, and how it
    ended (rdma_path.CutOutcome)."""
    target = sweep_target(hpc_placement, mpi_runtime, hpc_session, request)
    fabric: ClusterFabric = request.getfixturevalue("hpc_rdma_fabric")
    return lambda: cut_under_job(mpi_runtime, target, fabric)
