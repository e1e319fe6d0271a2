"""pytest plugin of the verbs stack (pytest11: hpccomm_verbs): provisioning, peers, skips.

More: docs/explanation/internals.md (pytest_hpccomm.stacks.verbs.plugin).
"""

from __future__ import annotations

import dataclasses
import platform
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest

from pytest_hpccomm import skips
from pytest_hpccomm.fabrics import RDMA_KINDS, FabricSelection
from pytest_hpccomm.fabrics import provision as prov
from pytest_hpccomm.fabrics.sysfs import SOFTWARE_DRIVERS
from pytest_hpccomm.session import HpcSession, hpc_session_of
from pytest_hpccomm.stack_probes import ImportProbe, StackProbe
from pytest_hpccomm.stacks.contract import (
    Implementations,
    PythonEnvStack,
    named_in_pair,
    stack_params,
)
from pytest_hpccomm.stacks.verbs.env import (
    NONE,
    OPTION,
    THIS,
    VerbsEnv,
)

if TYPE_CHECKING:  # the driver side is imported by the fixtures that start it
    from pytest_hpccomm.cluster.host_fabrics import ClusterFabric
    from pytest_hpccomm.stacks.verbs.driver import Placement, VerbsPair
    from pytest_hpccomm.stacks.verbs.perf import BenchRunner, Sweeps

PLANT_HELP = (
    "test-only: start the verbs peers with a planted bug, to prove the conformance "
    "suite catches it (mr-no-remote-write: MRs are registered without REMOTE_WRITE "
    "even when it is asked for)"
)

DEADLINE = 240.0  # seconds per verbs item; the slowest in the TCG-emulated guest take ~10 s
DEADLINE_SHARE = 0.8  # of pytest-timeout's timeout, so the watchdog fires first
DEADLINE_HELP = (
    f"seconds a verbs item may run (default {DEADLINE:g}, at most "
    f"{DEADLINE_SHARE:g} x pytest-timeout's --timeout; 0: no deadline): past it "
    "the item fails even inside a Hypothesis property, which swallows "
    "pytest-timeout's failure"
)

pytest_plugins = ["pytest_hpccomm.stacks.verbs.fixtures", "pytest_hpccomm.stacks.verbs.marks"]

STACK = "verbs"
EMULATED_KEY = pytest.StashKey[list[str]]()
PAIR_KEY = pytest.StashKey[Any]()  # the session's VerbsPair, once started
BASE_PAIR_KEY = pytest.StashKey[Any]()  # a paired A/B run's base side's VerbsPair


@dataclass(frozen=True)
class NamedProbe:
    """The user named the verbs Python(s) (--hpc-verbs-python, a paired run's sides): present
    for collection; the peers' Python is probed when a fixture resolves it (env.resolve)."""

    python: str
    name: str = STACK

    def unavailable_reason(self) -> str | None:
        return f"verbs opted out ({OPTION}={NONE})" if self.python == NONE else None

    def versions(self) -> dict[str, str]:
        return {}  # the resolved Python's facts travel in each result (VerbsEnv.fingerprint)


def verbs_python(config: pytest.Config) -> str:
    """--hpc-verbs-python, or `this` (this Python)."""
    return str(config.getoption("hpc_verbs_python", None) or THIS)


@pytest.hookimpl(optionalhook=True)  # the core plugin declares it; `-p no:hpccomm` does not
def pytest_hpccomm_stack_probes(config: pytest.Config) -> list[StackProbe]:
    python = verbs_python(config)
    if python != THIS or named_in_pair(config, STACK):
        return [NamedProbe(python)]
    return [
        ImportProbe(
            STACK, ("pyverbs",), ("pyverbs",), (), "apt-get install python3-pyverbs (rdma-core)"
        )
    ]


VERBS = PythonEnvStack(STACK, OPTION, "pyverbs", (THIS, NONE), verbs_python)
pytest_hpccomm_paired_stacks = VERBS.paired_stacks
pytest_hpccomm_under_test = VERBS.under_test


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("hpccomm")
    group.addoption(
        OPTION,
        default=None,
        dest="hpc_verbs_python",
        metavar="PYTHON",
        help="the Python (or its venv) whose pyverbs, and so whose rdma-core, the verbs peers "
        f"use (default: this Python; {NONE}: no verbs); a paired A/B run names two: "
        "--hpc-base verbs=PYTHON --hpc-candidate verbs=PYTHON",
    )
    group.addoption(
        "--hpc-verbs-plant",
        default=None,
        dest="hpc_verbs_plant",
        choices=("mr-no-remote-write",),
        help=PLANT_HELP,
    )
    group.addoption(
        "--hpc-verbs-deadline",
        default=None,
        type=float,
        dest="hpc_verbs_deadline",
        metavar="SECONDS",
        help=DEADLINE_HELP,
    )


@pytest.hookimpl(trylast=True)  # after the core plugin's, which builds the HpcConfig
def pytest_configure(config: pytest.Config) -> None:
    config.stash[EMULATED_KEY] = []
    VERBS.check(config)


def _is_verbs(item: pytest.Item) -> bool:
    return any(m.args[:1] == ("verbs",) for m in item.iter_markers("stack"))


def item_deadline(item: pytest.Item) -> float:
    """--hpc-verbs-deadline (default DEADLINE), kept below pytest-timeout's timeout."""
    asked = item.config.getoption("hpc_verbs_deadline", None)
    seconds = DEADLINE if asked is None else float(asked)
    outer = _pytest_timeout(item)
    if outer and seconds > 0:
        seconds = min(seconds, DEADLINE_SHARE * outer)
    return seconds


def _pytest_timeout(item: pytest.Item) -> float | None:
    """The item's pytest-timeout timeout: its marker, else --timeout, else the ini key."""
    marker = item.get_closest_marker("timeout")
    values: list[Any] = []
    if marker is not None:
        values += [marker.kwargs.get("timeout"), *marker.args[:1]]
    values.append(item.config.getoption("timeout", None))
    try:
        values.append(item.config.getini("timeout"))
    except ValueError:  # pytest-timeout not installed: no such ini key
        pass
    for value in values:
        try:
            if value not in (None, "") and float(value) > 0:
                return float(value)
        except (TypeError, ValueError):
            continue
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Before the item's fixtures: restart a pair an earlier item left broken; mark the
    kernel log, so a dead link reports only what this item's traffic provoked."""
    if not _is_verbs(item):
        return
    for pair in _pairs(item.config):
        if pair.broken:
            pair.restart()
        pair.kernel_log.mark()


def _pairs(config: pytest.Config) -> list[Any]:
    """The session's live VerbsPairs: the one under test, and a paired run's base side's."""
    return [p for p in (config.stash.get(k, None) for k in (PAIR_KEY, BASE_PAIR_KEY)) if p]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    if not _is_verbs(item):
        return (yield)
    from pytest_hpccomm.stacks.verbs import watchdog

    with watchdog.deadline(item_deadline(item), item.nodeid) as armed:
        try:
            return (yield)
        finally:
            for pair in _pairs(item.config) if armed is not None and armed.fired else []:
                # interrupted mid-request: a peer may still be busy, or its channel mid-frame
                pair.a.broken = pair.b.broken = True


def fabric_reason(hpc: HpcSession) -> str | None:
    """Why the session's fabric cannot carry verbs tests (None: it can, or can be created)."""
    sel = hpc.selection
    if isinstance(sel, FabricSelection):
        if sel.kind in RDMA_KINDS:
            return None
        return (
            f"verbs needs an RDMA fabric ({', '.join(RDMA_KINDS)}); this session runs on "
            f"{sel.kind} ({sel.description})"
        )
    if sel.kind in prov.LINK_TYPES:  # a link hpc_rdma_fabric makes counts, if it can
        return skips.fabric_reason((sel.kind,), hpc, made=True)
    return sel.reason


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    verbs = [item for item in items if _is_verbs(item)]
    if not verbs:
        return
    hpc = hpc_session_of(config)
    reasons = []
    probe = hpc.stacks.get("verbs")
    stack = probe.unavailable_reason() if probe is not None else "stack 'verbs' not registered"
    if stack:
        reasons.append(stack)
    fabric = fabric_reason(hpc)
    if fabric:
        reasons.append(f"fabric {hpc.cfg.fabric}: {fabric}")
    if reasons:
        mark = pytest.mark.skip(reason="; ".join(reasons))
        for item in verbs:
            item.add_marker(mark)


@pytest.hookimpl(optionalhook=True)
def pytest_hpccomm_foreseen_skip(item: pytest.Item) -> str | None:
    """The skips the verbs fixtures make that the fabric kind and PATH tell (skips.py)."""
    from pytest_hpccomm.stacks.verbs.skips import foreseen

    params = stack_params(item, "verbs")
    if params is None:
        return None
    return foreseen(item, params, hpc_session_of(item.config).fabric_kind == "iwarp")


@pytest.fixture(scope="session")
def verbs_fabric(hpc_rdma_fabric: ClusterFabric) -> FabricSelection:
    """The RDMA port under test; on softroce/iwarp the core's hpc_rdma_fabric created the link
    (here and on the other hosts of --hpc-hosts) when none existed."""
    sel = hpc_rdma_fabric.local
    if sel.kind not in RDMA_KINDS:
        pytest.skip(f"verbs needs an RDMA fabric; this session runs on {sel.kind}")
    return sel


@pytest.fixture(scope="session")
def verbs_emulated(verbs_fabric: FabricSelection) -> bool:
    """rxe and siw are software: their timings say nothing about a fabric."""
    return verbs_fabric.driver in SOFTWARE_DRIVERS


def _resolve(spec: str) -> VerbsEnv:
    from pytest_hpccomm.stacks.verbs.env import resolve

    return resolve(spec)


IMPLS = Implementations(_resolve)  # errors.Unavailable: skip; errors.Broken: fail


@pytest.fixture(scope="session")
def verbs_env(pytestconfig: pytest.Config, hpc_session: HpcSession) -> VerbsEnv:
    """The Python (pyverbs, rdma-core) under test; in a paired A/B run of verbs, the
    candidate's."""
    return IMPLS.under_test(hpc_session, STACK, verbs_python(pytestconfig))


@pytest.fixture(scope="session")
def verbs_base_env(hpc_session: HpcSession) -> VerbsEnv | None:
    """The base side's Python of a paired A/B run of verbs (None: not a paired run)."""
    return IMPLS.base(hpc_session, STACK)


@pytest.fixture(scope="session")
def verbs_pair(
    verbs_fabric: FabricSelection,
    verbs_env: VerbsEnv,
    hpc_rdma_fabric: ClusterFabric,
    pytestconfig: pytest.Config,
    record_testsuite_property: Any,
) -> Iterator[VerbsPair]:
    # which kernel and driver the suite ran on, in the JUnit XML next to the verdicts (known
    # defects are keyed by what a failure shows, and their explanations cite kernel sources)
    record_testsuite_property("verbs_kernel", platform.release())
    record_testsuite_property("verbs_device", str(verbs_fabric.device))
    record_testsuite_property("verbs_driver", str(verbs_fabric.driver))
    for name, value in verbs_env.fingerprint().items():
        record_testsuite_property(name, value)
    placement = placement_of(
        hpc_rdma_fabric, pytestconfig.getoption("hpc_verbs_plant"), verbs_env.python
    )
    # which path every verbs item of this session took: loopback QPs on one device, or a wire
    record_testsuite_property(
        "verbs_path",
        "loopback QPs on one device"
        if placement is None
        else "host to host: " + " -> ".join(p.host for p in placement.places),
    )
    yield from _live_pair(verbs_fabric, verbs_env, hpc_rdma_fabric, pytestconfig, PAIR_KEY)


@pytest.fixture(scope="session")
def verbs_base_pair(
    verbs_fabric: FabricSelection,
    verbs_base_env: VerbsEnv | None,
    hpc_rdma_fabric: ClusterFabric,
    pytestconfig: pytest.Config,
    record_testsuite_property: Any,
) -> Iterator[VerbsPair | None]:
    """A paired run's base side: two more peers on the same device(s), run by the base's
    Python (None: not a paired run)."""
    if verbs_base_env is None:
        yield None
        return
    for name, value in verbs_base_env.fingerprint().items():
        record_testsuite_property(f"base_{name}", value)
    yield from _live_pair(
        verbs_fabric, verbs_base_env, hpc_rdma_fabric, pytestconfig, BASE_PAIR_KEY
    )


def _live_pair(
    fabric: FabricSelection,
    env: VerbsEnv,
    cluster: ClusterFabric,
    config: pytest.Config,
    key: pytest.StashKey[Any],
) -> Iterator[VerbsPair]:
    """Two peers run by `env`'s Python, kept in the stash under `key` (the deadline and
    restart hooks find them there), closed at the end, also when the session fails."""
    from pytest_hpccomm.stacks.verbs.driver import PeerError, PeerOptions, VerbsPair, start_peers

    plant = config.getoption("hpc_verbs_plant")
    opts = PeerOptions.from_selection(fabric, plant, env.python)
    placement = placement_of(cluster, plant, env.python)
    try:
        a, b = start_peers(opts, 2, placement)
    except PeerError as exc:
        pytest.fail(f"verbs peers on {fabric.description} ({env.python}): {exc}", pytrace=False)
    pair = VerbsPair(a, b, fabric, opts, placement)
    config.stash[key] = pair
    try:
        yield pair
    finally:
        del config.stash[key]
        pair.close()


def placement_of(fabric: ClusterFabric, plant: str | None, python: str = "") -> Placement | None:
    """One peer on each of the first two hosts of --hpc-hosts; None for a single host."""
    from pytest_hpccomm.stacks.verbs.driver import PeerOptions, PeerPlace, Placement

    if not fabric.spans_hosts:
        return None
    places = tuple(
        PeerPlace(
            h.host,
            h.local,
            dataclasses.replace(
                PeerOptions.from_selection(h.selection, plant, python), address=h.address
            ),
        )
        for h in fabric.hosts[:2]
    )
    listen = fabric.local.address
    if not listen:
        pytest.fail(
            f"peers across hosts dial home to this host's fabric address; "
            f"{fabric.local.description} has none",
            pytrace=False,
        )
    return Placement(places, fabric.shell, listen)


@pytest.fixture(scope="session")
def verbs_bench(
    verbs_pair: VerbsPair, verbs_emulated: bool, pytestconfig: pytest.Config
) -> BenchRunner:
    """Benchmark points over the pair under test (the canary stretches these)."""
    from pytest_hpccomm.stacks.verbs.perf import BenchRunner, BenchSettings

    cfg = hpc_session_of(pytestconfig).cfg
    settings = BenchSettings.for_session(cfg, verbs_emulated)
    return BenchRunner(verbs_pair, settings, max(cfg.message_sizes))


@pytest.fixture(scope="session")
def verbs_sweeps(
    verbs_bench: BenchRunner,
    verbs_base_pair: VerbsPair | None,
    verbs_emulated: bool,
    pytestconfig: pytest.Config,
) -> Sweeps:
    """The session's pooled points (--hpc-repeats jobs, adaptive repeats); in a paired run
    with the base side's store inside, its runner never stretched by the canary. On an
    emulated device one job per point: its numbers are reported, never judged."""
    from pytest_hpccomm.stacks.verbs.perf import BenchRunner, BenchSettings, Sweeps

    cfg = hpc_session_of(pytestconfig).cfg
    repeats, most = (1, 1) if verbs_emulated else (cfg.repeats, cfg.repeat_limit)
    base = None
    if verbs_base_pair is not None:
        settings = BenchSettings.for_profile(cfg.profile, verbs_emulated)  # slowdown 1
        runner = BenchRunner(verbs_base_pair, settings, max(cfg.message_sizes))
        base = Sweeps(runner, repeats, most, guard=not verbs_emulated)
    return Sweeps(verbs_bench, repeats, most, base, guard=not verbs_emulated)


def note_emulated(config: pytest.Config, nodeid: str) -> None:
    config.stash[EMULATED_KEY].append(nodeid)


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    ran = config.stash[EMULATED_KEY] if EMULATED_KEY in config.stash else []
    if ran:
        sel = hpc_session_of(config).selection
        where = sel.description if isinstance(sel, FabricSelection) else sel.kind
        terminalreporter.write_sep("=", "hpccomm verbs")
        terminalreporter.write_line(
            f"{len(ran)} benchmark points ran as a functional pass on an emulated device "
            f"({where}): performance verdicts disabled, timings are not judged or stored"
        )
