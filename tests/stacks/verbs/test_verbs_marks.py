"""The verbs_not_on marker (stacks/verbs/marks.py) on pytester sessions: an item declared not to
run on a kind of device skips with its marker's reason once its fixtures are up, runs on other
devices, and a marker that could never skip is a usage error. The pair is a stand-in object
with the one attribute the marker reads (no peer is started: this host has no device); the
host-to-host helpers' counter arithmetic runs on a stand-in fabric's readings."""

from __future__ import annotations

import types
from typing import Any

import pytest

from pytest_hpccomm.cluster.host_fabrics import ClusterFabric, HostFabric
from pytest_hpccomm.fabrics import FabricSelection
from pytest_hpccomm.stacks.verbs.hosts import Moved, PortCount, VerbsHosts, port_count
from pytest_hpccomm.stacks.verbs.marks import NOT_ON_MARK
from tests.stacks.verbs.test_verbs_plugin import plugin_args, tree

REASON = "iWARP QPs cannot do this (the marker's own words)"

SUITE = f"""
import types

import pytest

IWARP = {{iwarp}}
SET_UP = []


@pytest.fixture
def verbs_pair():
    return types.SimpleNamespace(iwarp=IWARP)


@pytest.fixture
def uses_pair(verbs_pair):
    SET_UP.append("uses_pair")
    return verbs_pair


@pytest.mark.verbs_not_on("iwarp", reason={REASON!r})
def test_marked(uses_pair):
    print("RAN marked")


@pytest.mark.verbs_not_on("iwarp", reason={REASON!r})
@pytest.mark.parametrize("n", [1, 2])
def test_marked_param(verbs_pair, n):
    print("RAN marked", n)


def test_unmarked(verbs_pair):
    print("RAN unmarked")


def test_fixtures_came_first():
    assert SET_UP == ["uses_pair"]
"""


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest(
        "-rs", "-s", "-p", "no:cacheprovider", *plugin_args(), "--hpc-fabric=softroce",
        tree("ethernet-plain"), *args,
    )  # fmt: skip


def test_marked_items_skip_on_iwarp_with_the_markers_reason(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(SUITE.format(iwarp=True))
    result = run(pytester)
    result.assert_outcomes(passed=2, skipped=3)
    skipped = [line for line in result.stdout.lines if line.startswith("SKIPPED")]
    # at the items, as a skip in a fixture of theirs is reported (one line per test function)
    assert len(skipped) == 2, skipped
    assert all(" test_marked_items_skip_on_iwarp" in line for line in skipped), skipped
    assert all(line.endswith(f": {REASON}") for line in skipped), skipped
    assert "RAN marked" not in result.stdout.str()
    result.stdout.fnmatch_lines(["*RAN unmarked*"])


def test_marked_items_run_on_other_devices(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(SUITE.format(iwarp=False))
    result = run(pytester)
    result.assert_outcomes(passed=5)
    result.stdout.fnmatch_lines(["*RAN marked*", "*RAN marked 1*", "*RAN marked 2*"])


def test_the_skip_is_in_setup(pytester: pytest.Pytester) -> None:
    """Where a fixture of the item's own would have skipped: the test body never runs."""
    pytester.makepyfile(SUITE.format(iwarp=True))
    reports = pytester.inline_run(
        "-p", "no:cacheprovider", *plugin_args(), "--hpc-fabric=softroce", tree("ethernet-plain")
    ).getreports("pytest_runtest_logreport")
    skipped = {(r.nodeid.split("::")[-1], r.when) for r in reports if r.skipped}
    assert skipped == {
        ("test_marked", "setup"),
        ("test_marked_param[1]", "setup"),
        ("test_marked_param[2]", "setup"),
    }


@pytest.mark.parametrize(
    "mark,problem",
    [
        ('"roce", reason="x"', "kinds are iwarp"),
        ("reason='x'", "kinds are iwarp"),
        ('"iwarp"', "reason= is missing"),
        ('"iwarp", reason=""', "reason= is missing"),
    ],
)
def test_a_marker_that_could_never_skip_is_a_usage_error(
    pytester: pytest.Pytester, mark: str, problem: str
) -> None:
    pytester.makepyfile(
        f"""
        import pytest

        @pytest.fixture
        def verbs_pair():
            return None

        @pytest.mark.verbs_not_on({mark})
        def test_it(verbs_pair):
            pass
        """
    )
    result = run(pytester)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*test_it*{NOT_ON_MARK}*{problem}*"])


def test_a_marked_item_without_the_pair_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.verbs_not_on("iwarp", reason="x")
        def test_it():
            pass
        """
    )
    result = run(pytester)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*test_it*uses no verbs_pair*"])


def test_the_marker_is_registered(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest(*plugin_args(), "--markers")
    result.stdout.fnmatch_lines([f"@pytest.mark.{NOT_ON_MARK}(*kinds, reason=...): *iWARP*"])


NEEDS_SUITE = """
import types

import pytest


@pytest.fixture
def verbs_pair():
    return types.SimpleNamespace(iwarp=False, info={{"device": "dev0", "atomic_cap": {cap!r}}})


@pytest.mark.verbs_needs("atomics")
def test_needs_atomics(verbs_pair):
    print("RAN atomics")


def test_plain(verbs_pair):
    print("RAN plain")
"""


@pytest.mark.parametrize("cap,ran", [(None, False), ("ATOMIC_HCA", True)])
def test_an_item_that_needs_atomics_skips_on_a_device_without_them(
    pytester: pytest.Pytester, cap: str | None, ran: bool
) -> None:
    pytester.makepyfile(NEEDS_SUITE.format(cap=cap))
    result = run(pytester)
    result.assert_outcomes(passed=2 if ran else 1, skipped=0 if ran else 1)
    assert ("RAN atomics" in result.stdout.str()) is ran
    if not ran:
        result.stdout.fnmatch_lines(["SKIPPED*: dev0 has no atomics (atomic_cap = NONE)"])


@pytest.mark.parametrize(
    "mark,fixture,problem",
    [
        ('"atomcs"', "verbs_pair", "capabilities are atomics"),
        ("", "verbs_pair", "capabilities are atomics"),
        ('"atomics"', "other", "uses no verbs_pair"),
    ],
)
def test_a_needs_marker_that_could_never_skip_is_a_usage_error(
    pytester: pytest.Pytester, mark: str, fixture: str, problem: str
) -> None:
    pytester.makepyfile(
        f"""
        import pytest

        @pytest.fixture
        def {fixture}():
            return None

        @pytest.mark.verbs_needs({mark})
        def test_it({fixture}):
            pass
        """
    )
    result = run(pytester)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*test_it*verbs_needs*{problem}*"])


# -- the host-to-host helpers' arithmetic, on a stand-in fabric's readings -------------------


class ReadFabric(ClusterFabric):
    """Counter readings per host, one reading per call, in turn."""

    def __init__(self, hosts: tuple[HostFabric, ...], readings: dict[str, list[Any]]) -> None:
        super().__init__(hosts[0].selection, hosts)
        self.readings = readings

    def counters(self, host: HostFabric) -> dict[str, Any]:
        return dict(self.readings[host.host].pop(0))


def host(name: str, driver: str = "rxe") -> HostFabric:
    sel = FabricSelection(
        "softroce", f"{driver}0", 1, 1, None, "eth1", None, None, None, None, driver, "Ethernet",
        f"{driver}0 port 1",
    )  # fmt: skip
    return HostFabric(name, sel, local=name == "a")


def test_port_count_reads_packets_bytes_or_the_netdev() -> None:
    a = host("a")
    fabric = ReadFabric(
        (a,),
        {
            "a": [
                {"port": {"hw.sent_pkts": 3, "hw.rcvd_pkts": 4}, "netdev": {}},
                {"port": {"port_xmit_data": 2, "port_rcv_data": 5}, "netdev": {}},
                {"port": {}, "netdev": {"tx_bytes": 7, "rx_bytes": 9}},
            ]
        },
    )
    assert port_count(fabric, a) == PortCount(3, 4, "packets on rxe0")
    assert port_count(fabric, a) == PortCount(8, 20, "bytes on rxe0")  # 4-byte words
    assert port_count(fabric, a) == PortCount(7, 9, "bytes on eth1")


def test_counted_takes_the_sources_sent_and_the_destinations_received() -> None:
    a, b = host("a"), host("b", "siw")
    fabric = ReadFabric(
        (a, b),
        {
            "a": [{"port": {"hw.sent_pkts": 10, "hw.rcvd_pkts": 1000}, "netdev": {}}],
            "b": [{"port": {}, "netdev": {"tx_bytes": 5000, "rx_bytes": 70}}],
        },
    )
    pair: Any = types.SimpleNamespace(hosts=("a", "b"))  # which host each peer is on
    before = {"a": PortCount(4, 100, "packets on rxe0"), "b": PortCount(50, 20, "bytes on eth1")}
    moved = Moved("RDMA_READ", 64, b, a, "x", "x", before)  # b's bytes pulled to a
    got = VerbsHosts(pair, fabric).counted(moved)
    assert (got.sent, got.sent_unit) == (4950, "bytes on eth1")
    assert (got.received, got.received_unit) == (900, "packets on rxe0")
