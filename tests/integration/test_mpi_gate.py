"""The merge gate on a real benchmark: the MPI latency sweep (Open MPI, TCP over loopback).

Run 1 writes the baseline; run 2 with the canary (--hpc-inject-slowdown 1.5: the peers
stretch every timed batch by 1.5x) must catch every point or say why it cannot decide, never
PASS; run 3 (a clean re-run) is judged against it and must call no point a regression or an
improvement. The canary's own unstretched work shows whether the host moved too far for its
known answer (then the three run once more, counted as a retry: tests/integration/_paired.py),
and its run says it was a known answer.

Against a one-session baseline the stored rule claims nothing (fewer than 3 sessions: the
spread between sessions is unknown, and this VM type's MPI jobs move between speed modes
1.2-1.7x apart for minutes): the clean re-run and the canary are both INCONCLUSIVE, the canary's
median ratio beyond the band. The stored rule's claims with sessions are calibrated in
tests/baselines/test_baselines_calibration.py.
"""

from __future__ import annotations

import json
import shutil

import pytest

from hpccomm_suites import DIR as SUITES_DIR
from pytest_hpccomm.cluster.mpi import CACHE_VAR, mpi_cache, mpirun_path
from tests.integration._paired import (
    bracketed,
    canary_caught,
    clean_judged_no_change,
    on_own_cores,
)

MPI_CACHE = mpi_cache()  # read before pytester moves HOME
SUITE = SUITES_DIR / "mpi" / "test_perf_osu.py"

pytestmark = pytest.mark.skipif(
    mpirun_path("openmpi") is None,
    reason="MPI environment 'openmpi' not created (ci/bootstrap.sh "
    "makes it: python -m pytest_hpccomm mpi create)",
)


def test_gate_passes_rerun_and_catches_injected_slowdown(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CACHE_VAR, str(MPI_CACHE))
    pytester.copy_example(str(SUITE))
    args = [
        "--hpc-mpi=openmpi",
        "--hpc-launcher=local",
        "--hpc-sizes=8,1K",
        "-k",
        "osu_latency",
        "--hpc-baselines=bl",
        "--hpc-system=gate",
        "--hpc-history=none",
        "--hpc-tolerance=0.1",
        "-p",
        "no:cacheprovider",
        "--import-mode=importlib",
        "-rs",
    ]

    def sessions() -> tuple[pytest.RunResult, pytest.RunResult]:
        shutil.rmtree(pytester.path / "bl", ignore_errors=True)
        first = pytester.runpytest_subprocess(*args, "--hpc-update-baselines=all", timeout=300)
        first.assert_outcomes(passed=2)
        stored = json.loads((pytester.path / "bl/gate/ethernet/mpi.json").read_text())
        assert len(stored["entries"]) == 2
        assert all(
            e["fingerprint"].get("mpi_library", "").startswith("Open MPI")
            for e in stored["entries"].values()
        )
        canary = pytester.runpytest_subprocess(
            *args, "--hpc-inject-slowdown=1.5", "--hpc-results=canary.json", timeout=300
        )
        rerun = pytester.runpytest_subprocess(*args, "--hpc-results=rerun.json", timeout=300)
        return canary, rerun

    canary, rerun = bracketed(
        lambda: on_own_cores(sessions, pytester.path / "canary.json"),
        pytester.path / "canary.json",
        1.5,
    )
    clean_judged_no_change(rerun, pytester.path / "rerun.json", 2)
    canary_caught(
        canary,
        pytester.path / "canary.json",
        2,
        "*regression: osu_latency * median * us vs baseline * us (ratio 1.*, "
        "98% CI *, p=*, tolerance 10%)*",
    )
    # the run itself says its canary was a known answer at every point (baselines/canary.py)
    canary.stdout.fnmatch_lines(["hpccomm canary 1.5x: a known answer at 2 of 2 points *"])
