"""Which verdicts more jobs could decide (adaptive repeats, --hpc-max-repeats)."""

from __future__ import annotations

import dataclasses

import pytest

from pytest_hpccomm.baselines.adaptive import (
    describe,
    session_cost,
    settles_without_sessions_spread,
    undecided,
)
from pytest_hpccomm.baselines.verdict import Outcome, Verdict, temper_for_shared_cores


def verdict(
    outcome: Outcome,
    reason: str = "",
    ci: tuple[float, float] | None = (0.98, 1.02),
    tolerance: float = 0.05,
) -> Verdict:
    return Verdict(
        outcome=outcome,
        current_median=1.0,
        baseline_median=1.0,
        ratio=1.0,
        ci_low=None if ci is None else ci[0],
        ci_high=None if ci is None else ci[1],
        p_value=0.5,
        tolerance=tolerance,
        message=f"{outcome.value}: x",
        reason=reason,
    )


@pytest.mark.parametrize(
    "v,more",
    [
        (verdict(Outcome.PASS, "within tolerance"), False),
        (verdict(Outcome.PASS, "within tolerance", (0.97, 1.06)), True),  # reaches beyond 5 %
        (verdict(Outcome.PASS, "within tolerance", (0.94, 1.01)), True),
        (verdict(Outcome.PASS, "within tolerance", (0.94, 1.06), tolerance=0.1), False),
        (
            verdict(
                Outcome.INCONCLUSIVE, "too noisy: CI wider than the tolerance band", (0.8, 1.3)
            ),
            True,
        ),
        (
            dataclasses.replace(
                verdict(Outcome.INCONCLUSIVE, "too few samples (3 vs 30; need 5 each)", None),
                n_current=3,
            ),
            True,
        ),
        (
            dataclasses.replace(
                verdict(Outcome.INCONCLUSIVE, "too few samples (30 vs 3; need 5 each)", None),
                n_current=30,
            ),
            False,
        ),  # the baseline is short
        (verdict(Outcome.INCONCLUSIVE, "worse than tolerance, but not significant"), True),
        (
            verdict(Outcome.INCONCLUSIVE, "better than tolerance, but the CI reaches inside it"),
            True,
        ),
        (
            verdict(Outcome.INCONCLUSIVE, "baseline is in us (lower is better), this run in MB/s"),
            False,
        ),
        (verdict(Outcome.INCONCLUSIVE, "non-positive samples: ratio undefined"), False),
        # a claimed change is confirmed on the most jobs allowed before it is made
        (verdict(Outcome.REGRESSION, "worse beyond tolerance", (1.2, 1.3)), True),
        (verdict(Outcome.IMPROVEMENT, "better beyond tolerance", (0.7, 0.8)), True),
        (verdict(Outcome.NEW, "no baseline", None), False),
    ],
)
def test_undecided(v: Verdict, more: bool) -> None:
    assert undecided(v) is more


@pytest.mark.parametrize(
    "v,more",
    [
        # inside the band: more jobs could settle it, but cannot make it a change
        (verdict(Outcome.PASS, "within tolerance", (0.97, 1.06)), False),
        (
            verdict(
                Outcome.INCONCLUSIVE, "too noisy: CI wider than the tolerance band", (0.8, 1.3)
            ),
            False,
        ),
        (
            dataclasses.replace(
                verdict(
                    Outcome.INCONCLUSIVE, "too noisy: CI wider than the tolerance band", (0.9, 1.6)
                ),
                ratio=1.2,
            ),
            True,
        ),  # beyond: may be one
        (
            dataclasses.replace(
                verdict(
                    Outcome.INCONCLUSIVE, "better than tolerance, but not significant", (0.7, 1.01)
                ),
                ratio=0.9,
            ),
            True,
        ),
        (verdict(Outcome.REGRESSION, "worse beyond tolerance", (1.2, 1.3)), True),
        (verdict(Outcome.IMPROVEMENT, "better beyond tolerance", (0.7, 0.8)), True),
        # beyond the band but nothing more jobs mend
        (
            dataclasses.replace(
                verdict(Outcome.INCONCLUSIVE, "non-positive samples: ratio undefined"), ratio=1.3
            ),
            False,
        ),
    ],
)
def test_the_changes_scope_grows_potential_changes_only(v: Verdict, more: bool) -> None:
    assert undecided(v, "changes") is more


def with_margin(v: Verdict, ratio: float, margin: float | None) -> Verdict:
    return dataclasses.replace(v, ratio=ratio, session_margin=margin)


@pytest.mark.parametrize(
    "v,more",
    [
        # this run known exactly: 1.0 x exp(+-0.02) lies inside the 5 % band, more jobs can pass it
        (with_margin(verdict(Outcome.PASS, "within tolerance", (0.96, 1.06)), 1.0, 0.02), True),
        # 1.03 x exp(+-0.03) = 0.9996-1.061: the sessions' part alone straddles 1.05
        (with_margin(verdict(Outcome.PASS, "within tolerance", (0.97, 1.09)), 1.03, 0.03), False),
        (
            with_margin(
                verdict(
                    Outcome.INCONCLUSIVE,
                    "worse than tolerance, but the CI reaches inside it",
                    (1.02, 1.12),
                ),
                1.07,
                0.01,
            ),
            True,
        ),  # 1.059-1.081
        (
            with_margin(
                verdict(
                    Outcome.INCONCLUSIVE,
                    "worse than tolerance, but the CI reaches inside it",
                    (1.0, 1.15),
                ),
                1.07,
                0.04,
            ),
            False,
        ),  # 1.028-1.114
        (
            with_margin(
                verdict(
                    Outcome.INCONCLUSIVE, "too noisy: CI wider than the tolerance band", (0.85, 1.2)
                ),
                0.8,
                0.05,
            ),
            True,
        ),  # 0.761-0.841: wholly beyond
        (with_margin(verdict(Outcome.PASS, "within tolerance", (0.97, 1.06)), 1.03, None), True),
        (with_margin(verdict(Outcome.PASS, "within tolerance", (0.97, 1.06)), 1.03, 0.0), True),
    ],
)
def test_the_spread_between_sessions_is_not_mended_by_more_jobs(v: Verdict, more: bool) -> None:
    assert undecided(v) is more
    assert settles_without_sessions_spread(v) is more


def test_a_baseline_from_shared_cores_is_not_mended_by_more_jobs() -> None:
    hit = verdict(Outcome.REGRESSION, "worse beyond tolerance", (1.2, 1.3))
    tempered = temper_for_shared_cores(hit, "", "cores shared: other processes used 1.2 of 2")
    assert tempered.outcome is Outcome.INCONCLUSIVE and not undecided(tempered)


def test_the_message_names_added_jobs_only() -> None:
    assert describe({"adaptive": {"jobs": 3, "added": 0, "seconds": 0.0}}) == ""
    assert describe({}) == ""
    assert (
        describe({"adaptive": {"jobs": 5, "added": 2, "seconds": 3.25}})
        == "5 jobs, 2 of them added for an undecided verdict (3.2 s)"
    )


def test_the_session_summary_counts_records_judged_on_added_jobs() -> None:
    assert session_cost([{}, {"adaptive": {"jobs": 3, "added": 0, "seconds": 0.0}}]) == ""
    line = session_cost(
        [
            {"adaptive": {"jobs": 6, "added": 3, "seconds": 4.0}},
            {"adaptive": {"jobs": 4, "added": 1, "seconds": 1.5}},
            {},
        ]
    )
    assert line == (
        "adaptive repeats: 2 records were judged on added jobs (up to 6 jobs per "
        "sweep, 4.0 s at most for one sweep's added jobs)"
    )
