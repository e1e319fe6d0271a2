"""The OSU items' plumbing behind the `mpi_osu` fixture (plugin.py): which benchmarks a session
selected, and judging one (benchmark, size) point of a finished sweep."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any

import pytest

from pytest_hpccomm.baselines.adaptive import until_decided
from pytest_hpccomm.measure.measurement import Measurement
from pytest_hpccomm.record import Record
from pytest_hpccomm.stacks.mpi.driver import Sweep, SweepFailed, measurements

FIXTURE = "mpi_osu"
BANDWIDTH = ("osu_bw", "osu_bibw", "osu_mbw_mr")  # undefined for 0-byte messages

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


def judge(
    benchmark: str,
    size: int,
    sweep: Sweep,
    params: dict[str, str],
    record: Record,
    emulated: bool = False,
    base: Sweep | None = None,
    more: Callable[[], Sweep | None] | None = None,
    cost: Callable[[], dict[str, Any]] = dict,
) -> None:
    """Validation first (a wrong byte fails whatever the timing), then every record; a
    regression in one record fails the item only after all of them are recorded. On an
    emulated device (rxe, siw) the sweep is a functional pass: validated, never judged.
    With `base` (a paired A/B run) both sides are validated and each record of the candidate
    is judged against the base's record of the same point. Otherwise, while a record's
    verdict is undecided (`record.undecided`), `more()` pools one more job into the sweep
    (None: no more allowed); `cost()` is what the repeats cost, kept with every record
    (baselines/adaptive.until_decided)."""
    records = [_validated("" if base is None else "candidate: ", sweep, benchmark, size, params)]
    if base is not None:
        records.append(_validated("base: ", base, benchmark, size, params))
    if emulated:
        return
    ms = records[0]
    if more is not None:

        def grow() -> list[Measurement] | None:
            try:
                grown = more()
            except SweepFailed as exc:
                pytest.fail(f"adaptive repeat: {exc}", pytrace=False)
            return None if grown is None else _validated("", grown, benchmark, size, params)

        ms = until_decided(ms, lambda m: record.undecided(m, sweep.runtime_fingerprint), grow, cost)
    record.all(ms, sweep.runtime_fingerprint, records[1] if base is not None else None)


def _validated(
    label: str, sweep: Sweep, benchmark: str, size: int, params: dict[str, str]
) -> list[Measurement]:
    """The point's records; a failed sweep or a validation error fails the item."""
    try:
        errors = sweep.errors_for(benchmark, size)
        ms = measurements(sweep, benchmark, size, params)
    except SweepFailed as exc:
        pytest.fail(f"{label}{exc}", pytrace=False)
    if errors:
        pytest.fail(f"{label}data validation failed: " + "; ".join(errors[:3]), pytrace=False)
    return ms
