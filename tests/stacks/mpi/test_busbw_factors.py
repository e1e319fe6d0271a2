"""The bus-bandwidth factors and algbw sizes of every collective the suites report, against
nccl-tests' own table (doc/PERFORMANCE.md, "Summary"; Gather and Scatter from src/gather.cu
and src/scatter.cu), written out here independently of measure/metrics.py:

    AllReduce 2(n-1)/n; ReduceScatter, AllGather, AlltoAll, Gather, Scatter (n-1)/n;
    Broadcast, Reduce 1.  algbw = S / t in GB/s (10^9 B/s), S the whole array the operation
    moves: for allgather, alltoall, gather, scatter n blocks of OSU's per-rank size; for
    reduce_scatter OSU's size is already the whole vector.

Pure (no MPI): the MPI driver's records are built from a hand-made job document, so a changed
factor, a per-rank instead of a whole-array S, or GB/s computed as GiB/s fails here."""

from __future__ import annotations

from fractions import Fraction

import pytest

from pytest_hpccomm.measure import metrics
from pytest_hpccomm.proc.jobs import JobResult
from pytest_hpccomm.stacks.mpi.driver import Sweep, busbw_factor, collective_bytes, measurements
from pytest_hpccomm.stacks.mpi.wire import COLLECTIVES

RANKS = (2, 3, 4, 8)


def full(n: int) -> Fraction:
    return Fraction(2 * (n - 1), n)


def part(n: int) -> Fraction:
    return Fraction(n - 1, n)


def one(n: int) -> Fraction:
    return Fraction(1)


# OSU collective -> (nccl-tests factor, S in units of OSU's size)
NCCL = {
    "osu_allreduce": (full, lambda n: 1),
    "osu_reduce_scatter": (part, lambda n: 1),
    "osu_allgather": (part, lambda n: n),
    "osu_alltoall": (part, lambda n: n),
    "osu_gather": (part, lambda n: n),
    "osu_scatter": (part, lambda n: n),
    "osu_bcast": (one, lambda n: 1),
    "osu_reduce": (one, lambda n: 1),
}


def test_every_reported_collective_has_a_reference_row() -> None:
    """A collective added to the suite without a row here fails: its factor is then unchecked."""
    assert set(COLLECTIVES) - {"osu_barrier"} == set(NCCL)


@pytest.mark.parametrize("n", RANKS)
@pytest.mark.parametrize("bench", sorted(NCCL))
def test_factor_and_size_match_nccl_tests(bench: str, n: int) -> None:
    factor, blocks = NCCL[bench]
    assert busbw_factor(bench, n) == pytest.approx(float(factor(n)), rel=1e-12)
    assert collective_bytes(bench, 1000, n) == 1000 * blocks(n)


@pytest.mark.parametrize("n", RANKS)
@pytest.mark.parametrize("name", ["allreduce", "all_reduce_perf", "AllReduce"])
def test_allreduce_factor_horovod_and_tf_use(name: str, n: int) -> None:
    """Horovod's and TensorFlow's allreduce records take metrics.busbw_factor("allreduce")."""
    assert metrics.busbw_factor(name, n) == pytest.approx(float(full(n)), rel=1e-12)


def test_algbw_is_bytes_per_second_in_1e9() -> None:
    assert metrics.nccl_algbw_gb_s(10**9, 1.0) == pytest.approx(1.0, rel=1e-12)
    assert metrics.nccl_algbw_gb_s(3 * 10**9, 2.0) == pytest.approx(1.5, rel=1e-12)


@pytest.mark.parametrize("n", RANKS)
@pytest.mark.parametrize("bench", sorted(NCCL))
def test_driver_busbw_record_known_answer(bench: str, n: int) -> None:
    """OSU size 10^6 B at 1000 us: algbw = blocks * 10^6 B / 10^-3 s = blocks GB/s, busbw =
    algbw * factor; the record's unit GB/s, its direction higher-is-better."""
    factor, blocks = NCCL[bench]
    size, us = 10**6, 1000.0
    doc = {
        "benchmark": bench,
        "ranks": n,
        "participants": n,
        "results": [
            {
                "size": size,
                "samples": [us, us, us],
                "max_samples": [us, us, us],
                "iterations": 1,
                "warmup": 0,
            }
        ],
    }
    sweep = Sweep({bench: doc}, JobResult((), 0, "", "", 0.0, False))
    latency, busbw = measurements(sweep, bench, size, {"mpi": "openmpi"})
    assert latency.samples == (us, us, us) and latency.unit == "us"
    want_algbw = float(blocks(n))
    assert busbw.params["metric"] == "busbw" and busbw.unit == "GB/s"
    assert busbw.extra["algbw_gb_s"] == pytest.approx(want_algbw, rel=1e-12)
    assert busbw.samples == pytest.approx([want_algbw * float(factor(n))] * 3, rel=1e-12)
    assert busbw.direction.name == "HIGHER_IS_BETTER"
