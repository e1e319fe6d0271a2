"""Adaptive repeats (--hpc-max-repeats): a point its pooled jobs cannot decide gets more jobs.

A stored-mode verdict is undecided when more jobs could settle it: INCONCLUSIVE because the
interval is too wide, too few samples, or a shift beyond the tolerance that the interval does
not establish; or a PASS whose interval still reaches beyond the tolerance band. What more jobs
cannot mend is decided as it stands: a baseline in other units, non-positive samples, a
baseline measured on shared cores, a NEW point, a REGRESSION. The stack adds one job at a time
to the whole sweep (every point of the sweep gains from it: measure/pooling.JobPool) and
records the cost with the measurement (`extra["adaptive"]`, JobPool.cost), which the verdict
message names.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from pytest_hpccomm.baselines.verdict import Outcome, Verdict
from pytest_hpccomm.measure.measurement import Measurement
from pytest_hpccomm.measure.stats import MIN_SAMPLES

MORE_DATA_HELPS = ("too noisy", "worse than tolerance", "better than tolerance")


def undecided(v: Verdict) -> bool:
    if v.outcome is Outcome.INCONCLUSIVE:
        if v.reason.startswith("too few samples"):  # more jobs help only this run's side
            return v.n_current < MIN_SAMPLES
        return v.reason.startswith(MORE_DATA_HELPS)
    if v.outcome is Outcome.PASS and v.ci_low is not None and v.ci_high is not None:
        return v.ci_low < 1.0 - v.tolerance or v.ci_high > 1.0 + v.tolerance
    return False


def describe(extra: Mapping[str, Any]) -> str:
    """The verdict message's note of the added jobs ("" when none were added)."""
    got = extra.get("adaptive")
    if not isinstance(got, Mapping) or not got.get("added"):
        return ""
    return (f"{got['jobs']} jobs, {got['added']} of them added for an undecided verdict "
            f"({got['seconds']:.1f} s)")


M = TypeVar("M", bound=Measurement)


def until_decided(records: list[M], undecided: Callable[[M], bool],
                  grow: Callable[[], list[M] | None],
                  cost: Callable[[], dict[str, Any]]) -> list[M]:
    """The records once none is undecided, or once `grow` (one more job pooled in, the
    point's records re-made) says no more jobs may be added (None); each then carries what
    the repeats cost (`extra["adaptive"]`: JobPool.cost)."""
    while any(undecided(m) for m in records):
        grown = grow()
        if grown is None:
            break
        records = grown
    spent = cost()
    return [dataclasses.replace(m, extra={**m.extra, "adaptive": spent})
            for m in records]


def session_cost(extras: Iterable[Mapping[str, Any]]) -> str:
    """The terminal summary's line on adaptive repeats ("" when no job was added)."""
    grown = [e["adaptive"] for e in extras
             if isinstance(e.get("adaptive"), Mapping) and e["adaptive"].get("added")]
    if not grown:
        return ""
    return (f"adaptive repeats: {len(grown)} records were judged on added jobs (up to "
            f"{max(g['jobs'] for g in grown)} jobs per sweep, "
            f"{max(g['seconds'] for g in grown):.1f} s at most for one sweep's added jobs)")
