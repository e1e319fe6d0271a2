"""contract.SessionStore's own logic with stand-in jobs (what a stack's store gets from it):
pooling, adaptive repeats (also of one part of a job that runs several), paired rounds against
the base, and the contention guard's reruns (one guard may serve both sides)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pytest

from pytest_hpccomm import retries
from pytest_hpccomm.proc.cpu_share import QuietRetry
from pytest_hpccomm.stacks.contract import SessionStore


@dataclass(frozen=True)
class Job:
    side: str
    samples: tuple[float, ...]
    cpu: tuple[dict[str, float], ...] = ()
    disturbed: str = ""
    reruns: int = 0


Store = SessionStore[str, Job]


def merge(jobs: Sequence[Job]) -> Job:
    return Job(jobs[0].side, tuple(x for j in jobs for x in j.samples), (), "", 0)


class Side:
    """Jobs of one side: `value` per sample; the first `noisy` tries disturbed."""

    def __init__(self, side: str, value: float, noisy: int = 0) -> None:
        self.side, self.value, self.noisy, self.calls = side, value, noisy, []  # type: ignore[var-annotated]

    def __call__(self, key: str, where: str) -> Job:
        self.calls.append((key, where))
        why = "cores shared: a neighbour" if len(self.calls) <= self.noisy else ""
        return Job(self.side, (self.value,), disturbed=why)


def test_get_pools_repeats_and_more_adds_one() -> None:
    job = Side("a", 1.0)
    store = Store(job, merge, 2, 3, (RuntimeError,))
    assert store.get("k", "here").samples == (1.0, 1.0) and job.calls == [("k", "here")] * 2
    assert store.more("k", "here") is not None and len(job.calls) == 3
    assert store.more("k", "here") is None  # at max_repeats
    assert store.cost("k")["jobs"] == 3


def test_paired_rounds_run_each_side_once_per_round() -> None:
    base_job, cand_job = Side("base", 1.0), Side("candidate", 2.0)
    base = Store(base_job, merge, 1, 1, (RuntimeError,))
    cand = Store(cand_job, merge, 1, 1, (RuntimeError,), base=base)
    got_cand, got_base = cand.paired("k", 4, "there")
    assert (got_cand.side, got_base.side) == ("candidate", "base")
    assert got_cand.samples == (2.0,) * 4 and got_base.samples == (1.0,) * 4
    assert base_job.calls == cand_job.calls == [("k", "there")] * 4
    with pytest.raises(ValueError, match="no base"):
        base.paired("k", 2, "there")


def test_a_disturbed_job_runs_again_and_its_reruns_are_kept(
    retry_ledger: list[retries.Retry],
) -> None:
    job = Side("a", 1.0, noisy=1)
    got = Store(job, merge, 1, 1, (RuntimeError,)).one_job("k", "here")
    assert len(job.calls) == 2 and got.reruns == 1 and got.disturbed == ""
    assert [r.cause for r in retry_ledger] == [retries.CONTENTION]
    unguarded = Side("b", 1.0, noisy=1)
    got = Store(unguarded, merge, 1, 1, (RuntimeError,), guard=False).one_job("k", "x")
    assert len(unguarded.calls) == 1 and got.disturbed and got.reruns == 0


@dataclass(frozen=True)
class Parts:
    """A job that runs several parts at once: (part, sample) per sample."""

    samples: tuple[tuple[str, float], ...]
    cpu: tuple[dict[str, float], ...] = ()
    disturbed: str = ""
    reruns: int = 0


def merge_parts(jobs: Sequence[Parts]) -> Parts:
    return Parts(tuple(x for j in jobs for x in j.samples))


def test_an_undecided_part_grows_by_jobs_of_that_part_alone() -> None:
    whole: list[tuple[str, str]] = []
    alone: list[tuple[str, str, str]] = []

    def job(key: str, where: str) -> Parts:
        whole.append((key, where))
        return Parts(tuple((p, 1.0) for p in key.split(",")))

    def part_job(key: str, part: str, where: str) -> Parts:
        alone.append((key, part, where))
        return Parts(((part, 2.0),))

    def restrict(sweep: Parts, part: str) -> Parts:
        return Parts(tuple(x for x in sweep.samples if x[0] == part))

    store = SessionStore[str, Parts](
        job, merge_parts, 2, 3, (RuntimeError,), part_job=part_job, restrict=restrict
    )
    assert store.get_part("a,b", "a", "here").samples == (("a", 1.0), ("b", 1.0)) * 2
    grown = store.more_of("a,b", "a", "here")
    assert grown is not None and grown.samples == (("a", 1.0), ("a", 1.0), ("a", 2.0))
    assert whole == [("a,b", "here")] * 2 and alone == [("a,b", "a", "here")]
    assert store.get_part("a,b", "a", "here") == grown  # a's view from now on
    assert store.get_part("a,b", "b", "here").samples == (("a", 1.0), ("b", 1.0)) * 2
    assert store.more_of("a,b", "a", "here") is None  # a's view holds max_repeats jobs
    assert store.cost("a,b", "a")["jobs"] == 3 and store.cost("a,b", "a")["added"] == 1
    assert store.cost("a,b")["jobs"] == 2 and store.cost("a,b", "b")["jobs"] == 2
    with pytest.raises(ValueError, match="no parts"):
        SessionStore[str, Parts](job, merge_parts, 1, 2, (RuntimeError,)).more_of(
            "a,b", "a", "here"
        )


def test_a_part_job_runs_under_the_contention_guard(retry_ledger: list[retries.Retry]) -> None:
    tries: list[str] = []

    def part_job(key: str, part: str, where: str) -> Parts:
        tries.append(part)
        return Parts(
            ((part, 2.0),), disturbed="cores shared: a neighbour" if len(tries) == 1 else ""
        )

    store = SessionStore[str, Parts](
        lambda key, where: Parts((("a", 1.0),)),
        merge_parts,
        1,
        2,
        (RuntimeError,),
        part_job=part_job,
        restrict=lambda sweep, part: sweep,
    )
    store.get_part("a", "a", "here")
    assert store.more_of("a", "a", "here") is not None
    assert tries == ["a", "a"] and [r.cause for r in retry_ledger] == [retries.CONTENTION]


class Rounds(SessionStore[str, Job]):
    """A store whose paired jobs note the round they ran in."""

    def __init__(self, side: str) -> None:
        super().__init__(Side(side, 1.0), merge, 1, 1, (RuntimeError,))
        self.rounds: list[int] = []

    def paired_job(self, key: str, round_: int, *context: object) -> Job:
        self.rounds.append(round_)
        return self.round_job(key, *context)


def test_paired_jobs_know_their_round_and_the_base_may_be_given_to_paired() -> None:
    base, cand = Rounds("base"), Rounds("candidate")
    got_cand, got_base = cand.paired("k", 4, "there", base=base)
    assert (got_cand.side, got_base.side) == ("candidate", "base")
    assert sorted(base.rounds) == sorted(cand.rounds) == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="no base"):
        cand.paired("other", 2, "there")  # made without one, and none given


def test_stores_sharing_a_guard_share_its_streak_of_disturbed_jobs(
    retry_ledger: list[retries.Retry],
) -> None:
    """The two sides of a paired run under one guard: once `streak` tries in a row were
    disturbed, on either side, the next job gets no re-run."""
    guard = QuietRetry(reruns=2, streak=2)
    a, b = Side("a", 1.0, noisy=9), Side("b", 1.0, noisy=9)
    Store(a, merge, 1, 1, (RuntimeError,), retry=guard).one_job("k", "here")
    Store(b, merge, 1, 1, (RuntimeError,), retry=guard).one_job("k", "here")
    assert len(a.calls) == 2 and len(b.calls) == 1  # b alone would have run twice
    own = Side("c", 1.0, noisy=9)
    Store(own, merge, 1, 1, (RuntimeError,)).one_job("k", "here")
    assert len(own.calls) == 3  # a guard of its own: 1 + 2 re-runs
