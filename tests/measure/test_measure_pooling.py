"""JobPool: a session's sweeps pooled from jobs, grown for undecided verdicts, paired rounds.

The jobs here are stand-ins returning numbers (the pool's own logic: counting, caching,
ordering); real jobs through it are the MPI and gRPC gate tests (tests/integration).
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest

from pytest_hpccomm.baselines.adaptive import until_decided
from pytest_hpccomm.measure.measurement import Measurement
from pytest_hpccomm.measure.pooling import JobPool, balanced_order, pool_point
from tests.builders import make_measurement


class Broken(Exception):
    pass


def pooled(jobs: Sequence[list[str]]) -> list[str]:
    return [x for job in jobs for x in job]


def test_get_runs_repeats_jobs_once_and_more_grows_to_the_limit() -> None:
    pool: JobPool[list[str]] = JobPool(pooled, repeats=3, max_repeats=5, failures=(Broken,))
    ran: list[int] = []

    def job() -> list[str]:
        ran.append(1)
        return [f"j{len(ran)}"]

    assert pool.get("k", job) == ["j1", "j2", "j3"]
    assert pool.get("k", job) == ["j1", "j2", "j3"] and len(ran) == 3  # cached
    assert pool.cost("k") == {"jobs": 3, "added": 0, "seconds": 0.0}
    assert pool.more("k", job) == ["j1", "j2", "j3", "j4"]
    assert pool.more("k", job) == ["j1", "j2", "j3", "j4", "j5"]
    assert pool.more("k", job) is None and len(ran) == 5  # the limit: nothing ran
    cost = pool.cost("k")
    assert cost["jobs"] == 5 and cost["added"] == 2 and cost["seconds"] >= 0
    assert pool.get("k", job) == ["j1", "j2", "j3", "j4", "j5"]  # later items see the growth
    assert pool.more("never-run", job) is None


def test_pooled_is_the_sweep_only_once_get_pooled_it() -> None:
    # the gRPC path proof takes the timed sweep if there is one, else runs one job itself
    pool: JobPool[list[str]] = JobPool(pooled, repeats=2, max_repeats=2, failures=(Broken,))
    assert pool.pooled("k") is None
    assert pool.get("k", lambda: ["x"]) == pool.pooled("k") == ["x", "x"]

    def broken() -> list[str]:
        raise Broken("no")

    with pytest.raises(Broken):
        pool.get("bad", broken)
    assert pool.pooled("bad") is None


def test_more_of_grows_one_part_of_a_sweep_alone() -> None:
    # a sweep's jobs run benchmarks a and b; a point of a is undecided: its added jobs run a
    # alone, its view pools the sweep's jobs restricted to a with them, b's points are untouched
    pool: JobPool[list[str]] = JobPool(pooled, repeats=2, max_repeats=4, failures=(Broken,))
    ran: list[str] = []

    def both() -> list[str]:
        ran.append("ab")
        return [f"a{len(ran)}", f"b{len(ran)}"]

    def a_alone() -> list[str]:
        ran.append("a")
        return [f"a{len(ran)}"]

    def only_a(job: list[str]) -> list[str]:
        return [x for x in job if x.startswith("a")]

    assert pool.get("k", both) == ["a1", "b1", "a2", "b2"]
    assert pool.more_of("k", "a", a_alone, only_a) == ["a1", "a2", "a3"]
    assert pool.more_of("k", "a", a_alone, only_a) == ["a1", "a2", "a3", "a4"]
    assert pool.more_of("k", "a", a_alone, only_a) is None  # the view holds max_repeats jobs
    assert ran == ["ab", "ab", "a", "a"]
    assert pool.get_part("k", "a", both) == ["a1", "a2", "a3", "a4"]  # a's later points
    assert pool.get_part("k", "b", both) == ["a1", "b1", "a2", "b2"]  # b: the sweep, as run
    cost_a, cost_b = pool.cost("k", "a"), pool.cost("k", "b")
    assert cost_a["jobs"] == 4 and cost_a["added"] == 2 and cost_a["seconds"] >= 0
    assert cost_b == {"jobs": 2, "added": 0, "seconds": 0.0}

    def broken() -> list[str]:
        raise Broken("a alone exited 1")

    with pytest.raises(Broken, match="exited 1"):
        pool.more_of("k", "b", broken, only_a)
    with pytest.raises(Broken):
        pool.get_part("k", "b", both)  # b's view failed: its later points fail alike
    assert pool.more_of("k", "b", a_alone, only_a) is None
    assert pool.more_of("never-run", "a", a_alone, only_a) is None


def test_a_failure_is_cached_and_a_failed_extra_job_fails_the_sweep() -> None:
    pool: JobPool[list[str]] = JobPool(pooled, repeats=1, max_repeats=3, failures=(Broken,))
    calls: list[int] = []

    def bad() -> list[str]:
        calls.append(1)
        raise Broken("job 1 exited 1")

    for _ in range(2):
        with pytest.raises(Broken, match="exited 1"):
            pool.get("a", bad)
    assert len(calls) == 1
    assert pool.get("b", lambda: ["ok"]) == ["ok"]
    with pytest.raises(Broken):
        pool.more("b", bad)
    with pytest.raises(Broken):
        pool.get("b", lambda: ["ok"])
    assert pool.more("b", lambda: ["ok"]) is None


def test_other_errors_are_not_swallowed() -> None:
    pool: JobPool[list[str]] = JobPool(pooled, repeats=1, max_repeats=1, failures=(Broken,))

    def typo() -> list[str]:
        raise KeyError("a bug in the stack's code")

    with pytest.raises(KeyError):
        pool.get("k", typo)


def test_paired_rounds_run_adjacent_in_the_drawn_order_and_pool_in_round_order() -> None:
    pool: JobPool[list[str]] = JobPool(pooled, repeats=3, max_repeats=6, failures=(Broken,))
    order: list[str] = []

    def side(name: str):  # type: ignore[no-untyped-def]
        def job(i: int) -> list[str]:
            order.append(f"{name}{i}")
            return [f"{name}{i}"]

        return job

    cand, base = pool.paired("k", side("A"), side("B"), rounds=6)
    drawn = pool.orders["k"]
    assert sorted(drawn) == list("bbbccc")  # each side first in half the rounds
    # each round's two jobs adjacent, the side the order names first
    assert order == [
        f"{x}{i}" for i, first in enumerate(drawn) for x in (("A", "B") if first == "b" else "BA")
    ]
    assert base == [f"A{i}" for i in range(6)] and cand == [f"B{i}" for i in range(6)]
    assert pool.paired("k", side("A"), side("B"), rounds=6) == (cand, base) and len(order) == 12


def test_the_first_side_is_balanced_and_drawn_not_alternating() -> None:
    # odd rounds: the base goes first once more; a fixed A B, B A pattern is one draw of many
    assert sorted(balanced_order(5, random.Random(1))) == [False, False, True, True, True]
    draws = {tuple(balanced_order(10, random.Random(seed))) for seed in range(200)}
    assert all(sum(d) == 5 for d in draws)
    assert len(draws) > 100  # C(10, 5) = 252 orders, not one
    assert tuple(i % 2 == 0 for i in range(10)) != tuple(balanced_order(10, random.Random(7)))


def test_until_decided_grows_while_any_record_is_undecided() -> None:
    def width(*xs: float) -> list[Measurement]:  # a record's spread stands for its verdict
        return [make_measurement([x] * 5) for x in xs]

    grown = [width(0.5, 0.2), width(0.5, 0.05), width(0.01, 0.02)]
    cost = {"jobs": 6, "added": 3, "seconds": 1.5}
    got = until_decided(
        width(0.9, 0.9),
        lambda m: m.samples[0] > 0.1,
        lambda: grown.pop(0) if grown else None,
        lambda: cost,
    )
    assert [m.samples[0] for m in got] == [0.01, 0.02] and not grown
    assert all(m.extra["adaptive"] == cost for m in got)
    kept = until_decided(width(0.9), lambda m: m.samples[0] > 0.1, lambda: None, lambda: cost)
    assert kept[0].samples[0] == 0.9 and kept[0].extra["adaptive"] == cost


def test_pool_point_records_where_each_job_ends() -> None:
    parts = [{"samples": [1.0, 2.0, 3.0], "warmup": 1}, {"samples": [4.0, 5.0], "warmup": 2}]
    got = pool_point(parts, ("samples",))
    assert got["samples"] == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert got["job_sizes"] == [3, 2] and got["job_medians"] == [2.0, 4.5] and got["warmup"] == 3
