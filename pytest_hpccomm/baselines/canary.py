"""Whether a canary run (--hpc-inject-slowdown F) could test the gate at each point.

The canary stretches every timed batch to F times its own work, and a peer that reports that
work unstretched (the record's extra UNSTRETCHED: its median) shows the host's own speed in the
same session. Against a baseline from another session the stretch can show at most F times the
host's own move: on a host that ran faster tonight than F survives, the stretched ratio stays in
the band, and a PASS there is no missed catch but no test either. The run says so per point
(canary_lines), so a green canary is never read as a working gate or as a broken one.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from pytest_hpccomm.baselines.result import RunResult
from pytest_hpccomm.measure.measurement import UNSTRETCHED, Direction

SHOWN = 5  # points named in the lines where the stretch could not show beyond the band


def host_move(unstretched: float, baseline: float, direction: Direction) -> float:
    """The host's own move at a point as a time ratio (above 1: slower than the baseline): the
    unstretched median over the baseline's, inverted for a rate."""
    if direction is Direction.LOWER_IS_BETTER:
        return unstretched / baseline
    return baseline / unstretched


@dataclass(frozen=True)
class Reach:
    """One point of a canary run against its baseline. `shows`: the time ratio the stretch can
    show there (F times the host's move); a known answer when beyond 1 + tolerance."""

    nodeid: str
    move: float
    shows: float
    tolerance: float

    @property
    def known(self) -> bool:
        return self.shows > 1.0 + self.tolerance


def reaches(results: Iterable[RunResult], factor: float) -> list[Reach]:
    """The points that report their unstretched work and were judged against a baseline."""
    out = []
    for r in results:
        work, base = r.measurement.extra.get(UNSTRETCHED), r.verdict.baseline_median
        if not work or not base:
            continue
        move = host_move(float(work), base, r.measurement.direction)
        out.append(Reach(r.nodeid, move, factor * move, r.verdict.tolerance))
    return out


def canary_lines(results: Iterable[RunResult], factor: float) -> list[str]:
    """The canary's lines for the terminal and the JUnit properties (the first line is the
    summary); [] when no point reports its unstretched work against a baseline.

    >>> canary_lines([], 1.5)
    []
    """
    got = reaches(results, factor)
    if not got:
        return []
    lost = [r for r in got if not r.known]
    head = (
        f"hpccomm canary {factor:g}x: a known answer at {len(got) - len(lost)} of {len(got)} "
        "points judged against a baseline"
    )
    if not lost:
        return [head + " (the host's own speed let the stretch show beyond the band)"]
    inside = [r for r in lost if factor <= 1.0 + r.tolerance]
    moved = [r for r in lost if factor > 1.0 + r.tolerance]
    if inside:
        head += (
            f"; at {len(inside)} the factor lies within the band (up to "
            f"{1 + max(r.tolerance for r in inside):.3f}x): no host speed lets it show"
        )
    if moved:
        moves = sorted(r.move for r in moved)
        head += (
            f"; at {len(moved)} the host ran faster than the stretch survives (its own work "
            f"took {moves[0]:.2f}-{moves[-1]:.2f}x the baseline's time)"
        )
    head += ": no test of the gate there, whatever their verdicts say"
    named = [
        f"  {r.nodeid}: own work {r.move:.3f}x, so the stretch shows at most {r.shows:.3f}x "
        f"(band {1 + r.tolerance:.3f}x)"
        for r in lost[:SHOWN]
    ]
    more = [f"  ... and {len(lost) - SHOWN} more"] if len(lost) > SHOWN else []
    return [head, *named, *more]
