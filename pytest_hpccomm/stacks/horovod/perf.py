"""hvd.allreduce latency and bus bandwidth vs message size, nccl-tests' definitions, pooled
from independent jobs like every other stack (measure/pooling.JobPool).

A job: fresh peers for (controller, placement, knobs), one `bench` request (the peer times
batches of float32 allreduces per size, warm-up apart, the canary stretching each batch), the
peers closed, the machine's CPU use read around it (the contention guard: a job that shared
the cores with another process is run again, else kept marked, as for MPI and gRPC). Time per
operation is the ranks' mean per batch, as nccl-tests (`-a 1`, its default) and OSU ("Avg
Latency") report it, so the OSU allreduce beside it is the same statistic; the slowest rank's
is kept beside (`max_rank_latency_us`, as OSU's -f). algbw = bytes / time, busbw = algbw *
2 (n-1) / n. The knobs users tune are Horovod's own variables (fusion threshold, cycle time),
recorded as parameters.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeAlias, TypeVar

from pytest_hpccomm.measure.collective import latency_and_busbw
from pytest_hpccomm.measure.measurement import Direction, Measurement, Param
from pytest_hpccomm.measure.pooling import canary_extra, jobs_extra, pool_point
from pytest_hpccomm.proc import cpu_share
from pytest_hpccomm.report.beside import beside
from pytest_hpccomm.stacks.contract import SessionStore
from pytest_hpccomm.stacks.horovod.driver import (
    HorovodError,
    HorovodPeers,
    PeerLost,
    Site,
    bench_times,
)
from pytest_hpccomm.stacks.horovod.env import HorovodEnv

BENCHMARK = "hvd_allreduce"
# name -> Horovod's variables; "default" is Horovod's own (fusion 128 MiB, cycle 1 ms)
KNOBS: dict[str, dict[str, str]] = {
    "default": {},
    "cycle_5ms": {"HOROVOD_CYCLE_TIME": "5"},
    "no_fusion": {"HOROVOD_FUSION_THRESHOLD": "0"},
}
KNOB_SIZES = (16, 64 << 10, 4 << 20)  # what a knob's sweep runs: a size per regime of the curve
SETTINGS = {
    "quick": {"warmup": 3, "iters": 10, "batches": 8},
    "full": {"warmup": 10, "iters": 20, "batches": 20},
}


class SweepFailed(Exception):
    """A job of the sweep could not run (one line; every item of the sweep fails with it)."""


def bench_sizes(sizes: Sequence[int]) -> list[int]:
    """The session's sizes Horovod can reduce as float32 (4 B and up), powers of 4 only: every
    size costs cycle-time-bound operations, and 2 cores run a quick profile in minutes."""
    return [s for s in sizes if s >= 4 and (s & (s - 1)) == 0 and (s.bit_length() - 1) % 2 == 0]


@dataclass
class Sweep:
    points: dict[int, dict[str, Any]]  # bytes -> {"samples" (us/op), "warmup", "valid"}
    ranks: int
    fingerprint: dict[str, Any] = field(default_factory=dict)
    mpi: str = ""  # the MPI stack's name of the MPI Horovod links (openmpi, ..., system)
    cpu: tuple[dict[str, float], ...] = ()  # per job: who used the cores (cpu_share.py)
    disturbed: str = ""  # why a job's timings are not its own ("" when the cores were ours)
    reruns: int = 0  # jobs run again because another process shared the cores


def run_job(
    hvd: HorovodEnv,
    controller: str,
    placement: str,
    site: Site,
    sizes: Sequence[int],
    profile: str,
    slowdown: float,
    knobs: str,
    timeout: float = 900.0,
) -> Sweep:
    replies, ranks, cpu = _one_job(
        HorovodPeers(hvd, controller, placement, site, env=KNOBS[knobs]),
        {
            "op": "bench",
            "sizes": list(sizes),
            "slowdown": slowdown,
            **SETTINGS.get(profile, SETTINGS["quick"]),
        },
        timeout,
        f"{BENCHMARK} job ({controller}, {placement}, {knobs})",
    )
    warmup = int(SETTINGS.get(profile, SETTINGS["quick"])["warmup"])
    points = {
        int(p["bytes"]): {
            "samples": [s * 1e6 for s in p["samples"]],
            "max_samples": [s * 1e6 for s in p["max_samples"]],
            "warmup": warmup,
            "valid": bool(p["valid"]),
            **({"unstretched": [s * 1e6 for s in p["unstretched"]]} if "unstretched" in p else {}),
        }
        for p in bench_times(replies)
    }
    return Sweep(points, ranks, hvd.fingerprint(), hvd.mpi_name, cpu.shares, cpu.disturbed)


def _one_job(
    peers: HorovodPeers, request: Mapping[str, Any], timeout: float, what: str
) -> tuple[list[Any], int, cpu_share.JobsCpu]:
    """Every rank's reply to `request` from fresh peers (closed after), their number, and
    who used the cores meanwhile (read once the ranks are reaped: their time is ours then)."""
    meter = cpu_share.CpuMeter()
    try:
        peers.start()
        replies, ranks = peers.request(request, timeout), peers.size
        peers.close()  # reaped first: their CPU time is then ours, not a neighbour's
        return replies, ranks, cpu_share.of_jobs([meter.stop()])
    except (HorovodError, PeerLost) as exc:
        raise SweepFailed(f"{what}: {exc}") from None
    finally:
        peers.close()


def merge(sweeps: Sequence[Sweep]) -> Sweep:
    """The jobs' batches pooled per size (job_sizes mark where each job's batches end)."""
    first = sweeps[0]
    points = {
        size: {
            **pool_point(
                [s.points[size] for s in sweeps], ["samples", "max_samples", "unstretched"]
            ),
            "valid": all(s.points[size]["valid"] for s in sweeps),
        }
        for size in first.points
    }
    return Sweep(points, first.ranks, first.fingerprint, first.mpi, *cpu_share.pooled(sweeps))


def measurements(sweep: Sweep, size: int, params: Mapping[str, Any]) -> list[Measurement]:
    """Latency (us per allreduce), then busbw (GB/s) with algbw beside it; each names the OSU
    allreduce of the same MPI, placement, ranks and size to be read beside (the report shows
    Horovod's overhead over raw MPI as their ratio)."""
    point = sweep.points[size]
    keyed = {**params, "size": size, "ranks": sweep.ranks}
    osu: dict[str, Param] = {
        "mpi": sweep.mpi,
        "placement": str(params.get("placement")),
        "ranks": sweep.ranks,
        "size": size,
    }
    label = f"Horovod ({params.get('controller')}) / OSU allreduce ({sweep.mpi})"
    over_mpi = beside("mpi", "osu_allreduce", osu, label) if sweep.mpi else {}
    samples = [float(x) for x in point["samples"]]
    jobs = jobs_extra(point)
    cpu = cpu_share.evidence_extra(sweep)
    slowest = (
        {"max_rank_latency_us": statistics.median(point["max_samples"])}
        if point.get("max_samples")
        else {}
    )
    return latency_and_busbw(
        "horovod",
        BENCHMARK,
        "allreduce",
        size,
        sweep.ranks,
        keyed,
        samples,
        int(point["warmup"]),
        {**jobs, **over_mpi, **cpu, **slowest, **canary_extra(point)},
        {**over_mpi, **cpu, **({"job_sizes": jobs["job_sizes"]} if jobs else {})},
    )


# -- the synthetic training benchmark ---------------------------------------------------------

SYNTHETIC = "hvd_synthetic"
TIMELINE = "hvd_timeline"
TRAIN = {  # model -> the benchmark's settings (Horovod's defaults: batch 32, 10 x 10, 10 warm-up)
    "small_cnn": {"batch_size": 32, "warmup": 5, "batches_per_iter": 5, "iters": 8},
    # ~13 s per step of batch 32 on one core: 4 steps per job keep the full profile in minutes
    "resnet50": {"batch_size": 32, "warmup": 1, "batches_per_iter": 1, "iters": 3},
}


@dataclass
class TrainSweep:
    images: list[float]  # images/s per rank, one per iteration (mean over ranks)
    steps: list[dict[str, float]]  # rank 0's timeline: ms per step, one per iteration
    ranks: int
    warmup: int
    job_sizes: list[int] = field(default_factory=list)
    fingerprint: dict[str, Any] = field(default_factory=dict)
    cpu: tuple[dict[str, float], ...] = ()  # as Sweep's
    disturbed: str = ""
    reruns: int = 0


def run_train_job(
    hvd: HorovodEnv,
    controller: str,
    placement: str,
    site: Site,
    model: str,
    slowdown: float,
    scratch: Path,
    timeout: float = 1800.0,
) -> TrainSweep:
    path = scratch / f"timeline-{controller}-{placement}-{model}-{time.time_ns()}.json"
    try:
        replies, ranks, cpu = _one_job(
            HorovodPeers(hvd, controller, placement, site, env={"HOROVOD_TIMELINE": "DYNAMIC"}),
            {
                "op": "train",
                "model": model,
                "slowdown": slowdown,
                "timeline": str(path),
                **TRAIN[model],
            },
            timeout,
            f"{SYNTHETIC} job ({controller}, {placement}, {model})",
        )
    finally:
        path.unlink(missing_ok=True)
    if not all(r["valid"] for r in replies):
        raise SweepFailed(
            f"{SYNTHETIC} ({controller}, {placement}, {model}): the ranks' "
            "parameters differ after training (the optimizer's allreduce is wrong)"
        )
    images = [statistics.fmean(it) for it in zip(*(r["images_per_s"] for r in replies))]
    return TrainSweep(
        images,
        list(replies[0]["timeline"]),
        ranks,
        int(TRAIN[model]["warmup"]),
        [len(images)],
        hvd.fingerprint(),
        cpu.shares,
        cpu.disturbed,
    )


def merge_train(sweeps: Sequence[TrainSweep]) -> TrainSweep:
    first = sweeps[0]
    return TrainSweep(
        [x for s in sweeps for x in s.images],
        [x for s in sweeps for x in s.steps],
        first.ranks,
        sum(s.warmup for s in sweeps),
        [n for s in sweeps for n in s.job_sizes],
        first.fingerprint,
        *cpu_share.pooled(sweeps),
    )


def train_measurements(sweep: TrainSweep, params: Mapping[str, Param]) -> list[Measurement]:
    """images/s per rank (higher is better); then, from the timeline, negotiation and
    reduction milliseconds per step (lower is better)."""
    keyed = {**params, "ranks": sweep.ranks}
    jobs = {"job_sizes": sweep.job_sizes, **cpu_share.evidence_extra(sweep)}
    out = [
        Measurement(
            stack="horovod",
            benchmark=SYNTHETIC,
            params=keyed,
            samples=tuple(sweep.images),
            unit="img/s",
            direction=Direction.HIGHER_IS_BETTER,
            warmup_discarded=sweep.warmup,
            metric="images_per_s_per_rank",
            extra={**jobs, "images_per_s_total": statistics.median(sweep.images) * sweep.ranks},
        )
    ]
    for part in ("negotiation", "reduction"):
        out.append(
            Measurement(
                stack="horovod",
                benchmark=TIMELINE,
                params={**keyed, "phase": part},
                samples=tuple(s[f"{part}_ms"] for s in sweep.steps),
                unit="ms",
                direction=Direction.LOWER_IS_BETTER,
                warmup_discarded=sweep.warmup,
                metric=f"{part}_ms_per_step",
                extra=dict(jobs),
            )
        )
    return out


class PooledSweep(cpu_share.Guarded, Protocol):
    """What the contention guard reads and marks in a job's result, and judging needs."""

    @property
    def fingerprint(self) -> dict[str, Any]: ...


S = TypeVar("S", bound=PooledSweep)
Key = tuple[str, str, str]  # (controller, placement, variant: the knobs or the model)
# one side's session store (contract.SessionStore): a job's context is its Site; in a paired
# run the candidate's holds the base's (its own Horovod, made with slowdown 1)
Sweeps: TypeAlias = SessionStore[Key, S]


def allreduce_sweeps(
    hvd: HorovodEnv,
    sizes: Sequence[int],
    profile: str,
    slowdown: float,
    repeats: int,
    max_repeats: int,
    before_job: Callable[[], None] = lambda: None,
    base: Sweeps[Sweep] | None = None,
) -> Sweeps[Sweep]:
    def job(key: Key, site: Site) -> Sweep:
        controller, placement, knobs = key
        before_job()
        # a knob's sweep runs only KNOB_SIZES: each size costs cycle-bound operations
        mine = sizes if knobs == "default" else [s for s in sizes if s in KNOB_SIZES]
        return run_job(hvd, controller, placement, site, mine, profile, slowdown, knobs)

    return SessionStore(job, merge, repeats, max_repeats, (SweepFailed,), base)


def train_sweeps(
    hvd: HorovodEnv,
    slowdown: float,
    repeats: int,
    max_repeats: int,
    scratch: Path,
    before_job: Callable[[], None] = lambda: None,
    base: Sweeps[TrainSweep] | None = None,
) -> Sweeps[TrainSweep]:
    def job(key: Key, site: Site) -> TrainSweep:
        controller, placement, model = key
        before_job()
        return run_train_job(hvd, controller, placement, site, model, slowdown, scratch)

    return SessionStore(job, merge_train, repeats, max_repeats, (SweepFailed,), base)
