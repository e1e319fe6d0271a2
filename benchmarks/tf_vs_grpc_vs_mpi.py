"""What TensorFlow's runtime adds over raw gRPC, and gRPC over MPI, at the same payloads.

Not a test: a script. It runs the three suites' point-to-point items on loopback, one pytest
session each (the product's own items, results written with --hpc-results, nothing judged:
baselines in a scratch directory, no history), and prints a Markdown table:

    .venv/bin/python benchmarks/tf_vs_grpc_vs_mpi.py [--sizes 64,64K,1M,4M] [--mpi openmpi]

The three definitions differ, and the table says how they are made comparable: every column
is a round trip, in microseconds (median of the batches of the pooled jobs).
  TensorFlow  tf_recv_tensor latency: one read of a variable on the ps task by the worker
              (a tf.function call; the request is small, the tensor crosses once);
  gRPC        tf_grpc_p2p_latency, the native C++ peer, raw mode, one buffer of the size: an
              echo (the payload crosses twice);
  MPI         osu_latency x 2: OSU reports half a ping-pong whose messages both carry the
              payload (it crosses twice).
So at large sizes the gRPC and MPI columns move twice the bytes TensorFlow's does: the
TF / gRPC ratio there understates TensorFlow's cost per byte by up to 2x.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from pytest_hpccomm.measure.sizes import format_size, parse_size_spec
from pytest_hpccomm.proc.jobs import run_job

ROOT = Path(__file__).resolve().parents[1]
COMMON = [
    "-q",
    "-p",
    "no:cacheprovider",
    "--hpc-history=none",
    "--hpc-fabric=ethernet",
    "--hpc-update-baselines=all",
]
TIMEOUT = 1800.0
# gRPC's payload categories: the size decides which uniform scheme carries it
CATEGORY = ((1 << 10, "small"), (1 << 20, "medium"), ((10 << 20) + 1, "large"))


def pytest_run(args: list[str], results: Path, scratch: Path) -> list[dict[str, Any]]:
    argv = [
        sys.executable,
        "-m",
        "pytest",
        *COMMON,
        f"--hpc-baselines={scratch / 'bl'}",
        f"--hpc-results={results}",
        *args,
    ]
    got = run_job(argv, timeout=TIMEOUT, label=" ".join(args[:1]))
    if got.returncode not in (0, 1) or not results.exists():
        raise SystemExit(f"{' '.join(args[:2])}: exit {got.returncode}\n{got.stdout[-3000:]}")
    records: list[dict[str, Any]] = json.loads(results.read_text())["results"]
    return records


def medians(
    records: list[dict[str, Any]], benchmark: str, metric: str, size_of: str = "size"
) -> dict[int, float]:
    return {
        int(r["measurement"]["params"][size_of]): float(r["summary"]["median"])
        for r in records
        if r["measurement"]["benchmark"] == benchmark and r["measurement"]["metric"] == metric
    }


def category(size: int) -> str:
    return next(name for limit, name in CATEGORY if size < limit)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="64,64K,1M,4M")
    ap.add_argument("--mpi", default="openmpi")
    a = ap.parse_args()
    sizes = parse_size_spec(a.sizes)
    spec = ",".join(str(s) for s in sizes)
    with tempfile.TemporaryDirectory(prefix="hpccomm-tfvs-") as tmp:
        scratch = Path(tmp)
        tf = medians(
            pytest_run(
                [
                    str(ROOT / "hpccomm_suites/tf/test_perf_tf.py"),
                    "-k",
                    "test_tf_recv_tensor and loopback",
                    f"--hpc-sizes={spec}",
                ],
                scratch / "tf.json",
                scratch,
            ),
            "tf_recv_tensor",
            "latency",
        )
        grpc: dict[int, float] = {}
        for size in sizes:  # one session per size: the category's size is an option
            cat = category(size)
            got = pytest_run(
                [
                    str(ROOT / "hpccomm_suites/grpc/test_perf_tf_grpc_bench.py"),
                    "-k",
                    f"tf_grpc_p2p_latency and uniform-{cat} and loopback",
                    "--hpc-grpc-peers=native",
                    "--hpc-grpc-modes=raw",
                    "--hpc-grpc-buffers=1",
                    f"--hpc-grpc-{cat}={size}",
                ],
                scratch / f"grpc-{size}.json",
                scratch,
            )
            grpc |= medians(got, "tf_grpc_p2p_latency", "latency", size_of="bytes")
        mpi = medians(
            pytest_run(
                [
                    str(ROOT / "hpccomm_suites/mpi/test_perf_osu.py"),
                    "-k",
                    "osu_latency and loopback",
                    f"--hpc-mpi={a.mpi}",
                    "--hpc-launcher=local",
                    f"--hpc-sizes={spec}",
                ],
                scratch / "mpi.json",
                scratch,
            ),
            "osu_latency",
            "latency",
        )
    print(
        "| size | TensorFlow read (us) | gRPC echo (us) | MPI ping-pong (us) | TF / gRPC "
        "| gRPC / MPI |"
    )
    print("|--:|--:|--:|--:|--:|--:|")
    for size in sizes:
        t, g, m = tf.get(size), grpc.get(size), mpi.get(size)
        m2 = None if m is None else 2 * m
        cells = [f"{v:.1f}" if v is not None else "-" for v in (t, g, m2)]
        ratios = [f"{x / y:.1f}x" if x and y else "-" for x, y in ((t, g), (g, m2))]
        print(f"| {format_size(size)} | " + " | ".join(cells + ratios) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
