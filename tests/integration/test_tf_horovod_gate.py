"""The stored-baseline gate on TensorFlow and Horovod, through real verdicts: a baseline run of
one perf point (TensorFlow's RecvTensor read of 64 KiB between a ps and a worker task;
Horovod's allreduce of 64 KiB over two ranks with the Gloo controller), then a 1.5x canary run
of the same point judged against it (--hpc-inject-slowdown: the peers stretch every timed
batch). The canary is caught or declined with the gate's reason, never PASS
(tests/integration/_paired.py); each run is made once.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_hpccomm.cluster.mpi import CACHE_VAR as MPI_CACHE_VAR
from pytest_hpccomm.cluster.mpi import mpi_cache
from pytest_hpccomm.stacks.horovod import build as hvd_build
from pytest_hpccomm.stacks.tf import env as tf_env
from tests.integration._paired import canary_caught

ROOT = Path(__file__).resolve().parents[2]
# read before pytester moves HOME: the bootstrap's environments
CACHES = {MPI_CACHE_VAR: str(mpi_cache()), tf_env.CACHE_VAR: str(tf_env.cache_root()),
          hvd_build.CACHE_VAR: str(hvd_build.cache_root())}
COMMON = ["--hpc-launcher=local", "--hpc-sizes=64K", "--hpc-baselines=bl",
          "--hpc-system=gate", "--hpc-history=none", "--hpc-results=r.json",
          "-p", "no:cacheprovider", "--import-mode=importlib", "-rs"]
POINTS = {
    "tf": ("suites/tf/test_perf_tf.py", ["-k", "test_tf_recv_tensor"]),
    "horovod": ("suites/horovod/test_perf_horovod.py",
                ["-k", "test_hvd_allreduce and not knobs", "--hpc-horovod-controllers=gloo"]),
}

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("stack", sorted(POINTS))
def test_a_canary_is_caught_against_a_fresh_baseline(pytester: pytest.Pytester,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     stack: str) -> None:
    for var, path in CACHES.items():
        monkeypatch.setenv(var, path)
    suite, select = POINTS[stack]
    pytester.copy_example(str(ROOT / suite))
    args = [*select, *COMMON]
    first = pytester.runpytest_subprocess(*args, "--hpc-update-baselines=all", timeout=900)
    out = first.stdout.str()
    if first.parseoutcomes().get("skipped") and not first.parseoutcomes().get("passed"):
        pytest.skip(f"stack {stack!r} is not set up here: "
                    f"{[ln for ln in first.stdout.lines if 'SKIPPED' in ln][:1]}")
    first.assert_outcomes(passed=1)
    assert (pytester.path / "bl" / "gate" / "ethernet" / f"{stack}.json").is_file(), out
    canary = pytester.runpytest_subprocess(*args, "--hpc-inject-slowdown=1.5", timeout=900)
    judged = canary_caught(canary, pytester.path / "r.json", None)  # a time and a rate
    assert all(v["tolerance"] == 0.05 for v in judged.values())
