"""RecvTensor latency and bandwidth vs tensor size, TF-gRPC-Bench's point-to-point definitions:
a uint8 variable on the ps task read by the worker, one tf.function call per read, whose graph
TensorFlow partitions so the tensor crosses tasks as a Send/Recv pair (the RecvTensor RPC).

A job: one `recv_bench` request to the session's worker task (fresh variables and functions;
the tasks themselves are reused: a task takes 20-35 s to start), the machine's CPU use read
around it (the contention guard: the tasks are this process's descendants, so their time is
ours). Jobs are pooled and resampled as units like every other stack's (measure/pooling).
Latency: mean seconds per read over a batch, as OSU's osu_latency reports it; bandwidth:
bytes per read / that time, MB/s (10^6, TF-gRPC-Bench's unit).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pytest_hpccomm.measure.measurement import Direction, Measurement, Param
from pytest_hpccomm.measure.pooling import canary_extra, jobs_extra, pool_point
from pytest_hpccomm.proc import cpu_share
from pytest_hpccomm.stacks.contract import SessionStore
from pytest_hpccomm.stacks.tf.driver import TfError, TfTasks

R = TypeVar("R")

BENCHMARK = "tf_recv_tensor"
SETTINGS = {
    "quick": {"warmup": 5, "iters": 20, "batches": 8},
    "full": {"warmup": 20, "iters": 50, "batches": 20},
}


class SweepFailed(Exception):
    """A job of the sweep could not run (one line; every item of the sweep fails with it)."""


def bench_sizes(sizes: Sequence[int]) -> list[int]:
    """The session's sizes that are powers of 4 (1 B - 4 MiB in the quick profile: 12 points):
    a read costs a function call and an RPC, and 2 cores run the sweep in seconds."""
    return [s for s in sizes if s >= 1 and (s & (s - 1)) == 0 and (s.bit_length() - 1) % 2 == 0]


@dataclass
class RecvSweep:
    """A job's (or pooled jobs') points of one TensorFlow benchmark."""

    points: dict[int, dict[str, Any]]  # bytes -> {"samples" (us/op), "warmup", "valid", ..}
    fingerprint: dict[str, Any] = field(default_factory=dict)
    cpu: tuple[dict[str, float], ...] = ()  # per job: who used the cores (cpu_share.py)
    disturbed: str = ""  # why a job's timings are not its own ("" when the cores were ours)
    reruns: int = 0  # jobs run again because another process shared the cores


def metered(benchmark: str, tasks: TfTasks, ask: Callable[[], R]) -> tuple[R, cpu_share.JobsCpu]:
    """One job's requests to the tasks (`ask`) under the contention guard's meter; a task's
    error fails the job (SweepFailed) naming the benchmark and the tasks."""
    meter = cpu_share.CpuMeter()
    try:
        reply = ask()
    except TfError as exc:
        raise SweepFailed(f"{benchmark} job ({tasks.describe()}): {exc}") from None
    return reply, cpu_share.of_jobs([meter.stop()])


def run_job(
    tasks: TfTasks, sizes: Sequence[int], profile: str, slowdown: float, timeout: float = 900.0
) -> RecvSweep:
    """One RecvTensor job: worker:0 reads ps:0's variables."""
    settings = SETTINGS.get(profile, SETTINGS["quick"])
    msg = {"op": "recv_bench", "from": "ps:0", "sizes": list(sizes), "slowdown": slowdown}
    reply, cpu = metered(
        BENCHMARK, tasks, lambda: tasks.request("worker:0", {**msg, **settings}, timeout)
    )
    points = {}
    for p in reply["points"]:
        point = {
            "samples": [s * 1e6 for s in p["samples"]],
            "warmup": settings["warmup"],
            "valid": bool(p["valid"]),
        }
        if p.get("read"):  # what the check read instead (the peer's what_was_read)
            point["read"] = f"{tasks.tf.version}: {p['read']}"
        if "unstretched" in p:
            point["unstretched"] = [s * 1e6 for s in p["unstretched"]]
        points[int(p["bytes"])] = point
    return RecvSweep(
        points, {**tasks.tf.fingerprint(), "tf_tasks": str(tasks.layout)}, cpu.shares, cpu.disturbed
    )


def merge(sweeps: Sequence[RecvSweep]) -> RecvSweep:
    """The jobs' batches pooled per size (job_sizes mark where each job's batches end)."""
    first = sweeps[0]
    points = {
        size: {
            **pool_point(
                [s.points[size] for s in sweeps], ["samples", "unstretched", "max_samples"]
            ),
            "valid": all(s.points[size]["valid"] for s in sweeps),
            **next(
                ({"read": s.points[size]["read"]} for s in sweeps if "read" in s.points[size]), {}
            ),
        }
        for size in first.points
    }
    return RecvSweep(
        points,
        first.fingerprint,
        tuple(c for s in sweeps for c in s.cpu),
        next((s.disturbed for s in sweeps if s.disturbed), ""),
        sum(s.reruns for s in sweeps),
    )


JobFn = Callable[[TfTasks, Sequence[int], str, float], RecvSweep]


class Sweeps(SessionStore[str, RecvSweep]):
    """Session cache of one benchmark (`job` runs one of its jobs on the tasks): one pooled
    sweep per placement (contract.SessionStore). In a paired run every round's job runs on
    tasks started for it (`fresh`, closed after it); the session's tasks otherwise."""

    def __init__(
        self,
        job: JobFn,
        tasks_for: Callable[[str], TfTasks],
        sizes: Sequence[int],
        profile: str,
        slowdown: float,
        repeats: int,
        max_repeats: int,
        base: Sweeps | None = None,
        fresh: Callable[[str], TfTasks] | None = None,
    ) -> None:
        def one(placement: str, tasks: TfTasks | None = None) -> RecvSweep:
            on = tasks if tasks is not None else tasks_for(placement)
            return job(on, list(sizes), profile, slowdown)

        super().__init__(one, merge, repeats, max_repeats, (SweepFailed,), base)
        self.fresh = fresh  # new started tasks per paired job

    def round_job(self, key: str, *context: Any) -> RecvSweep:
        if self.fresh is None:
            return self.one_job(key)
        tasks = self.fresh(key)
        try:
            return self.one_job(key, tasks)
        finally:
            tasks.close()


def measurements(sweep: RecvSweep, size: int, params: Mapping[str, Param]) -> list[Measurement]:
    """Latency (us per read), then bandwidth (MB/s) of one size."""
    point = sweep.points[size]
    keyed = {**params, "size": size}
    samples = [float(x) for x in point["samples"]]
    jobs = jobs_extra(point)
    cpu = cpu_share.evidence_extra(sweep)
    return [
        Measurement(
            stack="tf",
            benchmark=BENCHMARK,
            params=keyed,
            samples=tuple(samples),
            unit="us",
            direction=Direction.LOWER_IS_BETTER,
            warmup_discarded=int(point["warmup"]),
            metric="latency",
            extra={**jobs, **cpu, **canary_extra(point)},
        ),
        Measurement(
            stack="tf",
            benchmark=BENCHMARK,
            params={**keyed, "metric": "bandwidth"},
            samples=tuple(size / us for us in samples),
            unit="MB/s",
            direction=Direction.HIGHER_IS_BETTER,
            warmup_discarded=int(point["warmup"]),
            metric="bandwidth",
            extra={**cpu, **({"job_sizes": jobs["job_sizes"]} if jobs else {})},
        ),
    ]
