"""The virtual cluster's shaping bookkeeping: what shape() set is what link_rate() reports for
the hosts a measurement crossed (tc itself is stubbed: no root needed; the real shaping is
measured in test_virtual.py and tests/stacks/test_link_fraction.py)."""

from __future__ import annotations

import pytest

from pytest_hpccomm.cluster import virtual
from pytest_hpccomm.cluster.virtual import VirtualCluster
from pytest_hpccomm.measure.link import LinkRate


def tbf(gbps: float, on: str, text: str) -> LinkRate:
    return LinkRate(gbps, f"tbf fab0 on {on}: {text}", shaped=True)


@pytest.fixture
def tc(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The tc commands shape() ran (none reaches the kernel)."""
    calls: list[list[str]] = []
    monkeypatch.setattr(virtual, "run_command", lambda argv, **kw: calls.append(list(argv)) or "")
    return calls


@pytest.fixture
def vc(tc: list[list[str]]) -> VirtualCluster:
    return VirtualCluster(4, prefix="hpcclink", subnet="10.250.3.0/24")  # never started


def test_unshaped_links_have_no_rate(vc: VirtualCluster) -> None:
    assert vc.link_rate(["h0", "h1"]) is None
    assert vc.shaped() == {}


def test_shaped_pair_reports_the_tbf_rate(vc: VirtualCluster) -> None:
    for h in vc.hosts:
        vc.shape(h, 1e9)
    assert vc.link_rate(["h0", "h1"]) == tbf(1.0, "h0,h1", "1 Gbit/s")
    assert vc.link_rate([0, vc.hosts[1]]) == vc.link_rate(["h0", "h1"])  # any way of naming
    assert vc.link_rate(["h2", "h2"]) is None  # one host: nothing crosses a link
    assert vc.shaped() == {h.name: 1e9 for h in vc.hosts}


def test_the_slowest_shaped_link_bounds_a_pair(vc: VirtualCluster) -> None:
    vc.shape("h0", 1e9)
    vc.shape("h1", 2.5e8)
    assert vc.link_rate(["h0", "h1"]) == tbf(0.25, "h1", "250 Mbit/s")
    # one end shaped: every byte still passes its tbf
    assert vc.link_rate(["h0", "h2"]) == tbf(1.0, "h0", "1 Gbit/s")
    # two unshaped hosts talk past every tbf: unknown
    assert vc.link_rate(["h0", "h2", "h3"]) is None
    assert vc.link_rate(["h2", "h3"]) is None


def test_removing_the_shaping_forgets_the_rate(vc: VirtualCluster) -> None:
    vc.shape("h0", 1e9)
    vc.shape("h1", 1e9)
    vc.shape("h1", None)
    assert vc.shaped() == {"h0": 1e9}
    assert vc.link_rate(["h0", "h1"]) == tbf(1.0, "h0", "1 Gbit/s")
    vc.shape("h0", None)
    assert vc.link_rate(["h0", "h1"]) is None


def test_a_failed_tc_leaves_the_rate_unknown(
    monkeypatch: pytest.MonkeyPatch, vc: VirtualCluster
) -> None:
    vc.shape("h0", 1e9)
    vc.shape("h1", 1e9)

    def fail(argv: list[str], **kw: object) -> str:
        raise virtual.ClusterError("tc: no sch_tbf")

    monkeypatch.setattr(virtual, "run_command", fail)
    with pytest.raises(virtual.ClusterError):
        vc.shape("h1", 5e8)
    assert vc.shaped() == {"h0": 1e9}  # not the old 1 Gbit/s, not the new 500 Mbit/s


def test_shape_sets_tbf_on_both_ends_of_the_link(vc: VirtualCluster, tc: list[list[str]]) -> None:
    vc.shape("h2", 1e9)
    assert [(c[2], c[6], c[8], c[10]) for c in tc] == [
        ("hpcclink-h2", "fab0", "tbf", "1000000000bit"),
        ("hpcclink-sw", "p2", "tbf", "1000000000bit"),
    ]
