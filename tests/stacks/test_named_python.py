"""--hpc-tf-python and --hpc-horovod-python name the user's TensorFlow or Horovod: a path that
is no Python is a one-line usage error (exit 4); a Python that does not run, or lacks the
package, fails the items naming the option, never skips them (a skip would leave a merge gate
green)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from hpccomm_suites import DIR as SUITES_DIR
from tests.builders import usage_error_line

SUITES = SUITES_DIR
COMMON = (
    "--hpc-history=none",
    "--hpc-baselines=bl",
    "-p",
    "no:cacheprovider",
    "--import-mode=importlib",
)
# option, its suite, one item of it, what the probe imports, the package a Python may lack
NAMED = {
    "tf": (
        "--hpc-tf-python",
        SUITES / "tf" / "test_conformance_tf.py",
        "test_tensors_cross_tasks_bit_exact",
        "tensorflow",
        "tensorflow",
    ),
    "horovod": (
        "--hpc-horovod-python",
        SUITES / "horovod" / "test_conformance_horovod.py",
        "test_allreduce_matches_numpy",
        "horovod.torch",
        "horovod",
    ),
}


def run(pytester: pytest.Pytester, stack: str, python: object) -> pytest.RunResult:
    option, suite, item, _, _ = NAMED[stack]
    pytester.copy_example(str(suite))
    return pytester.runpytest_subprocess(f"{option}={python}", "-k", item, *COMMON)


@pytest.mark.parametrize("stack", NAMED)
def test_a_python_that_does_not_exist(pytester: pytest.Pytester, stack: str) -> None:
    line = usage_error_line(run(pytester, stack, "/typo/python"))
    assert f"{NAMED[stack][0]}: /typo/python does not exist" in line


@pytest.mark.parametrize("stack", NAMED)
def test_a_directory_without_a_python(
    pytester: pytest.Pytester, tmp_path: Path, stack: str
) -> None:
    line = usage_error_line(run(pytester, stack, tmp_path))
    assert f"{NAMED[stack][0]}: {tmp_path} is not a Python executable" in line


def fails_naming(result: pytest.RunResult, stack: str, python: Path) -> None:
    option, _, _, imported, _ = NAMED[stack]
    outcomes = result.parseoutcomes()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    assert "skipped" not in outcomes and "passed" not in outcomes, outcomes
    result.stdout.fnmatch_lines([f"*{option}: {python}: importing {imported} failed*"])


@pytest.mark.parametrize("stack", NAMED)
def test_a_python_that_does_not_run_fails(
    pytester: pytest.Pytester, tmp_path: Path, stack: str
) -> None:
    python = tmp_path / "python"
    python.write_text("#!/bin/sh\nexit 3\n")
    python.chmod(0o755)
    fails_naming(run(pytester, stack, python), stack, python)


@pytest.mark.parametrize("stack", NAMED)
def test_a_python_without_the_package_fails(pytester: pytest.Pytester, stack: str) -> None:
    package = NAMED[stack][4]
    if importlib.util.find_spec(package) is not None:
        pytest.skip(f"this Python has {package}: it cannot stand for one that lacks it")
    python = Path(sys.executable)
    fails_naming(run(pytester, stack, python), stack, python)
