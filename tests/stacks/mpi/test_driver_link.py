"""Which MPI records carry the link rate, and which link a sweep says it crossed (no MPI)."""

from __future__ import annotations

import dataclasses

import pytest

from pytest_hpccomm.cluster import virtual
from pytest_hpccomm.cluster.hosts import Host
from pytest_hpccomm.cluster.placement import HOSTS, LOOPBACK, NETNS
from pytest_hpccomm.cluster.virtual import VirtualCluster
from pytest_hpccomm.measure.link import LinkRate, link_fraction
from pytest_hpccomm.stacks.mpi.driver import (
    Sweep,
    SweepTarget,
    _link_rate,
    measurements,
    merge_sweeps,
)
from tests.stacks.mpi.test_driver_records import collective_sweep, doc, job

LINK = LinkRate(1.0, "tbf fab0 on h0,h1: 1 Gbit/s", shaped=True)


def p2p_sweep(link: LinkRate | None) -> Sweep:
    bw = {"size": 1 << 20, "samples": [110.0, 118.0, 120.0], "iterations": 10, "warmup": 1}
    lat = {"size": 1 << 20, "samples": [9000.0, 9100.0], "iterations": 10, "warmup": 1}
    mr = {
        "size": 1 << 20,
        "samples": [110.0, 118.0],
        "rate_samples": [105.0, 112.0],
        "iterations": 10,
        "warmup": 1,
        "window": 64,
        "pairs": 1,
    }
    return Sweep(
        {
            "osu_bw": doc("osu_bw", [bw]),
            "osu_latency": doc("osu_latency", [lat]),
            "osu_mbw_mr": doc("osu_mbw_mr", [mr]),
        },
        job(""),
        link=link,
    )


def test_bandwidth_records_carry_the_link_and_others_do_not() -> None:
    sweep = p2p_sweep(LINK)
    (bw,) = measurements(sweep, "osu_bw", 1 << 20, {"placement": NETNS})
    assert bw.extra["link_rate_gbps"] == 1.0
    assert bw.extra["link_rate_source"] == "tbf fab0 on h0,h1: 1 Gbit/s"
    assert link_fraction(118.0, bw.unit, bw.extra["link_rate_gbps"]) == pytest.approx(0.944)
    (lat,) = measurements(sweep, "osu_latency", 1 << 20, {})
    assert "link_rate_gbps" not in lat.extra
    mbw, rate = measurements(sweep, "osu_mbw_mr", 1 << 20, {})
    assert mbw.extra["link_rate_gbps"] == 1.0 and "link_rate_gbps" not in rate.extra
    busbw = measurements(
        dataclasses.replace(collective_sweep(), link=LINK), "osu_allreduce", 1 << 20, {}
    )
    assert [("link_rate_gbps" in m.extra) for m in busbw] == [False, True]  # latency, busbw


def test_unknown_link_leaves_no_key() -> None:
    for m in measurements(p2p_sweep(None), "osu_bw", 1 << 20, {}):
        assert "link_rate_gbps" not in m.extra and "link_rate_source" not in m.extra


def test_a_shaped_link_is_in_the_runtime_fingerprint() -> None:
    """A shaped result judged against an unshaped baseline says why it differs."""
    assert p2p_sweep(LINK).runtime_fingerprint["vlink_rate_gbps"] == 1.0
    assert "vlink_rate_gbps" not in p2p_sweep(None).runtime_fingerprint
    hardware = LinkRate(100.0, "port rate mlx5_0/1")  # the session's fingerprint has it
    assert "vlink_rate_gbps" not in p2p_sweep(hardware).runtime_fingerprint


def test_pooled_jobs_keep_the_link_only_if_they_agree() -> None:
    a, b = p2p_sweep(LINK), p2p_sweep(LINK)
    assert merge_sweeps([a, b]).link == LINK
    assert merge_sweeps([a, p2p_sweep(None)]).link is None
    assert merge_sweeps([a, p2p_sweep(LinkRate(0.5, "tbf fab0 on h1: 500 Mbit/s"))]).link is None


def test_the_link_a_target_crosses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(virtual, "run_command", lambda argv, **kw: "")  # no tc here
    vc = VirtualCluster(4, prefix="hpcclinkmpi", subnet="10.250.4.0/24")
    pair = [Host("h0"), Host("h1")]
    netns = SweepTarget(NETNS, cluster=vc)
    assert _link_rate(netns, pair) is None  # a veth alone: unknown
    vc.shape("h0", 1e9)
    vc.shape("h1", 1e9)
    assert _link_rate(netns, pair) == LINK
    # a collective over h0..h3: h2 and h3 talk past every tbf
    assert _link_rate(netns, [Host(h.name) for h in vc.hosts]) is None
    fabric = LinkRate(100.0, "port rate mlx5_0/1")
    assert _link_rate(SweepTarget(HOSTS, link=fabric), pair) == fabric
    assert _link_rate(SweepTarget(LOOPBACK, link=fabric), None) is None  # crosses no link
