"""The field's definitions (OSU, nccl-tests) as known answers."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_hpccomm.measure import metrics as M


def test_osu_latency_is_half_round_trip_in_us() -> None:
    # 10 000 ping-pongs in 0.06 s: 6 us per round trip, 3 us one way.
    assert M.osu_latency_us(0.06, 10_000) == pytest.approx(3.0)


def test_osu_bandwidth_uses_decimal_megabytes() -> None:
    # 1 MiB messages, window 64, 100 iterations in 1 s: 6710.8864 MB/s (10^6, not 2^20).
    assert M.osu_bandwidth_mb_s(1 << 20, 64, 100, 1.0) == pytest.approx(6710.8864)
    assert M.osu_bandwidth_mb_s(0, 64, 100, 1.0) == 0.0


def test_osu_bibw_counts_both_directions() -> None:
    assert M.osu_bibw_mb_s(8192, 64, 100, 0.5) == pytest.approx(
        2 * M.osu_bandwidth_mb_s(8192, 64, 100, 0.5)
    )


def test_osu_multi_pair_bandwidth_and_message_rate() -> None:
    # 4 pairs, window 64, 100 iterations, slowest pair 0.01 s.
    assert M.osu_message_rate(4, 64, 100, 0.01) == pytest.approx(2_560_000)
    bw = M.osu_multi_bandwidth_mb_s(8, 4, 64, 100, 0.01)
    # osu_mbw_mr prints rate = 1e6 * bw / size: the two must agree.
    assert 1e6 * bw / 8 == pytest.approx(M.osu_message_rate(4, 64, 100, 0.01))


def test_nccl_algbw_in_decimal_gigabytes() -> None:
    assert M.nccl_algbw_gb_s(1_000_000_000, 0.5) == pytest.approx(2.0)


@pytest.mark.parametrize(
    ("collective", "n", "factor"),
    [
        ("allreduce", 8, 2 * 7 / 8),
        ("all_reduce_perf", 2, 1.0),
        ("AllReduce", 1, 0.0),
        ("allgather", 4, 3 / 4),
        ("reduce_scatter", 4, 3 / 4),
        ("alltoall", 16, 15 / 16),
        ("gather", 4, 3 / 4),
        ("scatter", 2, 1 / 2),
        ("broadcast", 8, 1.0),
        ("bcast", 8, 1.0),
        ("reduce", 8, 1.0),
        ("sendrecv", 2, 1.0),
    ],
)
def test_busbw_factors(collective: str, n: int, factor: float) -> None:
    assert M.busbw_factor(collective, n) == pytest.approx(factor)
    assert M.nccl_busbw_gb_s(10.0, collective, n) == pytest.approx(10.0 * factor)


def test_unknown_collective_and_bad_ranks_raise() -> None:
    with pytest.raises(ValueError, match="no busbw factor for collective 'scan'"):
        M.busbw_factor("scan", 4)
    with pytest.raises(ValueError):
        M.busbw_factor("allreduce", 0)


@pytest.mark.parametrize(
    "call",
    [
        lambda: M.osu_latency_us(0.0, 10),
        lambda: M.osu_latency_us(1.0, 0),
        lambda: M.osu_bandwidth_mb_s(-1, 64, 10, 1.0),
        lambda: M.osu_bandwidth_mb_s(8, 0, 10, 1.0),
        lambda: M.nccl_algbw_gb_s(8, 0.0),
        lambda: M.osu_message_rate(0, 64, 10, 1.0),
    ],
)
def test_non_positive_inputs_raise(call: object) -> None:
    with pytest.raises(ValueError):
        call()  # type: ignore[operator]


@given(st.integers(min_value=2, max_value=4096))
def test_allreduce_factor_is_twice_allgather(n: int) -> None:
    assert M.busbw_factor("allreduce", n) == pytest.approx(2 * M.busbw_factor("allgather", n))
    assert 0 < M.busbw_factor("allgather", n) < 1 <= M.busbw_factor("allreduce", n) < 2
