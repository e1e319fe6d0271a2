"""The gate's status: how many verdicts could have claimed a change, and why the others could not.

A verdict is *armed* when it counts (not informational) and its interval is narrow enough that
a slowdown of ARMED_MULTIPLE times the tolerance would have been called a regression
(Verdict.min_effect: the smallest slowdown its interval could claim). The stored rule asks the
whole interval beyond the band, so it can never claim a change of exactly the tolerance; twice
the tolerance is the size a gate at that tolerance is expected to catch.

Every other point is counted under one reason, so a run whose gate was off says so in one
line (status_line), first in every output, and --hpc-require-armed can fail it.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pytest_hpccomm.baselines.result import FUNCTIONAL, RunResult
from pytest_hpccomm.baselines.verdict import BETWEEN_SESSIONS, FEW_SESSIONS, Outcome, Verdict, band

ARMED_MULTIPLE = 2.0
# how a verdict against another machine type's baseline says why it claims nothing (judging.py)
MACHINE_TYPE_NOTE = "informational: the baseline is from another machine type"

# reasons a point could not claim a change, in the order they are checked and shown
NO_BASELINE = "no baseline"
MACHINE_TYPE = "baseline from another machine type"
SHARED = "cores shared with other processes"
SPREAD = "spread between sessions wider than the band"
FEW = "fewer than 3 baseline sessions"
HOST = "host probe outside its band (the band widened)"
NO_INTERVAL = "no interval"
WIDE = "interval too wide (too few jobs or samples)"


def armed(v: Verdict) -> bool:
    return (
        not v.informational
        and v.min_effect is not None
        and v.min_effect <= 1.0 + ARMED_MULTIPLE * v.tolerance
    )


def unarmed_reason(v: Verdict) -> str:
    """Why `v` could not have claimed a change of ARMED_MULTIPLE x its tolerance."""
    if v.outcome is Outcome.NEW:
        return NO_BASELINE
    if v.informational.startswith(MACHINE_TYPE_NOTE):
        return MACHINE_TYPE
    if "shared" in v.informational:
        return SHARED
    if v.informational:
        return v.informational
    if v.reason.startswith(FEW_SESSIONS):
        return FEW
    if v.min_effect is None:
        return f"{NO_INTERVAL}: {v.reason}" if v.reason else NO_INTERVAL
    if v.session_margin is not None and v.reason.startswith(BETWEEN_SESSIONS):
        return SPREAD
    if v.host_shift is not None:
        return HOST
    down, up = band(v.tolerance)
    if v.session_margin is not None and 2.0 * v.session_margin > math.log(up / down):
        return SPREAD
    return WIDE


@dataclass
class StackGate:
    points: int = 0
    armed: int = 0
    reasons: Counter[str] = field(default_factory=Counter)
    effects: list[float] = field(default_factory=list)  # min_effect of the armed points

    def add(self, v: Verdict) -> None:
        self.points += 1
        if armed(v):
            self.armed += 1
            assert v.min_effect is not None
            self.effects.append(v.min_effect)
        else:
            self.reasons[unarmed_reason(v)] += 1

    def to_json(self) -> dict[str, Any]:
        return {
            "points": self.points,
            "armed": self.armed,
            "not_armed": dict(self.reasons.most_common()),
            "median_min_effect": (
                round(statistics.median(self.effects), 4) if self.effects else None
            ),
        }


@dataclass
class GateStatus:
    total: StackGate
    stacks: dict[str, StackGate]
    paired: bool

    @property
    def off(self) -> bool:
        return self.total.points > 0 and self.total.armed == 0

    def fraction(self) -> float:
        return self.total.armed / self.total.points if self.total.points else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            **self.total.to_json(),
            "armed_multiple": ARMED_MULTIPLE,
            "rule": "paired" if self.paired else "stored",
            "line": status_line(self),
            "hints": [h.strip() for h in hints(self)],
            "stacks": {s: g.to_json() for s, g in sorted(self.stacks.items())},
        }


def gate_status(results: Iterable[RunResult], paired: bool = False) -> GateStatus:
    """The status over every verdict (a result without one, FUNCTIONAL, is not a point)."""
    total, stacks = StackGate(), dict[str, StackGate]()
    for r in results:
        if FUNCTIONAL in r.measurement.extra:
            continue
        total.add(r.verdict)
        stacks.setdefault(r.measurement.stack, StackGate()).add(r.verdict)
    return GateStatus(total, stacks, paired)


def _reasons(g: StackGate) -> str:
    return "; ".join(f"{n} {why}" for why, n in g.reasons.most_common())


def status_line(g: GateStatus) -> str:
    """One line: 'gate ARMED: 812 of 1247 points ...' or 'gate OFF: ...'."""
    t = g.total
    if not t.points:
        return "hpccomm gate: no performance point judged"
    state = "OFF" if g.off else "ARMED" if t.armed == t.points else "PARTLY ARMED"
    effect = (
        f" (median smallest claimable slowdown {statistics.median(t.effects):.2f}x)"
        if t.effects
        else ""
    )
    rest = f"; not armed: {_reasons(t)}" if t.reasons else ""
    return (
        f"hpccomm gate {state}: {t.armed} of {t.points} points could claim a slowdown of "
        f"{ARMED_MULTIPLE:g}x the tolerance{effect}{rest}"
    )


def stack_lines(g: GateStatus) -> list[str]:
    """One line per stack, when there are several."""
    if len(g.stacks) < 2:
        return []
    return [
        f"  {s}: {sg.armed} of {sg.points} armed" + (f"; {_reasons(sg)}" if sg.reasons else "")
        for s, sg in sorted(g.stacks.items())
    ]


def hints(g: GateStatus) -> list[str]:
    """What would arm the points that are not, for the reasons a user can act on."""
    out = []
    if g.total.reasons.get(MACHINE_TYPE):
        out.append(
            "  to judge on this machine type: record a set of its own, 3 or more sessions "
            "hours apart, with --hpc-update-baselines=all --hpc-system=NAME; meanwhile a "
            "paired A/B run (--hpc-base/--hpc-candidate) judges two builds on any machine"
        )
    if g.total.reasons.get(FEW):
        out.append(
            "  the set has fewer than 3 sessions: until it knows how far this host moves "
            "between sessions it claims nothing; add sessions hours apart with "
            "--hpc-update-baselines=all, or gate with a paired A/B run"
        )
    if g.total.reasons.get(SPREAD):
        out.append(
            "  the set's sessions moved more than the band between them: judge at a wider "
            "--hpc-tolerance, or gate merges with a paired A/B run"
        )
    return out


def required_armed(g: GateStatus, fraction: float) -> str:
    """Why the session fails under --hpc-require-armed `fraction` ("" when it does not)."""
    if fraction <= 0 or not g.total.points:
        return ""
    if g.fraction() + 1e-12 >= fraction:
        return ""
    return (
        f"hpccomm gate: FAILED --hpc-require-armed {fraction:g}: only {g.total.armed} of "
        f"{g.total.points} points ({g.fraction() * 100:.0f}%) could claim a change"
        + (f"; not armed: {_reasons(g.total)}" if g.total.reasons else "")
    )


def nothing_judged(g: GateStatus, paired: bool, against_set: bool) -> str:
    """A paired run, or a run against an existing baseline set, that judged no point: the
    gate compared nothing ("" when something was judged)."""
    if not g.total.points or (not paired and not against_set):
        return ""
    judged = g.total.points - g.total.reasons.get(NO_BASELINE, 0)
    if judged:
        return ""
    what = "the paired A/B run" if paired else "the run against the baseline set"
    return (
        f"hpccomm gate: FAILED nothing judged: {what} gave no point a verdict "
        f"({g.total.points} without a baseline)"
    )
