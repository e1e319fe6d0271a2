"""The paired A/B gate on a real benchmark: Open MPI against itself, TCP over loopback.

One session measures base and candidate (both the `openmpi` environment here; a user names two
builds), their jobs interleaved in rounds, and judges every point candidate vs base. The canary
stretches the candidate only: a 1.5x canary must fail every point with a message naming both
sides; the clean A vs A session must call no point a regression or an improvement. Each
session runs once (tests/integration/_paired.py says what a canary point may do instead of
failing, and why).
"""

from __future__ import annotations

import json

import pytest

from hpccomm_suites import DIR as SUITES_DIR
from pytest_hpccomm.cluster.mpi import CACHE_VAR, mpi_cache, mpirun_path
from tests.integration._paired import canary_caught, clean_judged_no_change, on_own_cores

MPI_CACHE = mpi_cache()  # read before pytester moves HOME
SUITE = SUITES_DIR / "mpi" / "test_perf_osu.py"
ARGS = [
    "--hpc-base=mpi=openmpi",
    "--hpc-candidate=mpi=openmpi",
    "--hpc-ab-rounds=4",
    "--hpc-launcher=local",
    "--hpc-sizes=8,1K",
    "-k",
    "osu_latency",
    "--hpc-history=none",
    "--hpc-baselines=bl",
    "--hpc-results=r.json",
    "-p",
    "no:cacheprovider",
    "--import-mode=importlib",
    "-rs",
]

pytestmark = pytest.mark.skipif(
    mpirun_path("openmpi") is None,
    reason="MPI environment 'openmpi' not created (ci/bootstrap.sh "
    "makes it: python -m pytest_hpccomm mpi create)",
)


def test_paired_run_catches_the_candidates_canary_and_not_a_clean_candidate(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CACHE_VAR, str(MPI_CACHE))
    pytester.copy_example(str(SUITE))

    canary = on_own_cores(
        lambda: pytester.runpytest_subprocess(*ARGS, "--hpc-inject-slowdown=1.5", timeout=600),
        pytester.path / "r.json",
    )
    canary_caught(
        canary,
        pytester.path / "r.json",
        2,
        "*regression: osu_latency * openmpi (candidate) median * us vs "
        "openmpi (base) * us (4 job pairs, paired ratio 1.*, 98% CI *, p=*, "
        "tolerance 5%)*",
    )
    doc = json.loads((pytester.path / "r.json").read_text())
    first = doc["results"][0]
    assert len(first["measurement"]["extra"]["paired_base"]["job_medians"]) == 4
    assert len(first["measurement"]["extra"]["job_medians"]) == 4
    assert not (pytester.path / "bl").exists()  # a paired run reads and writes no baseline

    clean = pytester.runpytest_subprocess(*ARGS, timeout=300)
    clean_judged_no_change(clean, pytester.path / "r.json", 2)
