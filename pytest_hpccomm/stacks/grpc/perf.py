"""TF-gRPC-Bench's benchmarks as judged items: what each is called, which sweep produces it and
what one (benchmark, payload scheme) point records (behind the `grpc_bench` fixture)."""

from __future__ import annotations

from typing import Any

from pytest_hpccomm.measure.link import with_link_rate
from pytest_hpccomm.measure.measurement import Direction, Measurement
from pytest_hpccomm.measure.pooling import canary_extra, jobs_extra
from pytest_hpccomm.proc import cpu_share
from pytest_hpccomm.stacks.grpc.driver import Sweep

# benchmark -> (sweep family, peer-side name, metric, unit, direction)
BENCHMARKS = {
    "tf_grpc_p2p_latency": ("p2p", "latency", "latency", "us", Direction.LOWER_IS_BETTER),
    "tf_grpc_p2p_bandwidth": ("p2p", "bandwidth", "bandwidth", "MB/s", Direction.HIGHER_IS_BETTER),
    "tf_grpc_ps_throughput": ("ps", "ps", "rate", "rpc/s", Direction.HIGHER_IS_BETTER),
    "tf_grpc_mimic_step": ("ps", "mimic", "step time", "ms", Direction.LOWER_IS_BETTER),
}


def measurement(
    bench: str,
    scheme: str,
    sweep: Sweep,
    point: dict[str, Any],
    runtime: str,
    peer: str,
    mode: str,
    placement: str,
) -> Measurement:
    """The record of one point; its params are the baseline's key (keep them stable)."""
    family, name, metric, unit, direction = BENCHMARKS[bench]
    layout = [int(n) for n in point["layout"]]
    params: dict[str, str | int] = {
        "scheme": scheme,
        "buffers": len(layout),
        "bytes": sum(layout),
        "runtime": runtime,
        "peer": peer,
        "mode": mode,
        "placement": placement,
    }
    extra: dict[str, Any] = {
        "layout": ",".join(map(str, layout)),
        "iterations_per_sample": point["iterations"],
    }
    extra |= jobs_extra(point)  # runs pooled by --hpc-repeats
    extra |= canary_extra(point)  # the canary's own work: the host's speed tonight
    extra |= cpu_share.evidence_extra(sweep)  # shared cores temper the verdict
    if family == "ps":
        params |= {"workers": sweep.workers, "servers": sweep.servers}
        if name == "ps":
            rates = sorted(point["samples"])
            extra["MB/s"] = rates[len(rates) // 2] * sum(layout) / 1e6
    m = Measurement(
        stack="grpc",
        benchmark=bench,
        params=params,
        samples=tuple(point["samples"]),
        unit=unit,
        direction=direction,
        warmup_discarded=int(point["warmup"]),
        metric=metric,
        extra=extra,
    )
    return with_link_rate(m, sweep.link)  # p2p bandwidth: the link it crossed, when known


def bytes_sent(sweep: Sweep, benchmark: str = "bandwidth") -> int:
    """Payload bytes a p2p sweep's client sent for one peer-side benchmark, warm-up included."""
    return sum(
        sum(r["layout"]) * (r["warmup"] + sum(r["iterations"]))
        for (b, _), r in sweep.results.items()
        if b == benchmark
    )


def payload_moved(sweep: Sweep) -> int:
    """Payload bytes the client runs of a sweep sent (echoes come back on top), warm-up
    included: what an RDMA runtime's port must at least have carried."""
    return sum(
        sum(r["layout"]) * (r["warmup"] + sum(r["iterations"])) for r in sweep.results.values()
    )
