"""Collective ring all-reduce over TensorFlow's gRPC as algbw/busbw vs size, nccl-tests'
definitions: float32 tensors SUM-reduced by CollectiveReduceV2 (communication_hint "ring") on
the session's two collective worker tasks, one tf.function call per all-reduce.

A job: one `allreduce_bench` request to every worker at once (fresh functions, new instance
keys; the tasks are reused), the machine's CPU use read around it (the contention guard).
Jobs are pooled and resampled as units (perf.Sweeps). Time per all-reduce is the workers'
mean per batch, as nccl-tests and OSU report it, the slowest worker's beside it; algbw = bytes
/ time, busbw = algbw * 2 (n-1) / n.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pytest_hpccomm.measure.collective import latency_and_busbw
from pytest_hpccomm.measure.measurement import Measurement, Param
from pytest_hpccomm.measure.pooling import canary_extra, jobs_extra
from pytest_hpccomm.proc import cpu_share
from pytest_hpccomm.stacks.tf.driver import TfTasks
from pytest_hpccomm.stacks.tf.perf import SETTINGS, RecvSweep, metered

BENCHMARK = "tf_allreduce"
# The benchmark's collectives have no timeout_seconds (0): TensorFlow 2.21.0 holds two threads
# per pending collective timeout until it expires (the thread count grows with every
# all-reduce, flat with 0), so a 2 ms all-reduce with a 120 s timeout holds ~10^5 threads and
# the tasks die at the kernel's pid limit. A hang is caught by
# the request's own timeout, which ends the tasks.
TIMEOUT = 0.0
# instance keys of the benchmark's collectives: a key's shape is fixed, so every job and every
# size gets keys of its own (the property tests take theirs from the orchestrator below 10^6)
_KEYS = itertools.count(1_000_000, 100)


# what a knob's sweep runs (wire.KNOBS): a size per regime of the curve, as for Horovod's knobs
KNOB_SIZES = (16, 64 << 10, 4 << 20)
# bytes_per_pack, MultiWorkerMirroredStrategy's packing of a model's gradients: the size split
# into TENSORS tensors, packed as a fraction of the size (0: TensorFlow's default, one pack;
# a quarter: about four packs; 1 B: one all-reduce per tensor)
PACKED = "tf_allreduce_packed"
TENSORS = 16
PACKINGS = {"one_pack": 0.0, "four_packs": 0.25, "per_tensor": 1e-12}
PACK_SIZES = (64 << 10, 4 << 20)
_GROUP_KEYS = itertools.count(10_000, 100)  # the packed launchers' groups (one per size)


def bench_sizes(sizes: Sequence[int]) -> list[int]:
    """The session's sizes that are powers of 4 from 4 B (one float32) up: 11 points in the
    quick profile, 4 B - 4 MiB."""
    return [s for s in sizes if s >= 4 and (s & (s - 1)) == 0 and (s.bit_length() - 1) % 2 == 0]


def packed_job(packing: str) -> Callable[[TfTasks, Sequence[int], str, float], RecvSweep]:
    """The job of the packed benchmark with PACKINGS[packing]."""

    def job(tasks: TfTasks, sizes: Sequence[int], profile: str, slowdown: float) -> RecvSweep:
        # half the batch of the single-tensor sweep: one call is up to 16 collectives
        iters = max(1, SETTINGS.get(profile, SETTINGS["quick"])["iters"] // 2)
        return run_job(
            tasks,
            sizes,
            profile,
            slowdown,
            packing={
                "tensors": TENSORS,
                "packing": PACKINGS[packing],
                "group_key": next(_GROUP_KEYS),
                "iters": iters,
            },
        )

    return job


def run_job(
    tasks: TfTasks,
    sizes: Sequence[int],
    profile: str,
    slowdown: float,
    timeout: float = 900.0,
    packing: Mapping[str, Any] | None = None,
) -> RecvSweep:
    settings = SETTINGS.get(profile, SETTINGS["quick"])
    msg = {
        "op": "allreduce_bench",
        "sizes": list(sizes),
        "slowdown": slowdown,
        "instance_key": next(_KEYS),
        "timeout": TIMEOUT,
        **settings,
        **(packing or {}),
    }
    replies, cpu = metered(
        BENCHMARK,
        tasks,
        lambda: tasks.request_all({t: msg for t in tasks.layout.workers_tasks}, timeout),
    )
    workers = [r["points"] for r in replies.values()]
    points = {}
    for per_worker in zip(*workers):
        batches = zip(*(p["samples"] for p in per_worker))
        means, slowest = zip(*((statistics.fmean(b) * 1e6, max(b) * 1e6) for b in batches))
        point: dict[str, Any] = {
            "samples": list(means),
            "max_samples": list(slowest),
            "warmup": settings["warmup"],
            "valid": all(p["valid"] for p in per_worker),
        }
        if "unstretched" in per_worker[0]:
            point["unstretched"] = [
                statistics.fmean(b) * 1e6 for b in zip(*(p["unstretched"] for p in per_worker))
            ]
        points[int(per_worker[0]["bytes"])] = point
    return RecvSweep(
        points, {**tasks.tf.fingerprint(), "tf_tasks": str(tasks.layout)}, cpu.shares, cpu.disturbed
    )


def measurements(
    sweep: RecvSweep,
    size: int,
    workers: int,
    params: Mapping[str, Param],
    benchmark: str = BENCHMARK,
) -> list[Measurement]:
    """Latency (us per all-reduce, the slowest worker's beside), then busbw (GB/s) with algbw
    beside it."""
    point = sweep.points[size]
    keyed = {**params, "size": size, "ranks": workers}
    samples = [float(x) for x in point["samples"]]
    jobs = jobs_extra(point)
    cpu = cpu_share.evidence_extra(sweep)
    slowest = {"max_rank_latency_us": statistics.median(point["max_samples"])}
    return latency_and_busbw(
        "tf",
        benchmark,
        "allreduce",
        size,
        workers,
        keyed,
        samples,
        int(point["warmup"]),
        {**jobs, **cpu, **slowest, **canary_extra(point)},
        {**cpu, **({"job_sizes": jobs["job_sizes"]} if jobs else {})},
    )
