"""The cross-stack table: which benchmark of each stack feeds it, how values are made
comparable (units, half an echo RPC), the ratio to the fastest path, the share of the link."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from pytest_hpccomm.baselines.result import FUNCTIONAL, RunResult
from pytest_hpccomm.measure.measurement import Direction
from pytest_hpccomm.report.cross_stack import (
    LINK_UNKNOWN,
    cells,
    cross_stack,
    link_text,
    notes,
    ratio_text,
)
from tests.builders import make_result

HI = Direction.HIGHER_IS_BETTER


def _r(
    stack: str,
    bench: str,
    params: dict[str, Any],
    median: float,
    unit: str = "us",
    metric: str = "latency",
    extra: dict[str, Any] | None = None,
) -> RunResult:
    r = make_result(
        stack=stack,
        benchmark=bench,
        params=params,
        samples=(median,),
        unit=unit,
        metric=metric,
        baseline=None,
        direction=HI if unit.endswith("/s") else Direction.LOWER_IS_BETTER,
    )
    return dataclasses.replace(r, measurement=dataclasses.replace(r.measurement, extra=extra or {}))


def _grpc(
    bench: str,
    b: int,
    median: float,
    *,
    buffers: int = 1,
    peer: str = "native",
    scheme: str = "uniform-small",
    unit: str = "us",
    metric: str = "latency",
) -> RunResult:
    return _r(
        "grpc",
        bench,
        {
            "scheme": scheme,
            "buffers": buffers,
            "bytes": b,
            "peer": peer,
            "mode": "raw",
            "runtime": "stock",
            "placement": "loopback",
        },
        median,
        unit,
        metric,
    )


def test_each_stack_is_read_on_one_scale_and_ranked() -> None:
    rs = [
        _r("mpi", "osu_latency", {"size": 8, "ranks": 2, "mpi": "openmpi"}, 1.5),
        _r("mpi", "osu_bw", {"size": 8, "ranks": 2, "mpi": "openmpi"}, 10.0, "MB/s", "bandwidth"),
        # perftest's MB/sec is 2^20 B/s (recorded as MiB/s); its latency is already half
        # a round trip
        _r("verbs", "ib_send_lat", {"size": 8, "connection": "RC"}, 1.0),
        _r("verbs", "ib_send_bw", {"size": 8, "connection": "RC"}, 10.0, "MiB/s", "bandwidth"),
        _r("verbs", "ib_send_lat", {"size": 8, "connection": "UD"}, 0.1),  # not the path
        # an echo RPC is a ping-pong: half of it is OSU's latency
        _grpc("tf_grpc_p2p_latency", 8, 40.0),
        _grpc("tf_grpc_p2p_latency", 8, 1.0, buffers=10),  # an iovec, not one message
        _grpc("tf_grpc_p2p_latency", 8, 1.0, scheme="random"),  # not a uniform payload
        _r("horovod", "hvd_allreduce", {"size": 8, "ranks": 2, "controller": "mpi"}, 0.5),
    ]
    cs = cross_stack(rs)
    assert cs is not None and cs.sizes == [8]
    rows = cs.rows[8]
    assert [r.label for r in rows] == ["verbs", "MPI", "gRPC", "Horovod allreduce"]
    verbs, mpi, grpc, hvd = rows
    assert verbs.latency == pytest.approx(1e-6) and grpc.latency == pytest.approx(20e-6)
    assert verbs.bandwidth == pytest.approx(10 * 2**20) and mpi.bandwidth == pytest.approx(1e7)
    assert mpi.latency_ratio == pytest.approx(1.5) and grpc.latency_ratio == pytest.approx(20)
    assert mpi.bandwidth_ratio == pytest.approx(2**20 / 1e6)
    # a collective is never the fastest path, even when its number is the smallest
    assert verbs.latency_ratio == 1.0 and hvd.latency_ratio == pytest.approx(0.5)
    assert cells(verbs, True)[:4] == ("8B", "verbs", "1.00 µs", "fastest")
    assert cells(hvd, False)[1] == "Horovod allreduce (collective)"
    assert cells(hvd, False)[3] == "2.00x faster"
    assert cells(grpc, False)[3] == "20.0x slower"


def test_sizes_of_one_stack_are_left_out_and_named() -> None:
    rs = [_r("mpi", "osu_latency", {"size": s, "ranks": 2}, 1.0 + s) for s in (8, 16, 32)]
    rs += [
        _r("tf", "tf_recv_tensor", {"size": s, "placement": "loopback"}, 900.0) for s in (16, 64)
    ]
    cs = cross_stack(rs)
    assert cs is not None and cs.sizes == [16]
    assert cs.left_out == {"MPI": [8, 32], "TF": [64]}
    assert any(n == "left out, no other stack at that size: MPI at 8B, 32B" for n in notes(cs))
    assert len(cs.every) == 5  # the figure still draws every point
    assert cross_stack(rs[:3]) is None  # one stack: nothing to compare


def test_variants_are_named_by_what_differs() -> None:
    rs = [
        _r("mpi", "osu_latency", {"size": 8, "ranks": 2, "mpi": m, "placement": "loopback"}, 1.0)
        for m in ("openmpi", "mpich")
    ]
    rs += [_grpc("tf_grpc_p2p_latency", 8, 30.0, peer=p) for p in ("native", "python")]
    cs = cross_stack(rs)
    assert cs is not None
    assert sorted(cs.labels()) == ["MPI mpich", "MPI openmpi", "gRPC native", "gRPC python"]
    # what every variant shares is said once, in the notes
    assert any(n.startswith("MPI: ") and n.endswith("placement=loopback") for n in notes(cs))


def test_share_of_the_link_only_where_its_rate_is_known() -> None:
    link = {"link_rate_gbps": 100.0, "link_rate_source": "sysfs mlx5_0/1"}
    bw = [
        _r("mpi", "osu_bw", {"size": 1 << 20, "ranks": 2}, 6250.0, "MB/s", "bandwidth", link),
        _r(
            "tf",
            "tf_recv_tensor",
            {"size": 1 << 20, "metric": "bandwidth"},
            500.0,
            "MB/s",
            "bandwidth",
        ),
        _r(
            "verbs",
            "ib_send_bw",
            {"size": 1 << 20, "connection": "RC"},
            1000.0,
            "MiB/s",
            "bandwidth",
            {"link_rate_gbps": True},
        ),  # not a rate
        _r("mpi", "osu_latency", {"size": 1 << 20, "ranks": 2}, 100.0),
    ]
    cs = cross_stack(bw)
    assert cs is not None
    by = {r.label: r for r in cs.rows[1 << 20]}
    assert link_text(by["MPI"]) == "50% of 100 Gbit/s"  # 6250 MB/s = 50 Gbit/s
    assert link_text(by["TF"]) == LINK_UNKNOWN and link_text(by["verbs"]) == LINK_UNKNOWN
    assert "link rate from sysfs mlx5_0/1" in notes(cs)
    lat_only = dataclasses.replace(by["MPI"], bandwidth=None)
    assert link_text(lat_only) == "-"


def test_emulated_timings_say_so() -> None:
    a = _r("mpi", "osu_latency", {"size": 8, "ranks": 2}, 5.0)
    b = _r("tf", "tf_recv_tensor", {"size": 8}, 900.0, extra={FUNCTIONAL: "rxe"})
    cs = cross_stack([a, b])
    assert cs is not None
    assert cells(cs.rows[8][1], False)[1] == "TF (function only)"
    assert ratio_text(None) == "-" and ratio_text(1.0) == "fastest"
    assert ratio_text(1234.0) == "1234x slower"
