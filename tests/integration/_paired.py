"""What the end-to-end gate tests share: one canary session and one clean session, each run
once and judged as it came out. Nothing is run again: a clean run called a regression is a
false alarm of the rule, and a canary called PASS is a miss; both fail the test.

A canary point may be INCONCLUSIVE rather than a regression: the gate saying, with its reason,
that it cannot decide (too few sessions, or an interval too wide for the band; counted in the
gate status). Its median ratio must still lie beyond the band, since the peers stretch every
timed batch by the canary's factor (a known answer), and it must never be PASS or an
improvement. A run whose cores another process shared (the contention guard's reason) has no
known answer: the test fails naming that, not as a missed canary."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest


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
        shared = next(
            (
                text
                for text in (v.get("informational") or "", v.get("message") or "")
                if "cores shared" in text or "shared cores" in text
            ),
            "",
        )
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


def clean_judged_no_change(result: pytest.RunResult, path: Path, items: int) -> None:
    """A clean run (A vs identical A, or a re-run against its own fresh baseline) calls no
    point a regression or an improvement, and exits 0."""
    got = outcomes(path)
    assert len(got) == items, result.stdout.str()
    changed = {
        k: verdicts(path)[k]["message"]
        for k, o in got.items()
        if o in ("regression", "improvement")
    }
    assert not changed, f"a clean run judged a change: {changed}\n{result.stdout.str()}"
    assert result.ret == 0, result.stdout.str()
