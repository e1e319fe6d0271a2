"""Pooling of independent gRPC client runs (--hpc-repeats) into one sweep (no gRPC needed)."""

from __future__ import annotations

from typing import Any

from pytest_hpccomm.stacks.grpc.driver import Sweep, merge_sweeps


def result(
    samples: list[float], iterations: list[int], errors: tuple[str, ...] = ()
) -> dict[str, Any]:
    return {
        "benchmark": "latency",
        "name": "uniform",
        "layout": [8],
        "samples": samples,
        "per_worker": [samples],
        "iterations": iterations,
        "warmup": 2,
        "errors": list(errors),
    }


def sweep(results: dict[tuple[str, str], dict[str, Any]], rx: int) -> Sweep:
    return Sweep("p2p", "python", "raw", "netns", results, "1.51.1", veth={"rx": rx, "tx": 1})


def test_runs_are_pooled_in_run_order() -> None:
    key, other = ("latency", "uniform"), ("bandwidth", "uniform")
    a = sweep({key: result([1.0, 3.0], [10, 10], ("e1",)), other: result([5.0], [1])}, 100)
    b = sweep({key: result([7.0], [20])}, 50)
    merged = merge_sweeps([a, b])
    r = merged.results[key]
    assert r["samples"] == [1.0, 3.0, 7.0] and r["iterations"] == [10, 10, 20]
    assert r["warmup"] == 4 and r["errors"] == ["e1"] and r["job_medians"] == [2.0, 7.0]
    assert len(r["per_worker"]) == 2
    assert other not in merged.results  # not measured by every run
    assert merged.veth == {"rx": 150, "tx": 2}
    assert (merged.peer, merged.placement, merged.grpc_version) == ("python", "netns", "1.51.1")
    assert merge_sweeps([a]) is a
