"""The canary reaches TensorFlow's timed regions: with --hpc-inject-slowdown F the worker task
stretches every timed batch of RecvTensor reads by F (a sleep: TensorFlow's gRPC threads need
the cores; never the warm-up), so the gate's power can be checked on this stack as on the
others. Real tasks (ps and worker on loopback). Each batch is judged against its own
unstretched time, as for Horovod: a comparison with plain batches would ask the runtime to run
at the same speed across requests, which a gRPC runtime on 2 shared cores does not promise.
The ring all-reduce likewise, each worker stretching its own batches (the report takes their
mean), and the parameter-server steps, the chief stretching each batch it schedules."""

from __future__ import annotations

import statistics

from pytest_hpccomm.stacks.tf import allreduce, ps
from pytest_hpccomm.stacks.tf.driver import PS_CLUSTER, RING, Layout, TfTasks
from pytest_hpccomm.stacks.tf.env import TfEnv
from pytest_hpccomm.stacks.tf.perf import RecvSweep, run_job

FACTOR = 3.0


def test_slowdown_stretches_every_batch_of_reads(tf_env: TfEnv) -> None:
    with TfTasks(tf_env, "loopback", None, Layout()) as tasks:
        plain = run_job(tasks, [64, 1 << 20], "quick", 1.0)
        assert all("unstretched" not in p for p in plain.points.values()), (
            "a plain job was stretched"
        )
        canary = run_job(tasks, [64, 1 << 20], "quick", FACTOR)
    check_stretched(canary)


def test_slowdown_stretches_every_batch_of_allreduces(tf_env: TfEnv) -> None:
    with TfTasks(tf_env, "loopback", None, RING) as tasks:
        plain = allreduce.run_job(tasks, [64, 1 << 20], "quick", 1.0)
        assert all("unstretched" not in p for p in plain.points.values()), (
            "a plain job was stretched"
        )
        canary = allreduce.run_job(tasks, [64, 1 << 20], "quick", FACTOR)
    check_stretched(canary)


def test_slowdown_stretches_every_batch_of_ps_steps(tf_env: TfEnv) -> None:
    """Rates: a batch's steps per second are F times fewer than its own work gave."""
    with TfTasks(tf_env, "loopback", None, PS_CLUSTER) as tasks:
        plain = ps.run_job(tasks, [1 << 10], "quick", 1.0)
        assert all("unstretched" not in p for p in plain.points.values()), (
            "a plain job was stretched"
        )
        canary = ps.run_job(tasks, [1 << 10, 4 << 20], "quick", FACTOR)
    check_stretched(canary, rate=True)


def check_stretched(canary: RecvSweep, rate: bool = False) -> None:
    for size, p in canary.points.items():
        assert p["valid"], f"{size} B: the job's result was wrong"
        ratios = [
            (u / s if rate else s / u) for s, u in zip(p["samples"], p["unstretched"], strict=True)
        ]
        # never short of F; above it by the sleep's wake-up delay only
        assert min(ratios) >= 0.98 * FACTOR and statistics.median(ratios) <= 1.2 * FACTOR, (
            f"{size} B: reported/unstretched per batch = {ratios}, expected {FACTOR}"
        )
