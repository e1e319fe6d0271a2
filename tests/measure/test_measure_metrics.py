"""The field's definitions (OSU, nccl-tests) as known answers."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_hpccomm.measure import metrics as M


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


def test_unknown_collective_and_bad_ranks_raise() -> None:
    with pytest.raises(ValueError, match="no busbw factor for collective 'scan'"):
        M.busbw_factor("scan", 4)
    with pytest.raises(ValueError):
        M.busbw_factor("allreduce", 0)


@pytest.mark.parametrize(
    "call",
    [
        lambda: M.nccl_algbw_gb_s(8, 0.0),
        lambda: M.nccl_algbw_gb_s(-1, 1.0),
    ],
)
def test_non_positive_inputs_raise(call: object) -> None:
    with pytest.raises(ValueError):
        call()  # type: ignore[operator]


@given(st.integers(min_value=2, max_value=4096))
def test_allreduce_factor_is_twice_allgather(n: int) -> None:
    assert M.busbw_factor("allreduce", n) == pytest.approx(2 * M.busbw_factor("allgather", n))
    assert 0 < M.busbw_factor("allgather", n) < 1 <= M.busbw_factor("allreduce", n) < 2
