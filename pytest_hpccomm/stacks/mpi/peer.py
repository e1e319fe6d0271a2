"""MPI benchmark peer: runs under mpirun/srun, times itself with MPI.Wtime, prints JSON.

Runs alone: `mpirun -n 2 python -m pytest_hpccomm.stacks.mpi.peer --benchmark osu_latency`.
It imports neither pytest nor the orchestrator (DESIGN rule 1); its output is one JSON
document on rank 0's stdout between marker lines, so launcher chatter cannot corrupt it.

Definitions follow OSU Micro-Benchmarks: latency is half the round-trip time of a blocking
ping-pong (osu_latency.c); bandwidth is a window of non-blocking sends acknowledged by one
zero-byte reply (osu_bw.c). Each sample is one batch of iterations, so the timer's cost is
far below 1 % of what it times and the verdict engine gets a distribution, not one mean.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

BEGIN, END = "@@HPCCOMM-RESULT-BEGIN@@", "@@HPCCOMM-RESULT-END@@"
LARGE = 8192  # OSU switches to fewer iterations above this size


def pattern(size: int, seed: int) -> np.ndarray:
    """Distinct bytes per (batch, size) so a stale or shifted buffer cannot pass validation."""
    return ((np.arange(size, dtype=np.uint32) * 131 + seed * 7 + 1) % 251).astype(np.uint8)


def stretch(t0: float, factor: float, clock: Callable[[], float]) -> None:
    """Canary: spin until the timed region has taken `factor` times what it took."""
    if factor > 1.0:
        target = t0 + (clock() - t0) * factor
        while clock() < target:
            pass


class Bench:
    def __init__(self, comm: Any, mpi: Any, args: argparse.Namespace) -> None:
        self.comm, self.MPI, self.args = comm, mpi, args
        self.rank = comm.Get_rank()
        self.peer = 1 - self.rank if self.rank < 2 else None
        self.errors: list[str] = []

    def iters(self, size: int) -> tuple[int, int]:
        """(iterations per batch, warm-up iterations), scaled down for large messages."""
        base = self.args.iterations if size <= LARGE else max(1, self.args.iterations // 10)
        big = max(1, size // (1 << 20))
        return max(1, base // big), max(1, self.args.warmup // (10 if size > LARGE else 1))

    def validate(self, got: np.ndarray, size: int, seed: int, what: str) -> None:
        want = pattern(size, seed)
        if got.shape != want.shape or not np.array_equal(got, want):
            bad = int(np.argmax(got != want)) if got.shape == want.shape else -1
            self.errors.append(f"{what} size={size} batch={seed}: wrong data at byte {bad}")

    def pingpong_batch(self, sbuf: np.ndarray, rbuf: np.ndarray, n: int) -> float:
        comm, peer, clock = self.comm, self.peer, self.MPI.Wtime
        t0 = clock()
        if self.rank == 0:
            for _ in range(n):
                comm.Send(sbuf, dest=peer, tag=1)
                comm.Recv(rbuf, source=peer, tag=1)
        else:
            for _ in range(n):
                comm.Recv(rbuf, source=peer, tag=1)
                comm.Send(sbuf, dest=peer, tag=1)
        stretch(t0, self.args.slowdown, clock)
        return clock() - t0

    def osu_latency(self, size: int) -> dict[str, Any]:
        n, warm = self.iters(size)
        sbuf, rbuf = np.zeros(size, np.uint8), np.zeros(size, np.uint8)
        if self.rank < 2:
            self.pingpong_batch(sbuf, rbuf, warm)
        samples = []
        for batch in range(self.args.batches):
            self.comm.Barrier()
            if self.rank < 2:
                elapsed = self.pingpong_batch(sbuf, rbuf, n)
                samples.append(elapsed * 1e6 / (2 * n))  # half round trip, in us
                self.check_pingpong(size, batch)
        return {"samples": samples, "unit": "us", "iterations": n, "warmup": warm}

    def check_pingpong(self, size: int, batch: int) -> None:
        """OSU -c: one untimed exchange with a batch-specific pattern, checked on both sides."""
        buf = pattern(size, batch) if self.rank == 0 else np.zeros(size, np.uint8)
        if self.rank == 0:
            self.comm.Send(buf, dest=1, tag=2)
            back = np.zeros(size, np.uint8)
            self.comm.Recv(back, source=1, tag=3)
            self.validate(back, size, batch, "osu_latency echo")
        else:
            self.comm.Recv(buf, source=0, tag=2)
            self.validate(buf, size, batch, "osu_latency")
            self.comm.Send(buf, dest=0, tag=3)

    def osu_bw(self, size: int) -> dict[str, Any]:
        n, warm = self.iters(size)
        n = max(1, n // self.args.window)
        window, comm, peer, clock = self.args.window, self.comm, self.peer, self.MPI.Wtime
        bufs = [np.zeros(size, np.uint8) for _ in range(window)]
        ack = np.zeros(1, np.uint8)

        def run(loops: int) -> float:
            t0 = clock()
            for _ in range(loops):
                if self.rank == 0:
                    reqs = [comm.Isend(b, dest=peer, tag=10) for b in bufs]
                    self.MPI.Request.Waitall(reqs)
                    comm.Recv(ack, source=peer, tag=11)
                else:
                    reqs = [comm.Irecv(b, source=peer, tag=10) for b in bufs]
                    self.MPI.Request.Waitall(reqs)
                    comm.Send(ack, dest=peer, tag=11)
            stretch(t0, self.args.slowdown, clock)
            return clock() - t0

        if self.rank < 2:
            run(max(1, warm // window))
        samples = []
        for batch in range(self.args.batches):
            self.comm.Barrier()
            if self.rank < 2:
                elapsed = run(n)
                samples.append(size * window * n / elapsed / 1e6)  # OSU MB/s = 10^6 B/s
                self.check_pingpong(size, batch)
        return {"samples": samples, "unit": "MB/s", "iterations": n * window, "warmup": warm}


BENCHMARKS = {"osu_latency": Bench.osu_latency, "osu_bw": Bench.osu_bw}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m pytest_hpccomm.stacks.mpi.peer")
    p.add_argument("--benchmark", choices=sorted(BENCHMARKS), required=True)
    p.add_argument("--sizes", default="1,8,1024", help="comma-separated byte counts")
    p.add_argument("--batches", type=int, default=30, help="samples per size")
    p.add_argument("--iterations", type=int, default=200, help="iterations per batch (small)")
    p.add_argument("--warmup", type=int, default=100)
    p.add_argument("--window", type=int, default=64, help="osu_bw window size")
    p.add_argument("--slowdown", type=float, default=1.0, help="canary stretch factor")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from mpi4py import MPI  # late: `--help` works without an MPI library

    comm = MPI.COMM_WORLD
    if comm.Get_size() < 2:
        print("needs at least 2 ranks", file=sys.stderr)
        return 2
    bench = Bench(comm, MPI, args)
    results = []
    for size in (int(s) for s in args.sizes.split(",")):
        out = BENCHMARKS[args.benchmark](bench, size)
        results.append({"size": size, **out})
    errors = comm.gather(bench.errors, root=0)
    hosts = comm.gather(MPI.Get_processor_name(), root=0)
    if comm.Get_rank() == 0:
        doc = {"benchmark": args.benchmark, "ranks": comm.Get_size(), "hosts": hosts,
               "mpi_library": MPI.Get_library_version().rstrip("\x00").strip().splitlines()[0],
               "mpi_version": "%d.%d" % MPI.Get_version(), "mpi4py": _mpi4py_version(),
               "slowdown": args.slowdown, "results": results,
               "errors": [e for errs in errors or [] for e in errs], "time": time.time()}
        sys.stdout.write(f"\n{BEGIN}\n{json.dumps(doc)}\n{END}\n")
        sys.stdout.flush()
    return 0


def _mpi4py_version() -> str:
    import mpi4py

    return str(mpi4py.__version__)


if __name__ == "__main__":
    sys.exit(main())
