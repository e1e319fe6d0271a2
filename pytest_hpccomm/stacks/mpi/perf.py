"""The OSU items' plumbing behind the `mpi_osu` fixture (fixtures.py): which benchmarks a
session selected, the session's store of pooled sweeps (MpiSweeps), and the validated records
of one (benchmark, size) point of a finished sweep."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any

import pytest

from pytest_hpccomm.measure.measurement import Measurement
from pytest_hpccomm.proc.cpu_share import QuietRetry
from pytest_hpccomm.stacks.contract import SessionStore
from pytest_hpccomm.stacks.mpi.driver import (
    Sweep,
    SweepFailed,
    SweepSettings,
    SweepTarget,
    measurements,
    merge_sweeps,
    run_sweep,
)
from pytest_hpccomm.stacks.mpi.env import MpiRuntime

FIXTURE = "mpi_osu"
BANDWIDTH = ("osu_bw", "osu_bibw", "osu_mbw_mr")  # undefined for 0-byte messages
ZERO_BYTES = "bandwidth of 0-byte messages is undefined (OSU starts at 1 B)"

Selected = dict[tuple[str, str], set[str]]  # (MPI, placement) -> benchmarks


def benchmark_of(item: pytest.Item) -> str | None:
    """The OSU benchmark an item runs: its `osu` parameter, else (a test of one benchmark,
    test_osu_barrier) its function's name without `test_`."""
    if FIXTURE not in getattr(item, "fixturenames", ()):
        return None
    params = _params(item)
    name = getattr(item, "originalname", "")
    bench = params.get("osu") or (
        name.removeprefix("test_") if name.startswith("test_osu_") else None
    )
    return str(bench) if bench else None


def _params(item: pytest.Item) -> dict[str, Any]:
    callspec = getattr(item, "callspec", None)  # only parametrized items have one
    return dict(callspec.params) if callspec is not None else {}


def selected(items: Iterable[pytest.Item]) -> Selected:
    """(MPI, placement) -> the benchmarks this session's items ask for, so one job runs just
    those (`-k osu_latency` must not pay for the other thirteen)."""
    chosen: Selected = defaultdict(set)
    for item in items:
        bench = benchmark_of(item)
        params = _params(item)
        mpi, placement = params.get("mpi_name"), params.get("hpc_placement")
        if bench and mpi and placement:
            chosen[(mpi, placement)].add(bench)
    return chosen


def records_of(
    benchmark: str, size: int, params: dict[str, str]
) -> Callable[[Sweep], list[Measurement]]:
    """records(sweep): the point's records, validation first (a wrong byte fails whatever the
    timing); a failed sweep or a validation error fails the item."""

    def records(sweep: Sweep) -> list[Measurement]:
        try:
            errors = sweep.errors_for(benchmark, size)
            ms = measurements(sweep, benchmark, size, params)
        except SweepFailed as exc:
            pytest.fail(str(exc), pytrace=False)
        if errors:
            pytest.fail("data validation failed: " + "; ".join(errors[:3]), pytrace=False)
        return ms

    return records


Key = tuple[str, str, str]  # (MPI, placement, the comma-separated benchmarks one job runs)


class MpiSweeps(SessionStore[Key, Sweep]):
    """One side's OSU sweeps of a session (contract.SessionStore): one per (MPI, placement,
    benchmarks), pooled from independent jobs that each run all the key's benchmarks (context:
    the MpiRuntime and the SweepTarget). An undecided point grows by jobs of its benchmark
    alone (more_of): a job of every selected benchmark takes 15-20 s here, and re-running the
    decided ones adds no evidence. A paired run's base store runs `runtime` under the
    candidate's keys, and shares the candidate's contention guard (`retry`)."""

    def __init__(
        self,
        profile: str,
        sizes: Sequence[int],
        slowdown: float,
        repeats: int = 1,
        reruns: int = 2,
        max_repeats: int = 0,
        base: MpiSweeps | None = None,
        runtime: MpiRuntime | None = None,
        retry: QuietRetry | None = None,
    ) -> None:
        self.settings = SweepSettings.for_profile(profile)
        self.sizes = list(sizes)
        self.slowdown = slowdown  # the canary: >1 on the candidate's side only
        self.runtime = runtime
        super().__init__(
            self._job,
            merge_sweeps,
            repeats,
            max_repeats,
            (SweepFailed,),
            base,
            retry=QuietRetry(reruns) if retry is None else retry,
            part_job=self._part_job,
            restrict=lambda sweep, part: sweep.only(str(part)),
        )

    @staticmethod
    def key(runtime: MpiRuntime, target: SweepTarget, benchmarks: str) -> Key:
        return runtime.name, target.placement, benchmarks

    def _job(self, key: Key, runtime: MpiRuntime, target: SweepTarget) -> Sweep:
        return self._run(runtime, target, key[2])

    def _part_job(
        self, key: Key, part: Hashable, runtime: MpiRuntime, target: SweepTarget
    ) -> Sweep:
        return self._run(runtime, target, str(part))

    def _run(self, runtime: MpiRuntime, target: SweepTarget, benchmarks: str) -> Sweep:
        mpi = runtime if self.runtime is None else self.runtime
        return run_sweep(mpi, target, benchmarks, self.sizes, self.settings, self.slowdown)
