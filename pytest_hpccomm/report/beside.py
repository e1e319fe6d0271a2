"""Side by side: one stack's result next to another's at the same point, with the ratio.

A measurement names what it should be read beside in `extra["beside"]`: {"stack", "benchmark",
"params" (those that must match; the rest may differ), "label"}. E.g. Horovod's allreduce over
MPI names the OSU allreduce of the same MPI, placement, ranks and size, so the report shows
Horovod's overhead over raw MPI per size. A pair appears only when both ran in the session.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from pytest_hpccomm.baselines.result import RunResult
from pytest_hpccomm.measure.measurement import Measurement, Param
from pytest_hpccomm.report.common import metric_of

BESIDE = "beside"


def beside(stack: str, benchmark: str, params: Mapping[str, Param], label: str) -> dict[str, Any]:
    """The `extra["beside"]` value naming the other stack's point."""
    return {
        BESIDE: {"stack": stack, "benchmark": benchmark, "params": dict(params), "label": label}
    }


@dataclass(frozen=True)
class Pair:
    label: str
    this: RunResult
    other: RunResult

    @property
    def ratio(self) -> float:
        """this / other, of the session's medians (for latency: how many times slower)."""
        a, b = self.this.verdict.current_median, self.other.verdict.current_median
        return a / b if b else float("inf")


def _matches(m: Measurement, want: Mapping[str, Any], metric: str) -> bool:
    if m.stack != want["stack"] or m.benchmark != want["benchmark"] or metric_of(m) != metric:
        return False
    return all(m.params.get(k) == v for k, v in dict(want["params"]).items())


def pairs(results: Sequence[RunResult]) -> list[Pair]:
    """Every result with a `beside` whose named point is among `results` (same metric and
    unit), in the results' order."""
    out = []
    for r in results:
        want = r.measurement.extra.get(BESIDE)
        if not isinstance(want, Mapping):
            continue
        metric = metric_of(r.measurement)
        other = next(
            (
                o
                for o in results
                if o is not r
                and _matches(o.measurement, want, metric)
                and o.measurement.unit == r.measurement.unit
            ),
            None,
        )
        if other is not None:
            out.append(Pair(str(want.get("label", "")), r, other))
    return out
