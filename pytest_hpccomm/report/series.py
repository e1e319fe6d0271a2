"""Series: the results of one benchmark that differ only along its sweep axis (message size,
or TF-gRPC-Bench's payload scheme), i.e. one line of a plot. The compact tables give a series
one row, where a row per result made 2,238 rows."""

from __future__ import annotations

from typing import Any, Sequence

from pytest_hpccomm.baselines.result import RunResult
from pytest_hpccomm.measure.measurement import Measurement
from pytest_hpccomm.report.common import (
    SIZE_PARAM,
    fmt_params,
    metric_of,
    outcome_counts,
    sorted_results,
)
from pytest_hpccomm.report.units import fmt_size

SCHEME, BYTES = "scheme", "bytes"


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def axis(m: Measurement) -> tuple[str, ...]:
    """The parameters a series sweeps: ("size",), ("scheme", "bytes") or () for a lone point."""
    p = m.params
    if _number(p.get(SIZE_PARAM)):
        return (SIZE_PARAM,)
    if isinstance(p.get(SCHEME), str) and _number(p.get(BYTES)):
        return (SCHEME, BYTES)
    return ()


def x_value(m: Measurement) -> float:
    """Where a point sits along its series: its size or its payload bytes."""
    ax = axis(m)
    return float(m.params[ax[-1]]) if ax else 0.0


def series(results: Sequence[RunResult]) -> dict[tuple[str, str, str, str], list[RunResult]]:
    """(stack, benchmark, metric, the other params as text) -> its points along the axis."""
    out: dict[tuple[str, str, str, str], list[RunResult]] = {}
    for r in sorted_results(results):
        m = r.measurement
        key = (m.stack, m.benchmark, metric_of(m), fmt_params(m.params, skip=axis(m)))
        out.setdefault(key, []).append(r)
    for members in out.values():
        members.sort(key=lambda r: x_value(r.measurement))
    return out


def points_text(members: Sequence[RunResult]) -> str:
    """ "23 sizes 1B–4MiB", "5 schemes 8B–1MiB" or "1 point"."""
    ax = axis(members[0].measurement)
    if not ax:
        return f"{len(members)} point" + ("s" if len(members) > 1 else "")
    xs = [x_value(r.measurement) for r in members]
    what = "sizes" if ax == (SIZE_PARAM,) else "schemes"
    if len(members) == 1:
        what = what[:-1]
    span = fmt_size(min(xs)) if min(xs) == max(xs) else f"{fmt_size(min(xs))}–{fmt_size(max(xs))}"
    return f"{len(members)} {what} {span}"


def verdict_counts(members: Sequence[RunResult], icons: dict[Any, str]) -> str:
    return " ".join(f"{icons[o]} {n}" for o, n in outcome_counts(members).items() if n)
