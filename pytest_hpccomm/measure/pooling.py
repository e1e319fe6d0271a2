"""Pooling one benchmark point measured by several independent jobs (--hpc-repeats).

Two jobs of unchanged code land up to ~10 % apart on a noisy node (process placement, memory
layout), a shift no batch of one job can show; pooled, the batches of N jobs carry that spread
into the samples the verdict is built from (benchmarks/canary.py, README).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, Generic, TypeVar


def pool_point(parts: Sequence[Mapping[str, Any]], series: Sequence[str]) -> dict[str, Any]:
    """The first part, with each list in `series` concatenated over the parts in job order,
    `warmup` summed, `job_medians` (each part's median sample) and `job_sizes` (each part's
    number of samples: where one job's batches end in the pooled series, so the verdict
    resamples jobs as units) added."""
    out = dict(parts[0])
    for name in series:
        if isinstance(out.get(name), list):
            out[name] = [x for p in parts for x in p.get(name, [])]
    out["warmup"] = sum(int(p["warmup"]) for p in parts)
    out["job_medians"] = [statistics.median(p["samples"]) for p in parts if p["samples"]]
    out["job_sizes"] = [len(p["samples"]) for p in parts]
    return out


S = TypeVar("S")
T = TypeVar("T")


class JobPool(Generic[S]):
    """A session's sweeps, each pooled from independent jobs of one stack (`merge` pools
    them): `repeats` jobs at first, grown one at a time up to `max_repeats` for an undecided
    verdict (adaptive repeats), or in a paired A/B run one job of each side per round.
    A failure (one of `failures`) is cached too: every item of a failed sweep reports the same
    error without relaunching."""

    def __init__(self, merge: Callable[[Sequence[S]], S], repeats: int, max_repeats: int,
                 failures: tuple[type[Exception], ...]) -> None:
        self.merge, self.repeats = merge, repeats
        self.max_repeats = max(max_repeats, repeats)
        self.failures = failures
        self._jobs: dict[Hashable, list[S]] = {}
        self._done: dict[Hashable, S | Exception] = {}
        self._added: dict[Hashable, float] = {}  # seconds the added jobs took
        self._paired: dict[Hashable, tuple[S, S] | Exception] = {}

    def get(self, key: Hashable, job: Callable[[], S]) -> S:
        if key not in self._done:
            try:
                self._jobs[key] = [job() for _ in range(self.repeats)]
                self._done[key] = self.merge(self._jobs[key])
            except self.failures as exc:
                self._done[key] = exc
        return self._settled(self._done[key])

    def more(self, key: Hashable, job: Callable[[], S]) -> S | None:
        """The sweep with one more job pooled in, or None once it has max_repeats jobs (or
        failed). A failed extra job fails the sweep, as a first one would."""
        jobs = self._jobs.get(key, [])
        if not jobs or len(jobs) >= self.max_repeats or key not in self._done \
                or isinstance(self._done[key], Exception):
            return None
        t0 = time.monotonic()
        try:
            jobs.append(job())
            self._done[key] = self.merge(jobs)
        except self.failures as exc:
            self._done[key] = exc
        finally:
            self._added[key] = self._added.get(key, 0.0) + time.monotonic() - t0
        return self._settled(self._done[key])

    def cost(self, key: Hashable) -> dict[str, Any]:
        """What the sweep's records keep as `extra["adaptive"]` (baselines/adaptive.py)."""
        jobs = len(self._jobs.get(key, []))
        return {"jobs": jobs, "added": max(0, jobs - self.repeats),
                "seconds": round(self._added.get(key, 0.0), 2)}

    def paired(self, key: Hashable, base: Callable[[int], S], candidate: Callable[[int], S],
               rounds: int) -> tuple[S, S]:
        """(candidate, base) of a paired A/B run: `rounds` rounds of one job of each side
        (called with the round's index), adjacent, in alternating order (base first in even
        rounds), each side pooled in round order so job i of one side pairs with job i of the
        other (baselines/paired.py)."""
        if key not in self._paired:
            jobs: dict[str, list[S]] = {"base": [], "candidate": []}
            try:
                for i in range(rounds):
                    for side in ("base", "candidate") if i % 2 == 0 else ("candidate", "base"):
                        jobs[side].append((base if side == "base" else candidate)(i))
                self._paired[key] = (self.merge(jobs["candidate"]), self.merge(jobs["base"]))
            except self.failures as exc:
                self._paired[key] = exc
        return self._settled(self._paired[key])

    @staticmethod
    def _settled(got: T | Exception) -> T:
        if isinstance(got, Exception):
            raise got
        return got

