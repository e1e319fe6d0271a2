"""The canary reaches both gRPC clients' timed regions: with --hpc-inject-slowdown F every
timed batch takes F times its own work, and the client reports that work unstretched beside
the samples (the host's own speed in the same session: baselines/canary.py reads it). A real
server and client on loopback, the native (C++) and the Python peer: latency (a time) and
bandwidth (a rate). Each batch is held to the stretch's definition: time >= F x work, rate <=
work's rate / F. A plain run reports no unstretched work.
"""

from __future__ import annotations

import statistics
from typing import Any

import pytest

from pytest_hpccomm.measure.measurement import UNSTRETCHED, Direction, Measurement
from pytest_hpccomm.stacks.grpc.build import NativeBuild
from pytest_hpccomm.stacks.grpc.driver import BenchSettings, Sweep, run_p2p, start_server
from pytest_hpccomm.stacks.grpc.perf import measurement
from tests.native_grpc import native_build_or_skip

pytest.importorskip("grpc", reason="stack 'grpc' not available: missing grpc")

FACTOR = 2.0
QUICK = BenchSettings(batches=4, batch_seconds=0.01, warmup_seconds=0.01, lifetime=60)
ROUNDING = 1e-9  # float rounding of the clock arithmetic, nothing else


@pytest.mark.parametrize("kind", ["native", "python"])
def test_slowdown_stretches_every_batch_and_reports_its_own_work(kind: str) -> None:
    native: NativeBuild | None = native_build_or_skip() if kind == "native" else None
    server = start_server(kind, native, lifetime=60)
    try:
        plain = run_p2p(kind, native, server, "raw", [("one", [1024])], QUICK)
        canary = run_p2p(kind, native, server, "raw", [("one", [1024])], QUICK, slowdown=FACTOR)
    finally:
        server.stop()
    assert all("unstretched" not in p for p in plain.results.values()), "a plain run stretched"
    assert {b for b, _ in canary.results} == {"latency", "bandwidth"}
    for (peer_bench, name), p in canary.results.items():
        bench = f"tf_grpc_p2p_{peer_bench}"
        assert not p["errors"], (bench, p["errors"][:3])
        record = record_of(bench, canary, p)
        rate = record.direction is Direction.HIGHER_IS_BETTER
        ratios = [
            (u / s if rate else s / u) for s, u in zip(p["samples"], p["unstretched"], strict=True)
        ]
        assert len(ratios) == QUICK.batches, (bench, p)
        assert min(ratios) >= FACTOR * (1 - ROUNDING), (
            f"{kind} {bench}: reported/unstretched per batch = {ratios}, never below "
            f"{FACTOR} by the stretch's definition"
        )
        assert record.extra[UNSTRETCHED] == statistics.median(p["unstretched"]), record.extra
        plain_record = record_of(bench, plain, plain.get(peer_bench, name))
        assert UNSTRETCHED not in plain_record.extra


def record_of(bench: str, sweep: Sweep, point: dict[str, Any]) -> Measurement:
    return measurement(bench, "one", sweep, point, "grpcio", sweep.peer, "raw", "loopback")
