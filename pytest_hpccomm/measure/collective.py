"""A collective's point as the field reports it, for stacks that time one all-reduce per
sample (Horovod, TensorFlow): latency in us per operation, then nccl-tests' busbw in GB/s
with its algbw and factor beside it (metrics.py has the definitions)."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_hpccomm.measure import metrics
from pytest_hpccomm.measure.measurement import Direction, Measurement, Param


def latency_and_busbw(
    stack: str,
    benchmark: str,
    collective: str,
    size: int,
    ranks: int,
    params: Mapping[str, Param],
    samples_us: Sequence[float],
    warmup: int,
    latency_extra: Mapping[str, Any],
    busbw_extra: Mapping[str, Any],
) -> list[Measurement]:
    """[latency, busbw] of one size: busbw = algbw x busbw_factor(collective, ranks), algbw =
    size / latency; `params` gain metric=busbw on the second."""
    factor = metrics.busbw_factor(collective, ranks)
    algbw = [metrics.nccl_algbw_gb_s(size, us * 1e-6) for us in samples_us]
    return [
        Measurement(
            stack=stack,
            benchmark=benchmark,
            params=dict(params),
            samples=tuple(samples_us),
            unit=metrics.UNIT_LATENCY,
            direction=Direction.LOWER_IS_BETTER,
            warmup_discarded=warmup,
            metric="latency",
            extra=dict(latency_extra),
        ),
        Measurement(
            stack=stack,
            benchmark=benchmark,
            params={**params, "metric": "busbw"},
            samples=tuple(a * factor for a in algbw),
            unit=metrics.UNIT_NCCL_BANDWIDTH,
            direction=Direction.HIGHER_IS_BETTER,
            warmup_discarded=warmup,
            metric="busbw",
            extra={"algbw_gb_s": statistics.median(algbw), "busbw_factor": factor, **busbw_extra},
        ),
    ]
