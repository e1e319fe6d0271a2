"""Verdicts: this run's samples against the stored baseline for the same key."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Outcome(str, enum.Enum):
    PASS = "pass"
    REGRESSION = "regression"  # the test fails
    IMPROVEMENT = "improvement"
    NEW = "new"  # no baseline for this key: passes, is reported
    INCONCLUSIVE = "inconclusive"  # too noisy to say; fails only under --hpc-strict


@dataclass(frozen=True)
class Verdict:
    outcome: Outcome
    current_median: float
    baseline_median: float | None
    ratio: float | None  # current median / baseline median (raw, not direction-adjusted)
    ci_low: float | None  # confidence interval of that ratio
    ci_high: float | None
    p_value: float | None  # one-sided test in the "worse" direction
    tolerance: float  # relative effect that counts, e.g. 0.05
    message: str  # one readable line; the failure message of a regression
