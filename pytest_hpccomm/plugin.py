"""pytest entry point (pytest11: hpccomm). Thin: options, markers, fixtures, summary.

The work lives in config (options), session (discovery and fingerprint; stack plugins reach
it through session.hpc_session_of), skips (skip semantics), judging (verdicts against
baselines) and report/ (outputs).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from pytest_hpccomm import hookspecs, retries
from pytest_hpccomm.cluster.placement import kept_in_profile, placements
from pytest_hpccomm.config import HpcConfig, add_options, build_config
from pytest_hpccomm.errors import KnownDefect
from pytest_hpccomm.fabrics import FabricSelection, FabricUnavailable
from pytest_hpccomm.judging import BaselineJudge
from pytest_hpccomm.measure.host_speed import quiet_probe
from pytest_hpccomm.record import JUDGE_KEY, Record
from pytest_hpccomm.report.stack_time import OTHER, StackTimes, stack_of
from pytest_hpccomm.session import SESSION_KEY, HpcSession, hpc_session_of
from pytest_hpccomm.skips import MARKERS, check_marker_args, skip_reason

STARTED_KEY = pytest.StashKey[float]()
LINKS_KEY = pytest.StashKey[list[Any]]()  # rxe/siw links this session created here
TIMES_KEY = pytest.StashKey[StackTimes]()  # the time per stack
NARROWED_KEY = pytest.StashKey[dict[str, list[str]]]()  # stack -> placements the profile kept


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    for line in MARKERS:
        config.addinivalue_line("markers", line)
    cfg = build_config(config)
    if cfg.inject_slowdown > 1.0 and cfg.update_baselines != "none":
        raise pytest.UsageError(
            "--hpc-inject-slowdown is a canary run: it cannot be combined "
            "with --hpc-update-baselines"
        )
    hpc = HpcSession.open(config, cfg)
    config.stash[SESSION_KEY] = hpc
    config.stash[JUDGE_KEY] = BaselineJudge(
        hpc, probe=lambda: config.hook.pytest_hpccomm_host_probe(config=config) or quiet_probe()
    )
    config.stash[STARTED_KEY] = time.time()
    config.stash[LINKS_KEY] = []
    config.stash[TIMES_KEY] = StackTimes()


def pytest_unconfigure(config: pytest.Config) -> None:
    """Belt and braces: a session torn down without fixture teardown still removes the
    rxe/siw link it created here."""
    from pytest_hpccomm.fabrics import provision as prov

    made_here: list[Any] = config.stash.get(LINKS_KEY, [])
    for made in list(made_here):
        try:
            prov.unprovision(made)
        except prov.ProvisionError:
            pass


def pytest_report_header(config: pytest.Config) -> list[str]:
    hpc = hpc_session_of(config)
    sel = hpc.selection
    where = sel.description if isinstance(sel, FabricSelection) else f"ABSENT: {sel.reason}"
    return [
        f"hpccomm: fabric={hpc.cfg.fabric} -> {sel.kind}: {where}",
        f"hpccomm: system={hpc.system} profile={hpc.cfg.profile} "
        f"launcher={hpc.cfg.launcher} baselines={hpc.cfg.baselines}",
    ]


def pytest_report_collectionfinish(config: pytest.Config) -> list[str]:
    narrowed = config.stash.get(NARROWED_KEY, {})
    return [
        f"hpccomm: quick profile: {stack} timed at {', '.join(kept)} only (the same "
        "code path at every placement; --hpc-profile=full runs each)"
        for stack, kept in sorted(narrowed.items())
    ]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    hpc = hpc_session_of(config)
    for item in items:
        marks = list(item.iter_markers())
        check_marker_args(item.nodeid, marks, hpc)
        callspec = getattr(item, "callspec", None)
        placement = None if callspec is None else callspec.params.get("hpc_placement")
        reason = skip_reason(marks, hpc, placement)
        if reason:
            item.add_marker(pytest.mark.skip(reason=reason))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """`hpc_size` sweeps the profile's message sizes; `hpc_placement` where peers run."""
    from pytest_hpccomm.measure.sizes import format_size

    hpc = hpc_session_of(metafunc.config)
    if "hpc_size" in metafunc.fixturenames:
        sizes = hpc.cfg.message_sizes
        metafunc.parametrize("hpc_size", sizes, ids=[format_size(s) for s in sizes])
    if "hpc_placement" in metafunc.fixturenames:
        where = placements(hpc.cfg.launcher, bool(hpc.cfg.host_list))
        mark = metafunc.definition.get_closest_marker("quick_placements")
        kept = kept_in_profile(where, None if mark is None else mark.args, hpc.cfg.profile)
        if kept != where:
            stack = metafunc.definition.get_closest_marker("stack")
            narrowed = metafunc.config.stash.setdefault(NARROWED_KEY, {})
            narrowed[str(stack.args[0]) if stack and stack.args else OTHER] = kept
        metafunc.parametrize("hpc_placement", kept, scope="session")


@pytest.fixture(scope="session")
def hpc_virtual_cluster(hpc_session: HpcSession) -> Iterator[Any]:
    """A virtual cluster of network namespaces for the session (needs root; else skips)."""
    from pytest_hpccomm.cluster.virtual import (
        ClusterUnavailable,
        VirtualCluster,
        cleanup_leftovers,
        unavailable_reason,
    )

    reason = unavailable_reason()
    if reason:
        pytest.skip(f"virtual cluster unavailable: {reason}")
    cleanup_leftovers()  # namespaces and processes of an earlier run that was killed
    cluster = VirtualCluster(hpc_session.cfg.vhosts)
    try:
        cluster.start()
    except ClusterUnavailable as exc:
        pytest.skip(f"virtual cluster unavailable: {exc}")
    try:
        if hpc_session.cfg.vlink_rate is not None:  # --hpc-vlink-rate: a known link rate
            for host in cluster.hosts:
                cluster.shape(host, hpc_session.cfg.vlink_rate)
        yield cluster
    finally:
        cluster.teardown()


@pytest.fixture(scope="session")
def hpc_session(pytestconfig: pytest.Config) -> HpcSession:
    return hpc_session_of(pytestconfig)


@pytest.fixture(scope="session")
def hpc_config(hpc_session: HpcSession) -> HpcConfig:
    return hpc_session.cfg


@pytest.fixture(scope="session")
def hpc_fabric(hpc_session: HpcSession) -> FabricSelection:
    """The fabric this session tests on; skips the test (with what was found) when absent."""
    sel = hpc_session.selection
    if isinstance(sel, FabricUnavailable):
        pytest.skip(sel.reason)
    return sel


@pytest.fixture(scope="session")
def hpc_rdma_fabric(pytestconfig: pytest.Config) -> Iterator[Any]:
    """The session's fabric here and on every host of --hpc-hosts (cluster/host_fabrics.py's
    ClusterFabric): on softroce/iwarp an rxe/siw link is created where none exists and removed
    at the end. Skips with the reason when the fabric cannot be had."""
    from pytest_hpccomm.cluster.host_fabrics import FabricNotReady, provisioned

    hpc = hpc_session_of(pytestconfig)
    cfg = hpc.cfg
    stack = ExitStack()  # entered here, left after the session: a failed removal is an error
    try:
        fabric = stack.enter_context(
            provisioned(
                hpc.selection.kind,
                hpc.selection,
                hpc.inventory,
                hpc.refresh_fabric,
                hosts=[h.name for h in cfg.host_list],
                rsh_agent=cfg.rsh_agent,
                device=cfg.device,
                netdev=cfg.netdev,
                sysfs_root=Path(cfg.sysfs_root),
                made_here=pytestconfig.stash[LINKS_KEY],
            )
        )
    except FabricNotReady as exc:
        pytest.skip(str(exc))
    with stack:
        yield fabric


@pytest.fixture(scope="session")
def hpc_fingerprint(hpc_session: HpcSession) -> dict[str, Any]:
    return hpc_session.fingerprint


@pytest.fixture
def hpc_record(
    request: pytest.FixtureRequest,
    hpc_session: HpcSession,
    record_property: Callable[[str, object], None],
) -> Record:
    """record(measurement, runtime_fingerprint=None, base=None) -> RunResult.

    Judges the measurement against its baseline (in a paired A/B run: against `base`, the
    same point measured by the base build in this session), puts the numbers into JUnit
    properties and fails the test on a regression (or, with --hpc-strict, on an inconclusive
    verdict). `record.undecided(m)` asks whether more jobs could decide it (--hpc-max-repeats).
    """
    return Record(request, hpc_session, record_property)


@pytest.hookimpl(wrapper=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> Generator[None, object, object]:
    """A test that raised KnownDefect (errors.py) is an xfail with its reason."""
    try:
        return (yield)
    except KnownDefect as defect:
        pytest.xfail(str(defect))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Setup, call and teardown of every item, summed per stack (the suite's own cost)."""
    report = yield
    if TIMES_KEY in item.config.stash:
        callspec = getattr(item, "callspec", None)
        item.config.stash[TIMES_KEY].add(
            stack_of(item.iter_markers(), callspec.params if callspec else {}),
            item.nodeid,
            report.duration,
            skipped=report.when == "setup" and report.skipped,
        )
    return report


@pytest.hookimpl(tryfirst=True)  # before junitxml writes its file: the gate's properties
def pytest_sessionfinish(session: pytest.Session) -> None:
    from pytest_hpccomm.report.session_end import (
        canary_report,
        gate_verdict,
        ratio_gate,
        retry_properties,
        write_session_outputs,
    )

    config = session.config
    if SESSION_KEY not in config.stash:
        return
    hpc, judge = hpc_session_of(config), config.stash[JUDGE_KEY]
    retry_properties(config, hpc)
    status, gate_lines, failed = gate_verdict(config, hpc, judge)
    config.stash[GATE_KEY] = [*gate_lines, *canary_report(config, hpc)]
    if failed and session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    lines = write_session_outputs(
        config, hpc, judge, config.stash[STARTED_KEY], config.stash[TIMES_KEY], status
    )
    ratio_lines, ratio_failed = ratio_gate(config, hpc)  # the history holds tonight's run now
    if ratio_failed and session.exitstatus in (
        pytest.ExitCode.OK,
        pytest.ExitCode.NO_TESTS_COLLECTED,
    ):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    config.stash[SUMMARY_KEY] = [*lines, *ratio_lines]


SUMMARY_KEY = pytest.StashKey[list[str]]()
GATE_KEY = pytest.StashKey[list[str]]()  # the gate status, first in the verdicts' summary


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    if SESSION_KEY not in config.stash:
        return
    times = config.stash[TIMES_KEY]
    suites = bool(set(times.items) - {OTHER})  # a run of the suites, not only of our own tests
    if suites:
        terminalreporter.write_sep("=", "hpccomm time per stack (setup + call + teardown)")
        for line in times.lines(wall=time.time() - config.stash[STARTED_KEY]):
            terminalreporter.write_line(line)
    hpc = hpc_session_of(config)
    retried = retries.counts(hpc.retries_mark)
    if suites or retried:
        terminalreporter.write_line(f"hpccomm {retries.summary_line(retried)}")
        for line in retries.detail_lines(retries.since(hpc.retries_mark)):
            terminalreporter.write_line(f"  retried: {line}")
    if not hpc.results:
        return
    from pytest_hpccomm.report.terminal import summary_table

    terminalreporter.write_sep("=", "hpccomm performance verdicts")
    for line in config.stash.get(GATE_KEY, []):
        terminalreporter.write_line(line)
    # never narrower than 150: a cut parameter list hides which run a row is
    for line in summary_table(
        hpc.results, width=max(150, terminalreporter._tw.fullwidth), verbose=config.get_verbosity()
    ):
        terminalreporter.write_line(line)
    for line in config.stash.get(SUMMARY_KEY, []):
        terminalreporter.write_line(line)
