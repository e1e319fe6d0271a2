"""The stored-baseline gate on TensorFlow and Horovod, through real verdicts: a baseline run
of one perf point per stack, then a 1.5x canary run of the same point judged against it
(--hpc-inject-slowdown: the peers stretch every timed batch or iteration). The canary is
caught or declined with the gate's reason, its median ratio beyond the band, never PASS
(tests/integration/_paired.py); each run is made once.

- TensorFlow: the RecvTensor read of 64 KiB between a ps and a worker task.
- Horovod: the synthetic training benchmark (small_cnn, images/s per rank), both controllers.
  Its timeline points (negotiation and reduction ms per step) are judged too but carry no
  known answer (the canary stretches the iteration, not those phases): only the images/s
  point must show the canary. Horovod's allreduce points are not used: one run of them on 2
  cores can be many times slower than the next (1 MiB over the MPI controller at 27.5 ms in
  one baseline run, 1.1 ms in others), so one baseline run is no reference for them; their
  canary is checked batch by batch (tests/stacks/horovod). A training job's images/s spread
  +-15 % job to job, now and then one job at half speed: the median over the run's jobs holds.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_hpccomm.cluster.mpi import CACHE_VAR as MPI_CACHE_VAR
from pytest_hpccomm.cluster.mpi import mpi_cache
from pytest_hpccomm.stacks.horovod import build as hvd_build
from pytest_hpccomm.stacks.tf import env as tf_env
from tests.integration._paired import canary_caught

ROOT = Path(__file__).resolve().parents[2]
# read before pytester moves HOME: the bootstrap's environments
CACHES = {
    MPI_CACHE_VAR: str(mpi_cache()),
    tf_env.CACHE_VAR: str(tf_env.cache_root()),
    hvd_build.CACHE_VAR: str(hvd_build.cache_root()),
}
COMMON = [
    "--hpc-launcher=local",
    "--hpc-baselines=bl",
    "--hpc-system=gate",
    "--hpc-history=none",
    "--hpc-results=r.json",
    "-p",
    "no:cacheprovider",
    "--import-mode=importlib",
    "-rs",
]
POINTS = {
    "tf": ("hpccomm_suites/tf/test_perf_tf.py", ["-k", "test_tf_recv_tensor", "--hpc-sizes=64K"]),
    "horovod": (
        "hpccomm_suites/horovod/test_perf_horovod.py",
        ["-k", "test_hvd_synthetic_benchmark"],
    ),
}
# the points whose canary is a known answer (None: every point the run judged)
STRETCHED: dict[str, Callable[[str], bool] | None] = {
    "tf": None,
    "horovod": lambda point: "|hvd_synthetic" in point,
}

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("stack", sorted(POINTS))
def test_a_canary_is_caught_against_a_fresh_baseline(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, stack: str
) -> None:
    for var, path in CACHES.items():
        monkeypatch.setenv(var, path)
    suite, select = POINTS[stack]
    pytester.copy_example(str(ROOT / suite))
    args = [*select, *COMMON]
    first = pytester.runpytest_subprocess(*args, "--hpc-update-baselines=all", timeout=900)
    out = first.stdout.str()
    if first.parseoutcomes().get("skipped") and not first.parseoutcomes().get("passed"):
        pytest.skip(
            f"stack {stack!r} is not set up here: "
            f"{[ln for ln in first.stdout.lines if 'SKIPPED' in ln][:1]}"
        )
    passed = first.parseoutcomes().get("passed")
    assert passed == {"tf": 1, "horovod": 2}[stack], out
    assert (pytester.path / "bl" / "gate" / "ethernet" / f"{stack}.json").is_file(), out
    canary = pytester.runpytest_subprocess(*args, "--hpc-inject-slowdown=1.5", timeout=900)
    judged = canary_caught(canary, pytester.path / "r.json", None, stretched=STRETCHED[stack])
    assert all(v["tolerance"] == 0.05 for v in judged.values())
    if stack == "horovod":  # one images/s point per controller among the judged
        assert sum("|hvd_synthetic" in point for point in judged) == 2, sorted(judged)
