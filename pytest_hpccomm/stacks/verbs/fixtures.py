"""The verbs suites' fixtures (loaded by the verbs plugin's pytest_plugins): links, QPs and
Hypothesis settings for the conformance tests, and one perftest point or program for the perf
tests. The session-wide parts they stand on (fabric, provisioning, the pair of peers, the
benchmark runner, deadlines) are plugin.py's."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

from pytest_hpccomm.fabrics import FabricSelection
from pytest_hpccomm.measure.measurement import Measurement
from pytest_hpccomm.record import Record
from pytest_hpccomm.session import hpc_session_of
from pytest_hpccomm.stacks.verbs.plugin import note_emulated

if TYPE_CHECKING:  # the driver side is imported by the fixtures that start it
    from hypothesis import settings

    from pytest_hpccomm.cluster.host_fabrics import ClusterFabric
    from pytest_hpccomm.stacks.verbs.driver import Side, VerbsPair
    from pytest_hpccomm.stacks.verbs.env import VerbsEnv
    from pytest_hpccomm.stacks.verbs.hosts import VerbsHosts
    from pytest_hpccomm.stacks.verbs.links import Link
    from pytest_hpccomm.stacks.verbs.perf import Benchmark, BenchPoint, Sweeps
    from pytest_hpccomm.stacks.verbs.perftest import PerftestRun


# -- conformance: links, QPs, Hypothesis --------------------------------------------------------


@pytest.fixture(scope="session")
def _verbs_shared_rc() -> dict[int, Link]:
    return {}  # id(pair) -> its long-lived link (one pair per session; keyed to be sure)


@pytest.fixture
def verbs_rc(verbs_pair: VerbsPair, _verbs_shared_rc: dict[int, Link]) -> Link:
    """The session's long-lived RC link (re-made when a failed test left it in ERR)."""
    from pytest_hpccomm.stacks.verbs.links import make_link

    link = _verbs_shared_rc.get(id(verbs_pair))
    if link is None or not link.healthy():
        if link is not None:
            link.close()
        link = _verbs_shared_rc[id(verbs_pair)] = make_link(verbs_pair)
    return link


FreshLink = Callable[..., "Link"]


@pytest.fixture
def verbs_fresh_rc(verbs_pair: VerbsPair) -> Iterator[FreshLink]:
    """make(b_access=..., length=1 << 16, retry_cnt=7) -> a new Link that the test may break;
    closed afterwards."""
    from pytest_hpccomm.stacks.verbs.driver import ALL_ACCESS
    from pytest_hpccomm.stacks.verbs.links import make_link

    made: list[Link] = []

    def make(
        b_access: tuple[str, ...] = ALL_ACCESS, length: int = 1 << 16, retry_cnt: int = 7
    ) -> Link:
        link = make_link(verbs_pair, b_access, length, retry_cnt)
        made.append(link)
        return link

    yield make
    for link in made:
        link.close()


@pytest.fixture
def verbs_fi_info(verbs_pair: VerbsPair) -> str:
    """libfabric's fi_info, asked after the pair's device was provisioned; skips naming the
    package when it is absent (skips.py)."""
    import shutil

    from pytest_hpccomm.stacks.verbs.skips import FI_INFO, fi_info_missing

    reason = fi_info_missing()
    if reason:
        pytest.skip(reason)
    return str(shutil.which(FI_INFO))


NewQp = Callable[[str], "Side"]


@pytest.fixture
def verbs_qps(verbs_pair: VerbsPair) -> Iterator[NewQp]:
    """make(qp_type) -> a new QP, on peer a and b in turn; destroyed after the test."""
    made: list[Side] = []

    def make(qp_type: str = "RC") -> Side:
        side = verbs_pair.create_qp(verbs_pair.a if len(made) % 2 == 0 else verbs_pair.b, qp_type)
        made.append(side)
        return side

    yield make
    for side in made:
        side.peer.call("destroy_qp", ep=side.ep)


@pytest.fixture
def verbs_hosts(verbs_pair: VerbsPair, hpc_rdma_fabric: ClusterFabric) -> VerbsHosts:
    """The pair's two hosts under --hpc-hosts (hosts.VerbsHosts): their port counters, a
    payload moved over a link, a transfer cut under way."""
    from pytest_hpccomm.stacks.verbs.hosts import VerbsHosts

    return VerbsHosts(verbs_pair, hpc_rdma_fabric)


@pytest.fixture
def verbs_settings(verbs_emulated: bool, pytestconfig: pytest.Config) -> settings:
    """Hypothesis settings of a property on the pair: no deadline (the item's is the bound),
    fewer examples on an emulated device (links.examples), derandomized in the quick profile."""
    from pytest_hpccomm.stacks.verbs.links import property_settings

    return property_settings(verbs_emulated, hpc_session_of(pytestconfig).cfg.profile != "full")


@pytest.fixture
def verbs_atomic_order(verbs_rc: Link, verbs_pair: VerbsPair, record_property: Any) -> str:
    """The byte order the device does arithmetic in (rxe: the host's; some HCAs: big), found
    by one FETCH_AND_ADD; skips a device without atomics."""
    if not verbs_pair.info.get("atomic_cap"):
        pytest.skip(f"{verbs_pair.info['device']} has no atomics (atomic_cap = NONE)")
    rc = verbs_rc
    rc.b.peer.call("write", mr=rc.mr_b["mr"], offset=0, hex=(1).to_bytes(8, "little").hex())
    wr = {
        "opcode": "ATOMIC_FETCH_AND_ADD",
        "mr": rc.mr_a["mr"],
        "offset": 0,
        "length": 8,
        "remote_addr": rc.mr_b["addr"],
        "rkey": rc.mr_b["rkey"],
        "compare_add": 1,
    }
    verbs_pair.expect_success(verbs_pair.execute(rc.a, [wr]), [wr], "FETCH_AND_ADD probe")
    after = rc.b.peer.call("read", mr=rc.mr_b["mr"], offset=0, length=8)
    order = "little" if int.from_bytes(bytes.fromhex(after), "little") == 2 else "big"
    record_property("atomic_byte_order", order)
    return order


# -- perf: perftest's set over the pair, and perftest's own programs ----------------------------

PerftestPoint = Callable[["Benchmark", int], None]


FUNCTIONAL_ROUNDS = 2  # a paired run on an emulated device: each order once, nothing judged


@pytest.fixture
def verbs_perftest(
    verbs_sweeps: Sweeps,
    verbs_pair: VerbsPair,
    verbs_emulated: bool,
    verbs_env: VerbsEnv,
    hpc_record: Record,
    request: pytest.FixtureRequest,
) -> PerftestPoint:
    """run(benchmark, size): one point (stacks.contract.judge_point): skips what the device
    cannot run, fails on an error or a non-finite, non-positive or missing sample; then
    judges it (adaptive repeats; in a paired run, against the base's jobs of the same
    rounds), or on an emulated device reports both sides' numbers without a verdict."""
    from pytest_hpccomm.stacks.contract import Point, judge_point
    from pytest_hpccomm.stacks.verbs.driver import PeerError, VerbsCallError
    from pytest_hpccomm.stacks.verbs.perf import records

    info = verbs_pair.info
    batches = verbs_sweeps.runner.settings.batches
    cfg = hpc_session_of(request.config).cfg
    rounds = FUNCTIONAL_ROUNDS if verbs_emulated else cfg.ab_rounds
    functional = (
        f"emulated device {info['device']} (software RDMA: timings say nothing about a fabric)"
        if verbs_emulated
        else None
    )
    fingerprint = {
        "verbs_device": info["device"],
        "verbs_fw": info.get("fw_ver"),
        **verbs_env.fingerprint(),
    }

    def checked(point: BenchPoint) -> list[Measurement]:
        where = f"{point.bench.key} size={point.size}"
        want = batches * max(1, len(point.job_sizes))
        if len(point.samples) != want:
            pytest.fail(f"{where}: {len(point.samples)} samples, not {want}", pytrace=False)
        bad = [x for x in point.samples if not (math.isfinite(x) and x > 0)]
        if bad:
            pytest.fail(f"{where}: non-positive or infinite samples {bad}", pytrace=False)
        return records(point)

    def run(bench: Benchmark, size: int) -> None:
        why = bench.needs(info)
        if why:
            pytest.skip(why)
        mtu = info.get("active_mtu") or 0
        if bench.qp_type == "UD" and size > mtu:
            pytest.skip(f"UD messages are limited to the path MTU ({mtu} B on {info['device']})")
        paired = None
        if verbs_sweeps.base is not None:
            paired = lambda: verbs_sweeps.paired((bench.key, size), rounds, bench)  # noqa: E731
        judge_point(
            hpc_record,
            Point(
                get=lambda: verbs_sweeps.get((bench.key, size), bench),
                more=lambda: verbs_sweeps.more((bench.key, size), bench),
                cost=lambda: verbs_sweeps.cost((bench.key, size)),
                paired=paired,
                fingerprint=lambda _point: fingerprint,
            ),
            checked,
            (VerbsCallError, PeerError),
            functional,
        )
        if verbs_emulated:
            note_emulated(request.config, request.node.nodeid)

    return run


PerftestProgram = Callable[[str, int], "PerftestRun"]


@pytest.fixture
def verbs_perftest_program(
    verbs_fabric: FabricSelection, verbs_pair: VerbsPair, verbs_emulated: bool, record_property: Any
) -> PerftestProgram:
    """run(program, size): perftest's own program (server and client) on the suite's device,
    its report in the JUnit properties; skips when perftest or the device's atomics are
    missing, fails when the program does."""
    from pytest_hpccomm.stacks.verbs.perftest import RemoteServer

    # across hosts, as the suite's own pair: client here, server on the pair's other host
    remote = None
    placement = verbs_pair.placement
    if placement is not None and placement.places[0].local:
        other = placement.places[1]
        remote = RemoteServer(
            placement.shell,
            other.host,
            dataclasses.replace(
                verbs_fabric,
                device=other.opts.device,
                port=other.opts.port,
                gid_index=other.opts.gid_index,
                address=other.opts.address,
            ),
        )

    def run(program: str, size: int) -> PerftestRun:
        return run_perftest(
            program, size, verbs_fabric, verbs_pair.info, verbs_emulated, record_property, remote
        )

    return run


def run_perftest(
    program: str,
    size: int,
    fabric: FabricSelection,
    info: dict[str, Any],
    emulated: bool,
    record_property: Any,
    remote: Any = None,
) -> PerftestRun:
    """perftest's `program` at `size` once: a missing program or device atomics skip; any
    failure, a hang included, fails the item (a hang is the stack's: never launched again),
    except perftest's own known defect, an xfail naming what this run showed of it."""
    from pytest_hpccomm.stacks.verbs.perftest import (
        OBSERVED,
        REFUSED_CRASH,
        PerftestFailed,
        missing,
        run_pair,
    )

    why = missing(program)
    if why:
        pytest.skip(why)
    if "atomic" in program and not info.get("atomic_cap"):
        pytest.skip(f"{fabric.device} has no atomics (atomic_cap = NONE)")
    iterations = 200 if emulated else (1000 if program.endswith("_lat") else 5000)
    try:
        got = run_pair(program, fabric, size, iterations, remote=remote)
    except PerftestFailed as exc:
        if exc.defect:
            pytest.xfail(f"{OBSERVED}{exc.defect}. {REFUSED_CRASH}")
        pytest.fail(str(exc), pytrace=False)
    for name, value in got.report.items():
        record_property(f"perftest_{name}", value)
    record_property("perftest_server", remote.host if remote else "this host (loopback)")
    return got
