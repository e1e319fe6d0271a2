"""--hpc-tf-python names the user's TensorFlow: a path that is no Python is a one-line usage error (exit
4); a Python that does not run, or lacks tensorflow, fails the items naming the option, never
skips them (a skip would leave a merge gate green)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

SUITE = Path(__file__).resolve().parents[3] / "suites" / "tf" / "test_conformance_tf.py"
ARGS = ("-k", "test_tensors_cross_tasks_bit_exact", "--hpc-history=none", "--hpc-baselines=bl", "-p", "no:cacheprovider",
        "--import-mode=importlib")


def one_line_usage_error(result: pytest.RunResult) -> str:
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str() + result.stderr.str()
    lines = [line for line in result.stderr.lines if line.strip()]
    assert len(lines) == 1, lines
    return lines[0]


def test_a_python_that_does_not_exist(pytester: pytest.Pytester) -> None:
    pytester.copy_example(str(SUITE))
    line = one_line_usage_error(pytester.runpytest_subprocess("--hpc-tf-python=/typo/python", *ARGS))
    assert "--hpc-tf-python: /typo/python does not exist" in line


def test_a_directory_without_a_python(pytester: pytest.Pytester, tmp_path: Path) -> None:
    pytester.copy_example(str(SUITE))
    line = one_line_usage_error(pytester.runpytest_subprocess(f"--hpc-tf-python={tmp_path}", *ARGS))
    assert f"--hpc-tf-python: {tmp_path} is not a Python executable" in line


def fails_naming(result: pytest.RunResult, python: Path) -> None:
    outcomes = result.parseoutcomes()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    assert "skipped" not in outcomes and "passed" not in outcomes, outcomes
    result.stdout.fnmatch_lines([f"*--hpc-tf-python: {python}: importing tensorflow failed*"])


def test_a_python_that_does_not_run_fails(pytester: pytest.Pytester, tmp_path: Path) -> None:
    python = tmp_path / "python"
    python.write_text("#!/bin/sh\nexit 3\n")
    python.chmod(0o755)
    pytester.copy_example(str(SUITE))
    fails_naming(pytester.runpytest_subprocess(f"--hpc-tf-python={python}", *ARGS), python)


@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is not None,
                    reason="this Python has tensorflow: it cannot stand for one that lacks it")
def test_a_python_without_tensorflow_fails(pytester: pytest.Pytester) -> None:
    python = Path(sys.executable)
    pytester.copy_example(str(SUITE))
    fails_naming(pytester.runpytest_subprocess(f"--hpc-tf-python={python}", *ARGS), python)
