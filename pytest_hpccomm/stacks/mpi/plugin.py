"""pytest plugin of the MPI stack (pytest11: hpccomm_mpi): its options and fixtures.

Tests ask for
  mpi_name               parametrized over --hpc-mpi (session scope)
  mpi_runtime            that MPI, resolved once (skips when it is not installed)
  mpi_osu                run(benchmark, size): one OSU point, from the session's sweep of this
                         (MPI, placement), validated and judged (test_perf_osu.py)
  mpi_conformance_peer   the long-lived peer the conformance properties drive
  mpi_ulfm               run(): the ULFM job of its own (it kills a rank) on this placement
  mpi_rdma_traffic       run(): an osu_bw job across two hosts and what their RDMA ports and
                         TCP counted meanwhile (rdma_path.py)
  mpi_cut_job            run(): a long job across two hosts, its RDMA path cut under it
Underneath: `mpi_sweeps` (the session's sweep cache, MpiSweeps) and `mpi_osu_selected` (the
benchmarks this session's items ask for, so one job runs just those).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest

from pytest_hpccomm.cluster.host_fabrics import ClusterFabric
from pytest_hpccomm.cluster.mpi import MPI_ENVS
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
from pytest_hpccomm.measure.pooling import JobPool
from pytest_hpccomm.proc.cpu_share import QuietRetry
from pytest_hpccomm.record import Record
from pytest_hpccomm.session import HpcSession, hpc_session_of
from pytest_hpccomm.stack_probes import StackProbe
from pytest_hpccomm.stacks.contract import (
    BASE_FLAG,
    CANDIDATE_FLAG,
    Implementations,
    Point,
    judge_point,
    sides,
    stack_params,
    validate_point,
)
from pytest_hpccomm.stacks.mpi import perf
from pytest_hpccomm.stacks.mpi.conformance import (
    ConformanceError,
    ConformancePeer,
    UlfmOutcome,
    register_settings,
    run_ulfm,
    ulfm_unavailable_reason,
)
from pytest_hpccomm.stacks.mpi.driver import (
    Sweep,
    SweepFailed,
    SweepSettings,
    SweepTarget,
    job_groups,
    merge_sweeps,
    run_sweep,
)
from pytest_hpccomm.stacks.mpi.env import (
    MpiRuntime,
    absence_error,
    resolve,
    spec_error,
)
from pytest_hpccomm.stacks.mpi.libfabric import verbs_provider_reason
from pytest_hpccomm.stacks.mpi.probe import MpiProbe
from pytest_hpccomm.stacks.mpi.rdma_path import (
    CutOutcome,
    RdmaTraffic,
    cut_under_job,
    measure_traffic,
)
from pytest_hpccomm.stacks.mpi.transport import OFI_VERBS_FABRICS, NoTransport, transport_for
from pytest_hpccomm.stacks.mpi.wire import PLANTS

DEFAULT_MPIS = "openmpi,mpich"
# sweep timeouts are sized for real fabrics; rxe/siw between two TCG guests took 91 s and more
# for osu_bw's 1 B-64 KiB points, which a hardware job finishes in seconds
EMULATED_TIMEOUT_SCALE = 10.0


def pytest_addoption(parser: pytest.Parser) -> None:
    help_ = (
        "MPIs to test, comma-separated: environment names (openmpi, openmpi4, mpich; made "
        "by `hpccomm mpi create NAME`) or paths to a system "
        f"mpirun (default {DEFAULT_MPIS})"
    )
    parser.getgroup("hpccomm").addoption("--hpc-mpi", default=None, dest="hpc_mpi", help=help_)
    parser.addini("hpc_mpi", help_, default=DEFAULT_MPIS)
    parser.getgroup("hpccomm").addoption(
        "--hpc-mpi-plant",
        choices=PLANTS,
        default=None,
        dest="hpc_mpi_plant",
        help="TEST ONLY: plant a known bug in the MPI conformance peer (validates the suite: "
        "the conformance tests must fail)",
    )


def _listed_mpis(config: pytest.Config) -> list[str]:
    """The names --hpc-mpi (or the ini, or the default list) gives, unchecked."""
    value = config.getoption("hpc_mpi") or config.getini("hpc_mpi") or DEFAULT_MPIS
    return [n.strip() for n in str(value).split(",") if n.strip()]


def mpi_names(config: pytest.Config) -> list[str]:
    """The MPIs the items run on; in a paired A/B run of mpi, the candidate alone (each item
    then measures the base too and is judged against it)."""
    if config.pluginmanager.has_plugin("hpccomm"):
        sides = hpc_session_of(config).cfg.paired("mpi")
        if sides is not None:
            return [sides[1]]
    names = _listed_mpis(config)
    if not names:
        raise pytest.UsageError("--hpc-mpi: empty list")
    for name in names:
        error = spec_error(name)
        if error:
            raise pytest.UsageError(f"--hpc-mpi: {error}")
    return names


def _check_named(config: pytest.Config, names: list[str]) -> None:
    """An MPI the user named in --hpc-mpi (or the ini) is theirs, never a default: when it is
    not here that is a usage error, not a skip that leaves the run green. Only the default
    list's environments may skip (it names environments a machine may lack)."""
    named = bool(config.getoption("hpc_mpi") or config.getini("hpc_mpi") != DEFAULT_MPIS)
    for name in names:
        if name in MPI_ENVS and not named:
            continue
        error = absence_error(name)
        if error:
            raise pytest.UsageError(f"--hpc-mpi: {error}")


def _check_paired(config: pytest.Config) -> None:
    sides = hpc_session_of(config).cfg.paired("mpi")
    if sides is None:
        return
    cfg, named = hpc_session_of(config).cfg, config.getoption("hpc_mpi")
    if named and not cfg.tested_by_option("mpi", named):
        raise pytest.UsageError(
            "--hpc-mpi cannot be combined with a paired A/B run of mpi: "
            "--hpc-base/--hpc-candidate name the two MPIs"
        )
    for flag, spec in zip(("--hpc-base", "--hpc-candidate"), sides):
        error = spec_error(spec)
        if error:
            raise pytest.UsageError(f"{flag}: mpi={error}")
    for flag, spec in zip(("--hpc-base", "--hpc-candidate"), sides):
        error = absence_error(spec)  # both sides are named: neither may skip
        if error:
            raise pytest.UsageError(f"{flag} mpi={spec}: {error}")


@pytest.hookimpl(trylast=True)  # after the core plugin's, which builds the HpcConfig
def pytest_configure(config: pytest.Config) -> None:
    names = mpi_names(config)  # a bad value is a usage error before any test runs
    if not config.pluginmanager.has_plugin("hpccomm"):
        _check_named(config, names)
        return  # `-p no:hpccomm`: the core plugin and its session are off
    _check_paired(config)
    if hpc_session_of(config).cfg.paired("mpi") is None:
        _check_named(config, names)
    register_settings(hpc_session_of(config).cfg.profile)


@pytest.hookimpl(optionalhook=True)  # the core plugin declares it; `-p no:hpccomm` does not
def pytest_hpccomm_stack_probes(config: pytest.Config) -> list[StackProbe]:
    return [MpiProbe()]


ON_HOSTS = "needs a TCP control channel (not implemented)"


@pytest.hookimpl(optionalhook=True)
def pytest_hpccomm_foreseen_skip(item: pytest.Item) -> str | None:
    """The skips the OSU, conformance and ULFM fixtures make that collection can tell."""
    params = stack_params(item, "mpi")
    if params is None:
        return None
    if perf.benchmark_of(item) in perf.BANDWIDTH and params.get("hpc_size") == 0:
        return perf.ZERO_BYTES
    placement = params.get("hpc_placement")
    fixtures = getattr(item, "fixturenames", ())
    name = params.get("mpi_name")
    if name is not None and sides(hpc_session_of(item.config), "mpi") is None:
        absent = IMPLS.skip_reason(str(name))  # a paired run's absent side fails instead
        if absent:
            return absent
    if placement not in (None, LOOPBACK, NETNS):
        if "mpi_conformance_peer" in fixtures:
            return conformance_placement(str(placement))
        if "mpi_ulfm" in fixtures:
            return ulfm_placement(str(placement))
    if "mpi_ulfm" in fixtures and name is not None:
        got = IMPLS.peek(str(name))
        if isinstance(got, MpiRuntime):
            return ulfm_reason(got)
    return None


def conformance_placement(placement: str) -> str:
    return f"conformance peer runs on {LOOPBACK} or {NETNS}; placement {placement!r} {ON_HOSTS}"


def ulfm_placement(placement: str) -> str:
    return f"placement {placement!r}: the ULFM job runs on {LOOPBACK} or {NETNS}"


@pytest.hookimpl(optionalhook=True)
def pytest_hpccomm_paired_stacks(config: pytest.Config) -> list[str]:
    return ["mpi"]  # two MPI environments or two system mpiruns (--hpc-base mpi=...)


@pytest.hookimpl(optionalhook=True)
def pytest_hpccomm_under_test(config: pytest.Config, stack: str) -> str | None:
    """The one MPI --hpc-mpi (or the ini) names; None for several, or the default list."""
    if stack != "mpi":
        return None
    names = _listed_mpis(config)
    return names[0] if len(names) == 1 else None


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "mpi_name" in metafunc.fixturenames:
        metafunc.parametrize("mpi_name", mpi_names(metafunc.config), scope="session")


class MpiSweeps:
    """Session cache: one sweep per (MPI, placement, benchmarks), pooled from independent
    jobs (measure/pooling.JobPool: failures cached, adaptive repeats, paired rounds)."""

    def __init__(
        self,
        profile: str,
        sizes: Sequence[int],
        slowdown: float,
        repeats: int = 1,
        reruns: int = 2,
        max_repeats: int = 0,
    ) -> None:
        self.settings = SweepSettings.for_profile(profile)
        self.sizes = list(sizes)
        self.slowdown = slowdown
        self.retry = QuietRetry(reruns)  # the contention guard's re-runs of disturbed jobs
        self.pool = JobPool(merge_sweeps, repeats, max_repeats, (SweepFailed,))

    def get(
        self,
        runtime: MpiRuntime,
        target: SweepTarget,
        benchmarks: str,
        benchmark: str | None = None,
    ) -> Sweep:
        """The sweep of the comma-separated `benchmarks` (one job each time), or for
        `benchmark` its view once adaptive repeats added jobs of it alone (more)."""
        key, job = (
            self._key(runtime, target, benchmarks),
            lambda: self._quiet_job(runtime, target, benchmarks),
        )
        return (
            self.pool.get(key, job)
            if benchmark is None
            else self.pool.get_part(key, benchmark, job)
        )

    def more(
        self, runtime: MpiRuntime, target: SweepTarget, benchmarks: str, benchmark: str
    ) -> Sweep | None:
        """`benchmark`'s view with one more job of it alone pooled in (adaptive repeats):
        the sweep's job runs every selected benchmark, 15-20 s here, and re-running the
        decided ones adds no evidence; None: no more allowed."""
        return self.pool.more_of(
            self._key(runtime, target, benchmarks),
            benchmark,
            lambda: self._quiet_job(runtime, target, benchmark),
            lambda sweep: sweep.only(benchmark),
        )

    def cost(
        self,
        runtime: MpiRuntime,
        target: SweepTarget,
        benchmarks: str,
        benchmark: str | None = None,
    ) -> dict[str, Any]:
        return self.pool.cost(self._key(runtime, target, benchmarks), benchmark)

    @staticmethod
    def _key(runtime: MpiRuntime, target: SweepTarget, benchmark: str) -> tuple[str, str, str]:
        return runtime.name, target.placement, benchmark

    def get_paired(
        self,
        base: MpiRuntime,
        candidate: MpiRuntime,
        target: SweepTarget,
        benchmark: str,
        rounds: int,
    ) -> tuple[Sweep, Sweep]:
        """(candidate, base) sweeps of a paired A/B run (JobPool.paired: one job of each side
        per round, balanced random order). The canary stretches the candidate only."""
        return self.pool.paired(
            (f"{base.mpirun}|{candidate.mpirun}", target.placement, benchmark),
            lambda _round: self._quiet_job(base, target, benchmark, 1.0),
            lambda _round: self._quiet_job(candidate, target, benchmark, self.slowdown),
            rounds,
        )

    def _quiet_job(
        self,
        runtime: MpiRuntime,
        target: SweepTarget,
        benchmark: str,
        slowdown: float | None = None,
    ) -> Sweep:
        """One job, run again while another process shared the cores (cpu_share.QuietRetry).
        A job that never got them to itself is kept, marked: its verdict turns INCONCLUSIVE
        instead of calling a neighbour's load a regression."""
        return self.retry.guarded(
            lambda: run_sweep(
                runtime,
                target,
                benchmark,
                self.sizes,
                self.settings,
                self.slowdown if slowdown is None else slowdown,
            )
        )


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


IMPLS = Implementations(resolve)  # errors.Unavailable: skip; errors.Broken: fail


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
def mpi_sweeps(hpc_session: HpcSession) -> MpiSweeps:
    cfg = hpc_session.cfg
    return MpiSweeps(
        cfg.profile,
        cfg.message_sizes,
        cfg.inject_slowdown,
        cfg.repeats,
        max_repeats=cfg.repeat_limit,
    )


@pytest.fixture(scope="session")
def mpi_osu_selected(request: pytest.FixtureRequest) -> perf.Selected:
    return perf.selected(request.session.items)


OsuRun = Callable[[str, int], None]


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
        benchmarks, rounds = ",".join(group), hpc_session.cfg.ab_rounds
        point = Point(
            get=lambda: mpi_sweeps.get(mpi_runtime, target, benchmarks, benchmark),
            more=lambda: mpi_sweeps.more(mpi_runtime, target, benchmarks, benchmark),
            cost=lambda: mpi_sweeps.cost(mpi_runtime, target, benchmarks, benchmark),
            paired=None
            if mpi_base_runtime is None
            else lambda: mpi_sweeps.get_paired(
                mpi_base_runtime, mpi_runtime, target, benchmarks, rounds
            ),
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


UlfmRun = Callable[[], UlfmOutcome]
_ULFM: dict[str, str | None] = {}  # mpirun -> why it has no ULFM (None: it has)


def ulfm_reason(runtime: MpiRuntime) -> str | None:
    """ulfm_unavailable_reason, asked once per MPI (it may run ompi_info)."""
    key = str(runtime.mpirun)
    if key not in _ULFM:
        _ULFM[key] = ulfm_unavailable_reason(runtime)
    return _ULFM[key]


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
