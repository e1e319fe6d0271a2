"""The TensorFlow suites' fixtures (loaded by the TensorFlow plugin's pytest_plugins): the
TensorFlow under test (and a paired run's base), the session's tasks per placement and layout,
where tasks go, one benchmark point judged through the stack contract, and what the suites
measure of the tasks (traffic per device, a task's connections).

More: docs/explanation/internals.md (pytest_hpccomm.stacks.tf.fixtures).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import replace
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
from pytest_hpccomm.errors import KnownDefect
from pytest_hpccomm.fabrics import FabricSelection
from pytest_hpccomm.fabrics.counters import TrafficMeter
from pytest_hpccomm.measure.measurement import Measurement, Param
from pytest_hpccomm.record import Record
from pytest_hpccomm.session import HpcSession, hpc_session_of
from pytest_hpccomm.stacks.contract import Point, judge_point
from pytest_hpccomm.stacks.tf import allreduce, ps
from pytest_hpccomm.stacks.tf.driver import (
    PS_CLUSTER,
    RING,
    Layout,
    Site,
    TfError,
    TfHosts,
    TfTasks,
)
from pytest_hpccomm.stacks.tf.env import TfEnv
from pytest_hpccomm.stacks.tf.perf import (
    BENCHMARK,
    JobFn,
    RecvSweep,
    SweepFailed,
    Sweeps,
    bench_sizes,
    measurements,
    run_job,
)
from pytest_hpccomm.stacks.tf.plugin import IMPLS, STACK, tf_python


@pytest.fixture(scope="session")
def tf_env(pytestconfig: pytest.Config, hpc_session: HpcSession) -> TfEnv:
    """The TensorFlow under test; in a paired A/B run of tf, the candidate's."""
    return IMPLS.under_test(hpc_session, STACK, tf_python(pytestconfig))


@pytest.fixture(scope="session")
def tf_base_env(hpc_session: HpcSession) -> TfEnv | None:
    """The base side's TensorFlow of a paired A/B run of tf (None: not a paired run)."""
    return IMPLS.base(hpc_session, STACK)


class SessionTasks:
    """The session's TfTasks per (placement, layout), made on first use and reused; at most
    LIVE sets at a time (a task holds ~0.5 GB: the least recently used set is ended first),
    all closed at the end."""

    LIVE = 3

    def __init__(self, tf: TfEnv, request: pytest.FixtureRequest) -> None:
        self.tf, self.request = tf, request
        self.live: OrderedDict[tuple[str, Layout], TfTasks] = OrderedDict()

    def __call__(self, placement: str, layout: Layout = Layout()) -> TfTasks:  # noqa: B008 (frozen)
        key = (placement, layout)
        if key not in self.live:
            while len(self.live) >= self.LIVE:
                self.live.popitem(last=False)[1].close()
            self.live[key] = TfTasks(self.tf, placement, tf_site(placement, self.request), layout)
        self.live.move_to_end(key)
        tasks = self.live[key]
        tasks.start()
        return tasks

    def fresh(self, placement: str, layout: Layout = Layout()) -> TfTasks:  # noqa: B008
        """A set of tasks of its own, started, that the caller closes: a paired run's job
        gets new tasks every round, as gRPC's paired runs start fresh servers (a task
        process instance is part of the measurement: one side's long-lived tasks ran the
        whole session faster than the other's, A against identical A)."""
        tasks = TfTasks(self.tf, placement, tf_site(placement, self.request), layout)
        try:
            tasks.start()
        except BaseException:
            tasks.close()
            raise
        return tasks

    def close(self) -> None:
        for tasks in self.live.values():
            tasks.close()
        self.live.clear()


@pytest.fixture(scope="session")
def tf_session_tasks(tf_env: TfEnv, request: pytest.FixtureRequest) -> Iterator[SessionTasks]:
    tasks = SessionTasks(tf_env, request)
    try:
        yield tasks
    finally:
        tasks.close()


@pytest.fixture(scope="session")
def tf_base_session_tasks(
    tf_base_env: TfEnv | None, request: pytest.FixtureRequest
) -> Iterator[SessionTasks | None]:
    """A paired run's base side's tasks (its own TensorFlow); None: not a paired run."""
    if tf_base_env is None:
        yield None
        return
    tasks = SessionTasks(tf_base_env, request)
    try:
        yield tasks
    finally:
        tasks.close()


def check_placement(placement: str, hpc_session: HpcSession) -> None:
    """Skips (one line) where the placement cannot carry the session's fabric."""
    reason = placement_reason(placement, hpc_session.selection)
    if reason:
        pytest.skip(reason)
    if placement not in (LOOPBACK, NETNS, HOSTS):
        pytest.fail(
            f"placement {placement}: the TensorFlow tasks run on {LOOPBACK}, {NETNS} and {HOSTS}",
            pytrace=False,
        )


def tf_site(placement: str, request: pytest.FixtureRequest) -> Site:
    """Where the tasks go: the virtual cluster (netns); the hosts of --hpc-hosts at their
    fabric addresses, read on each host (hosts: the tasks dial home to this host's); None on
    loopback. Own tasks of a test take it too."""
    if placement == NETNS:
        cluster: VirtualCluster = request.getfixturevalue("hpc_virtual_cluster")
        return cluster
    if placement == HOSTS:
        fabric = request.getfixturevalue("hpc_rdma_fabric")
        error = hosts_fabric_error(fabric.local, [h.host for h in fabric.hosts])
        if error:
            pytest.fail(error, pytrace=False)
        if not fabric.local.address:
            pytest.fail(
                f"TensorFlow tasks on hosts dial home to this host's fabric address; "
                f"{fabric.local.description} has none",
                pytrace=False,
            )
        return TfHosts(
            tuple(h.host for h in fabric.hosts),
            tuple(h.address for h in fabric.hosts),
            fabric.local.address,
            hpc_session_of(request.config).cfg.rsh_agent,
        )
    return None


def tasks_or_fail(
    tasks: SessionTasks, placement: str, layout: Layout, hpc_session: HpcSession
) -> TfTasks:
    check_placement(placement, hpc_session)
    try:
        return tasks(placement, layout)
    except TfError as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture
def tf_tasks(
    tf_session_tasks: SessionTasks, hpc_placement: str, hpc_session: HpcSession
) -> TfTasks:
    return tasks_or_fail(tf_session_tasks, hpc_placement, Layout(), hpc_session)


@pytest.fixture
def tf_ring(tf_session_tasks: SessionTasks, hpc_placement: str, hpc_session: HpcSession) -> TfTasks:
    return tasks_or_fail(tf_session_tasks, hpc_placement, RING, hpc_session)


@pytest.fixture
def tf_ps_cluster(
    tf_session_tasks: SessionTasks, hpc_placement: str, hpc_session: HpcSession
) -> TfTasks:
    return tasks_or_fail(tf_session_tasks, hpc_placement, PS_CLUSTER, hpc_session)


def sweeps(
    job: JobFn,
    layout: Layout,
    sizes: list[int],
    tasks: SessionTasks,
    hpc_session: HpcSession,
    base_tasks: SessionTasks | None = None,
) -> Sweeps:
    """A benchmark's store; in a paired run with the base side's store inside it (its own
    TensorFlow, never stretched by the canary), and every paired job on new tasks."""
    cfg = hpc_session.cfg

    def store(on: SessionTasks, slowdown: float, base: Sweeps | None) -> Sweeps:
        return Sweeps(
            job,
            lambda placement: on(placement, layout),
            sizes,
            cfg.profile,
            slowdown,
            cfg.repeats,
            cfg.repeat_limit,
            base,
            fresh=None if base_tasks is None else lambda placement: on.fresh(placement, layout),
        )

    base = None if base_tasks is None else store(base_tasks, 1.0, None)
    return store(tasks, cfg.inject_slowdown, base)


@pytest.fixture(scope="session")
def tf_recv_sweeps(
    tf_session_tasks: SessionTasks,
    tf_base_session_tasks: SessionTasks | None,
    hpc_session: HpcSession,
) -> Sweeps:
    return sweeps(
        run_job,
        Layout(),
        bench_sizes(hpc_session.cfg.message_sizes),
        tf_session_tasks,
        hpc_session,
        tf_base_session_tasks,
    )


@pytest.fixture(scope="session")
def tf_allreduce_sweeps(
    tf_session_tasks: SessionTasks,
    tf_base_session_tasks: SessionTasks | None,
    hpc_session: HpcSession,
) -> Sweeps:
    return sweeps(
        allreduce.run_job,
        RING,
        allreduce.bench_sizes(hpc_session.cfg.message_sizes),
        tf_session_tasks,
        hpc_session,
        tf_base_session_tasks,
    )


@pytest.fixture(scope="session")
def tf_knob_sweeps(
    tf_session_tasks: SessionTasks,
    tf_base_session_tasks: SessionTasks | None,
    hpc_session: HpcSession,
) -> dict[str, Sweeps]:
    """knob -> the ring all-reduce's sweep with the workers' gRPC set so (made on first use)."""
    return KnobSweeps(
        lambda knob: sweeps(
            allreduce.run_job,
            replace(RING, knob=knob),
            list(allreduce.KNOB_SIZES),
            tf_session_tasks,
            hpc_session,
            tf_base_session_tasks,
        )
    )


@pytest.fixture(scope="session")
def tf_packed_sweeps(
    tf_session_tasks: SessionTasks,
    tf_base_session_tasks: SessionTasks | None,
    hpc_session: HpcSession,
) -> dict[str, Sweeps]:
    """packing -> the packed all-reduce's sweep (allreduce.PACKINGS, made on first use)."""
    return KnobSweeps(
        lambda packing: sweeps(
            allreduce.packed_job(packing),
            RING,
            list(allreduce.PACK_SIZES),
            tf_session_tasks,
            hpc_session,
            tf_base_session_tasks,
        )
    )


class KnobSweeps(dict[str, Sweeps]):
    """name -> a sweep, made on first use."""

    def __init__(self, make: Callable[[str], Sweeps]) -> None:
        super().__init__()
        self.make = make

    def __missing__(self, knob: str) -> Sweeps:
        self[knob] = self.make(knob)
        return self[knob]


@pytest.fixture(scope="session")
def tf_ps_sweeps(
    tf_session_tasks: SessionTasks,
    tf_base_session_tasks: SessionTasks | None,
    hpc_session: HpcSession,
) -> Sweeps:
    return sweeps(
        ps.run_job,
        PS_CLUSTER,
        ps.bench_sizes(hpc_session.cfg.message_sizes),
        tf_session_tasks,
        hpc_session,
        tf_base_session_tasks,
    )


RecvRun = Callable[[int], None]


def empty_first_read(read: str, size: int) -> str:
    """The known defect's reason when what the check read ("2.20.0: 0 bytes instead of 64")
    is its symptom: the first read of a variable just made on another task came back an empty
    tensor, no error (docs/reference/defects.md); "" for anything else, which stays a failure."""
    version, _, what = read.partition(": ")
    if size == 0 or what != f"0 bytes instead of {size}":
        return ""
    return (
        f"TensorFlow {version} defect: the first read of a {size} B variable just created on "
        "the ps task returned an empty tensor without an error (intermittent; see the "
        "defects catalogue, TensorFlow: a remote variable's first read is empty)"
    )


def judged(
    sweeps: Sweeps,
    placement: str,
    hpc_session: HpcSession,
    hpc_record: Record,
    records: Callable[[RecvSweep, int], list[Measurement]],
    invalid: str,
) -> RecvRun:
    """run(size): that point of this placement's pooled sweep, validated (a point not `valid`
    fails with `invalid`) and judged; an undecided verdict pools one more job at a time
    (adaptive repeats); in a paired run, judged against the base side's jobs of the same
    rounds."""
    check_placement(placement, hpc_session)

    def run(size: int) -> None:
        def checked(sweep: RecvSweep) -> list[Measurement]:
            point = sweep.points[size]
            if not point["valid"]:
                defect = empty_first_read(str(point.get("read", "")), size)
                if defect:
                    raise KnownDefect(defect)
                read = f" (TensorFlow {point['read']})" if point.get("read") else ""
                pytest.fail(f"{size} B: {invalid}{read}", pytrace=False)
            return records(sweep, size)

        judge_point(
            hpc_record,
            Point(
                get=lambda: sweeps.get(placement),
                more=lambda: sweeps.more(placement),
                cost=lambda: sweeps.cost(placement),
                paired=None
                if sweeps.base is None
                else lambda: sweeps.paired(placement, hpc_session.cfg.ab_rounds),
            ),
            checked,
            (SweepFailed, TfError),
        )

    return run


@pytest.fixture
def tf_recv_tensor(
    tf_recv_sweeps: Sweeps, hpc_placement: str, hpc_session: HpcSession, hpc_record: Record
) -> RecvRun:
    """run(size): RecvTensor latency then bandwidth; every byte read must be the variable's."""
    params = {"placement": hpc_placement, "tasks": str(Layout())}
    return judged(
        tf_recv_sweeps,
        hpc_placement,
        hpc_session,
        hpc_record,
        lambda sweep, size: measurements(sweep, size, params),
        f"{BENCHMARK}: the worker read other bytes than the variable's",
    )


@pytest.fixture
def tf_allreduce(
    tf_allreduce_sweeps: Sweeps, hpc_placement: str, hpc_session: HpcSession, hpc_record: Record
) -> RecvRun:
    """run(size): ring all-reduce latency then busbw; every element must be the workers'
    sum."""
    params = {"placement": hpc_placement, "tasks": str(RING), "hint": "ring", "knob": "default"}
    return judged(
        tf_allreduce_sweeps,
        hpc_placement,
        hpc_session,
        hpc_record,
        lambda sweep, size: allreduce.measurements(sweep, size, RING.workers, params),
        f"{allreduce.BENCHMARK}: an element of the result is not the workers' sum",
    )


@pytest.fixture
def tf_allreduce_knob(
    tf_knob_sweeps: dict[str, Sweeps],
    tf_knob: str,
    hpc_placement: str,
    hpc_session: HpcSession,
    hpc_record: Record,
) -> RecvRun:
    """run(size): the ring all-reduce with the workers' gRPC set by `tf_knob` (wire.KNOBS),
    at allreduce.KNOB_SIZES; its records carry the knob, so `knob=default` beside it is
    TensorFlow's own setting."""
    layout = replace(RING, knob=tf_knob)
    params = {"placement": hpc_placement, "tasks": str(RING), "hint": "ring", "knob": tf_knob}
    return judged(
        tf_knob_sweeps[tf_knob],
        hpc_placement,
        hpc_session,
        hpc_record,
        lambda sweep, size: allreduce.measurements(sweep, size, layout.workers, params),
        f"{allreduce.BENCHMARK} ({tf_knob}): an element of the result is not the workers' sum",
    )


@pytest.fixture
def tf_ps_throughput(
    tf_ps_sweeps: Sweeps, hpc_placement: str, hpc_session: HpcSession, hpc_record: Record
) -> RecvRun:
    """run(size): parameter-server steps per second; every variable must hold what the steps
    that ran pushed."""
    params = {"placement": hpc_placement, "tasks": str(PS_CLUSTER)}
    return judged(
        tf_ps_sweeps,
        hpc_placement,
        hpc_session,
        hpc_record,
        lambda sweep, size: ps.measurements(sweep, size, params),
        f"{ps.BENCHMARK}: a variable does not hold what the steps pushed",
    )


@pytest.fixture
def tf_allreduce_packed(
    tf_packed_sweeps: dict[str, Sweeps],
    tf_packing: str,
    hpc_placement: str,
    hpc_session: HpcSession,
    hpc_record: Record,
) -> RecvRun:
    """run(size): `size` bytes as allreduce.TENSORS gradients reduced in one
    batch_all_reduce, packed by bytes_per_pack (`tf_packing`: allreduce.PACKINGS)."""
    params: dict[str, Param] = {
        "placement": hpc_placement,
        "tasks": str(RING),
        "tensors": allreduce.TENSORS,
        "packing": tf_packing,
    }
    return judged(
        tf_packed_sweeps[tf_packing],
        hpc_placement,
        hpc_session,
        hpc_record,
        lambda sweep, size: allreduce.measurements(
            sweep, size, RING.workers, params, allreduce.PACKED
        ),
        f"{allreduce.PACKED} ({tf_packing}): an element of a result is not the workers' sum",
    )


def traffic(tasks: TfTasks, hpc_session: HpcSession, both_ways: bool = False) -> TrafficMeter:
    """What the started tasks send on the network their placement names
    (fabrics.counters.TrafficMeter): the veths of the virtual hosts they run on (netns), this
    host's fabric netdev (hosts; `both_ways`: received too), lo (loopback)."""
    sel = hpc_session.selection
    cluster = tasks.cluster
    return TrafficMeter(
        tasks.placement,
        sel.netdev if isinstance(sel, FabricSelection) else None,
        None if cluster is None else cluster.all_counters,
        None if cluster is None else [cluster.hosts[i].name for i in tasks.hosts.values()],
        both_ways,
    )


def connections(pid: int, port: int) -> int:
    """Established TCP connections of process `pid` to remote `port` (its own network
    namespace's tables, through /proc: netns placement too)."""
    mine = {
        link.readlink().name[len("socket:[") : -1]
        for link in Path(f"/proc/{pid}/fd").iterdir()
        if link.readlink().name.startswith("socket:[")
    }
    count = 0
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            remote_port = int(fields[2].rsplit(":", 1)[1], 16)
            if fields[3] == "01" and remote_port == port and fields[9] in mine:  # ESTABLISHED
                count += 1
    return count
