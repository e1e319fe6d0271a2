"""The canary's reach (baselines/canary.py): what its stretch can show against a baseline from
another session, given the host's own speed in the canary's session."""

from __future__ import annotations

import pytest

from pytest_hpccomm.baselines import canary
from pytest_hpccomm.baselines.result import RunResult
from pytest_hpccomm.baselines.verdict import Outcome, Verdict
from pytest_hpccomm.measure.measurement import UNSTRETCHED, Direction, Measurement


def result(
    current: float,
    baseline: float | None,
    work: float | None,
    direction: Direction = Direction.LOWER_IS_BETTER,
    nodeid: str = "n",
) -> RunResult:
    ratio = None if baseline is None else current / baseline
    v = Verdict(Outcome.PASS, current, baseline, ratio, None, None, None, 0.1, "x")
    m = Measurement(
        stack="mpi",
        benchmark="b",
        params={"size": 8},
        samples=(current,) * 5,
        unit="us",
        direction=direction,
        extra={} if work is None else {UNSTRETCHED: work},
    )
    return RunResult(nodeid, "s", "ethernet", m, v, {})


def test_the_stretch_shows_the_factor_times_the_hosts_own_move() -> None:
    # a 1.5x canary whose host ran faster than in the baseline's session: at 8 B its own work
    # took 0.742x the baseline's time (1.113x shown, beyond 1.1), at 1 KiB 0.709x (1.063x)
    at_8, at_1k = canary.reaches([result(16.03, 14.41, 10.69), result(15.15, 14.25, 10.1)], 1.5)
    assert at_8.move == pytest.approx(10.69 / 14.41)
    assert at_8.shows == pytest.approx(1.5 * 10.69 / 14.41)
    assert at_8.known
    assert at_1k.shows == pytest.approx(1.5 * 10.1 / 14.25)
    assert not at_1k.known


def test_a_rate_moves_the_other_way() -> None:
    # a rate: own work at 800 MB/s against a 1000 MB/s baseline is a 1.25x slower host
    [r] = canary.reaches([result(533.0, 1000.0, 800.0, Direction.HIGHER_IS_BETTER)], 1.5)
    assert r.move == pytest.approx(1.25)
    assert r.known
    [fast] = canary.reaches([result(900.0, 1000.0, 1400.0, Direction.HIGHER_IS_BETTER)], 1.5)
    assert fast.shows == pytest.approx(1.5 / 1.4)
    assert not fast.known


def test_the_edge_of_the_band_is_no_known_answer() -> None:
    # shows exactly 1 + tolerance: the stored rule never claims a change of exactly the band
    [edge] = canary.reaches([result(11.0, 10.0, 11.0 / 1.5)], 1.5)
    assert edge.shows == pytest.approx(1.1)
    assert not canary.Reach("n", 1.1 / 1.5, 1.1, 0.1).known


def test_points_without_their_own_work_or_a_baseline_are_not_read() -> None:
    assert canary.reaches([result(10.0, None, 5.0), result(10.0, 10.0, None)], 2.0) == []
    assert canary.canary_lines([result(10.0, None, 5.0)], 2.0) == []


def test_the_lines_say_where_the_canary_tested_nothing() -> None:
    known = [result(15.0, 10.0, 10.0, nodeid="a")]
    assert canary.canary_lines(known, 1.5) == [
        "hpccomm canary 1.5x: a known answer at 1 of 1 points judged against a baseline "
        "(the host's own speed let the stretch show beyond the band)"
    ]
    lost = [result(10.6, 14.25, 10.1, nodeid=f"p{i}") for i in range(7)]
    lines = canary.canary_lines(known + lost, 1.5)
    assert lines[0].startswith(
        "hpccomm canary 1.5x: a known answer at 1 of 8 points judged against a baseline; "
        "at 7 the host ran faster than the stretch survives (its own work took 0.71-0.71x "
        "the baseline's time): no test of the gate there"
    ), lines[0]
    # a factor within the band never shows beyond it, whatever the host does
    inside = canary.canary_lines([result(10.5, 10.0, 10.0)], 1.05)
    assert inside[0] == (
        "hpccomm canary 1.05x: a known answer at 0 of 1 points judged against a baseline; "
        "at 1 the factor lies within the band (up to 1.100x): no host speed lets it show: "
        "no test of the gate there, whatever their verdicts say"
    ), inside[0]
    assert lines[1] == ("  p0: own work 0.709x, so the stretch shows at most 1.063x (band 1.100x)")
    assert len(lines) == 1 + canary.SHOWN + 1 and lines[-1] == "  ... and 2 more"
