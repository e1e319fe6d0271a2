"""Pooling one benchmark point measured by several independent jobs (--hpc-repeats).

Two jobs of unchanged code land up to ~10 % apart on a noisy node (process placement, memory
layout), a shift no batch of one job can show; pooled, the batches of N jobs carry that spread
into the samples the verdict is built from (benchmarks/canary.py, README).
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, Generic, TypeVar

from pytest_hpccomm.measure.measurement import UNSTRETCHED


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


def jobs_extra(point: Mapping[str, Any], medians: bool = True) -> dict[str, Any]:
    """A pooled point's jobs for its record's extra (a verdict resamples whole jobs): job_sizes,
    and job_medians unless `medians` is False; {} for a point that was not pooled."""
    if "job_sizes" not in point:
        return {}
    return {"job_sizes": point["job_sizes"]} | (
        {"job_medians": point["job_medians"]} if medians else {}
    )


def canary_extra(point: Mapping[str, Any]) -> dict[str, float]:
    """A canary point's own work for its record's extra: {UNSTRETCHED: the median of its
    batches' unstretched values}, in the samples' unit; {} for a plain point."""
    work = point.get("unstretched")
    return {UNSTRETCHED: statistics.median(float(x) for x in work)} if work else {}


S = TypeVar("S")
T = TypeVar("T")


def balanced_order(rounds: int, rng: random.Random | None = None) -> list[bool]:
    """Which side runs first in each round of a paired run (True: the base): each side first
    in half the rounds (the base in the odd one), the rounds in random order. A fixed pattern
    (A B, B A, A B, ...: each side's jobs every 4 jobs) lines a host whose speed moves every
    few jobs up with one side, and the rounds stop being independent (A-vs-A gRPC at 10 MB:
    benchmarks/RESULTS.md). Balanced, so an effect of going first still cancels."""
    firsts = [i % 2 == 0 for i in range(rounds)]
    (rng or random.Random()).shuffle(firsts)
    return firsts


class JobPool(Generic[S]):
    """A session's sweeps, each pooled from independent jobs of one stack (`merge` pools
    them): `repeats` jobs at first, grown one at a time up to `max_repeats` for an undecided
    verdict (adaptive repeats), or in a paired A/B run one job of each side per round.
    A failure (one of `failures`) is cached too: every item of a failed sweep reports the same
    error without relaunching."""

    def __init__(
        self,
        merge: Callable[[Sequence[S]], S],
        repeats: int,
        max_repeats: int,
        failures: tuple[type[BaseException], ...],
    ) -> None:
        self.merge, self.repeats = merge, repeats
        self.max_repeats = max(max_repeats, repeats)
        self.failures = failures
        self._jobs: dict[Hashable, list[S]] = {}
        self._done: dict[Hashable, S | BaseException] = {}
        self._added: dict[Hashable, float] = {}  # seconds the added jobs took
        self._part_jobs: dict[tuple[Hashable, Hashable], list[S]] = {}  # more_of's jobs
        self._part_done: dict[tuple[Hashable, Hashable], S | BaseException] = {}
        self._paired: dict[Hashable, tuple[S, S] | BaseException] = {}
        self.orders: dict[Hashable, str] = {}  # key -> which side went first, round by round

    def get(self, key: Hashable, job: Callable[[], S]) -> S:
        if key not in self._done:
            try:
                self._jobs[key] = [job() for _ in range(self.repeats)]
                self._done[key] = self.merge(self._jobs[key])
            except self.failures as exc:
                self._done[key] = exc
        return self._settled(self._done[key])

    def pooled(self, key: Hashable) -> S | None:
        """The sweep if get() has pooled it (None: not yet, or it failed)."""
        got = self._done.get(key)
        return None if got is None or isinstance(got, BaseException) else got

    def more(self, key: Hashable, job: Callable[[], S]) -> S | None:
        """The sweep with one more job pooled in, or None once it has max_repeats jobs (or
        failed). A failed extra job fails the sweep, as a first one would."""
        jobs = self._jobs.get(key, [])
        if (
            not jobs
            or len(jobs) >= self.max_repeats
            or key not in self._done
            or isinstance(self._done[key], BaseException)
        ):
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

    def get_part(self, key: Hashable, part: Hashable, job: Callable[[], S]) -> S:
        """The sweep (get), or once more_of added jobs for `part`, that part's view."""
        whole = self.get(key, job)
        got = self._part_done.get((key, part))
        return whole if got is None else self._settled(got)

    def more_of(
        self, key: Hashable, part: Hashable, job: Callable[[], S], restrict: Callable[[S], S]
    ) -> S | None:
        """One more job of `part` alone (one benchmark of a sweep whose jobs run several):
        the part's view, each of the sweep's jobs restricted to it and then its own added
        jobs pooled, or None once that view holds max_repeats jobs (or failed). An undecided
        point then costs a job of its benchmark, not of every benchmark the sweep runs."""
        jobs = self._jobs.get(key, [])
        done = self._done.get(key)
        added = self._part_jobs.setdefault((key, part), [])
        if (
            not jobs
            or done is None
            or isinstance(done, BaseException)
            or isinstance(self._part_done.get((key, part)), BaseException)
            or len(jobs) + len(added) >= self.max_repeats
        ):
            return None
        t0 = time.monotonic()
        try:
            added.append(job())
            self._part_done[(key, part)] = self.merge([restrict(j) for j in jobs] + added)
        except self.failures as exc:
            self._part_done[(key, part)] = exc
        finally:
            self._added[(key, part)] = self._added.get((key, part), 0.0) + time.monotonic() - t0
        return self._settled(self._part_done[(key, part)])

    def cost(self, key: Hashable, part: Hashable | None = None) -> dict[str, Any]:
        """What the sweep's (or its part's, more_of) records keep as `extra["adaptive"]`
        (baselines/adaptive.py)."""
        jobs = len(self._jobs.get(key, []))
        added, seconds = max(0, jobs - self.repeats), self._added.get(key, 0.0)
        if part is not None:
            own = len(self._part_jobs.get((key, part), []))
            jobs, added = jobs + own, added + own
            seconds += self._added.get((key, part), 0.0)
        return {"jobs": jobs, "added": added, "seconds": round(seconds, 2)}

    def paired(
        self, key: Hashable, base: Callable[[int], S], candidate: Callable[[int], S], rounds: int
    ) -> tuple[S, S]:
        """(candidate, base) of a paired A/B run: `rounds` rounds of one job of each side
        (called with the round's index), adjacent, which side first drawn by balanced_order
        (kept in `orders`: "b" where the base went first), each side pooled in round order so
        job i of one side pairs with job i of the other (baselines/paired.py)."""
        if key not in self._paired:
            jobs: dict[str, list[S]] = {"base": [], "candidate": []}
            firsts = balanced_order(rounds)
            self.orders[key] = "".join("b" if f else "c" for f in firsts)
            try:
                for i, base_first in enumerate(firsts):
                    for side in ("base", "candidate") if base_first else ("candidate", "base"):
                        jobs[side].append((base if side == "base" else candidate)(i))
                self._paired[key] = (self.merge(jobs["candidate"]), self.merge(jobs["base"]))
            except self.failures as exc:
                self._paired[key] = exc
        return self._settled(self._paired[key])

    @staticmethod
    def _settled(got: T | BaseException) -> T:
        if isinstance(got, BaseException):
            raise got
        return got
