"""contract.SessionStore's own logic with stand-in jobs (what a stack's store gets from it):
pooling, adaptive repeats, paired rounds against the base, and the contention guard's reruns."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pytest

from pytest_hpccomm import retries
from pytest_hpccomm.stacks.contract import SessionStore


@dataclass(frozen=True)
class Job:
    side: str
    samples: tuple[float, ...]
    cpu: tuple[dict[str, float], ...] = ()
    disturbed: str = ""
    reruns: int = 0


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
    store = SessionStore(job, merge, 2, 3, (RuntimeError,))
    assert store.get("k", "here").samples == (1.0, 1.0) and job.calls == [("k", "here")] * 2
    assert store.more("k", "here") is not None and len(job.calls) == 3
    assert store.more("k", "here") is None  # at max_repeats
    assert store.cost("k")["jobs"] == 3


def test_paired_rounds_run_each_side_once_per_round() -> None:
    base_job, cand_job = Side("base", 1.0), Side("candidate", 2.0)
    base = SessionStore(base_job, merge, 1, 1, (RuntimeError,))
    cand = SessionStore(cand_job, merge, 1, 1, (RuntimeError,), base=base)
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
    got = SessionStore(job, merge, 1, 1, (RuntimeError,)).one_job("k", "here")
    assert len(job.calls) == 2 and got.reruns == 1 and got.disturbed == ""
    assert [r.cause for r in retry_ledger] == [retries.CONTENTION]
    unguarded = Side("b", 1.0, noisy=1)
    got = SessionStore(unguarded, merge, 1, 1, (RuntimeError,), guard=False).one_job("k", "x")
    assert len(unguarded.calls) == 1 and got.disturbed and got.reruns == 0
