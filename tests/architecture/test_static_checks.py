"""The package type-checks (mypy, configured in pyproject.toml) and the tree lints clean (ruff):
both run in the test command, so a type error or a likely bug fails CI like a failing test."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=900)


def test_mypy_finds_no_type_error() -> None:
    proc = _run([sys.executable, "-m", "mypy", "pytest_hpccomm", "hpccomm_suites"])
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]


def test_ruff_finds_nothing() -> None:
    ruff = BIN / "ruff"
    assert ruff.exists(), f"ruff is not installed in this venv: {BIN / 'pip'} install ruff"
    proc = _run([str(ruff), "check", "--no-cache", "pytest_hpccomm", "hpccomm_suites", "tests",
                 "benchmarks", "docs", "ci"])
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
