"""The canary's slowdown (--hpc-inject-slowdown F), applied inside a peer's timed region.

Standard library only. A peer calls stretch() at the end of each timed batch: it spins until
the batch has taken F times as long as it did, so the stack's real work is measured and then
made slower by a known factor, and the verdict engine's power can be checked against it.
"""

from __future__ import annotations

import time
from typing import Callable


def stretch(
    t0: float, factor: float, clock: Callable[[], float] = time.perf_counter, idle: bool = False
) -> float:
    """Spin until the region started at `t0` (on `clock`) has taken `factor` times as long;
    returns the region's own (unstretched) time, or 0.0 without a canary (factor <= 1: no
    clock is read, the plain timed region pays nothing). idle: sleep instead, for a stack whose
    work runs on threads of its own (Horovod's background loop) that a spinning caller would
    starve on a small machine."""
    if factor <= 1.0:
        return 0.0
    work = clock() - t0
    target = t0 + work * factor
    if idle:
        while (left := target - clock()) > 0:
            time.sleep(left)
        return work
    while clock() < target:
        pass
    return work


def finish(
    t0: float, factor: float, clock: Callable[[], float] = time.perf_counter
) -> tuple[float, float]:
    """End a timed region started at `t0`: (its time, its own work), the first stretched by
    the canary (`factor`), both equal without one."""
    if factor > 1.0:
        work = stretch(t0, factor, clock)
        return clock() - t0, work
    took = clock() - t0
    return took, took
