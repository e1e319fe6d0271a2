"""The canary reaches Horovod's timed regions: with --hpc-inject-slowdown F the peer stretches
every timed batch of allreduces and every training iteration by F (never the warm-up), so the
gate's power can be checked on this stack as on the others. Real peers.

Two questions, asked apart. Does the stretch land where it should? Each timed region is
checked against the canary's own unstretched time of the same region (its definition: F times
it, plus a sleep's wake-up). Does the gate see it? Plain and canary training requests run as
an A/B run's rounds do (the default --hpc-ab-rounds, the order drawn as measure.pooling's
balanced_order draws it) and the
paired A/B rule judges the canary's images/s against the plain ones': it must call a
regression. A round's plain/canary ratio is not F: training requests spread +-15 % from one to
the next, which a band around F cannot hold. Before loopback ranks ran one per core
(test_horovod_rank_cpus.py), runs of MPI-controller requests ran at half speed, and with 4
rounds one such round left a 3x canary inconclusive; the gate's own rounds are kept."""

from __future__ import annotations

import statistics

import pytest

from pytest_hpccomm.baselines.paired import judge_paired
from pytest_hpccomm.baselines.verdict import Outcome
from pytest_hpccomm.config import HpcConfig
from pytest_hpccomm.measure.measurement import Direction, Measurement
from pytest_hpccomm.measure.pooling import balanced_order
from pytest_hpccomm.stacks.horovod.driver import HorovodPeers, bench_times
from pytest_hpccomm.stacks.horovod.env import HorovodEnv
from pytest_hpccomm.stacks.horovod.perf import SYNTHETIC, TRAIN

FACTOR = 3.0
ROUNDS = HpcConfig.ab_rounds  # what an A/B run takes unless told otherwise
TOLERANCE = 0.05  # the plugin's default


# extended: tests/integration/test_tf_hvd_gate.py catches this canary through a verdict under
# both controllers; this one shows the stretch itself, per controller, in ~6 min
@pytest.mark.extended
@pytest.mark.parametrize("controller", ["gloo", "mpi"])
def test_slowdown_stretches_allreduce_batches_and_training(
    horovod_env: HorovodEnv, controller: str
) -> None:
    bench = {"op": "bench", "sizes": [16, 1 << 16], "warmup": 2, "iters": 5, "batches": 10}
    train = {"op": "train", "model": "small_cnn", **TRAIN["small_cnn"], "iters": 4}
    with HorovodPeers(horovod_env, controller, "loopback") as peers:
        batches = bench_times(peers.request(bench, 120.0))
        assert all("unstretched" not in p for p in batches), "a plain request was stretched"
        for p in bench_times(peers.request({**bench, "slowdown": FACTOR}, 120.0)):
            ratios = [s / u for s, u in zip(p["samples"], p["unstretched"], strict=True)]
            # never short of F; above it by the sleep's wake-up delay, which busy-polling MPI
            # ranks on 2 cores make up to ~2 ms on a 5 ms batch now and then
            assert min(ratios) >= 0.98 * FACTOR and statistics.median(ratios) <= 1.2 * FACTOR, (
                f"{p['bytes']} B: reported/unstretched per batch = {ratios}, expected {FACTOR}"
            )
        plain: list[list[float]] = []
        canary: list[list[float]] = []
        for plain_first in balanced_order(ROUNDS):  # the rounds the paired rule pairs
            for factor in (1.0, FACTOR) if plain_first else (FACTOR, 1.0):
                replies = peers.request({**train, "slowdown": factor}, 300.0)
                assert all(r["valid"] for r in replies)
                rates = [statistics.fmean(it) for it in zip(*(r["images_per_s"] for r in replies))]
                if factor > 1.0:
                    work = [
                        statistics.fmean(it)
                        for it in zip(*(r["unstretched_images_per_s"] for r in replies))
                    ]
                    ratios = [w / r for w, r in zip(work, rates, strict=True)]
                    assert (
                        min(ratios) >= 0.98 * FACTOR and statistics.median(ratios) <= 1.2 * FACTOR
                    ), f"training: unstretched/reported images/s per iteration = {ratios}"
                (canary if factor > 1.0 else plain).append(rates)
    v = judge_paired(_images(canary), _images(plain), TOLERANCE, labels=("canary", "plain"))
    rounds = [
        (round(statistics.median(p)), round(statistics.median(c)))
        for p, c in zip(plain, canary, strict=True)
    ]
    assert v.outcome is Outcome.REGRESSION, f"{v.message}; (plain, canary) per round: {rounds}"


def _images(jobs: list[list[float]]) -> Measurement:
    """One side's training requests as a record of the synthetic benchmark, one job each."""
    return Measurement(
        stack="horovod",
        benchmark=SYNTHETIC,
        params={"model": "small_cnn"},
        samples=tuple(x for job in jobs for x in job),
        unit="img/s",
        direction=Direction.HIGHER_IS_BETTER,
        metric="images_per_s_per_rank",
        extra={"job_medians": [statistics.median(job) for job in jobs]},
    )
