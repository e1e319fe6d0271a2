"""The clean-run check of the end-to-end gate tests on hand-made results: it fails where a
claim is stronger than chance over the run's points, or made without its evidence, and
passes, with a warning, a claim within the rule's designed false-alarm rate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration._paired import CLEAN_RUN_ALPHA, clean_judged_no_change


def results(path: Path, *points: tuple[str, float | None, float | None]) -> Path:
    """One results JSON with a point per (outcome, p worse, p better)."""
    doc = {
        "results": [
            {
                "nodeid": f"t.py::test_x[p{i}]",
                "key": "k",
                "measurement": {"direction": "lower"},
                "verdict": {
                    "outcome": o,
                    "p_value": pw,
                    "p_better": pb,
                    "message": f"{o} p{i}",
                },
            }
            for i, (o, pw, pb) in enumerate(points)
        ]
    }
    path.write_text(json.dumps(doc))
    return path


def run(ret: int) -> pytest.RunResult:
    return pytest.RunResult(ret, ["session output"], [], 0.0)


def test_no_claim_passes_quietly(tmp_path: Path) -> None:
    path = results(tmp_path / "r.json", ("pass", 0.6, 0.4), ("inconclusive", 0.02, 0.9))
    clean_judged_no_change(run(0), path, 2)


def test_a_claim_within_chance_is_a_warning_not_a_failure(tmp_path: Path) -> None:
    # the CI run that motivated the rule: an improvement at p=0.0086 among 3 points
    path = results(
        tmp_path / "r.json", ("improvement", 0.99, 0.0086), ("pass", 0.5, 0.5), ("pass", 0.5, 0.5)
    )
    with pytest.warns(UserWarning, match="within chance"):
        clean_judged_no_change(run(0), path, 3)


def test_a_claim_beyond_chance_fails(tmp_path: Path) -> None:
    p = CLEAN_RUN_ALPHA / (2 * 2) / 10
    path = results(tmp_path / "r.json", ("regression", p, 1.0), ("pass", 0.5, 0.5))
    with pytest.raises(AssertionError, match="chance explains in under"):
        clean_judged_no_change(run(1), path, 2)


def test_a_claim_without_its_evidence_fails(tmp_path: Path) -> None:
    path = results(tmp_path / "r.json", ("regression", 0.2, 0.8))
    with pytest.raises(AssertionError, match="without its evidence"):
        clean_judged_no_change(run(1), path, 1)


def test_the_exit_code_must_match_the_claims(tmp_path: Path) -> None:
    path = results(tmp_path / "r.json", ("regression", 0.005, 0.99))
    with pytest.warns(UserWarning), pytest.raises(AssertionError):
        clean_judged_no_change(run(0), path, 1)  # a regression called, yet exit 0
    path = results(tmp_path / "r.json", ("pass", 0.5, 0.5))
    with pytest.raises(AssertionError):
        clean_judged_no_change(run(1), path, 1)  # nothing called, yet exit 1


def test_a_missing_point_fails(tmp_path: Path) -> None:
    path = results(tmp_path / "r.json", ("pass", 0.5, 0.5))
    with pytest.raises(AssertionError):
        clean_judged_no_change(run(0), path, 2)
