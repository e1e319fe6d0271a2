"""A job that printed its benchmarks' results and then failed fails every item of it with the
job's reason (the review: a job that exited non-zero or timed out after printing passed every
item). Real Open MPI jobs (osu_latency, TCP over loopback) under a launcher wrapper that runs
the real mpirun, so the real peer prints real results, and then fails as an MPI does when a
rank crashes in MPI_Finalize (exit 3) or hangs (timeout). The wrapper is a fake launcher: what
is tested is the orchestrator's reading of the job."""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import signal
import threading
import time
from pathlib import Path

import pytest

from hpccomm_suites import DIR as SUITES_DIR
from pytest_hpccomm.cluster.mpi import CACHE_VAR, mpi_cache, mpirun_path
from pytest_hpccomm.proc import proctree
from pytest_hpccomm.stacks.mpi.driver import (
    PEER_MODULE,
    SweepFailed,
    SweepSettings,
    SweepTarget,
    measurements,
    run_sweep,
)
from pytest_hpccomm.stacks.mpi.env import MpiRuntime, resolve

MPI_CACHE = mpi_cache()  # read before pytester moves HOME
SUITE = SUITES_DIR / "mpi" / "test_perf_osu.py"
TINY = SweepSettings(
    batches=3,
    min_batches=3,
    budget=0.0,
    iterations=5,
    loops=2,
    coll_iterations=5,
    batch_bytes=1 << 16,
    warmup=2,
)
CRASH = 'echo "rank 1: segfault in MPI_Finalize" >&2; exit 3'

pytestmark = pytest.mark.skipif(
    mpirun_path("openmpi") is None,
    reason="MPI environment 'openmpi' not created (ci/bootstrap.sh "
    "makes it: python -m pytest_hpccomm mpi create)",
)


def wrapper(path: Path, real: Path, then: str) -> Path:
    """An mpirun that runs the real one, then (unless it failed, or only said its version)
    does `then`."""
    path.write_text(
        f'#!/bin/sh\n"{real}" "$@" || exit $?\n[ "$1" = --version ] && exit 0\n{then}\n'
    )
    path.chmod(0o755)
    return path


def runtime_failing_with(tmp_path: Path, then: str) -> MpiRuntime:
    real = resolve("openmpi")
    return dataclasses.replace(real, mpirun=wrapper(tmp_path / "mpirun", real.mpirun, then))


def test_a_job_that_exits_non_zero_after_printing_fails_its_benchmarks(tmp_path: Path) -> None:
    sweep = run_sweep(runtime_failing_with(tmp_path, CRASH), "loopback", "osu_latency", [8], TINY)
    assert len(sweep.docs["osu_latency"]["results"][0]["samples"]) == 3  # printed, for real
    with pytest.raises(
        SweepFailed,
        match=r"^osu_latency printed its results, but MPI job "
        r"failed after osu_latency: .* exit 3 after .*: "
        r"rank 1: segfault in MPI_Finalize$",
    ):
        measurements(sweep, "osu_latency", 8, {"mpi": "openmpi"})


def test_a_job_that_times_out_after_printing_fails_its_benchmarks(tmp_path: Path) -> None:
    # timeout_for() gives this tiny sweep ~61 s; a tenth is ample for Open MPI's ~1 s start
    target = SweepTarget("loopback", timeout_scale=0.15)
    sweep = run_sweep(
        runtime_failing_with(tmp_path, "exec sleep 300"), target, "osu_latency", [8], TINY
    )
    assert sweep.job.timed_out and sweep.docs["osu_latency"]["results"]
    with pytest.raises(
        SweepFailed,
        match=r"^osu_latency printed its results, but MPI job "
        r"failed after osu_latency: .* timed out after ",
    ):
        measurements(sweep, "osu_latency", 8, {"mpi": "openmpi"})


def test_a_job_its_timeout_ends_says_where_each_rank_waited() -> None:
    """Real ranks, rank 1 stopped (SIGSTOP) in the middle of the sweep: rank 0 waits in the
    MPI for it until the timeout, and the failure names both ranks and, by gdb, rank 0's
    native frames in Open MPI down to the MPI call."""
    long = dataclasses.replace(TINY, batches=10**6, budget=60.0)
    target = SweepTarget("loopback", timeout_scale=0.1)  # ~12 s of timeout_for's ~120 s
    failed: list[BaseException] = []

    def sweep() -> None:
        try:
            run_sweep(resolve("openmpi"), target, "osu_latency", [8], long)
        except BaseException as e:  # the main thread asserts
            failed.append(e)

    t = threading.Thread(target=sweep)
    t.start()
    try:
        stopped = _stop_rank(1, within=8.0)
    finally:
        t.join(120)
    assert stopped, "rank 1 never appeared"
    assert failed and isinstance(failed[0], SweepFailed), failed
    text = str(failed[0])
    assert "timed out after" in text and "where they waited (rank 0, rank 1):" in text, text
    if shutil.which("gdb"):
        # the peers use persistent requests: the call is PMPI_Wait (or Start, Recv, Send)
        assert re.search(r"^  rank 0 native: .*opal_progress.* < PMPI_\w+$", text, re.M), text


def _stop_rank(rank: int, within: float) -> bool:
    """SIGSTOP the benchmark peer of `rank` once it has run a second (MPI_Init done)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        for p in proctree.with_cmdline_prefix(str(resolve("openmpi").python).encode()):
            if PEER_MODULE.encode() not in proctree.cmdline(p.pid):
                continue
            if proctree.environ(p.pid).get("OMPI_COMM_WORLD_RANK") == str(rank):
                time.sleep(2.0)
                os.kill(p.pid, signal.SIGSTOP)
                return True
        time.sleep(0.1)
    return False


def test_the_items_of_a_job_that_failed_after_printing_fail(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The suite with an MPI environment whose mpirun crashes after the job: both items fail
    with the job's reason, none passes on the timings it printed."""
    env = pytester.path / "mpi-envs" / "openmpi" / "bin"
    env.mkdir(parents=True)
    real = MPI_CACHE / "openmpi" / "bin"
    wrapper(env / "mpirun", real / "mpirun", CRASH)
    (env / "python").write_text(f'#!/bin/sh\nexec "{real / "python"}" "$@"\n')
    (env / "python").chmod(0o755)
    monkeypatch.setenv(CACHE_VAR, str(env.parent.parent))
    pytester.copy_example(str(SUITE))
    result = pytester.runpytest_subprocess(
        "--hpc-mpi=openmpi",
        "--hpc-launcher=local",
        "--hpc-sizes=8,1K",
        "-k",
        "osu_latency",
        "--hpc-repeats=1",
        "--hpc-history=none",
        "--hpc-baselines=bl",
        "-p",
        "no:cacheprovider",
        "--import-mode=importlib",
        timeout=300,
    )
    result.assert_outcomes(failed=2)
    out = result.stdout.str()
    assert (
        out.count("osu_latency printed its results, but MPI job failed after osu_latency") >= 2
    ), out
    assert "exit 3" in out and "segfault in MPI_Finalize" in out
