"""The MPI peer without MPI: its command line, its patterns and its validation arithmetic."""

from __future__ import annotations

import argparse
from types import SimpleNamespace

import numpy as np
import pytest

from pytest_hpccomm.stacks.mpi.peer import __main__ as peer
from pytest_hpccomm.stacks.mpi.peer.__main__ import Bench, parse_args, participants, seed


def test_defaults_and_lists() -> None:
    args = parse_args(["--benchmark", "osu_latency, osu_allreduce", "--sizes", "0,8,1048576"])
    assert args.benchmark == ["osu_latency", "osu_allreduce"]
    assert args.sizes == [0, 8, 1048576]
    assert (args.min_batches, args.batches, args.window, args.slowdown) == (10, 30, 64, 1.0)
    assert args.corrupt is False


def test_every_osu_benchmark_is_known() -> None:
    args = parse_args(["--benchmark", ",".join(peer.BENCHMARKS), "--corrupt"])
    assert len(args.benchmark) == 14 and args.corrupt


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--benchmark", "osu_latncy"], "unknown benchmark(s) osu_latncy"),
        (["--benchmark", ","], "unknown benchmark(s) (none)"),
        (["--benchmark", "osu_bw", "--sizes", "8,1K"], "sizes must be byte counts"),
        (["--benchmark", "osu_bw", "--sizes", "-1"], "sizes must be >= 0"),
        (["--benchmark", "osu_bw", "--min-batches", "40"], "--min-batches <= --batches"),
        (["--benchmark", "osu_bw", "--window", "0"], "must be >= 1"),
        (["--benchmark", "osu_bw", "--slowdown", "0.5"], "--slowdown must be >= 1"),
    ],
)
def test_bad_arguments_are_usage_errors(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        parse_args(argv)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_participants() -> None:
    assert participants("osu_latency", 5) == 2
    assert participants("osu_mbw_mr", 5) == 4  # pairs = ranks // 2; the odd rank idles
    assert participants("osu_allreduce", 5) == 5


def test_patterns_differ_between_consecutive_batches_and_sources() -> None:
    assert len({seed(b) for b in range(-1, 100)}) > 90
    for b in range(200):
        assert seed(b) != seed(b + 1)
        assert len({seed(b, r) for r in range(16)}) == 16  # blocks from 16 ranks all differ


def bench(rank: int = 0, size: int = 2, corrupt: bool = False) -> Bench:
    comm = SimpleNamespace(Get_rank=lambda: rank, Get_size=lambda: size)
    mpi = SimpleNamespace(Wtime=lambda: 0.0)
    return Bench(comm, mpi, argparse.Namespace(corrupt=corrupt))


def test_validation_accepts_the_pattern_and_names_a_wrong_byte() -> None:
    b = bench()
    buf = b.buf("s", 1000)
    b.fill(buf, seed(3, 1))
    b.expect(buf, seed(3, 1), "osu_bw size=1000 batch=3")
    assert b.errors == []
    b.expect(buf, seed(4, 1), "osu_bw size=1000 batch=4")  # last batch's data: stale
    buf[10] ^= 0xFF
    b.expect(buf, seed(3, 1), "osu_bw size=1000 batch=3")
    assert len(b.errors) == 2
    assert b.errors[1] == (
        "osu_bw size=1000 batch=3 rank=0: wrong data at byte 10 "
        f"(got {int(buf[10])}, want {int(buf[10]) ^ 0xFF})"
    )


def test_corrupt_flag_puts_one_wrong_byte_in_every_block() -> None:
    good, bad = bench(), bench(corrupt=True)
    a, c = good.buf("s", 64), bad.buf("s", 64)
    good.fill(a, 7)
    bad.fill(c, 7)
    assert np.flatnonzero(a != c).tolist() == [32]
    bad.expect(c, 7, "x size=64 batch=0")
    assert len(bad.errors) == 1


@pytest.mark.parametrize("ranks", [2, 3, 16])
def test_reduction_sums_never_overflow_a_byte(ranks: int) -> None:
    """Open MPI's AVX reductions saturate 8-bit sums (ompi#8045): no sum may exceed 255."""
    b = bench(size=ranks)
    size, total = 5000, np.zeros(5000, np.uint16)
    seeds = [seed(9, r) for r in range(ranks)]
    for s in seeds:
        part = np.zeros(size, np.uint8)
        b.fill(part, s, b.modulo)
        total += part
    assert total.max() <= 255
    got = total.astype(np.uint8)
    b.expect_sum(got, 0, seeds, "osu_allreduce size=5000 batch=9")
    b.expect_sum(got[100:200], 100, seeds, "osu_reduce_scatter size=5000 batch=9")
    assert b.errors == []
    got[4321] += 1
    b.expect_sum(got, 0, seeds, "osu_allreduce size=5000 batch=9")
    assert "wrong data at byte 4321" in b.errors[0]
    b.expect_sum(got, 0, seeds[:-1], "osu_allreduce size=5000 batch=9")  # a rank's part missing
    assert len(b.errors) == 2


def test_error_lines_are_capped_per_size() -> None:
    b = bench()
    buf = b.buf("r", 8)
    b.wrong = 0
    for batch in range(10):
        b.expect(buf, seed(batch) ^ 1, f"osu_latency size=8 batch={batch}")
    assert len(b.errors) == peer.MAX_ERRORS and b.wrong == 10
