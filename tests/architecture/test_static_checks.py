"""The package type-checks (mypy, configured in pyproject.toml), the tree lints clean and is
formatted (ruff check, ruff format): all run in the test command, so a type error, a likely bug
or an unformatted file fails CI like a failing test."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
LINTED = ("pytest_hpccomm", "hpccomm_suites", "tests", "benchmarks", "docs", "ci")


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=900)


def test_mypy_finds_no_type_error() -> None:
    proc = _run([sys.executable, "-m", "mypy", "pytest_hpccomm", "hpccomm_suites"])
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]


def test_ruff_finds_nothing() -> None:
    ruff = BIN / "ruff"
    assert ruff.exists(), f"ruff is not installed in this venv: {BIN / 'pip'} install ruff"
    proc = _run([str(ruff), "check", "--no-cache", *LINTED])
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]


def test_ruff_format_leaves_every_file_as_it_is() -> None:
    ruff = BIN / "ruff"
    assert ruff.exists(), f"ruff is not installed in this venv: {BIN / 'pip'} install ruff"
    proc = _run([str(ruff), "format", "--no-cache", "--check", *LINTED])
    assert proc.returncode == 0, (
        "run `ruff format` on these:\n" + proc.stdout[-4000:] + proc.stderr[-2000:]
    )
