"""Unit and direction of every record the stacks emit, against what each metric's definition
says: times (latency, step time) are lower-is-better in us or ms; bandwidths higher-is-better
in MB/s (10^6 B/s, OSU / TF-gRPC-Bench), MiB/s (2^20 B/s, perftest's "MB/sec") or GB/s
(nccl-tests busbw); rates
(messages, RPCs, steps, images per second) higher-is-better. Each row is produced by the code
that makes the records (the stacks' measurements functions and tables) from hand-made sweep
results, so a flipped direction or a changed unit in any of them fails here; where a record
is derived (TF's bandwidth, the busbw records) its value is checked against its definition too.
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_hpccomm.measure.link import link_fraction
from pytest_hpccomm.measure.measurement import Direction, Measurement
from pytest_hpccomm.proc.jobs import JobResult
from pytest_hpccomm.stacks.grpc import perf as grpc_perf
from pytest_hpccomm.stacks.grpc.driver import Sweep as GrpcSweep
from pytest_hpccomm.stacks.horovod import perf as hvd
from pytest_hpccomm.stacks.mpi import driver as mpi
from pytest_hpccomm.stacks.mpi.wire import BENCHMARKS as MPI_BENCHMARKS
from pytest_hpccomm.stacks.mpi.wire import UNSIZED
from pytest_hpccomm.stacks.tf import allreduce as tf_allreduce
from pytest_hpccomm.stacks.tf import perf as tf_recv
from pytest_hpccomm.stacks.tf import ps as tf_ps
from pytest_hpccomm.stacks.verbs.perf import BENCHMARKS as VERBS_BENCHMARKS
from pytest_hpccomm.stacks.verbs.stats import bandwidth_mb_s, message_rate_mpps

LOWER, HIGHER = Direction.LOWER_IS_BETTER, Direction.HIGHER_IS_BETTER
TIME = {"us", "ms"}  # lower is better
BANDWIDTH = {"MB/s", "MiB/s", "GB/s"}  # higher is better
RATE = {"msg/s", "rpc/s", "steps/s", "img/s"}  # higher is better

US = 1000.0  # every hand-made time sample: 1000 us
SIZE = 10**6  # bytes


def consistent(m: Measurement) -> None:
    """The unit's kind fixes the direction."""
    assert m.unit in TIME | BANDWIDTH | RATE, m
    assert m.direction is (LOWER if m.unit in TIME else HIGHER), m


def row(m: Measurement) -> tuple[str, str, str, Direction]:
    return (m.benchmark, m.metric, m.unit, m.direction)


# -- MPI ---------------------------------------------------------------------------------------
MPI_WANT = {
    "osu_latency": [("latency", "us", LOWER)],
    "osu_multi_lat": [("latency", "us", LOWER)],
    "osu_bw": [("bandwidth", "MB/s", HIGHER)],
    "osu_bibw": [("bandwidth", "MB/s", HIGHER)],
    "osu_mbw_mr": [("bandwidth", "MB/s", HIGHER), ("message_rate", "msg/s", HIGHER)],
    "osu_barrier": [("latency", "us", LOWER)],
    **{
        b: [("latency", "us", LOWER), ("busbw", "GB/s", HIGHER)]
        for b in (
            "osu_allreduce",
            "osu_reduce",
            "osu_bcast",
            "osu_allgather",
            "osu_alltoall",
            "osu_reduce_scatter",
            "osu_gather",
            "osu_scatter",
        )
    },
}


def test_mpi_table_covers_every_benchmark() -> None:
    assert set(MPI_WANT) == set(MPI_BENCHMARKS)


@pytest.mark.parametrize("bench", MPI_BENCHMARKS)
def test_mpi_records(bench: str) -> None:
    size = 0 if bench in UNSIZED else SIZE
    point: dict[str, Any] = {"size": size, "samples": [US] * 3, "iterations": 1, "warmup": 0}
    if bench in mpi.COLLECTIVES:
        point["max_samples"] = [US] * 3
    if bench == "osu_mbw_mr":
        point |= {"rate_samples": [5.0] * 3, "pairs": 1, "window": 64}
    doc = {"benchmark": bench, "ranks": 2, "participants": 2, "results": [point]}
    sweep = mpi.Sweep({bench: doc}, JobResult((), 0, "", "", 0.0, False))
    ms = mpi.measurements(sweep, bench, size, {"mpi": "openmpi"})
    assert [(m.metric, m.unit, m.direction) for m in ms] == MPI_WANT[bench]
    for m in ms:
        consistent(m)
    # a second view is told apart in the baseline key by its `metric` parameter
    assert "metric" not in ms[0].params and all(m.params["metric"] == m.metric for m in ms[1:])


# -- gRPC (TF-gRPC-Bench) ----------------------------------------------------------------------
GRPC_WANT = {
    "tf_grpc_p2p_latency": ("latency", "us", LOWER),
    "tf_grpc_p2p_bandwidth": ("bandwidth", "MB/s", HIGHER),
    "tf_grpc_ps_throughput": ("rate", "rpc/s", HIGHER),
    "tf_grpc_mimic_step": ("step time", "ms", LOWER),
}


def test_grpc_table_covers_every_benchmark() -> None:
    assert set(GRPC_WANT) == set(grpc_perf.BENCHMARKS)


@pytest.mark.parametrize("bench", sorted(GRPC_WANT))
def test_grpc_records(bench: str) -> None:
    family = grpc_perf.BENCHMARKS[bench][0]
    sweep = GrpcSweep(
        family=family, peer="native", mode="raw", placement="loopback", results={}, grpc_version=""
    )
    point = {"layout": [10, 10], "samples": [US] * 3, "iterations": [1] * 3, "warmup": 0}
    m = grpc_perf.measurement(
        bench, "uniform-small", sweep, point, "native", "native", "raw", "loopback"
    )
    assert (m.metric, m.unit, m.direction) == GRPC_WANT[bench]
    consistent(m)


# -- TensorFlow --------------------------------------------------------------------------------
def tf_point() -> dict[str, Any]:
    return {"samples": [US] * 3, "max_samples": [US] * 3, "warmup": 0, "valid": True, "devices": []}


def test_tf_recv_tensor_records() -> None:
    """Latency us per read; bandwidth = bytes / us = 10^6 B/s = MB/s: 10^6 B in 1000 us is
    1000 MB/s."""
    sweep = tf_recv.RecvSweep({SIZE: tf_point()})
    lat, bw = tf_recv.measurements(sweep, SIZE, {})
    assert [row(m) for m in (lat, bw)] == [
        ("tf_recv_tensor", "latency", "us", LOWER),
        ("tf_recv_tensor", "bandwidth", "MB/s", HIGHER),
    ]
    assert bw.samples == pytest.approx([1000.0] * 3, rel=1e-12)
    for m in (lat, bw):
        consistent(m)


@pytest.mark.parametrize("workers", [2, 4])
def test_tf_allreduce_records(workers: int) -> None:
    """busbw of 10^6 B in 1000 us: algbw 1 GB/s times 2(n-1)/n."""
    sweep = tf_recv.RecvSweep({SIZE: tf_point()})
    lat, busbw = tf_allreduce.measurements(sweep, SIZE, workers, {})
    assert [row(m) for m in (lat, busbw)] == [
        ("tf_allreduce", "latency", "us", LOWER),
        ("tf_allreduce", "busbw", "GB/s", HIGHER),
    ]
    assert busbw.samples == pytest.approx([2 * (workers - 1) / workers] * 3, rel=1e-12)
    for m in (lat, busbw):
        consistent(m)


def test_tf_ps_records() -> None:
    sweep = tf_recv.RecvSweep({SIZE: {**tf_point(), "samples": [50.0] * 3}})
    (m,) = tf_ps.measurements(sweep, SIZE, {})
    assert row(m) == ("tf_ps_throughput", "rate", "steps/s", HIGHER)
    consistent(m)


# -- Horovod -----------------------------------------------------------------------------------
@pytest.mark.parametrize("ranks", [2, 4])
def test_horovod_allreduce_records(ranks: int) -> None:
    sweep = hvd.Sweep({SIZE: tf_point()}, ranks)
    lat, busbw = hvd.measurements(sweep, SIZE, {"placement": "loopback"})
    assert [row(m) for m in (lat, busbw)] == [
        ("hvd_allreduce", "latency", "us", LOWER),
        ("hvd_allreduce", "busbw", "GB/s", HIGHER),
    ]
    assert busbw.samples == pytest.approx([2 * (ranks - 1) / ranks] * 3, rel=1e-12)
    for m in (lat, busbw):
        consistent(m)


def test_horovod_train_records() -> None:
    steps = [{"negotiation_ms": 1.0, "reduction_ms": 2.0}] * 3
    sweep = hvd.TrainSweep([100.0] * 3, steps, ranks=2, warmup=0)
    ms = hvd.train_measurements(sweep, {})
    assert [row(m) for m in ms] == [
        ("hvd_synthetic", "images_per_s_per_rank", "img/s", HIGHER),
        ("hvd_timeline", "negotiation_ms_per_step", "ms", LOWER),
        ("hvd_timeline", "reduction_ms_per_step", "ms", LOWER),
    ]
    for m in ms:
        consistent(m)


# -- verbs (perftest) --------------------------------------------------------------------------
@pytest.mark.parametrize("bench", VERBS_BENCHMARKS, ids=lambda b: b.key)
def test_verbs_metric(bench: Any) -> None:
    """perftest: *_lat programs report latency in us (lower), *_bw programs MB/sec (higher),
    whose MB is 2^20 B: the record says MiB/s, so a link fraction and a cross-stack row read
    it on the right scale."""
    want = (
        ("latency", "us", LOWER) if bench.name.endswith("_lat") else ("bandwidth", "MiB/s", HIGHER)
    )
    assert bench.metric == want


def test_verbs_link_fraction_known_answer() -> None:
    """2^20 B x 1000 iterations in 1 s is perftest's 1000 MB/sec = 8.388608 Gbit/s: exactly
    the whole of an 8.388608 Gbit/s link (read as OSU's decimal MB/s it would be 95.4 %)."""
    bench = next(b for b in VERBS_BENCHMARKS if not b.latency)
    value = bandwidth_mb_s(1 << 20, 1000, 10**9)
    assert link_fraction(value, bench.metric[1], 8.388608) == pytest.approx(1.0, rel=1e-12)


def test_verbs_bandwidth_and_rate_known_answer() -> None:
    """perftest's print_report_bw: BW in MB/sec with MB = 2^20 B (format_factor 0x100000, so
    the verbs records' "MB/s" is not OSU's 10^6), MsgRate in Mpps = 10^6 messages/s:
    2^20 B x 1000 iterations in 1 s is 1000 MB/s and 0.001 Mpps."""
    assert bandwidth_mb_s(1 << 20, 1000, 10**9) == pytest.approx(1000.0, rel=1e-12)
    assert message_rate_mpps(1000, 10**9) == pytest.approx(1e-3, rel=1e-12)
