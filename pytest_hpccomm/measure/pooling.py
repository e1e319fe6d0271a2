"""Pooling one benchmark point measured by several independent jobs (--hpc-repeats).

Two jobs of unchanged code land up to ~10 % apart on a noisy node (process placement, memory
layout), a shift no batch of one job can show; pooled, the batches of N jobs carry that spread
into the samples the verdict is built from (benchmarks/canary.py, README).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any


def pool_point(parts: Sequence[Mapping[str, Any]], series: Sequence[str]) -> dict[str, Any]:
    """The first part, with each list in `series` concatenated over the parts in job order,
    `warmup` summed, and `job_medians` (each part's median sample) added."""
    out = dict(parts[0])
    for name in series:
        if isinstance(out.get(name), list):
            out[name] = [x for p in parts for x in p.get(name, [])]
    out["warmup"] = sum(int(p["warmup"]) for p in parts)
    out["job_medians"] = [statistics.median(p["samples"]) for p in parts if p["samples"]]
    return out
