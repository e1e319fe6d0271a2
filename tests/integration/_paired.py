"""What the paired A/B end-to-end tests share: reading verdicts, the clean A vs A session."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


def outcomes(path: Path) -> dict[str, str]:
    """Item parameters -> verdict outcome, from a results JSON."""
    doc = json.loads(path.read_text())
    return {r["nodeid"].split("[", 1)[1]: r["verdict"]["outcome"] for r in doc["results"]}


def canary_session(pytester: pytest.Pytester, args: list[str], items: int,
                   timeout: float, tries: int = 3) -> pytest.RunResult:
    """The candidate's canary must be caught at every point, never PASS. The gate may decline
    to judge a point: the contention guard (another process shared the cores, measured), or a
    CI too wide for the band while the median is worse than it (a cold CI saw a 1.5x canary at
    paired ratio 1.30, CI 0.88-1.92, over 4 pairs): then the session is run again, a few
    times, and finally the test fails; never a skip."""
    for _attempt in range(tries):
        canary = pytester.runpytest_subprocess(*args, timeout=timeout)
        doc = json.loads((pytester.path / "r.json").read_text())
        judged = {r["nodeid"].split("[", 1)[1]: r["verdict"] for r in doc["results"]}
        assert len(judged) == items, canary.stdout.str()
        if all(v["outcome"] == "regression" for v in judged.values()):
            assert canary.ret == 1
            return canary
        missed = {k: v["message"] for k, v in judged.items() if v["outcome"] != "regression"}
        declined = {k: "cores shared" in v["message"] or v["outcome"] == "inconclusive"
                    and (v["ratio"] or 0.0) > 1.0 + float(v["tolerance"] or 0.05)
                    for k, v in judged.items() if v["outcome"] != "regression"}
        assert all(declined.values()), f"the canary was not caught: {missed}"
    pytest.fail(f"no quiet canary session in {tries} tries: {missed}")


def clean_session(pytester: pytest.Pytester, args: list[str], items: int,
                  timeout: float) -> pytest.RunResult:
    """A vs identical A must judge no change. The rule's false alarm is a 1 %-per-point event
    (benchmarks/canary.py --ab): one is retried once, two in a row fail the test."""
    for _attempt in range(2):
        clean = pytester.runpytest_subprocess(*args, timeout=timeout)
        got = outcomes(pytester.path / "r.json")
        assert len(got) == items, clean.stdout.str()
        if not {"regression", "improvement"} & set(got.values()):
            assert clean.ret == 0
            return clean
    pytest.fail(f"A vs identical A judged a change twice in a row: {got}\n{clean.stdout.str()}")
