"""JUnit properties: the numbers behind a verdict, carried by `--junitxml` via record_property.

Values are plain text with 6 significant digits (enough for any timer here, short in XML);
a missing number (no baseline yet) is an empty string, never "None".
"""

from __future__ import annotations

import math

from pytest_hpccomm.baselines.result import FUNCTIONAL, RunResult
from pytest_hpccomm.report.common import metric_of

PROPERTY_NAMES = (
    "metric",
    "unit",
    "median",
    "baseline_median",
    "ratio",
    "ci",
    "p_value",
    "verdict",
    "n",
)


def _num(x: float | None) -> str:
    if x is None or not math.isfinite(x):
        return ""
    return f"{x:.6g}"


def junit_properties(result: RunResult, *, prefix: str = "") -> list[tuple[str, str]]:
    """(name, value) pairs for `record_property`. A test that records a whole sweep can pass a
    prefix per point (e.g. "size=8.") so names stay distinct within one <testcase>."""
    m, v = result.measurement, result.verdict
    ci = "" if v.ci_low is None or v.ci_high is None else f"[{_num(v.ci_low)}, {_num(v.ci_high)}]"
    values = (
        metric_of(m),
        m.unit,
        _num(v.current_median),
        _num(v.baseline_median),
        _num(v.ratio),
        ci,
        _num(v.p_value),
        v.outcome.value,
        str(len(m.samples)),
    )
    out = [(prefix + name, value) for name, value in zip(PROPERTY_NAMES, values)]
    if FUNCTIONAL in m.extra:  # reported without a verdict: say why beside "new"
        out.append((prefix + "no_verdict", str(m.extra[FUNCTIONAL])))
    return out
