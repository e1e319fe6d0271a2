"""TF-gRPC-Bench payload schemes: categories, defaults, bias, seeds, the shared byte pattern."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_hpccomm.stacks.grpc.peer.payload import (
    CATEGORIES,
    LARGE,
    MEDIUM,
    POOL_SIZE,
    SCHEMES,
    SMALL,
    PayloadError,
    PayloadSpec,
    buffer_at,
    buffers_for,
    categories_of,
    layout,
    skew_counts,
)

KiB, MiB = 1 << 10, 1 << 20


def test_defaults_are_tf_grpc_bench_s() -> None:
    spec = PayloadSpec()
    assert spec.buffers == 10
    assert layout("uniform-small", spec) == [10] * 10
    assert layout("uniform-medium", spec) == [10 * KiB] * 10
    assert layout("uniform-large", spec) == [MiB] * 10


def test_category_boundaries() -> None:
    assert categories_of([1, KiB - 1, KiB, MiB - 1, MiB, 10 * MiB]) == [
        SMALL,
        SMALL,
        MEDIUM,
        MEDIUM,
        LARGE,
        LARGE,
    ]
    assert (
        CATEGORIES[SMALL][1] < CATEGORIES[MEDIUM][0]
        and CATEGORIES[MEDIUM][1] < CATEGORIES[LARGE][0]
    )


@pytest.mark.parametrize(
    "kw",
    [
        {"small": KiB},
        {"small": 0},
        {"medium": KiB - 1},
        {"medium": MiB},
        {"large": MiB - 1},
        {"large": 10 * MiB + 1},
        {"buffers": 0},
        {"skew": (0.0, 0.0, 0.0)},
        {"skew": (-1.0, 1.0, 1.0)},
    ],
)
def test_sizes_outside_their_category_are_rejected(kw: dict[str, object]) -> None:
    with pytest.raises(PayloadError):
        PayloadSpec(**kw)  # type: ignore[arg-type]


def test_skew_default_is_60_30_10_over_ten_buffers() -> None:
    sizes = layout("skew", PayloadSpec())
    cats = categories_of(sizes)
    assert (cats.count(LARGE), cats.count(MEDIUM), cats.count(SMALL)) == (6, 3, 1)


def test_skew_bias_option() -> None:
    cats = categories_of(layout("skew", PayloadSpec(buffers=20, skew=(10, 30, 60))))
    assert (cats.count(LARGE), cats.count(MEDIUM), cats.count(SMALL)) == (2, 6, 12)


@given(
    buffers=st.integers(1, 1000),
    weights=st.tuples(*[st.floats(0, 100, allow_nan=False)] * 3).filter(lambda w: sum(w) > 0),
)
def test_skew_counts_are_exact_and_proportional(
    buffers: int, weights: tuple[float, float, float]
) -> None:
    counts = skew_counts(buffers, weights)
    assert sum(counts) == buffers
    for c, w in zip(counts, weights):
        assert abs(c - buffers * w / sum(weights)) < 1 + 1e-9


def test_schemes_are_reproducible_from_the_seed() -> None:
    for scheme in SCHEMES:
        assert layout(scheme, PayloadSpec(seed=7)) == layout(scheme, PayloadSpec(seed=7))
    random_layouts = {tuple(layout("random", PayloadSpec(seed=s))) for s in range(10)}
    skew_orders = {tuple(layout("skew", PayloadSpec(seed=s))) for s in range(10)}
    assert len(random_layouts) > 1 and len(skew_orders) > 1  # the seed matters


def test_random_draws_every_category_at_its_configured_size() -> None:
    drawn = {
        n
        for s in range(20)
        for n in layout("random", PayloadSpec(small=100, medium=100 * KiB, large=2 * MiB, seed=s))
    }
    assert drawn == {100, 100 * KiB, 2 * MiB}


def test_unknown_scheme() -> None:
    with pytest.raises(PayloadError, match="unknown scheme"):
        layout("uniform-huge", PayloadSpec())


def test_buffers_follow_the_native_pattern() -> None:
    """bench.h: pool[k] = (k * 131 + 7) % 251, buffer i at offset (i * 4099) % room."""
    for i, n in [(0, 300), (3, 5000), (9, 10 * MiB)]:
        off = (i * 4099) % (POOL_SIZE - n + 1)
        got = bytes(buffer_at(i, n))
        assert got[:300] == bytes(((off + k) * 131 + 7) % 251 for k in range(min(n, 300)))
        assert len(got) == n
    bufs = buffers_for([1000] * 10)
    assert len(set(bufs)) == 10  # no two buffers alike: a swap cannot pass an echo check


def test_buffer_larger_than_the_pool() -> None:
    with pytest.raises(PayloadError):
        buffer_at(0, POOL_SIZE + 1)
