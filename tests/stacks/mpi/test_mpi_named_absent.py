"""An MPI the user names (a path or command in --hpc-mpi, either side of a paired run) that
is not here is a one-line usage error (exit 4) naming the option and the value, never a skip
that leaves a merge gate green."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpccomm_suites import DIR as SUITES_DIR
from pytest_hpccomm.cluster.mpi import CACHE_VAR, mpirun_path
from tests.builders import usage_error_line

SUITE = SUITES_DIR / "mpi" / "test_perf_osu.py"
USES_RUNTIME = "def test_runtime(mpi_runtime):\n    assert mpi_runtime.flavor\n"


@pytest.mark.parametrize("spec", ["/typo/bin/mpirun", "mpirun-typo-not-on-path"])
def test_a_named_mpi_that_is_absent_is_a_usage_error(pytester: pytest.Pytester, spec: str) -> None:
    pytester.makepyfile(USES_RUNTIME)
    line = usage_error_line(
        pytester.runpytest_subprocess(
            f"--hpc-mpi={spec}", "--hpc-history=none", "-p", "no:cacheprovider"
        )
    )
    assert f"--hpc-mpi: MPI '{spec}': no such executable here" in line


def test_a_directory_is_no_mpirun(pytester: pytest.Pytester, tmp_path: Path) -> None:
    pytester.makepyfile(USES_RUNTIME)
    line = usage_error_line(
        pytester.runpytest_subprocess(
            f"--hpc-mpi={tmp_path}", "--hpc-history=none", "-p", "no:cacheprovider"
        )
    )
    assert f"--hpc-mpi: MPI '{tmp_path}': no such executable here" in line


@pytest.mark.parametrize("side", ["candidate", "base"])
def test_a_paired_side_that_is_absent_is_a_usage_error(
    pytester: pytest.Pytester, side: str
) -> None:
    """On the suite itself: the typo'd side would otherwise skip every item (exit 0)."""
    good = "openmpi" if mpirun_path("openmpi") is not None else "/bin/sh"
    sides = {"base": good, "candidate": good, side: "/typo/bin/mpirun"}
    pytester.copy_example(str(SUITE))
    line = usage_error_line(
        pytester.runpytest_subprocess(
            f"--hpc-base=mpi={sides['base']}",
            f"--hpc-candidate=mpi={sides['candidate']}",
            "--hpc-sizes=8",
            "-k",
            "osu_latency",
            "--hpc-history=none",
            "--hpc-baselines=bl",
            "-p",
            "no:cacheprovider",
            "--import-mode=importlib",
        )
    )
    assert (
        f"--hpc-{side} mpi=/typo/bin/mpirun: MPI '/typo/bin/mpirun': no such executable "
        "here" in line
    )


def test_an_absent_environment_of_a_paired_run_is_a_usage_error(
    pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CACHE_VAR, str(tmp_path / "empty"))
    pytester.makepyfile(USES_RUNTIME)
    line = usage_error_line(
        pytester.runpytest_subprocess(
            "--hpc-base=mpi=openmpi4",
            "--hpc-candidate=mpi=openmpi",
            "--hpc-history=none",
            "-p",
            "no:cacheprovider",
        )
    )
    assert "--hpc-base mpi=openmpi4: MPI environment 'openmpi4' not found at" in line


def test_a_named_environment_that_was_not_created_is_a_usage_error(
    pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--hpc-mpi=mpich names it: absent, it is an error; the default list's may skip."""
    monkeypatch.setenv(CACHE_VAR, str(tmp_path / "empty"))
    pytester.makepyfile(USES_RUNTIME)
    line = usage_error_line(
        pytester.runpytest_subprocess(
            "--hpc-mpi=mpich", "--hpc-history=none", "-p", "no:cacheprovider"
        )
    )
    assert line.startswith("ERROR: --hpc-mpi: ") and "mpich" in line, line
    default = pytester.runpytest_subprocess("--hpc-history=none", "-p", "no:cacheprovider", "-rs")
    assert default.ret == pytest.ExitCode.OK, default.stdout.str()
    default.assert_outcomes(skipped=2)


def test_a_release_the_package_index_lacks_is_a_usage_error_naming_its_releases(
    pytester: pytest.Pytester,
) -> None:
    """--hpc-mpi mpich==0.0.1: the index is asked once, and the error names what it has."""
    pytester.makepyfile(USES_RUNTIME)
    result = pytester.runpytest_subprocess("--hpc-mpi", "mpich==0.0.1")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*--hpc-mpi: mpich==0.0.1: mpich has no release 0.0.1*it has*4.3.2*"]
    )
