"""The stored-baseline and the paired A/B gate on TensorFlow and Horovod, through real verdicts.

Stored: a baseline run
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

Paired: one session measures base and candidate (both `build` here, two environments of one
build; a user names two builds or versions), jobs interleaved in rounds, every point judged
candidate vs base. The 1.5x canary stretches the candidate only and must be caught at every
stretched point naming both sides; the clean A vs A session must call no point a change.
Horovod runs over gloo alone here (the stored test covers both controllers).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_hpccomm.cluster.mpi import CACHE_VAR as MPI_CACHE_VAR
from pytest_hpccomm.cluster.mpi import mpi_cache
from pytest_hpccomm.stacks.horovod import env as hvd_build
from pytest_hpccomm.stacks.tf import env as tf_env
from tests.integration._paired import canary_caught, clean_judged_no_change, on_own_cores

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

    def sessions() -> pytest.RunResult:
        shutil.rmtree(pytester.path / "bl", ignore_errors=True)
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
        return pytester.runpytest_subprocess(*args, "--hpc-inject-slowdown=1.5", timeout=900)

    canary = on_own_cores(sessions, pytester.path / "r.json", STRETCHED[stack])
    judged = canary_caught(canary, pytester.path / "r.json", None, stretched=STRETCHED[stack])
    assert all(v["tolerance"] == 0.05 for v in judged.values())
    if stack == "horovod":  # one images/s point per controller among the judged
        assert sum("|hvd_synthetic" in point for point in judged) == 2, sorted(judged)


ROUNDS = 4
PAIRED = {  # stack -> extra selection, points judged per run, the regression's terminal line
    "tf": ([], 2, "*regression: tf_recv_tensor* build (candidate) median * vs build (base) *"),
    "horovod": (
        ["--hpc-horovod-controllers=gloo"],
        3,
        "*regression: hvd_synthetic* build (candidate) median * img/s vs build (base) * img/s "
        f"({ROUNDS} job pairs, paired ratio 0.*",
    ),
}


@pytest.mark.parametrize("stack", sorted(POINTS))
def test_paired_run_catches_the_candidates_canary_and_not_a_clean_candidate(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, stack: str
) -> None:
    for var, path in CACHES.items():
        monkeypatch.setenv(var, path)
    suite, select = POINTS[stack]
    extra, points, line = PAIRED[stack]
    pytester.copy_example(str(ROOT / suite))
    args = [
        *select,
        *extra,
        f"--hpc-base={stack}=build",
        f"--hpc-candidate={stack}=build",
        f"--hpc-ab-rounds={ROUNDS}",
        *COMMON,
    ]
    canary = on_own_cores(
        lambda: pytester.runpytest_subprocess(*args, "--hpc-inject-slowdown=1.5", timeout=900),
        pytester.path / "r.json",
        STRETCHED[stack],
    )
    canary_caught(canary, pytester.path / "r.json", points, line, STRETCHED[stack])
    for r in json.loads((pytester.path / "r.json").read_text())["results"]:
        # both sides ran every round, and the result says which side was which
        assert r["fingerprint"]["paired_base"] == r["fingerprint"]["paired_candidate"] == "build"
        extra_ = r["measurement"]["extra"]
        assert len(extra_["paired_base"]["job_medians"]) == len(extra_["job_medians"]) == ROUNDS
    assert not (pytester.path / "bl").exists()  # a paired run reads and writes no baseline

    clean = pytester.runpytest_subprocess(*args, timeout=900)
    clean_judged_no_change(clean, pytester.path / "r.json", points)
