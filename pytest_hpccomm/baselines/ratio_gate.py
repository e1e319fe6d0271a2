"""The nightly's ratio gate: change points in a series of paired ratios (the build under test
over a reference build, both measured in the same session each night), which host drift
cannot move as it moves raw medians.

`judge_series`: Otava's change points on the log ratios, kept only where both levels they separate
last `min_segment` nights (one odd night is no level; history._long_levels). A step is the
ratio of the levels' geometric means with a Welch t interval on the log ratios; it fails the
gate when it is worse beyond the tolerance, starts within the last `last` nights and has not
gone away (a later change point back to within the tolerance of the level before it). What changed across it:
the commit and fingerprint keys that differ between the night before and the night of it.
Explained in docs/explanation/nightly-reference.md.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy  # scipy.stats loads on first use (scipy imports subpackages lazily)

from pytest_hpccomm.baselines.history import (
    DEFAULT_MIN_SEGMENT,
    DEFAULT_WINDOW,
    RunRecord,
    change_points,
)
from pytest_hpccomm.baselines.verdict import DEFAULT_ALPHA, band

DEFAULT_LAST = 3  # nights a new step may start in and still fail the gate


@dataclass(frozen=True)
class Step:
    """A change of level in a ratio series, at `index` (the first night of the new level)."""

    index: int
    run_id: str
    night: str  # the night's UTC timestamp, minute precision
    step: float  # new level / old level (geometric means of the ratios)
    ci: tuple[float, float]
    worse: bool  # in the metric's worse direction
    beyond: bool  # outside the tolerance band
    p_value: float
    changed: list[str] = field(default_factory=list)  # fingerprint differences across it
    gone_at: int | None = None  # index of the night the level came back, if it did


@dataclass(frozen=True)
class SeriesGate:
    """The ratio gate of one series: its steps and those that fail it."""

    nights: int
    steps: list[Step]
    fired: list[Step]
    reason: str = ""  # why no gate could be applied ("" when it was)


def fingerprint_changes(
    before: Mapping[str, Any], after: Mapping[str, Any], side: str
) -> list[str]:
    """'side: key a -> b' for every key whose value differs (absent reads as '-')."""
    out = []
    for key in sorted(set(before) | set(after)):
        a, b = before.get(key, "-"), after.get(key, "-")
        if a != b:
            out.append(f"{side}: {key} {a} -> {b}")
    return out


def _level(logs: np.ndarray) -> float:
    return float(np.mean(logs))


def _interval(old: np.ndarray, new: np.ndarray, alpha: float) -> tuple[float, float]:
    """Welch t interval of exp(mean(new) - mean(old)) at 1 - 2*alpha."""
    if len(old) < 2 or len(new) < 2 or (np.ptp(old) == 0 and np.ptp(new) == 0):
        step = math.exp(_level(new) - _level(old))
        return step, step
    res = scipy.stats.ttest_ind(new, old, equal_var=False)
    low, high = res.confidence_interval(confidence_level=1.0 - 2.0 * alpha)
    return math.exp(float(low)), math.exp(float(high))


def judge_series(
    records: Sequence[RunRecord],
    tolerance: float,
    last: int = DEFAULT_LAST,
    min_segment: int = DEFAULT_MIN_SEGMENT,
    max_pvalue: float = 0.001,
    alpha: float = DEFAULT_ALPHA,
) -> SeriesGate:
    """The ratio gate of one series of paired runs, oldest first (module docstring)."""
    if not 0 < tolerance < 1:
        raise ValueError(f"tolerance must be in (0, 1), got {tolerance!r}")
    if min_segment < 1 or last < 1:
        raise ValueError("last and min_segment must be at least 1")
    paired = [r for r in records if r.has_ratio]
    n = len(paired)
    if n < 2 * min_segment:
        return SeriesGate(n, [], [], f"{n} paired nights; a step needs {2 * min_segment}")
    ratios = [float(r.ratio or 0.0) for r in paired]
    logs = np.log(np.asarray(ratios))
    # each window holds two full levels and a night either side (history.DEFAULT_WINDOW);
    # on the log ratios: a ratio's spread grows with its level, so on the raw scale a large
    # step widens its own level and Otava's t test loses it
    window = max(DEFAULT_WINDOW, 2 * min_segment + 2)
    found = {
        cp.index: cp
        for cp in change_points(
            logs.tolist(), max_pvalue=max_pvalue, window_len=window, min_segment=min_segment
        )
    }
    cuts = sorted(found)
    bounds = [0, *cuts, n]
    lower_better = paired[-1].direction == "lower"
    down, up = band(tolerance)
    steps: list[Step] = []
    for k, i in enumerate(cuts):
        old, new = logs[bounds[k] : i], logs[i : bounds[k + 2]]
        step = math.exp(_level(new) - _level(old))
        before, after = paired[i - 1], paired[i]
        steps.append(
            Step(
                index=i,
                run_id=after.run_id,
                night=after.timestamp.strftime("%Y-%m-%d %H:%M"),
                step=step,
                ci=_interval(old, new, alpha),
                worse=step > 1 if lower_better else step < 1,
                beyond=not down <= step <= up,
                p_value=found[i].p_value,
                changed=fingerprint_changes(
                    {"commit": before.commit or "-", **before.fingerprint},
                    {"commit": after.commit or "-", **after.fingerprint},
                    "candidate",
                )
                + fingerprint_changes(
                    before.base_fingerprint or {}, after.base_fingerprint or {}, "reference"
                ),
            )
        )
    # a step is gone when a later level is back within the tolerance of the level before it
    for k, s in enumerate(steps):
        prior = _level(logs[bounds[k] : s.index])
        for j in range(k + 1, len(steps)):
            later = _level(logs[steps[j].index : bounds[j + 2]])
            if down <= math.exp(later - prior) <= up:
                steps[k] = Step(**{**s.__dict__, "gone_at": steps[j].index})
                break
    fired = [s for s in steps if s.worse and s.beyond and s.gone_at is None and s.index >= n - last]
    return SeriesGate(n, steps, fired)


def step_line(s: Step, unit_ratio: str = "ratio") -> str:
    """One readable line of a step."""
    what = "worse" if s.worse else "better"
    gone = f"; gone again from night {s.gone_at + 1}" if s.gone_at is not None else ""
    changed = "; ".join(s.changed) if s.changed else "no fingerprint difference"
    return (
        f"night {s.index + 1} ({s.night}, run {s.run_id}): {unit_ratio} step {s.step:.3f} "
        f"({what}; {(1 - 2 * DEFAULT_ALPHA) * 100:g}% CI {s.ci[0]:.3f}\N{EN DASH}"
        f"{s.ci[1]:.3f}, p={s.p_value:.2g}"
        f"{'' if s.beyond else ', within the tolerance'}){gone}; changed: {changed}"
    )
