"""The MPI driver without MPI: peer output parsing, job grouping, timeouts, and the records
(OSU metric, nccl-tests busbw, message rate) it makes of a sweep."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from pytest_hpccomm import retries
from pytest_hpccomm.measure.measurement import Direction
from pytest_hpccomm.peer.framing import BEGIN, END
from pytest_hpccomm.proc.jobs import JobResult
from pytest_hpccomm.stacks.mpi.driver import (
    Sweep,
    SweepFailed,
    SweepSettings,
    _finish,
    busbw_factor,
    collective_bytes,
    job_groups,
    measurements,
    merge_sweeps,
    parse_output,
    peer_argv,
    timeout_for,
)
from pytest_hpccomm.stacks.mpi.peer.__main__ import parse_args
from pytest_hpccomm.stacks.mpi.wire import BENCHMARKS


def doc(
    benchmark: str,
    results: list[dict[str, Any]],
    ranks: int = 2,
    errors: list[str] | None = None,
    participants: int | None = None,
) -> dict[str, Any]:
    return {
        "benchmark": benchmark,
        "ranks": ranks,
        "participants": participants or ranks,
        "hosts": ["h0", "h1"],
        "mpi_library": "Open MPI v5.0.11",
        "mpi_version": "3.1",
        "mpi4py": "4.1.0",
        "timer_us": 0.06,
        "results": results,
        "errors": errors or [],
    }


def printed(*docs: dict[str, Any]) -> str:
    return "".join(f"chatter\n{BEGIN}\n{json.dumps(d)}\n{END}\n" for d in docs)


def job(stdout: str, rc: int = 0, timed_out: bool = False) -> JobResult:
    return JobResult(("mpirun",), rc, stdout, "boom" if rc else "", 1.0, timed_out, "test job")


def test_parse_output_reads_every_document_and_ignores_a_cut_off_one() -> None:
    a, b = doc("osu_latency", []), doc("osu_bw", [])
    out = printed(a, b) + f'{BEGIN}\n{{"benchmark": "osu_bi'
    assert list(parse_output(out)) == ["osu_latency", "osu_bw"]
    assert parse_output("no markers at all") == {}


def test_a_job_that_dies_fails_every_benchmark_also_those_it_printed() -> None:
    finished = printed(doc("osu_latency", [{"size": 8, "samples": [1.0]}]))
    assert _finish(job(finished)).point("osu_latency", 8)["samples"] == [1.0]
    for failed in (job(finished, rc=137), job(finished, rc=-9, timed_out=True)):
        sweep = _finish(failed)
        with pytest.raises(
            SweepFailed,
            match="osu_latency printed its results, but MPI job "
            "failed after osu_latency: test job ",
        ):
            sweep.point("osu_latency", 8)
    with pytest.raises(
        SweepFailed,
        match="osu_bw did not finish: MPI job failed after osu_latency: test job exit 137",
    ):
        _finish(job(finished, rc=137)).point("osu_bw", 8)
    with pytest.raises(SweepFailed, match="MPI job failed: test job timed out"):
        _finish(job("", rc=-9, timed_out=True))
    with pytest.raises(SweepFailed, match="unreadable peer output"):
        _finish(job(f"{BEGIN}\n{{not json\n{END}\n"))


def test_errors_are_matched_to_their_size() -> None:
    errors = [
        "osu_bw size=1 batch=0 rank=1: wrong data at byte 0 (got 3, want 2)",
        "osu_bw size=1024 rank=1: 4 more wrong blocks",
    ]
    sweep = Sweep({"osu_bw": doc("osu_bw", [], errors=errors)}, job(""))
    assert sweep.errors_for("osu_bw", 1) == errors[:1]
    assert sweep.errors_for("osu_bw", 1024) == errors[1:]
    assert sweep.errors_for("osu_bw", 10) == []


def test_job_groups() -> None:
    everything = set(BENCHMARKS)
    assert job_groups(everything, "loopback", 2) == [BENCHMARKS]  # one job, OSU order
    pair, wide = job_groups(everything, "netns", 4)
    assert pair == ("osu_latency", "osu_bw", "osu_bibw") and "osu_mbw_mr" in wide
    assert job_groups({"osu_latency"}, "netns", 4) == [("osu_latency",)]
    assert job_groups(set(), "loopback", 2) == []


def test_peer_argv_round_trips_through_the_peer_parser() -> None:
    runtime: Any = type("R", (), {"python": "/env/bin/python"})()
    s = SweepSettings.for_profile("quick")
    argv = peer_argv(runtime, "osu_bw,osu_allreduce", [1, 4096], s, 1.5, corrupt=True)
    args = parse_args(argv[3:])
    assert args.benchmark == ["osu_bw", "osu_allreduce"] and args.sizes == [1, 4096]
    assert (args.batches, args.min_batches, args.budget, args.batch_bytes) == (
        s.batches,
        s.min_batches,
        s.budget,
        s.batch_bytes,
    )
    assert args.slowdown == 1.5 and args.corrupt


def test_timeouts_are_generous_but_finite() -> None:
    quick, full = SweepSettings.for_profile("quick"), SweepSettings.for_profile("full")
    sizes = [1 << k for k in range(23)]  # 1 B .. 4 MiB
    t = timeout_for(BENCHMARKS, sizes, quick)
    assert 600 < t < 3600  # measured here: ~40 s for the whole quick sweep
    assert timeout_for(["osu_latency"], [8], quick) < 70
    big = timeout_for(BENCHMARKS, [1 << k for k in range(27)], full, ranks=4)
    assert t < big < 48 * 3600


def test_nccl_factors_and_sizes() -> None:
    assert busbw_factor("osu_allreduce", 4) == 1.5  # 2(n-1)/n
    assert busbw_factor("osu_allgather", 4) == busbw_factor("osu_gather", 4) == 0.75
    assert busbw_factor("osu_bcast", 4) == busbw_factor("osu_reduce", 4) == 1.0
    assert collective_bytes("osu_alltoall", 1024, 4) == 4096  # OSU's size is one block
    assert collective_bytes("osu_reduce_scatter", 1024, 4) == 1024  # OSU's size is the vector


def collective_sweep(ranks: int = 4) -> Sweep:
    lat = [100.0, 200.0, 400.0]  # us per operation, average over ranks, per batch
    results = [
        {
            "size": 1 << 20,
            "samples": lat,
            "max_samples": [110.0, 210.0, 420.0],
            "iterations": 1,
            "warmup": 1,
        },
        {
            "size": 0,
            "samples": [5.0, 5.0, 5.0],
            "max_samples": [6.0, 6.0, 6.0],
            "iterations": 50,
            "warmup": 50,
        },
    ]
    return Sweep(
        {
            "osu_allreduce": doc("osu_allreduce", results, ranks),
            "osu_allgather": doc("osu_allgather", results, ranks),
            "osu_barrier": doc("osu_barrier", results[1:], ranks),
        },
        job(""),
    )


def test_busbw_numbers_for_a_sweep() -> None:
    sweep = collective_sweep()
    lat, bus = measurements(
        sweep, "osu_allreduce", 1 << 20, {"mpi": "openmpi", "placement": "netns"}
    )
    assert lat.metric == "latency" and lat.unit == "us"
    assert lat.direction is Direction.LOWER_IS_BETTER
    assert lat.samples == (100.0, 200.0, 400.0)
    assert lat.params == {"mpi": "openmpi", "placement": "netns", "ranks": 4, "size": 1 << 20}
    assert lat.extra["max_rank_latency_us"] == 210.0
    # algbw = S / t = 1 MiB / 100 us = 10.48576 GB/s; allreduce busbw = algbw * 2(4-1)/4
    assert bus.metric == "busbw" and bus.unit == "GB/s"
    assert bus.direction is Direction.HIGHER_IS_BETTER
    assert bus.samples == pytest.approx((15.72864, 7.86432, 3.93216))
    assert bus.extra["algbw_gb_s"] == pytest.approx(5.24288)  # median batch
    assert bus.params == {**lat.params, "metric": "busbw"}
    assert bus.key != lat.key  # separate baselines

    _, gbus = measurements(sweep, "osu_allgather", 1 << 20, {"mpi": "mpich"})
    # S = 4 blocks of 1 MiB; factor (n-1)/n
    assert gbus.samples[0] == pytest.approx(4 * 10.48576 * 0.75)


def test_no_busbw_without_data_and_barrier_has_no_size() -> None:
    sweep = collective_sweep()
    assert [m.metric for m in measurements(sweep, "osu_allreduce", 0, {})] == ["latency"]
    (barrier,) = measurements(sweep, "osu_barrier", 0, {"mpi": "openmpi"})
    assert barrier.params == {"mpi": "openmpi", "ranks": 4}
    with pytest.raises(SweepFailed, match="no result for size 8"):
        measurements(sweep, "osu_allreduce", 8, {})


def test_mbw_mr_records_bandwidth_and_message_rate() -> None:
    point = {
        "size": 8,
        "samples": [4.0, 5.0],
        "rate_samples": [5e5, 6.25e5],
        "iterations": 640,
        "warmup": 640,
        "window": 64,
        "pairs": 2,
    }
    sweep = Sweep({"osu_mbw_mr": doc("osu_mbw_mr", [point], ranks=5, participants=4)}, job(""))
    bw, rate = measurements(sweep, "osu_mbw_mr", 8, {})
    assert (bw.metric, bw.unit, bw.params["ranks"]) == ("bandwidth", "MB/s", 4)
    assert (rate.metric, rate.unit, rate.samples) == ("message_rate", "msg/s", (5e5, 6.25e5))
    assert rate.params["metric"] == "message_rate"


def test_jobs_of_one_sweep_are_pooled_in_job_order() -> None:
    def point(size: int, samples: list[float], rate: list[float] | None = None) -> dict[str, Any]:
        p: dict[str, Any] = {"size": size, "samples": samples, "warmup": 1, "iterations": 10}
        return p | ({"rate_samples": rate} if rate else {})

    a = Sweep(
        {
            "osu_mbw_mr": doc(
                "osu_mbw_mr", [point(8, [1.0, 3.0], [5.0]), point(64, [2.0])], errors=["e1"]
            ),
            "osu_bw": doc("osu_bw", [point(8, [9.0])]),
        },
        job(""),
        transport="tcp over lo",
    )
    b = Sweep({"osu_mbw_mr": doc("osu_mbw_mr", [point(8, [10.0, 30.0], [6.0])])}, job(""))
    failed = dataclasses.replace(b, failure="MPI job failed after osu_mbw_mr: test job exit 1")
    with pytest.raises(SweepFailed, match="osu_mbw_mr printed its results, but MPI job failed"):
        merge_sweeps([a, failed]).point("osu_mbw_mr", 8)  # one failed job fails the point
    merged = merge_sweeps([a, b])
    p8 = merged.point("osu_mbw_mr", 8)
    assert p8["samples"] == [1.0, 3.0, 10.0, 30.0] and p8["rate_samples"] == [5.0, 6.0]
    assert p8["warmup"] == 2 and p8["job_medians"] == [2.0, 20.0]
    assert merged.doc("osu_mbw_mr")["errors"] == ["e1"] and merged.doc("osu_mbw_mr")["jobs"] == 2
    with pytest.raises(SweepFailed, match="no result for size 64"):  # not in every job
        merged.point("osu_mbw_mr", 64)
    with pytest.raises(SweepFailed, match="osu_bw did not finish: not run"):
        merged.doc("osu_bw")
    assert merged.transport == "tcp over lo"
    (m, *_) = measurements(merged, "osu_mbw_mr", 8, {"mpi": "openmpi"})
    assert m.samples == (1.0, 3.0, 10.0, 30.0) and m.extra["job_medians"] == [2.0, 20.0]
    assert merge_sweeps([a]) is a


def test_a_job_on_shared_cores_is_run_again_and_marked_if_the_cores_never_came_free(
    monkeypatch: pytest.MonkeyPatch, retry_ledger: list[retries.Retry]
) -> None:
    """The contention guard in the sweep cache (orchestrator logic: the jobs are stand-ins)."""
    from types import SimpleNamespace

    from pytest_hpccomm.stacks.mpi import perf
    from pytest_hpccomm.stacks.mpi.driver import SweepTarget

    def sweep(median: float, foreign: float) -> Sweep:
        out = printed(
            doc(
                "osu_latency",
                [{"size": 8, "samples": [median] * 5, "warmup": 1, "iterations": 100}],
            )
        )
        why = f"cores shared: {foreign}" if foreign > 0.1 else ""
        return Sweep(parse_output(out), job(out), cpu=({"foreign_cores": foreign},), disturbed=why)

    # job 1: disturbed, then quiet on its first re-run; job 2: disturbed three times in a row
    planned = iter(
        [sweep(9.0, 0.8), sweep(4.0, 0.0), sweep(8.0, 0.7), sweep(8.5, 0.9), sweep(7.0, 0.6)]
    )
    monkeypatch.setattr(perf, "run_sweep", lambda *a, **k: next(planned))
    cache = perf.MpiSweeps("quick", [8], 1.0, repeats=2, reruns=2)
    runtime, target = SimpleNamespace(name="openmpi"), SweepTarget("loopback")
    key = perf.MpiSweeps.key(runtime, target, "osu_latency")  # type: ignore[arg-type]
    got = cache.get(key, runtime, target)
    assert next(planned, None) is None  # 1 + 1 re-run, then 1 + 2 re-runs
    assert [r.reason for r in retry_ledger] == [f"cores shared: {f}" for f in (0.8, 0.7, 0.9)]
    assert got.point("osu_latency", 8)["samples"] == [4.0] * 5 + [7.0] * 5
    assert got.disturbed == "cores shared: 0.6" and got.reruns == 3
    cpu = measurements(got, "osu_latency", 8, {"mpi": "openmpi"})[0].extra["cpu"]
    assert cpu == {
        "foreign_cores": [0.0, 0.6],
        "disturbed": "cores shared: 0.6",
        "reruns": 3,
        "load1": [None, None],
        "run_queue": [None, None],
        "mhz": [None, None],
        "others": [[], []],
    }


def test_the_sweep_store_runs_each_paired_side_on_its_mpi_and_grows_one_benchmark_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """perf.MpiSweeps (orchestrator logic: the jobs are stand-ins): a paired run's base store
    runs the base MPI, unstretched, under the candidate's keys, both sides under one guard;
    an undecided point's extra job runs its benchmark alone."""
    from types import SimpleNamespace

    from pytest_hpccomm.stacks.mpi import perf
    from pytest_hpccomm.stacks.mpi.driver import SweepTarget

    ran: list[tuple[str, str, float]] = []

    def fake(runtime: Any, target: Any, benchmarks: str, *settings: Any) -> Sweep:
        ran.append((runtime.name, benchmarks, settings[-1]))
        point = {"size": 8, "samples": [1.0] * 3, "warmup": 1, "iterations": 10}
        out = printed(*(doc(b, [point]) for b in benchmarks.split(",")))
        return Sweep(parse_output(out), job(out))

    monkeypatch.setattr(perf, "run_sweep", fake)
    cand_mpi, base_mpi = SimpleNamespace(name="cand"), SimpleNamespace(name="base")
    target = SweepTarget("loopback")
    base = perf.MpiSweeps("quick", [8], 1.0, runtime=base_mpi)  # type: ignore[arg-type]
    cand = perf.MpiSweeps("quick", [8], 1.5, base=base, retry=base.retry)
    key = perf.MpiSweeps.key(cand_mpi, target, "osu_latency,osu_bw")  # type: ignore[arg-type]
    got_cand, got_base = cand.paired(key, 2, cand_mpi, target)
    both = "osu_latency,osu_bw"
    assert sorted(ran) == [("base", both, 1.0)] * 2 + [("cand", both, 1.5)] * 2
    assert got_cand.point("osu_bw", 8)["samples"] == [1.0] * 6 and got_base.docs.keys() == {
        "osu_latency",
        "osu_bw",
    }
    ran.clear()
    solo = perf.MpiSweeps("quick", [8], 1.0, repeats=1, max_repeats=2)
    assert list(solo.get_part(key, "osu_bw", cand_mpi, target).docs) == ["osu_latency", "osu_bw"]
    grown = solo.more_of(key, "osu_bw", cand_mpi, target)
    assert ran == [("cand", both, 1.0), ("cand", "osu_bw", 1.0)]
    assert grown is not None and list(grown.docs) == ["osu_bw"]
    assert grown.point("osu_bw", 8)["samples"] == [1.0] * 6
    assert solo.cost(key, "osu_bw")["jobs"] == 2 and solo.more_of(key, "osu_bw") is None
