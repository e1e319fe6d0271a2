"""Parameter-server throughput over TensorFlow's gRPC: a ParameterServerStrategy's chief
schedules steps on N workers through its ClusterCoordinator; a step pulls each of the
variables (on M ps tasks, round robin) to its worker and pushes an update of the same size
back. The rate is steps per second over all workers (TF-gRPC-Bench's PS throughput counts RPCs
the same way: the cluster's, not one worker's), per batch of steps scheduled at once and
joined; the bytes moved per second ride along in extra.

A job: one `ps_bench` request to the session's chief:0 (fresh variables and functions; the
tasks are reused), pooled like the other benchmarks (perf.Sweeps).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_hpccomm.measure.measurement import Direction, Measurement, Param
from pytest_hpccomm.measure.pooling import canary_extra, jobs_extra
from pytest_hpccomm.proc import cpu_share
from pytest_hpccomm.stacks.tf.driver import TfTasks
from pytest_hpccomm.stacks.tf.perf import RecvSweep, metered

BENCHMARK = "tf_ps_throughput"
VARIABLES = 4  # per step: two on each of the two ps tasks
SIZES = (1 << 10, 256 << 10, 4 << 20)  # bytes per variable: small, middle, large
SETTINGS = {
    "quick": {"warmup": 5, "iters": 10, "batches": 8},
    "full": {"warmup": 10, "iters": 20, "batches": 20},
}


def bench_sizes(sizes: Sequence[int]) -> list[int]:
    """The session's sizes among SIZES (a step moves 2 x VARIABLES of them)."""
    return [s for s in SIZES if s in set(sizes)]


def run_job(
    tasks: TfTasks, sizes: Sequence[int], profile: str, slowdown: float, timeout: float = 900.0
) -> RecvSweep:
    settings = SETTINGS.get(profile, SETTINGS["quick"])
    msg = {"op": "ps_bench", "sizes": list(sizes), "variables": VARIABLES, "slowdown": slowdown}
    reply, cpu = metered(
        BENCHMARK, tasks, lambda: tasks.request("chief:0", {**msg, **settings}, timeout)
    )
    points = {}
    for p in reply["points"]:
        points[int(p["bytes"])] = {
            "samples": list(p["samples"]),
            "warmup": settings["warmup"],
            "valid": bool(p["valid"]),
            "devices": p["devices"],
            **({"unstretched": p["unstretched"]} if "unstretched" in p else {}),
        }
    return RecvSweep(
        points, {**tasks.tf.fingerprint(), "tf_tasks": str(tasks.layout)}, cpu.shares, cpu.disturbed
    )


def measurements(sweep: RecvSweep, size: int, params: Mapping[str, Param]) -> list[Measurement]:
    """Steps per second over the cluster (higher is better), MB/s moved beside."""
    point = sweep.points[size]
    samples = [float(x) for x in point["samples"]]
    extra: dict[str, Any] = {
        "MB/s": statistics.median(samples) * 2 * VARIABLES * size / 1e6,
        "variables": VARIABLES,
        "devices": point["devices"],
    }
    extra |= jobs_extra(point) | cpu_share.evidence_extra(sweep) | canary_extra(point)
    return [
        Measurement(
            stack="tf",
            benchmark=BENCHMARK,
            params={**params, "size": size},
            samples=tuple(samples),
            unit="steps/s",
            direction=Direction.HIGHER_IS_BETTER,
            warmup_discarded=int(point["warmup"]),
            metric="rate",
            extra=extra,
        )
    ]
