"""Known answers of the all-reduce records Horovod and TensorFlow write (measure/collective.py):
nccl-tests' algbw = S / t and busbw = algbw x 2(n-1)/n for all-reduce."""

from __future__ import annotations

import pytest

from pytest_hpccomm.measure.collective import latency_and_busbw
from pytest_hpccomm.measure.measurement import Direction


def test_four_ranks_reducing_4_mb_in_a_millisecond() -> None:
    latency, busbw = latency_and_busbw(
        "horovod", "hvd_allreduce", "allreduce", 4_000_000, 4, {"size": 4_000_000},
        [1000.0, 2000.0, 1000.0], 2, {"job_sizes": [3]}, {"cpu": "quiet"},
    )  # fmt: skip
    assert (latency.metric, latency.unit, latency.direction) == (
        "latency",
        "us",
        Direction.LOWER_IS_BETTER,
    )
    assert latency.samples == (1000.0, 2000.0, 1000.0) and latency.extra == {"job_sizes": [3]}
    assert (busbw.metric, busbw.unit, busbw.direction) == (
        "busbw",
        "GB/s",
        Direction.HIGHER_IS_BETTER,
    )
    assert busbw.params == {"size": 4_000_000, "metric": "busbw"}
    # 4 MB in 1 ms: algbw 4 GB/s; 2(n-1)/n = 1.5 at n = 4
    assert busbw.samples == pytest.approx((6.0, 3.0, 6.0), rel=1e-12)
    assert busbw.extra["algbw_gb_s"] == pytest.approx(4.0, rel=1e-12)
    assert busbw.extra["busbw_factor"] == 1.5 and busbw.extra["cpu"] == "quiet"
    assert latency.warmup_discarded == busbw.warmup_discarded == 2
