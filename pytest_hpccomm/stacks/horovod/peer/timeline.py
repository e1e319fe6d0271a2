"""Horovod's timeline (HOROVOD_TIMELINE, Chrome trace JSON written by the coordinator) reduced
to what a user tunes against: per training step, the time tensors spent in negotiation (ranks
agreeing what is ready: NEGOTIATE_*) and in the collective itself (ALLREDUCE and its nested
activities: fusion-buffer copies, the MPI or Gloo call). Standard library only: the peer runs it.

Each tensor is a trace "process" (pid); its top-level B/E pairs are the phases. A step's
negotiation (reduction) time is the wall time covered by at least one tensor's negotiation
(reduction) phase begun in that step: the union, not the sum, since tensors overlap (summed
over ResNet-50's 161 gradients, negotiation would be 30 times the step).
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any, Sequence

NEGOTIATION_PREFIX = "NEGOTIATE_"
REDUCTION = ("ALLREDUCE",)


def phases(events: Sequence[dict[str, Any]]) -> list[tuple[str, float, float]]:
    """(name, start, end) of every top-level phase, epoch microseconds."""
    epoch = 0.0
    for e in events:
        if e.get("ph") == "M" and "start_time_since_epoch_in_micros" in e.get("args", {}):
            epoch = float(e["args"]["start_time_since_epoch_in_micros"])
    stacks: dict[Any, list[tuple[str, float]]] = defaultdict(list)
    out = []
    for e in events:
        ph, pid = e.get("ph"), e.get("pid")
        if ph == "B":
            stacks[pid].append((str(e.get("name", "")), float(e["ts"])))
        elif ph == "E" and stacks[pid]:
            name, start = stacks[pid].pop()
            if not stacks[pid]:  # closed a top-level phase
                out.append((name, epoch + start, epoch + float(e["ts"])))
    return out


def per_step(text: str, boundaries: Sequence[float]) -> list[dict[str, float]]:
    """For steps [boundaries[i], boundaries[i+1]) (epoch seconds): milliseconds of
    negotiation and of reduction whose phases began in the step."""
    found = phases(json.loads(text))
    steps = []
    for lo, hi in zip(boundaries, boundaries[1:]):
        lo_us, hi_us = lo * 1e6, hi * 1e6
        inside = [(n, a, b) for n, a, b in found if lo_us <= a < hi_us]
        neg = covered([(a, b) for n, a, b in inside if n.startswith(NEGOTIATION_PREFIX)])
        red = covered([(a, b) for n, a, b in inside if n in REDUCTION])
        steps.append({"negotiation_ms": neg / 1e3, "reduction_ms": red / 1e3})
    return steps


def covered(intervals: Sequence[tuple[float, float]]) -> float:
    """Length of the union of the intervals."""
    total, end = 0.0, float("-inf")
    for a, b in sorted(intervals):
        if b > end:
            total += b - max(a, end)
            end = b
    return total
