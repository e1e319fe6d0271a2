"""perftest's set over pyverbs: send, RDMA write, RDMA read (latency and bandwidth, RC; send
also over UD) and atomics (compare-and-swap, fetch-and-add), each (benchmark, size) an item.

Statistics are perftest's (stacks/verbs/stats.py): latency t_min / t_typical (median) / t_avg /
t_99 / t_99.9 in µs, half the round trip for SEND and WRITE ping-pongs; bandwidth in MB/s
(2^20 B/s) and message rate in Mpps. One sample per batch feeds the verdict: the batch's
typical latency, or its bandwidth.

On rxe and siw (software devices, e.g. the CI guest under emulation) every benchmark still runs
— a functional pass: it must complete and produce numbers — but its timings are neither judged
nor stored: they are reported with no verdict and the reason (in a paired run, both sides').
Running, checking and judging a point: the `verbs_perftest` fixture (stacks/verbs/fixtures.py).
"""

from __future__ import annotations

import pytest

from pytest_hpccomm.stacks.verbs.fixtures import PerftestPoint
from pytest_hpccomm.stacks.verbs.perf import ATOMIC_SIZE, BENCHMARKS, Benchmark

pytestmark = [pytest.mark.perf, pytest.mark.stack("verbs")]

SWEPT = [b for b in BENCHMARKS if not b.atomic]
ATOMICS = [b for b in BENCHMARKS if b.atomic]


@pytest.mark.parametrize("bench", SWEPT, ids=[b.key for b in SWEPT])
def test_perftest(bench: Benchmark, hpc_size: int, verbs_perftest: PerftestPoint) -> None:
    verbs_perftest(bench, hpc_size)


@pytest.mark.parametrize("bench", ATOMICS, ids=[b.key for b in ATOMICS])
def test_perftest_atomic(bench: Benchmark, verbs_perftest: PerftestPoint) -> None:
    verbs_perftest(bench, ATOMIC_SIZE)
