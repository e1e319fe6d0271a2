"""Shared by every report: ordering, grouping, summary statistics, outcome counts, atomic writes."""

from __future__ import annotations

import datetime as dt
import math
import os
from collections import Counter
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from pytest_hpccomm.baselines.result import RunResult
from pytest_hpccomm.baselines.verdict import Outcome
from pytest_hpccomm.measure.measurement import Measurement, Param
from pytest_hpccomm.report.units import fmt_size

SIZE_PARAM = "size"
# Worst first: a reader scanning a report should meet what fails the merge before anything else.
OUTCOME_ORDER: tuple[Outcome, ...] = (
    Outcome.REGRESSION,
    Outcome.INCONCLUSIVE,
    Outcome.IMPROVEMENT,
    Outcome.NEW,
    Outcome.PASS,
)

FamilyKey = tuple[str, str, str]  # (stack, benchmark, metric)
# Labels of lines and table rows name these first (what a reader tells runs apart by: which
# peer, MPI or controller, then how), the other parameters after them by name.
LABEL_ORDER = ("peer", "mpi", "controller", "mode", "runtime", "placement")


def label_key(name: str) -> tuple[int, str]:
    return (LABEL_ORDER.index(name) if name in LABEL_ORDER else len(LABEL_ORDER), name)


def metric_of(m: Measurement) -> str:
    return m.metric or m.benchmark


def fmt_params(params: Mapping[str, Param], *, skip: Iterable[str] = ()) -> str:
    """ "size=8B ranks=2": size first (the sweep axis), the rest by name."""
    skipped = set(skip)
    names = sorted(k for k in params if k not in skipped)
    if SIZE_PARAM in names:
        names.remove(SIZE_PARAM)
        names.insert(0, SIZE_PARAM)
    parts = []
    for k in names:
        v = params[k]
        if k == SIZE_PARAM and isinstance(v, (int, float)) and not isinstance(v, bool):
            parts.append(f"{k}={fmt_size(v)}")
        else:
            parts.append(f"{k}={v}")
    return " ".join(parts)


def _value_key(v: Param) -> tuple[int, float, str]:
    # Numbers compare numerically (8 < 1024), text after numbers; never a TypeError on mixes.
    if isinstance(v, (int, float)):
        return (0, float(v), "")
    return (1, 0.0, str(v))


def params_sort_key(params: Mapping[str, Param]) -> tuple[Any, ...]:
    """Other parameters first, size last: each sweep stays contiguous and ascends by size."""
    others = tuple((k, _value_key(params[k])) for k in sorted(params) if k != SIZE_PARAM)
    size = params.get(SIZE_PARAM)
    return (others, _value_key(size) if size is not None else (-1, 0.0, ""))


def result_sort_key(r: RunResult) -> tuple[Any, ...]:
    m = r.measurement
    return (m.stack, m.benchmark, metric_of(m), params_sort_key(m.params), r.nodeid)


def sorted_results(results: Iterable[RunResult]) -> list[RunResult]:
    return sorted(results, key=result_sort_key)


def families(results: Iterable[RunResult]) -> dict[FamilyKey, list[RunResult]]:
    """Results grouped by (stack, benchmark, metric), each group in sweep order."""
    out: dict[FamilyKey, list[RunResult]] = {}
    for r in sorted_results(results):
        m = r.measurement
        out.setdefault((m.stack, m.benchmark, metric_of(m)), []).append(r)
    return out


def outcome_counts(results: Iterable[RunResult]) -> dict[Outcome, int]:
    c = Counter(r.verdict.outcome for r in results)
    return {o: c.get(o, 0) for o in OUTCOME_ORDER}


def counts_line(results: Sequence[RunResult]) -> str:
    """ "3 regression, 1 improvement, 40 pass" in OUTCOME_ORDER, zero counts left out."""
    counts = outcome_counts(results)
    parts = [f"{n} {o.value}" for o, n in counts.items() if n]
    return ", ".join(parts) if parts else "no results"


def summary_stats(samples: Sequence[float]) -> dict[str, float | int | None]:
    """The numbers every report shows next to raw samples. Non-finite samples (perftest can print
    inf under emulation) are dropped rather than poisoning every statistic."""
    a = np.asarray([x for x in samples if math.isfinite(x)], dtype=float)
    keys = ("median", "mean", "min", "max", "p5", "p25", "p75", "p95", "p99", "stddev", "iqr", "cv")
    if a.size == 0:
        return {"n": 0, **{k: None for k in keys}}
    p5, p25, p50, p75, p95, p99 = np.percentile(a, [5, 25, 50, 75, 95, 99])
    mean = float(a.mean())
    sd = float(a.std(ddof=1)) if a.size > 1 else 0.0
    return {
        "n": int(a.size),
        "median": float(p50),
        "mean": mean,
        "min": float(a.min()),
        "max": float(a.max()),
        "p5": float(p5),
        "p25": float(p25),
        "p75": float(p75),
        "p95": float(p95),
        "p99": float(p99),
        "stddev": sd,
        "iqr": float(p75 - p25),
        "cv": sd / abs(mean) if mean else None,
    }


def short_message(r: RunResult) -> str:
    """The verdict's message without what a report row already shows: the verdict engine writes
    "regression: osu_latency size=8: median ..." so it reads alone in a pytest failure; next to
    a verdict label and the benchmark's name only "median ..." is news."""
    msg = r.verdict.message.strip()
    prefix = f"{r.verdict.outcome.value}: "
    if msg.lower().startswith(prefix):
        msg = msg[len(prefix) :]
    if msg.startswith(r.measurement.benchmark) and ": " in msg:
        msg = msg.split(": ", 1)[1]
    return msg


def session_fingerprint(results: Sequence[RunResult], session: Mapping[str, Any]) -> Any:
    """The session's fingerprint, else the one the results carry (identical within a session)."""
    fp = session.get("fingerprint")
    if fp:
        return fp
    return dict(results[0].fingerprint) if results else {}


def jsonable(obj: Any) -> Any:
    """Plain JSON: datetimes as ISO 8601, non-finite floats as null (strict JSON has no NaN)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, (str, int, bool)) or obj is None:
        return obj
    if isinstance(obj, Mapping):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, dt.datetime):
        return obj.isoformat()
    if isinstance(obj, (np.floating, np.integer, np.bool_)):
        return jsonable(obj.item())
    if hasattr(obj, "value") and hasattr(obj, "name"):  # enums
        return jsonable(obj.value)
    if isinstance(obj, os.PathLike):
        return os.fspath(obj)
    return str(obj)


def iso_time(value: Any) -> str | None:
    """Timestamps arrive as datetime, epoch seconds or text; reports carry ISO 8601 (UTC)."""
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, (int, float)):
        return dt.datetime.fromtimestamp(float(value), tz=dt.timezone.utc).isoformat()
    return str(value)


def point_name(m: Measurement, sep: str = " ") -> str:
    """How a report names one point: "mpi osu_latency size=8B ranks=2" (sep "/" gives
    "mpi/osu_latency size=8B ranks=2")."""
    return " ".join(x for x in (f"{m.stack}{sep}{m.benchmark}", fmt_params(m.params)) if x)


def reason_key(r: RunResult) -> str:
    """An inconclusive verdict's reason without its numbers: what groups them in a report
    ("too noisy", "cores shared", "the baseline is from another machine type")."""
    why = r.verdict.informational or r.verdict.reason or "no reason given"
    why = why.removeprefix("informational: ")
    for stop in (" (", ": "):
        why = why.split(stop, 1)[0]
    return why.strip() or "no reason given"


def inconclusive_groups(results: Iterable[RunResult]) -> list[tuple[str, list[RunResult]]]:
    """Inconclusive results grouped by reason_key, the largest group first: a report counts
    them per reason instead of listing a line per point."""
    groups: dict[str, list[RunResult]] = {}
    for r in sorted_results(results):
        if r.verdict.outcome is Outcome.INCONCLUSIVE:
            groups.setdefault(reason_key(r), []).append(r)
    return sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))
