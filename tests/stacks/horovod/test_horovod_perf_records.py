"""The Horovod sweep's bookkeeping: which sizes it runs, how jobs pool, what it records
(nccl-tests' busbw for allreduce: 2 (n-1)/n x algbw), and the ranks' mean batch with the
slowest rank's beside it."""

from __future__ import annotations

import pytest

from pytest_hpccomm.measure.measurement import UNSTRETCHED
from pytest_hpccomm.stacks.horovod.driver import bench_times
from pytest_hpccomm.stacks.horovod.perf import Sweep, bench_sizes, measurements, merge


def test_sizes_are_powers_of_four_from_four_bytes() -> None:
    assert bench_sizes([0, 1, 2, 4, 8, 16, 32, 64, 1 << 20, 3 << 20, 4 << 20]) == [
        4,
        16,
        64,
        1 << 20,
        4 << 20,
    ]


def test_a_batch_is_the_ranks_mean_as_osu_and_nccl_tests_report_it_slowest_beside() -> None:
    replies = [
        {
            "points": [
                {"bytes": 16, "samples": [1.0, 5.0], "valid": True, "unstretched": [0.5, 2.0]}
            ]
        },
        {
            "points": [
                {"bytes": 16, "samples": [2.0, 3.0], "valid": False, "unstretched": [1.0, 1.0]}
            ]
        },
    ]
    assert bench_times(replies) == [
        {
            "bytes": 16,
            "samples": [1.5, 4.0],
            "max_samples": [2.0, 5.0],
            "valid": False,
            "unstretched": [0.75, 1.5],
        }
    ]


def test_jobs_pool_as_units_and_busbw_follows_nccl_tests() -> None:
    a = Sweep(
        {
            1 << 20: {
                "samples": [100.0, 100.0],
                "max_samples": [110.0, 120.0],
                "warmup": 3,
                "valid": True,
            }
        },
        2,
    )
    b = Sweep(
        {1 << 20: {"samples": [200.0], "max_samples": [210.0], "warmup": 3, "valid": True}}, 2
    )
    pooled = merge([a, b])
    point = pooled.points[1 << 20]
    assert point["samples"] == [100.0, 100.0, 200.0] and point["job_sizes"] == [2, 1]
    assert point["warmup"] == 6 and point["valid"]
    latency, busbw = measurements(pooled, 1 << 20, {"controller": "gloo"})
    assert latency.unit == "us" and latency.samples == (100.0, 100.0, 200.0)
    assert latency.params["ranks"] == 2 and latency.extra["job_sizes"] == [2, 1]
    assert latency.extra["max_rank_latency_us"] == 120.0  # the pooled slowest ranks' median
    # 1 MiB in 100 us: algbw 10.49 GB/s; 2 ranks: busbw = algbw x 2 (2-1)/2
    assert busbw.samples[0] == pytest.approx((1 << 20) / 100e-6 / 1e9)
    assert busbw.extra["busbw_factor"] == 1.0 and busbw.params["metric"] == "busbw"


def test_a_canary_point_records_its_own_work_pooled_over_jobs() -> None:
    """The canary's unstretched work pools as the samples do; the latency record carries its
    median (baselines/canary.py reads it), a plain point none."""
    a = Sweep(
        {
            64: {
                "samples": [30.0, 30.0],
                "max_samples": [31.0, 31.0],
                "unstretched": [10.0, 20.0],
                "warmup": 1,
                "valid": True,
            }
        },
        2,
    )
    b = Sweep(
        {
            64: {
                "samples": [60.0],
                "max_samples": [61.0],
                "unstretched": [40.0],
                "warmup": 1,
                "valid": True,
            }
        },
        2,
    )
    pooled = merge([a, b])
    assert pooled.points[64]["unstretched"] == [10.0, 20.0, 40.0]
    latency, _ = measurements(pooled, 64, {"controller": "gloo"})
    assert latency.extra[UNSTRETCHED] == 20.0
    plain = Sweep({64: {"samples": [1.0], "max_samples": [1.0], "warmup": 1, "valid": True}}, 2)
    assert UNSTRETCHED not in measurements(plain, 64, {"controller": "gloo"})[0].extra
