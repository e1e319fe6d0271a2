"""The merge gate on a real benchmark: the MPI latency sweep (Open MPI, TCP over loopback).

Run 1 writes the baseline, run 2 passes against it, run 3 with the canary
(--hpc-inject-slowdown 1.5: the peers stretch every timed batch by 1.5x) fails with a readable
message and exit status 1.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_hpccomm.cluster.mpi import CACHE_VAR, mpi_cache, mpirun_path

MPI_CACHE = mpi_cache()  # read before pytester moves HOME
SUITE = Path(__file__).resolve().parents[2] / "suites" / "mpi" / "test_perf_osu.py"

pytestmark = pytest.mark.skipif(mpirun_path("openmpi") is None,
                                reason="MPI environment 'openmpi' not created (ci/bootstrap.sh "
                                       "makes it: python -m pytest_hpccomm.cluster.mpi create)")


def test_gate_passes_rerun_and_catches_injected_slowdown(pytester: pytest.Pytester,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CACHE_VAR, str(MPI_CACHE))
    pytester.copy_example(str(SUITE))
    args = ["--hpc-mpi=openmpi", "--hpc-launcher=local", "--hpc-sizes=8,1K", "-k",
            "osu_latency", "--hpc-baselines=bl", "--hpc-system=gate", "--hpc-history=none",
            "-p", "no:cacheprovider", "--import-mode=importlib", "-rs"]
    first = pytester.runpytest_subprocess(*args, "--hpc-update-baselines", timeout=300)
    first.assert_outcomes(passed=2)
    stored = json.loads((pytester.path / "bl/gate/ethernet/mpi.json").read_text())
    assert len(stored["entries"]) == 2
    assert all(e["fingerprint"].get("mpi_library", "").startswith("Open MPI")
               for e in stored["entries"].values())

    second = pytester.runpytest_subprocess(*args, timeout=300)
    assert second.ret == 0, second.stdout.str()
    assert "REGRESSION" not in second.stdout.str()

    canary = pytester.runpytest_subprocess(*args, "--hpc-inject-slowdown=1.5", timeout=300)
    assert canary.ret == 1
    canary.assert_outcomes(failed=2)
    canary.stdout.fnmatch_lines(["*regression: osu_latency * median * us vs baseline * us "
                                 "(ratio 1.*, 98% CI *, p=*, tolerance 5%)*"])
