"""Adaptive repeats (--hpc-max-repeats): a point its pooled jobs cannot decide gets more jobs.

More: docs/explanation/internals.md (pytest_hpccomm.baselines.adaptive).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from pytest_hpccomm.baselines.verdict import Outcome, Verdict, band, within_band
from pytest_hpccomm.measure.measurement import Measurement
from pytest_hpccomm.measure.stats import MIN_SAMPLES

MORE_DATA_HELPS = ("too noisy", "worse than tolerance", "better than tolerance")
SCOPES = ("changes", "undecided")


def undecided(v: Verdict, scope: str = "undecided") -> bool:
    """Whether more jobs could decide `v` and are spent on it under `scope` (SCOPES)."""
    if scope == "changes" and not potential_change(v):
        return False
    return _more_jobs_could_decide(v)


def potential_change(v: Verdict) -> bool:
    """A claimed change, or a point ratio beyond the tolerance band (what, confirmed by the
    interval, would be one)."""
    if v.outcome in (Outcome.REGRESSION, Outcome.IMPROVEMENT):
        return True
    return (
        v.outcome is Outcome.INCONCLUSIVE
        and v.ratio is not None
        and not within_band(v.ratio, v.tolerance)
    )


def _more_jobs_could_decide(v: Verdict) -> bool:
    if v.outcome is Outcome.INCONCLUSIVE:
        if v.reason.startswith("too few samples"):  # more jobs help only this run's side
            return v.n_current < MIN_SAMPLES
        return v.reason.startswith(MORE_DATA_HELPS) and settles_without_sessions_spread(v)
    if v.outcome is Outcome.PASS and v.ci_low is not None and v.ci_high is not None:
        return not (
            within_band(v.ci_low, v.tolerance) and within_band(v.ci_high, v.tolerance)
        ) and settles_without_sessions_spread(v)
    return v.outcome in (Outcome.REGRESSION, Outcome.IMPROVEMENT)  # confirmed on more jobs


def settles_without_sessions_spread(v: Verdict) -> bool:
    """Whether the verdict could be decided if this run's side were known exactly: its
    interval then shrinks to the part the baseline's sessions add (ratio x exp(+-margin)),
    which must lie inside the tolerance band or wholly beyond it. True without that part."""
    if not v.session_margin or v.ratio is None or v.ratio <= 0:
        return True
    lo, hi = v.ratio * math.exp(-v.session_margin), v.ratio * math.exp(v.session_margin)
    down, up = band(v.tolerance)
    return down <= lo and hi <= up or lo > up or hi < down


def describe(extra: Mapping[str, Any]) -> str:
    """The verdict message's note of the added jobs ("" when none were added)."""
    got = extra.get("adaptive")
    if not isinstance(got, Mapping) or not got.get("added"):
        return ""
    return (
        f"{got['jobs']} jobs, {got['added']} of them added for an undecided verdict "
        f"({got['seconds']:.1f} s)"
    )


M = TypeVar("M", bound=Measurement)


def until_decided(
    records: list[M],
    undecided: Callable[[M], bool],
    grow: Callable[[], list[M] | None],
    cost: Callable[[], dict[str, Any]],
) -> list[M]:
    """The records once none is undecided, or once `grow` (one more job pooled in, the
    point's records re-made) says no more jobs may be added (None); each then carries what
    the repeats cost (`extra["adaptive"]`: JobPool.cost)."""
    while any(undecided(m) for m in records):
        grown = grow()
        if grown is None:
            break
        records = grown
    spent = cost()
    return [dataclasses.replace(m, extra={**m.extra, "adaptive": spent}) for m in records]


def session_cost(extras: Iterable[Mapping[str, Any]]) -> str:
    """The terminal summary's line on adaptive repeats ("" when no job was added)."""
    grown = [
        e["adaptive"]
        for e in extras
        if isinstance(e.get("adaptive"), Mapping) and e["adaptive"].get("added")
    ]
    if not grown:
        return ""
    return (
        f"adaptive repeats: {len(grown)} records were judged on added jobs (up to "
        f"{max(g['jobs'] for g in grown)} jobs per sweep, "
        f"{max(g['seconds'] for g in grown):.1f} s at most for one sweep's added jobs)"
    )
