"""The suite validates itself: with a planted bug (the peer corrupts one element of every
reduction result longer than PLANT_THRESHOLD), the reduction property must fail, Hypothesis
must shrink it to the smallest case that trips the bug, and the failure must say how to
reproduce it. Without the plant the same run passes."""

from __future__ import annotations

import json
import re

import pytest

from hpccomm_suites import DIR as SUITES_DIR
from pytest_hpccomm.cluster.mpi import CACHE_VAR, mpi_cache, mpirun_path
from pytest_hpccomm.stacks.mpi.wire import PLANT_THRESHOLD

MPI_CACHE = mpi_cache()  # read before pytester moves HOME
SUITES = SUITES_DIR / "mpi"
TEST = "test_conformance_reduce.py::test_reduce_any_predefined_op"

pytestmark = pytest.mark.skipif(
    mpirun_path("openmpi") is None,
    reason="MPI environment 'openmpi' not created (ci/bootstrap.sh "
    "makes it: python -m pytest_hpccomm mpi create)",
)


def run_reduce_property(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, *extra: str
) -> pytest.RunResult:
    monkeypatch.setenv(CACHE_VAR, str(MPI_CACHE))
    pytester.copy_example(str(SUITES / "test_conformance_reduce.py"))
    return pytester.runpytest_subprocess(
        TEST,
        "--hpc-mpi=openmpi",
        "--hpc-launcher=local",
        "--hpc-history=none",
        "--hpc-fabric=ethernet",
        "-p",
        "no:cacheprovider",
        "--import-mode=importlib",
        *extra,
        timeout=300,
    )


def test_planted_reduce_bug_fails_shrunk_and_reproducible(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    res = run_reduce_property(pytester, monkeypatch, "--hpc-mpi-plant=corrupt-reduce")
    out = res.stdout.str()
    res.assert_outcomes(failed=1)
    found = re.search(r"^E\s+case: (\{.*\})$", out, re.M)
    assert found, out[-3000:]
    case = json.loads(found.group(1))
    # shrunk: the shortest vector that trips the plant, the first op/dtype/variant, all zeros
    assert case["count"] == PLANT_THRESHOLD + 1, case
    assert (case["op"], case["dtype"], case["variant"], case["root"]) == (
        "SUM",
        "int8",
        "allreduce",
        0,
    ), case
    assert all(v == 0 for row in case["inputs"] for v in row), case
    assert f"element {PLANT_THRESHOLD} is np.int8(1), NumPy says np.int8(0)" in out
    # what reproduces it: the drawn case, Hypothesis' blob, and a replay without pytest
    assert "Draw 1 (case):" in out
    assert re.search(r"@reproduce_failure\('[\d.]+', b'[^']+'\)", out), out[-3000:]
    assert "replay without pytest:" in out and "HPCCOMM_MPI_PLANT=corrupt-reduce" in out


def test_same_property_passes_without_plant(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    res = run_reduce_property(pytester, monkeypatch)
    res.assert_outcomes(passed=1)
