"""A toy stack outside the package, written against the stack contract alone
(pytest_hpccomm.stacks.contract): a probe, an implementation resolver, a session store over
JobPool, records, and one fixture that hands a point to judge_point. Loaded with
`-p tests.contract.toy_stack`; nothing in pytest_hpccomm/ names it.

Its "jobs" are stand-ins with known answers (this tests the orchestrator's logic, not a
stack): implementation v1 takes 10 us per batch, v2 13 us (a 1.3x slower build); each job
gives JOB_BATCHES batches, and every job of round r shares that round's drift 1 + 0.05 r, as
two builds measured side by side on a drifting host do. `broken` is installed but does not
start; any other name is not installed here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from pytest_hpccomm.measure.measurement import Direction, Measurement
from pytest_hpccomm.measure.pooling import JobPool
from pytest_hpccomm.record import Record
from pytest_hpccomm.session import HpcSession
from pytest_hpccomm.stacks.contract import (
    BASE_FLAG,
    CANDIDATE_FLAG,
    Implementations,
    Point,
    judge_point,
    sides,
)

STACK = "toy"
US_PER_BATCH = {"v1": 10.0, "v2": 13.0}
JOB_BATCHES = 2


class ToyAbsent(Exception):
    pass


class ToyBroken(Exception):
    pass


class ToyFailed(Exception):
    pass


@dataclass(frozen=True)
class ToyImpl:
    name: str
    us: float


def resolve(spec: str) -> ToyImpl:
    if spec == "broken":
        raise ToyBroken(f"toy {spec}: installed, but its peer exits at start")
    if spec not in US_PER_BATCH:
        raise ToyAbsent(f"toy {spec!r} is not installed here")
    return ToyImpl(spec, US_PER_BATCH[spec])


IMPLS = Implementations(resolve, (ToyAbsent,), (ToyBroken,))


@dataclass
class ToySweep:
    samples: list[float]
    job_sizes: list[int]
    fingerprint: dict[str, Any] = field(default_factory=dict)


def merge(sweeps: Sequence[ToySweep]) -> ToySweep:
    return ToySweep(
        [x for s in sweeps for x in s.samples],
        [n for s in sweeps for n in s.job_sizes],
        sweeps[0].fingerprint,
    )


class ToySweeps:
    """The session's store: one pooled sweep per size; `base`: a paired run's base side."""

    def __init__(
        self,
        impl: ToyImpl,
        slowdown: float,
        repeats: int,
        max_repeats: int,
        base: ToySweeps | None = None,
    ) -> None:
        self.impl, self.slowdown, self.base = impl, slowdown, base
        self.pool: JobPool[ToySweep] = JobPool(merge, repeats, max_repeats, (ToyFailed,))
        self.jobs = 0

    def job(self, round_: int | None = None) -> ToySweep:
        r = self.jobs if round_ is None else round_
        self.jobs += 1
        drift = 1.0 + 0.05 * r
        jitter = (1.0 - 0.004, 1.0 + 0.004) if r % 2 else (1.0 + 0.002, 1.0 - 0.002)
        us = self.impl.us * self.slowdown * drift
        return ToySweep(
            [us * j for j in jitter[:JOB_BATCHES]], [JOB_BATCHES], {"toy": self.impl.name}
        )

    def point(self, size: int, rounds: int) -> Point[ToySweep]:
        base = self.base
        return Point(
            get=lambda: self.pool.get(size, self.job),
            more=lambda: self.pool.more(size, self.job),
            cost=lambda: self.pool.cost(size),
            paired=None
            if base is None
            else lambda: self.pool.paired(size, base.job, self.job, rounds),
        )


@dataclass(frozen=True)
class ToyProbe:
    name: str = STACK

    def unavailable_reason(self) -> str | None:
        return None

    def versions(self) -> dict[str, str]:
        return {}


@pytest.hookimpl(optionalhook=True)
def pytest_hpccomm_stack_probes(config: pytest.Config) -> list[ToyProbe]:
    return [ToyProbe()]


@pytest.hookimpl(optionalhook=True)
def pytest_hpccomm_paired_stacks(config: pytest.Config) -> list[str]:
    return [STACK]


@pytest.fixture(scope="session")
def toy_sweeps(hpc_session: HpcSession) -> ToySweeps:
    cfg = hpc_session.cfg
    paired = sides(hpc_session, STACK)
    if paired is None:
        return ToySweeps(IMPLS("v1"), cfg.inject_slowdown, cfg.repeats, cfg.repeat_limit)
    base = ToySweeps(IMPLS(paired[0], f"{BASE_FLAG} {STACK}"), 1.0, cfg.repeats, cfg.repeat_limit)
    candidate = IMPLS(paired[1], f"{CANDIDATE_FLAG} {STACK}")
    return ToySweeps(candidate, cfg.inject_slowdown, cfg.repeats, cfg.repeat_limit, base)


ToyRun = Callable[[int], None]


@pytest.fixture
def toy_latency(toy_sweeps: ToySweeps, hpc_session: HpcSession, hpc_record: Record) -> ToyRun:
    def records(sweep: ToySweep, size: int) -> list[Measurement]:
        return [
            Measurement(
                stack=STACK,
                benchmark="toy_latency",
                params={"size": size},
                samples=tuple(sweep.samples),
                unit="us",
                direction=Direction.LOWER_IS_BETTER,
                metric="latency",
                extra={"job_sizes": list(sweep.job_sizes)},
            )
        ]

    def run(size: int) -> None:
        judge_point(
            hpc_record,
            toy_sweeps.point(size, hpc_session.cfg.ab_rounds),
            lambda sweep: records(sweep, size),
            (ToyFailed,),
        )

    return run
