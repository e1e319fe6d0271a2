"""The measurement record: what every benchmark hands to the verdict engine and the reports.

A record carries raw samples (warm-up already discarded), never only a summary, so the
verdict engine can run rank tests and the store can re-test later runs against them.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field
from typing import Any, Mapping


class Direction(str, enum.Enum):
    LOWER_IS_BETTER = "lower"  # latency, time per step
    HIGHER_IS_BETTER = "higher"  # bandwidth, message rate, images/s


Param = str | int | float | bool

# extra key: under the canary (--hpc-inject-slowdown), the median of the batches' own work
# before the stretch, in the record's unit (baselines/canary.py reads it)
UNSTRETCHED = "unstretched_median"


def param_key(params: Mapping[str, Param]) -> str:
    """Canonical, order-independent text of a parameter set: part of the baseline key."""
    return json.dumps(dict(sorted(params.items())), sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True)
class Measurement:
    """One benchmark at one parameter point, as measured in this run."""

    stack: str  # "mpi", "grpc", "verbs", ...
    benchmark: str  # "osu_latency", "allreduce", "tf_grpc_p2p_latency", ...
    params: Mapping[str, Param]  # {"size": 8, "ranks": 2, ...}
    samples: tuple[float, ...]  # one value per timed batch, in `unit`
    unit: str  # "us", "MB/s", "msg/s", "GB/s"
    direction: Direction
    warmup_discarded: int = 0
    metric: str = ""  # "latency", "bandwidth", "busbw", ...: names the family for plots
    tolerance: float | None = None  # relative effect that counts; None = session default
    extra: Mapping[str, Any] = field(default_factory=dict)  # e.g. algbw next to busbw

    @property
    def key(self) -> str:
        """Identifies this measurement inside one (system, fabric, stack) baseline file."""
        return f"{self.benchmark}{param_key(self.params)}"

    def to_json(self) -> dict[str, Any]:
        return {
            "stack": self.stack,
            "benchmark": self.benchmark,
            "params": dict(sorted(self.params.items())),
            "metric": self.metric,
            "unit": self.unit,
            "direction": self.direction.value,
            "warmup_discarded": self.warmup_discarded,
            "tolerance": self.tolerance,
            "samples": list(self.samples),
            "extra": dict(self.extra),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Measurement:
        return cls(
            stack=str(data["stack"]),
            benchmark=str(data["benchmark"]),
            params=dict(data["params"]),
            samples=tuple(float(x) for x in data["samples"]),
            unit=str(data["unit"]),
            direction=Direction(data["direction"]),
            warmup_discarded=int(data.get("warmup_discarded", 0)),
            metric=str(data.get("metric", "")),
            tolerance=data.get("tolerance"),
            extra=dict(data.get("extra", {})),
        )
