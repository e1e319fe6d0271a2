"""What the end-to-end gate tests share: one canary session and one clean session, each run
once and judged as it came out. Nothing is run again: a canary called PASS is a miss and fails.

A clean run is held to what the rule defines: it calls a change at a one-sided level alpha per
direction and point, so a clean run over k points calls one in up to 2*alpha*k of its runs by
chance alone (clean_judged_no_change). It fails on a claim chance does not explain.

A canary point may be INCONCLUSIVE rather than a regression: the gate saying, with its reason,
that it cannot decide (too few sessions, or an interval too wide for the band; counted in the
gate status). Its median ratio must still lie beyond the band, since the peers stretch every
timed batch by the canary's factor (a known answer), and it must never be PASS or an
improvement. A run whose cores another process shared (the contention guard's reason) has no
known answer: the test fails naming that, not as a missed canary.

Against a stored baseline the known answer also needs the host at one speed in the baseline
and the canary session, and this VM type's jobs move between speed modes 1.2-1.7x apart within
seconds. The peers report each stretched batch's own work too, so a stored-gate test reads the
host's move in the canary session itself (host_moved): beyond what the canary's factor
survives, the sessions are run once more (retries.HOST_MOVED, counted), and a second such move
fails the test naming it (bracketed).

Likewise a session whose point was judged on shared cores after the contention guard's own
retries (a burst of hypervisor steal outlasts them: its jobs take a second) has no known answer:
the test waits for a quiet window and runs its sessions once more (retries.SESSION_SHARED,
counted), and fails naming both tries when the second is shared too (on_own_cores). Only where
every point of both tries shared its cores with the hypervisor alone (its steal accounts for
what the guard saw; no process of this machine did) are quiet cores absent, as hardware is: the
test then checks that the gate said so, each such point INCONCLUSIVE naming the guard's reason,
and skips with both tries' readings (cores_stolen)."""

from __future__ import annotations

import json
import re
import statistics
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from pytest_hpccomm import retries
from pytest_hpccomm.baselines.canary import host_move
from pytest_hpccomm.baselines.verdict import DEFAULT_ALPHA
from pytest_hpccomm.measure.measurement import UNSTRETCHED, Direction
from pytest_hpccomm.proc.cpu_share import CpuMeter, quiet_limit

T = TypeVar("T")

# the chance that a clean run fails clean_judged_no_change although its sides are
# exchangeable and the rule's p values valid (a family-wise bound over the run's points)
CLEAN_RUN_ALPHA = 0.001
# before a session runs again on shared cores: a window of the cores this process tree's alone,
# waited for at most QUIET_WAIT_S (the second try runs then in any case, and says what it met)
QUIET_WINDOW_S, QUIET_WAIT_S = 2.0, 60.0


def verdicts(path: Path) -> dict[str, dict[str, Any]]:
    """Point (item parameters and key) -> its verdict, with its measurement's direction under
    "direction", from a results JSON."""
    doc = json.loads(path.read_text())
    return {
        (r["nodeid"].split("[", 1)[1] if "[" in r["nodeid"] else "") + "|" + r["key"]: dict(
            r["verdict"], direction=r["measurement"]["direction"]
        )
        for r in doc["results"]
    }


def outcomes(path: Path) -> dict[str, str]:
    return {k: v["outcome"] for k, v in verdicts(path).items()}


def shared_reason(verdict: dict[str, Any]) -> str:
    """The contention guard's reason in a verdict ("" when its jobs had the cores)."""
    return next(
        (
            text
            for text in (verdict.get("informational") or "", verdict.get("message") or "")
            if "cores shared" in text or "shared cores" in text
        ),
        "",
    )


def judged_on_shared_cores(path: Path, stretched: Callable[[str], bool] | None = None) -> list[str]:
    """'point: reason' for each point of a results file (among `stretched`, None: all) whose
    verdict says its jobs shared the cores."""
    return [
        f"{point.split('|', 1)[0]}: {shared_reason(v)}"
        for point, v in verdicts(path).items()
        if (stretched is None or stretched(point)) and shared_reason(v)
    ]


# the contention guard's reading, as CpuShare.describe() words it
_READING = re.compile(
    r"other processes used (?P<foreign>[\d.]+) of (?P<cpus>\d+) cores over [\d.]+ s"
    r"(?:, (?P<steal>[\d.]+) stolen by the hypervisor)?"
)


def stolen_only(reason: str) -> bool:
    """Whether a guard's reason (CpuShare.disturbed, or a verdict's text quoting it) reads a
    share the hypervisor's steal accounts for: what this machine's other processes used
    (the foreign cores less the stolen ones) within the guard's quiet limit. False when the
    reason holds no reading."""
    hits = list(_READING.finditer(reason))
    if not hits:
        return False
    return all(
        float(hit["foreign"]) - float(hit["steal"] or 0.0) <= quiet_limit(int(hit["cpus"]))
        for hit in hits
    )


def quiet_window(window_s: float = QUIET_WINDOW_S, wait_s: float = QUIET_WAIT_S) -> str:
    """Wait until the cores were this process tree's for `window_s` (the contention guard's
    rule), at most about `wait_s`; "" once quiet, else the last window's reason."""
    deadline = time.monotonic() + wait_s
    while True:
        meter = CpuMeter()
        time.sleep(window_s)
        why = meter.stop().disturbed
        if not why or time.monotonic() >= deadline:
            return why


def on_own_cores(
    sessions: Callable[[], T],
    results: Path,
    stretched: Callable[[str], bool] | None = None,
    wait: Callable[[], str] = quiet_window,
) -> T:
    """Run `sessions` (in a fresh directory each time) and return what it returned, once no
    point of `results` (among `stretched`) was judged on shared cores. A shared try is
    counted (retries.SESSION_SHARED), the cores are given a quiet window (`wait`), and the
    sessions run once more; shared again, the test fails naming both tries: this run could
    not test the gate. Shared both times with the hypervisor alone (stolen_only), it checks
    the gate's refusal and skips instead (cores_stolen)."""
    tries: list[str] = []

    def found() -> list[str]:
        got = judged_on_shared_cores(results, stretched)
        tries.append("; ".join(got))
        return got

    return _once_more(
        sessions,
        found,
        retries.SESSION_SHARED,
        wait,
        lambda first, still, again: (
            "the gate could not be tested: both tries of the sessions "
            f"judged points on shared cores: {first}; then "
            f"({f'still shared before it: {still}' if still else 'a quiet window before it'}) "
            f"{again}"
        ),
        absent=lambda: cores_stolen(results, stretched, tries),
    )


def cores_stolen(results: Path, stretched: Callable[[str], bool] | None, tries: list[str]) -> None:
    """After two shared tries (`tries`: their guard readings): when every reading is the
    hypervisor's steal alone, the cores the test needs are absent. Each shared point must
    then be INCONCLUSIVE with the guard's reason in its message (the gate saying it cannot
    decide, and why), and the test skips naming both tries; else it returns (and the test
    fails)."""
    if not all(stolen_only(t) for t in tries):
        return
    for point, v in verdicts(results).items():
        if (stretched is None or stretched(point)) and shared_reason(v):
            assert v["outcome"] == "inconclusive", (
                f"{point}: judged on shared cores, yet {v['outcome']}: {v['message']}"
            )
            assert "shared" in (v.get("message") or ""), (
                f"{point}: the verdict does not name the shared cores: {v['message']}"
            )
    pytest.skip(
        "cores stolen by the hypervisor in both tries (no process of this machine shared "
        "them; the gate said INCONCLUSIVE with that reason, checked): " + " | then: ".join(tries)
    )


def _once_more(
    sessions: Callable[[], T],
    found: Callable[[], list[str]],
    cause: str,
    between: Callable[[], str],
    failure: Callable[[str, str, str], str],
    absent: Callable[[], None] = lambda: None,
) -> T:
    """The one rerun of on_own_cores and bracketed: run `sessions`; when `found()` names what
    kept it from testing the gate, count a retry for `cause`, call `between` (its text goes
    to `failure`), run once more, and fail with failure(first, between's, second) when
    `found()` names something again, unless `absent()` skips first."""
    first = sessions()
    shared = found()
    if not shared:
        return first
    retries.count(cause, reason="; ".join(shared))
    still = between()
    second = sessions()
    again = found()
    if again:
        absent()
        pytest.fail(failure("; ".join(shared), still, "; ".join(again)))
    return second


def canary_caught(
    result: pytest.RunResult,
    path: Path,
    items: int | None,
    regression_line: str | None = None,
    stretched: Callable[[str], bool] | None = None,
) -> dict[str, dict[str, Any]]:
    """Every point of the canary run a regression, or inconclusive with its reason, its median
    ratio beyond the band on the slower side (above 1 + tolerance for a time, below
    1 - tolerance for a rate); never PASS or an improvement. `items`: how many points the run
    must have judged (None: at least one); `regression_line`: the terminal line (fnmatch) a
    regression must print, checked when one was claimed; `stretched`: which points the canary
    stretches (None: all; the others have no known answer and are not asked). Returns the
    verdicts."""
    judged = verdicts(path)
    assert len(judged) == items if items is not None else judged, result.stdout.str()
    asked = [p for p in judged if stretched is None or stretched(p)]
    assert asked, f"no stretched point among {sorted(judged)}"
    for point in asked:
        v = judged[point]
        # the ratio is the canary's known answer only where both runs had the cores: a run
        # that shared them (the contention guard's reason, in the gate line too) cannot test
        # the gate, and says so rather than as a missed canary
        shared = shared_reason(v)
        assert not shared, (
            f"{point}: the gate could not be tested, another process used the "
            f"cores: {shared}\n{result.stdout.str()}"
        )
        tolerance = float(v["tolerance"])
        slower = (
            (
                v["ratio"] > 1.0 + tolerance
                if v["direction"] == "lower"
                else v["ratio"] < 1.0 - tolerance
            )
            if v["ratio"] is not None
            else False
        )
        assert slower, (
            f"{point}: the canary's median ratio {v['ratio']} is not beyond the "
            f"band on the slower side\n{result.stdout.str()}"
        )
        assert v["outcome"] in ("regression", "inconclusive"), (
            f"{point}: the canary was not caught: {v['message']}\n{result.stdout.str()}"
        )
    caught = any(v["outcome"] == "regression" for v in judged.values())
    assert result.ret == (1 if caught else 0), result.stdout.str()
    if caught and regression_line is not None:
        result.stdout.fnmatch_lines([regression_line])
    return judged


def clean_judged_no_change(
    result: pytest.RunResult, path: Path, items: int, *, failed_otherwise: bool = False
) -> None:
    """A clean run (A vs identical A, or a re-run against its own fresh baseline) makes no claim
    that chance does not explain. Every change the rule calls must carry its own evidence (p
    below the rule's alpha in the direction it moved) and none may be stronger than a clean run
    of `items` points shows in CLEAN_RUN_ALPHA of runs (Bonferroni: p < CLEAN_RUN_ALPHA / (2 *
    items)): such a claim is a defect (sides not exchangeable, p values too small), not chance.
    A claim within chance is the rule's designed false-alarm rate: reported as a warning. The
    exit code is 1 exactly when a regression was called (or `failed_otherwise`: another gate
    of the run, such as the ratio gate, failed it)."""
    judged = verdicts(path)
    assert len(judged) == items, result.stdout.str()
    bound = CLEAN_RUN_ALPHA / (2 * items)
    claimed = {k: v for k, v in judged.items() if v["outcome"] in ("regression", "improvement")}
    for point, v in claimed.items():
        p = v["p_value"] if v["outcome"] == "regression" else v["p_better"]
        assert p is not None and p < DEFAULT_ALPHA, (
            f"{point}: a change claimed without its evidence (p={p}): {v['message']}"
        )
        assert p >= bound, (
            f"{point}: a clean run claimed a change chance explains in under "
            f"{CLEAN_RUN_ALPHA:g} of runs (p={p:.2g} < {bound:.2g}): {v['message']}\n"
            f"{result.stdout.str()}"
        )
        warnings.warn(
            f"a clean run's claim within chance (p={p:.2g}, >= {bound:.2g}; the rule calls "
            f"one in up to {2 * DEFAULT_ALPHA * items:.0%} of clean runs of {items} points): "
            f"{v['message']}",
            stacklevel=2,
        )
    regression = any(v["outcome"] == "regression" for v in claimed.values())
    assert result.ret == (1 if regression or failed_otherwise else 0), result.stdout.str()


def host_moved(canary: Path, factor: float) -> list[str]:
    """The points at which the canary session's own work, before the stretch (the peers'
    unstretched median: measurement extra UNSTRETCHED), read the host farther from the stored
    baseline than the canary's `factor` survives: the stretch shows factor times that move
    (baselines/canary.py), which must clear 1 + tolerance. Each entry says the point, the move
    and the edge. Every point must carry that reading and a median at least `factor` times it
    (the stretch's definition, checked per batch in the stacks' canary tests): else the stretch
    did not reach the measurement, and the test fails here."""
    doc = json.loads(canary.read_text())
    moved = []
    for r in doc["results"]:
        m, v = r["measurement"], r["verdict"]
        point = r["nodeid"].split("[", 1)[-1]
        work = (m.get("extra") or {}).get(UNSTRETCHED)
        assert work, f"{point}: the canary's record has no unstretched reading: {m.get('extra')}"
        direction = Direction(m["direction"])
        stretched = statistics.median(x for x in m["samples"] if x is not None)
        reached = host_move(stretched, work, direction)  # a time ratio, as host_move's
        assert reached >= factor * (1 - 1e-9), (
            f"{point}: the canary's median is {reached:.3f}x its own work, short of {factor:g}x"
        )
        if v.get("baseline_median") is None:
            continue
        move, edge = host_move(work, v["baseline_median"], direction), 1.0 + float(v["tolerance"])
        if factor * move <= edge:
            moved.append(
                f"{point}: the canary session's own work took {move:.3f}x the baseline's time, "
                f"so the {factor:g}x stretch shows at most {factor * move:.3f}x, not beyond "
                f"the band's {edge:.3f}x"
            )
    return moved


def bracketed(sessions: Callable[[], T], canary: Path, factor: float) -> T:
    """Run `sessions` (baseline, canary, then a clean session; in a fresh directory each time)
    and return what it returned, once the canary session's own work (its results file:
    `canary`) shows the host did not move beyond what the canary survives (host_moved). A move
    is counted as a retry (retries.HOST_MOVED) and the sessions run once more; a second move
    fails the test, naming both: with the host moving that often, this run cannot test the
    gate."""
    return _once_more(
        sessions,
        lambda: host_moved(canary, factor),
        retries.HOST_MOVED,
        lambda: "",
        lambda first, _, again: (
            "the host's speed moved between the sessions twice in a row, "
            f"so the canary's ratio was no known answer in either: {first}; then {again}"
        ),
    )
