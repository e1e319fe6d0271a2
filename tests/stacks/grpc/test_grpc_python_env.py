"""The Python the Python peers run (--hpc-grpc-python): a grpcio release from the package
index made into a venv on first use and run by the real peers; what does not exist (a version
without a wheel for this Python, a path) is a usage error naming what does; the release axis
of `hpccomm matrix grpc` lists, orders and names the releases."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from hpccomm_suites import DIR as SUITES_DIR
from pytest_hpccomm.matrix.axis import adjacent_pairs, axis_for
from pytest_hpccomm.package_index import wheel_versions
from pytest_hpccomm.stacks.grpc import python_env
from pytest_hpccomm.stacks.grpc.driver import BenchSettings, run_p2p, start_server
from pytest_hpccomm.stacks.grpc.python_env import peer_python, released_versions, spec_error
from pytest_hpccomm.stacks.grpc.releases import newest_patches
from tests.builders import usage_error_line

SUITE = SUITES_DIR / "grpc" / "test_perf_tf_grpc_bench.py"
ARGS = ("--hpc-history=none", "--hpc-baselines=bl", "-p", "no:cacheprovider")
OLD = "grpcio==1.60.2"  # a release older than this interpreter's, with a cp311 wheel
NO_WHEEL = "grpcio==1.48.2"  # on the index, but built before Python 3.11: no wheel for it

PIP_SAYS = (
    "ERROR: Could not find a version that satisfies the requirement grpcio<0 (from versions: "
    "1.49.0, 1.49.1, 1.50.0rc1, 1.50.0)\nERROR: No matching distribution found for grpcio<0\n"
)


def test_the_versions_with_a_wheel_are_read_from_pips_answer() -> None:
    assert wheel_versions(PIP_SAYS) == ["1.49.0", "1.49.1", "1.50.0rc1", "1.50.0"]
    assert wheel_versions("nothing") == []
    assert wheel_versions("ERROR: ... requirement nogrpc<0 (from versions: none)") == []


def test_the_axis_takes_the_newest_final_patch_of_each_minor() -> None:
    got = newest_patches(["1.49.0", "1.49.1", "1.50.0rc1", "1.50.0", "1.9.1", "1.10.0", "x"])
    assert got == ["grpcio==1.9.1", "grpcio==1.10.0", "grpcio==1.49.1", "grpcio==1.50.0"]


def test_the_index_lists_wheels_for_this_python_only() -> None:
    have = released_versions()
    assert "1.60.2" in have and "1.48.2" not in have, have[:5]


def test_unknown_releases_and_paths_are_named_with_what_exists(tmp_path: Path) -> None:
    assert spec_error("") is None and spec_error(OLD) is None
    assert spec_error(sys.executable) is None
    error = spec_error(NO_WHEEL)
    assert error is not None and error.startswith(f"--hpc-grpc-python {NO_WHEEL}: ")
    assert "no release 1.48.2 with a wheel for Python" in error and "1.60.2" in error
    assert "a release is grpcio==VERSION" in (spec_error("grpcio=1.60.2") or "")
    assert "not a Python executable" in (spec_error(str(tmp_path / "typo")) or "")


def test_the_axis_is_found_by_its_role_name() -> None:
    axis = axis_for("grpc")
    assert axis.option == "--hpc-grpc-python"
    assert adjacent_pairs(axis, ["grpcio==1.85.3", "grpcio==1.9.1", "grpcio==1.60.2"]) == [
        ("grpcio==1.9.1", "grpcio==1.60.2"),
        ("grpcio==1.60.2", "grpcio==1.85.3"),
    ]
    assert axis.describe(OLD) == "grpcio 1.60.2, the package index's wheel"
    assert "a grpcio release is grpcio==VERSION" in (axis.spec_error("1.60.2") or "")


def test_a_release_runs_the_python_peers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The venv is made once (the second call finds it) and the real peers run from it: the
    server and the benchmark client each report the release's grpcio, not this one's."""
    monkeypatch.setenv(python_env.CACHE_VAR, str(tmp_path / "cache"))
    python, version = peer_python(OLD)
    assert version == "1.60.2" and python.startswith(str(tmp_path))
    assert peer_python(OLD) == (python, version)
    server = start_server("python", None, lifetime=120, python=python)
    try:
        assert server.info["grpc_version"] == "1.60.2"
        quick = BenchSettings.for_profile("quick")
        sweep = run_p2p("python", None, server, "raw", [("one", [10])], quick, python=python)
    finally:
        server.stop()
    assert sweep.grpc_version == "1.60.2"


def test_a_release_without_a_wheel_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.copy_example(str(SUITE))
    line = usage_error_line(pytester.runpytest_subprocess(f"--hpc-grpc-python={NO_WHEEL}", *ARGS))
    assert f"--hpc-grpc-python {NO_WHEEL}: grpcio has no release 1.48.2" in line


def test_paired_releases_are_checked_and_not_mixed_with_an_installation(
    pytester: pytest.Pytester,
) -> None:
    pytester.copy_example(str(SUITE))
    line = usage_error_line(
        pytester.runpytest_subprocess(
            f"--hpc-base=grpc={NO_WHEEL}", f"--hpc-candidate=grpc={OLD}", *ARGS
        )
    )
    assert f"--hpc-base grpc={NO_WHEEL}: grpcio has no release 1.48.2" in line
    line = usage_error_line(
        pytester.runpytest_subprocess(
            f"--hpc-base=grpc={OLD}", "--hpc-candidate=grpc=system", *ARGS
        )
    )
    assert "two grpcio releases or two gRPC installations, not one of each" in line
