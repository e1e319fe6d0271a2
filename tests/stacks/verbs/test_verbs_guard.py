"""The contention guard on verbs points (perf.Sweeps): on a real device every job is metered,
run again while another process shared the cores, and its records carry the evidence; on an
emulated one (guard off) the runner runs once, unmetered. The runner is a stand-in: this
checks the store's own logic, under a real busy neighbour."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from pytest_hpccomm import retries
from pytest_hpccomm.stacks.verbs.perf import BENCHMARKS, BenchPoint, Sweeps, records
from tests.neighbour import busy_neighbour

BENCH = next(b for b in BENCHMARKS if b.name == "ib_write_lat")


class StandIn:
    """What Sweeps asks of a BenchRunner: run(bench, size) -> BenchPoint, here half a second
    of this process's own work."""

    def __init__(self) -> None:
        self.calls = 0

    def run(self, bench: object, size: int) -> BenchPoint:
        self.calls += 1
        end = time.monotonic() + 0.5
        while time.monotonic() < end:
            pass
        return BenchPoint(BENCH, size, 100, 10, [1.0, 1.1, 0.9])


@pytest.fixture
def neighbour() -> Iterator[int]:
    with busy_neighbour(60.0) as pid:
        yield pid


def _store(runner: StandIn, guard: bool) -> Sweeps:
    return Sweeps(runner, 1, 1, guard=guard)  # type: ignore[arg-type]


def test_a_job_beside_a_busy_neighbour_runs_again_and_its_record_says_so(
    neighbour: int, retry_ledger: list[retries.Retry]
) -> None:
    runner = StandIn()
    point = _store(runner, guard=True).get((BENCH.key, 8), BENCH)
    assert runner.calls == 3 and point.reruns == 2  # QuietRetry: two more tries, then kept
    assert point.disturbed.startswith("cores shared: "), point.disturbed
    assert f"busiest: {neighbour} " in point.disturbed
    assert [r.cause for r in retry_ledger] == [retries.CONTENTION] * 2
    cpu = records(point)[0].extra["cpu"]
    assert (
        cpu["reruns"] == 2
        and cpu["disturbed"] == point.disturbed
        and len(cpu["foreign_cores"]) == 1
    )


def test_a_quiet_job_runs_once_with_its_reading(retry_ledger: list[retries.Retry]) -> None:
    runner = StandIn()
    point = _store(runner, guard=True).get((BENCH.key, 8), BENCH)
    assert runner.calls == 1 and point.reruns == 0 and point.disturbed == "", point.disturbed
    assert records(point)[0].extra["cpu"]["disturbed"] == "" and not retry_ledger


def test_on_an_emulated_device_the_runner_runs_once_unmetered(neighbour: int) -> None:
    runner = StandIn()
    point = _store(runner, guard=False).get((BENCH.key, 8), BENCH)
    assert runner.calls == 1 and point.cpu == () and "cpu" not in records(point)[0].extra
