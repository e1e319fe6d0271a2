"""The canary reaches Horovod's timed regions: with --hpc-inject-slowdown F the peer stretches
every timed batch of allreduces and every training iteration by F (never the warm-up), so the
gate's power can be checked on this stack as on the others. Real peers.

Allreduce batches are judged against the canary's own unstretched time of the same batch, not
against plain batches: a 16 B allreduce takes 1 to 3.7 ms per operation depending on how the
ranks' calls fall on Horovod's 1 ms cycle, and plain batches run back to back can lock on to
three cycles while the canary's pause breaks that phase (a CI run measured canary/plain = 0.93
at 16 B that way). Training iterations (hundreds of ms) are compared end to end, plain and
canary requests interleaved in one job (P C P C P C) so job-to-job spread stays out, and the
ratio is the median of the three pairs' (one disturbed request moves one pair only)."""

from __future__ import annotations

import statistics

import pytest

from pytest_hpccomm.stacks.horovod.build import HorovodEnv
from pytest_hpccomm.stacks.horovod.driver import HorovodPeers, bench_times
from pytest_hpccomm.stacks.horovod.perf import TRAIN

FACTOR = 3.0


@pytest.mark.parametrize("controller", ["gloo", "mpi"])
def test_slowdown_stretches_allreduce_batches_and_training(horovod_env: HorovodEnv,
                                                           controller: str) -> None:
    bench = {"op": "bench", "sizes": [16, 1 << 16], "warmup": 2, "iters": 5, "batches": 10}
    train = {"op": "train", "model": "small_cnn", **TRAIN["small_cnn"], "iters": 4}
    img: dict[float, list[float]] = {1.0: [], FACTOR: []}
    with HorovodPeers(horovod_env, controller, "loopback") as peers:
        plain = bench_times(peers.request(bench, 120.0))
        assert all("unstretched" not in p for p in plain), "a plain request was stretched"
        for p in bench_times(peers.request({**bench, "slowdown": FACTOR}, 120.0)):
            ratios = [s / u for s, u in zip(p["samples"], p["unstretched"], strict=True)]
            # never short of F; above it by the sleep's wake-up delay, which busy-polling MPI
            # ranks on 2 cores make up to ~2 ms on a 5 ms batch now and then
            assert min(ratios) >= 0.98 * FACTOR and statistics.median(ratios) <= 1.2 * FACTOR, \
                f"{p['bytes']} B: reported/unstretched per batch = {ratios}, expected {FACTOR}"
        pairs = []
        for _ in range(3):  # P C, three times: each pair judged on its own
            for factor in (1.0, FACTOR):
                replies = peers.request({**train, "slowdown": factor}, 300.0)
                assert all(r["valid"] for r in replies)
                img[factor] = [x for r in replies for x in r["images_per_s"]]
            pairs.append(statistics.median(img[1.0]) / statistics.median(img[FACTOR]))
    # the median pair: one request slowed by a neighbour (a cold CI measured 2.03 pooling all
    # requests, the same test passing 3 of 3 right after) moves one pair, not the verdict
    ratio = statistics.median(pairs)
    assert 0.85 * FACTOR <= ratio <= 1.25 * FACTOR, \
        f"images/s plain/canary per pair = {[round(r, 2) for r in pairs]}, expected {FACTOR}"
