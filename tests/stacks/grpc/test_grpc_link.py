"""The gRPC bandwidth record carries the link between servers and clients (no gRPC run)."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_hpccomm.cluster import virtual
from pytest_hpccomm.cluster.host_fabrics import ClusterFabric, HostFabric
from pytest_hpccomm.cluster.placement import HOSTS, LOOPBACK, NETNS
from pytest_hpccomm.cluster.virtual import VirtualCluster
from pytest_hpccomm.fabrics import FabricSelection
from pytest_hpccomm.measure.link import LinkRate, link_fraction
from pytest_hpccomm.stacks.grpc.driver import GrpcHosts, ServerHandle, Sweep, merge_sweeps
from pytest_hpccomm.stacks.grpc.lab import GrpcLab
from pytest_hpccomm.stacks.grpc.perf import measurement

LINK = LinkRate(1.0, "tbf fab0 on h0,h1: 1 Gbit/s", shaped=True)


def point(samples: list[float]) -> dict[str, Any]:
    return {
        "layout": [1 << 20] * 10,
        "samples": samples,
        "iterations": [3] * len(samples),
        "warmup": 1,
        "errors": [],
    }


def sweep(family: str, link: LinkRate | None) -> Sweep:
    return Sweep(family, "native", "raw", NETNS, {}, "1.51.1", link=link)


def test_only_the_bandwidth_record_carries_the_link() -> None:
    args = ("uniform-large", sweep("p2p", LINK))
    bw = measurement(
        "tf_grpc_p2p_bandwidth", *args, point([110.0, 115.0]), "grpc", "native", "raw", NETNS
    )
    assert (bw.extra["link_rate_gbps"], bw.extra["link_rate_source"]) == (1.0, LINK.source)
    assert link_fraction(115.0, bw.unit, 1.0) == pytest.approx(0.92)
    lat = measurement("tf_grpc_p2p_latency", *args, point([9e4]), "grpc", "native", "raw", NETNS)
    assert "link_rate_gbps" not in lat.extra
    ps = measurement(
        "tf_grpc_ps_throughput",
        "uniform-large",
        sweep("ps", LINK),
        point([11.0]),
        "grpc",
        "native",
        "raw",
        NETNS,
    )
    assert "link_rate_gbps" not in ps.extra  # rpc/s is no data rate
    unknown = measurement(
        "tf_grpc_p2p_bandwidth",
        "uniform-large",
        sweep("p2p", None),
        point([110.0]),
        "grpc",
        "native",
        "raw",
        LOOPBACK,
    )
    assert "link_rate_gbps" not in unknown.extra and "link_rate_source" not in unknown.extra


def test_pooled_runs_keep_the_link_only_if_they_agree() -> None:
    assert merge_sweeps([sweep("p2p", LINK), sweep("p2p", LINK)]).link == LINK
    assert merge_sweeps([sweep("p2p", LINK)] * 2).runtime_fingerprint["vlink_rate_gbps"] == 1.0
    assert merge_sweeps([sweep("p2p", LINK), sweep("p2p", None)]).link is None


def server(host: str) -> ServerHandle:
    return ServerHandle("native", NETNS, "10.0.0.1", host, {}, None)  # type: ignore[arg-type]


def test_link_between_servers_and_clients_on_the_virtual_cluster(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(virtual, "run_command", lambda argv, **kw: "")  # no tc here
    vc = VirtualCluster(2, prefix="hpcclinkgrpc", subnet="10.250.5.0/24")
    assert GrpcLab.link_between(NETNS, vc, [server("h0")], [1]) is None
    vc.shape(0, 1e9)
    vc.shape(1, 1e9)
    assert GrpcLab.link_between(NETNS, vc, [server("h0")], [1]) == LINK
    assert GrpcLab.link_between(LOOPBACK, None, [server("local")], [0]) is None


def test_link_between_real_hosts_is_the_slowest_discovered() -> None:
    def host(name: str, driver: str | None, gbps: float | None) -> HostFabric:
        sel = FabricSelection(
            "ethernet",
            None,
            None,
            None,
            None,
            "eth0",
            "192.0.2.1",
            gbps,
            1500,
            None,
            driver,
            "Ethernet",
            "eth0",
        )
        return HostFabric(name, sel, local=name == "a")

    def hosts(*fabrics: HostFabric) -> GrpcHosts:
        return GrpcHosts(ClusterFabric(fabrics[0].selection, fabrics))

    site = hosts(host("a", "ice", 100.0), host("b", "ice", 25.0))
    assert GrpcLab.link_between(HOSTS, site, [server("a")], [1]) == LinkRate(
        25.0, "netdev eth0 speed on b"
    )
    veths = hosts(host("a", "ice", 100.0), host("b", None, 10.0))  # b: a veth's 10000
    assert GrpcLab.link_between(HOSTS, veths, [server("a")], [1]) is None
