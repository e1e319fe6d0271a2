"""perftest's set over pyverbs: send, RDMA write, RDMA read (latency and bandwidth, RC; send
also over UD) and atomics (compare-and-swap, fetch-and-add), each (benchmark, size) an item.

Statistics are perftest's (stacks/verbs/stats.py): latency t_min / t_typical (median) / t_avg /
t_99 / t_99.9 in µs, half the round trip for SEND and WRITE ping-pongs; bandwidth in MB/s
(2^20 B/s) and message rate in Mpps. One sample per batch feeds the verdict: the batch's
typical latency, or its bandwidth.

On rxe and siw (software devices, e.g. the CI guest under emulation) every benchmark still runs
— a functional pass: it must complete and produce numbers — but its timings are neither judged
nor stored: they are put into the JUnit properties with hpccomm_verdict = disabled.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from pytest_hpccomm.measure.measurement import Measurement
from pytest_hpccomm.stacks.verbs.driver import PeerError, VerbsCallError
from pytest_hpccomm.stacks.verbs.perf import BENCHMARKS, Benchmark, BenchPoint, BenchRunner
from pytest_hpccomm.stacks.verbs.plugin import note_emulated

pytestmark = [pytest.mark.perf, pytest.mark.stack("verbs")]

SWEPT = [b for b in BENCHMARKS if not b.atomic]
ATOMICS = [b for b in BENCHMARKS if b.atomic]


def run_point(bench: Benchmark, size: int, runner: BenchRunner, pair: Any) -> BenchPoint:
    why = bench.needs(pair.info)
    if why:
        pytest.skip(why)
    mtu = pair.info.get("active_mtu") or 0
    if bench.qp_type == "UD" and size > mtu:
        pytest.skip(f"UD messages are limited to the path MTU ({mtu} B on {pair.info['device']})")
    try:
        point = runner.run(bench, size)
    except (VerbsCallError, PeerError) as exc:
        pytest.fail(f"{bench.key} size={size}: {exc}", pytrace=False)
    assert len(point.samples) == runner.settings.batches
    bad = [s for s in point.samples if not (math.isfinite(s) and s > 0)]
    assert not bad, f"{bench.key} size={size}: non-positive or infinite samples {bad}"
    return point


def report(point: BenchPoint, emulated: bool, hpc_record: Any, record_property: Any,
           request: pytest.FixtureRequest, pair: Any) -> None:
    bench = point.bench
    metric, unit, direction = bench.metric
    extra = {"iterations_per_sample": point.iterations, **point.stats}
    params: dict[str, Any] = {"size": point.size, "connection": bench.qp_type}
    if bench.atomic:
        params["atomic"] = bench.atomic
    if emulated:
        for name, value in sorted(extra.items()):
            record_property(f"hpccomm_{name}", value)
        record_property("hpccomm_samples", ",".join(f"{s:.6g}" for s in point.samples))
        record_property("hpccomm_verdict",
                        f"disabled: emulated device {pair.info['device']} (software RDMA: "
                        "timings say nothing about a fabric)")
        note_emulated(request.config, request.node.nodeid)
        return
    hpc_record(Measurement(stack="verbs", benchmark=bench.name, params=params,
                           samples=tuple(point.samples), unit=unit, direction=direction,
                           warmup_discarded=point.warmup, metric=metric, extra=extra),
               {"verbs_device": pair.info["device"], "verbs_fw": pair.info.get("fw_ver")})


@pytest.mark.parametrize("bench", SWEPT, ids=[b.key for b in SWEPT])
def test_perftest(bench: Benchmark, hpc_size: int, verbs_bench: BenchRunner, verbs_pair: Any,
                  verbs_emulated: bool, hpc_record: Any, record_property: Any,
                  request: pytest.FixtureRequest) -> None:
    point = run_point(bench, hpc_size, verbs_bench, verbs_pair)
    report(point, verbs_emulated, hpc_record, record_property, request, verbs_pair)


@pytest.mark.parametrize("bench", ATOMICS, ids=[b.key for b in ATOMICS])
def test_perftest_atomic(bench: Benchmark, verbs_bench: BenchRunner, verbs_pair: Any,
                         verbs_emulated: bool, hpc_record: Any, record_property: Any,
                         request: pytest.FixtureRequest) -> None:
    point = run_point(bench, 8, verbs_bench, verbs_pair)
    report(point, verbs_emulated, hpc_record, record_property, request, verbs_pair)
