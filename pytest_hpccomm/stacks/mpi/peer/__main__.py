"""MPI benchmark peer: runs under mpirun/srun, times itself with MPI.Wtime, prints JSON.

Runs alone: `mpirun -n 2 python -m pytest_hpccomm.stacks.mpi.peer --benchmark osu_latency,osu_bw`.
It imports neither pytest nor the orchestrator (peer rule). After each benchmark, rank 0
prints one JSON document between marker lines, so launcher chatter cannot corrupt it and the
benchmarks finished before a crash or a timeout still count.

More: docs/explanation/internals.md (pytest_hpccomm.stacks.mpi.peer.__main__).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from pytest_hpccomm.peer.canary import finish
from pytest_hpccomm.peer.framing import frame
from pytest_hpccomm.stacks.mpi.peer.osu_ops import collective_op, seed
from pytest_hpccomm.stacks.mpi.wire import BENCHMARKS, MULTI_PAIR, PAIR, UNSIZED

LARGE = 8192  # OSU: above this size, fewer warm-up iterations (skip_large)
TAG, ACK = 1, 2
MAX_ERRORS = 3  # wrong blocks described per (benchmark, size, rank)

# (iterations, stretch factor) -> (local value, its unstretched part: the canary's own work)
Loop = Callable[[int, float], tuple[float, float]]


class Bench:
    def __init__(self, comm: Any, mpi: Any, args: argparse.Namespace) -> None:
        self.comm, self.MPI, self.args = comm, mpi, args
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        self.pairs = self.size // 2
        self.clock: Callable[[], float] = mpi.Wtime
        self.errors: list[str] = []
        self.wrong = 0  # wrong blocks at the current size
        self._bufs: dict[str, np.ndarray] = {}
        self._base = np.zeros(0, np.uint8)

    # -- buffers and patterns ------------------------------------------------------------
    def buf(self, name: str, nbytes: int) -> np.ndarray:
        """A view of a buffer grown on demand: no allocation (or page fault) per size."""
        have = self._bufs.get(name)
        if have is None or have.size < nbytes:
            have = self._bufs[name] = np.zeros(max(nbytes, 1), np.uint8)
        return have[:nbytes]

    def base(self, nbytes: int) -> np.ndarray:
        if self._base.size < nbytes:
            self._base = ((np.arange(nbytes, dtype=np.uint32) * 131 + 1) % 251).astype(np.uint8)
        return self._base[:nbytes]

    def fill(self, view: np.ndarray, s: int, modulo: int = 256) -> None:
        """Send data of one block; --corrupt puts one wrong byte in every block sent."""
        np.add(self.base(view.size), np.uint8(s), out=view)
        if modulo < 256:
            np.remainder(view, np.uint8(modulo), out=view)
        if self.args.corrupt and view.size:
            view[view.size // 2] += np.uint8(1)

    def check(self, got: np.ndarray, want: np.ndarray, what: str) -> None:
        if not np.array_equal(got, want):
            self.wrong += 1
            if self.wrong <= MAX_ERRORS:  # a few readable lines, then only a count
                bad = int(np.argmax(got != want))
                self.errors.append(
                    f"{what} rank={self.rank}: wrong data at byte {bad} "
                    f"(got {int(got[bad])}, want {int(want[bad])})"
                )

    def expect(self, got: np.ndarray, s: int, what: str) -> None:
        self.check(got, self.base(got.size) + np.uint8(s), what)

    @property
    def modulo(self) -> int:
        """Reduced contributions stay below 256 // ranks, so their sum never overflows a byte:
        Open MPI's AVX reductions saturate 8-bit sums instead of wrapping (ompi#8045)."""
        return 256 // self.size

    def expect_sum(self, got: np.ndarray, offset: int, seeds: Sequence[int], what: str) -> None:
        """The sum of one contribution per seed, as fill(..., modulo) made them."""
        base = self.base(offset + got.size)[offset:]
        want = np.zeros(got.size, np.uint16)
        for s in seeds:
            want += (base + np.uint8(s)) % np.uint8(self.modulo)  # as fill(): wrap, then mod
        self.check(got, want.astype(np.uint8), what)

    # -- the batch engine ----------------------------------------------------------------
    def iterations(self, bytes_per_iter: int, cap: int, size: int) -> tuple[int, int]:
        """(iterations per batch, warm-up iterations): a batch moves at most --batch-bytes;
        warm-up is OSU's skip (smaller above LARGE) and never longer than one batch."""
        n = max(1, min(cap, self.args.batch_bytes // max(1, bytes_per_iter)))
        skip = self.args.warmup if size <= LARGE else max(1, self.args.warmup // 10)
        return n, max(1, min(skip, n))

    def run_point(
        self,
        n: int,
        warm: int,
        loop: Loop | None,
        prepare: Callable[[int], None],
        verify: Callable[[int], None],
    ) -> list[tuple[float, float]]:
        """Warm-up, then time-boxed batches; every rank takes part in the synchronisation,
        ranks with loop=None only idle. Rank 0 decides when to stop, so all agree. Each batch
        gives (value, unstretched value): equal unless the canary stretched it."""
        comm, a = self.comm, self.args
        prepare(-1)  # a pattern no timed batch uses: warm-up data cannot pass for a batch's
        comm.Barrier()
        if loop is not None:
            loop(warm, 1.0)
        values: list[tuple[float, float]] = []
        started = self.clock()
        batch = 0
        while True:
            more = batch < a.min_batches or (
                batch < a.batches and self.clock() - started < a.budget
            )
            if not comm.bcast(more, root=0):
                return values
            prepare(batch)
            comm.Barrier()
            if loop is not None:
                values.append(loop(n, a.slowdown))
            verify(batch)
            batch += 1

    def gather(self, values: list[tuple[float, float]]) -> list[list[tuple[float, float]]]:
        got = self.comm.gather(values, root=0)
        return list(got) if got is not None else []

    def canary_view(self, out: dict[str, Any], unstretched: np.ndarray) -> None:
        """Under the canary, the batches' unstretched values (same unit as `samples`): what
        the host's own speed gave in this session, read beside the stretched samples."""
        if self.args.slowdown > 1.0:
            out["unstretched"] = unstretched.tolist()

    # -- point-to-point ------------------------------------------------------------------
    def partner(self, benchmark: str) -> tuple[int | None, bool]:
        """(partner rank or None if idle, whether this rank sends first)."""
        half = 1 if benchmark in PAIR else self.pairs
        if self.rank < half:
            return self.rank + half, True
        if self.rank < 2 * half:
            return self.rank - half, False
        return None, False

    def p2p_point(
        self,
        n: int,
        warm: int,
        loop: Loop | None,
        s: np.ndarray,
        r: np.ndarray | None,
        peer: int | None,
        reqs: list[Any],
        what: str,
    ) -> list[list[tuple[float, float]]]:
        """A point-to-point size on every rank: batches that send this rank's pattern and check
        the partner's in `r` (None: this rank receives nothing to check); the persistent
        requests freed; every rank's values gathered at rank 0."""

        def verify(b: int) -> None:
            if r is not None and peer is not None:
                self.expect(r, seed(b, peer), f"{what} batch={b}")

        values = self.run_point(n, warm, loop, lambda b: self.fill(s, seed(b, self.rank)), verify)
        for q in reqs:
            q.Free()
        return self.gather(values)

    def pingpong(self, benchmark: str, size: int) -> dict[str, Any]:
        peer, first = self.partner(benchmark)
        s, r = self.buf("s", size), self.buf("r", size)
        n, warm = self.iterations(2 * size, self.args.iterations, size)
        loop: Loop | None = None
        reqs: list[Any] = []
        if peer is not None:
            sreq, rreq = self.comm.Send_init(s, peer, TAG), self.comm.Recv_init(r, peer, TAG)
            reqs = [sreq, rreq]
            ss, sw, rs, rw = sreq.Start, sreq.Wait, rreq.Start, rreq.Wait
            clock = self.clock

            def timed(k: int, factor: float) -> tuple[float, float]:
                t0 = clock()
                if first:
                    for _ in range(k):
                        ss()
                        sw()
                        rs()
                        rw()  # noqa: E702 - the loop is the benchmark
                else:
                    for _ in range(k):
                        rs()
                        rw()
                        ss()
                        sw()  # noqa: E702
                return finish(t0, factor, clock)

            loop = timed

        per_rank = self.p2p_point(
            n,
            warm,
            loop,
            s,
            r if peer is not None else None,
            peer,
            reqs,
            f"{benchmark} size={size}",
        )
        out: dict[str, Any] = {"iterations": n, "warmup": warm}
        if self.rank == 0:
            senders = per_rank[:1] if benchmark in PAIR else per_rank[: self.pairs]
            t = np.mean(np.array(senders), axis=0)  # OSU 7.4 multi_lat: mean over senders
            out["samples"] = (t[:, 0] * 1e6 / (2 * n)).tolist()
            self.canary_view(out, t[:, 1] * 1e6 / (2 * n))
        return out

    def window(self, benchmark: str, size: int) -> dict[str, Any]:
        """osu_bw / osu_mbw_mr (sender -> receiver, 1-byte ack) and osu_bibw (both ways)."""
        peer, sender = self.partner(benchmark)
        both = benchmark == "osu_bibw"
        w = self.args.window
        s, r, ack = self.buf("s", size), self.buf("r", size), self.buf("ack", 1)
        # up to --loops back-to-back windows per batch while one slot of the window moves at
        # most --batch-bytes: OSU times consecutive windows, and a lone window after a barrier
        # measured MPICH at 64 KiB ~2.5x faster than OSU's C binary (quick: 10 windows at 64 KiB)
        n, warm = self.iterations(size, self.args.loops, size)
        loop: Loop | None = None
        reqs: list[Any] = []
        if peer is not None:
            comm, clock = self.comm, self.clock
            startall, waitall = self.MPI.Prequest.Startall, self.MPI.Request.Waitall
            sends = [comm.Send_init(s, peer, TAG) for _ in range(w)] if sender or both else []
            recvs = [comm.Recv_init(r, peer, TAG) for _ in range(w)] if both or not sender else []
            # osu_bibw.c: post the receives, then the sends, wait for both; no acknowledgement
            first, then = (recvs, sends) if both else (sends, []) if sender else (recvs, [])
            ack_req = comm.Recv_init(ack, peer, ACK) if sender else comm.Send_init(ack, peer, ACK)
            reqs = sends + recvs + [ack_req]
            ack_start, ack_wait = ack_req.Start, ack_req.Wait

            def timed(k: int, factor: float) -> tuple[float, float]:
                t0 = clock()
                for _ in range(k):
                    startall(first)
                    if then:
                        startall(then)
                        waitall(then)
                    waitall(first)
                    if not both:
                        ack_start()
                        ack_wait()  # noqa: E702
                return finish(t0, factor, clock)

            loop = timed

        receives = peer is not None and (both or not sender)
        per_rank = self.p2p_point(
            n, warm, loop, s, r if receives else None, peer, reqs, f"{benchmark} size={size}"
        )
        out: dict[str, Any] = {"iterations": n * w, "warmup": warm * w, "window": w}
        if self.rank == 0:
            pairs = 1 if benchmark in PAIR else self.pairs
            t = np.mean(np.array(per_rank[:pairs]), axis=0)  # OSU 7.4: senders' mean time
            moved = pairs * size * w * n * (2 if both else 1)
            out["samples"] = (moved / t[:, 0] / 1e6).tolist()  # MB/s, MB = 10^6 bytes
            self.canary_view(out, moved / t[:, 1] / 1e6)
            out["pairs"] = pairs
            if benchmark == "osu_mbw_mr":
                out["rate_samples"] = (pairs * w * n / t[:, 0]).tolist()  # messages/s
        return out

    # -- collectives ---------------------------------------------------------------------
    def collective(self, benchmark: str, size: int) -> dict[str, Any]:
        op, prepare, verify, per_op = collective_op(self, benchmark, size)
        n, warm = self.iterations(per_op, self.args.coll_iterations, size)
        clock, barrier = self.clock, self.comm.Barrier
        whole_batch = benchmark == "osu_barrier"

        def timed(k: int, factor: float) -> tuple[float, float]:
            if whole_batch:  # a barrier synchronises itself: time the batch as a whole
                t0 = clock()
                for _ in range(k):
                    barrier()
                took, work = finish(t0, factor, clock)
                return took / k, work / k
            total = done = 0.0
            for _ in range(k):
                t0 = clock()
                op()
                took, work = finish(t0, factor, clock)
                total += took
                done += work
                barrier()  # OSU: outside the timed region, so operations cannot overlap
            return total / k, done / k

        per_rank = self.gather(self.run_point(n, warm, timed, prepare, verify))
        out: dict[str, Any] = {"iterations": n, "warmup": warm}
        if self.rank == 0:
            t = np.array(per_rank) * 1e6  # rank, batch, (value, unstretched)
            out["samples"] = t[:, :, 0].mean(axis=0).tolist()  # OSU's "Avg Latency", all ranks
            out["max_samples"] = t[:, :, 0].max(axis=0).tolist()
            self.canary_view(out, t[:, :, 1].mean(axis=0))
        return out

    def run(self, benchmark: str, size: int) -> dict[str, Any]:
        self.wrong = 0
        if benchmark in ("osu_latency", "osu_multi_lat"):
            out = self.pingpong(benchmark, size)
        elif benchmark in ("osu_bw", "osu_bibw", "osu_mbw_mr"):
            out = self.window(benchmark, size)
        else:
            out = self.collective(benchmark, size)
        if self.wrong > MAX_ERRORS:
            self.errors.append(
                f"{benchmark} size={size} rank={self.rank}: "
                f"{self.wrong - MAX_ERRORS} more wrong blocks"
            )
        return out


def participants(benchmark: str, ranks: int) -> int:
    """Ranks that take part (the others idle): part of a measurement's identity."""
    if benchmark in PAIR:
        return 2
    return ranks - ranks % 2 if benchmark in MULTI_PAIR else ranks


def timer_cost(clock: Callable[[], float], calls: int = 20000) -> float:
    """Seconds one clock() call costs (what a timed region pays for being timed)."""
    t0 = clock()
    for _ in range(calls):
        clock()
    return (clock() - t0) / calls


def parse_benchmarks(text: str) -> list[str]:
    names = [b.strip() for b in text.split(",") if b.strip()]
    unknown = [b for b in names if b not in BENCHMARKS]
    if not names or unknown:
        raise argparse.ArgumentTypeError(
            f"unknown benchmark(s) {', '.join(unknown) or '(none)'}; known: {', '.join(BENCHMARKS)}"
        )
    return names


def parse_sizes(text: str) -> list[int]:
    try:
        sizes = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"sizes must be byte counts, got {text!r}") from None
    if not sizes or min(sizes) < 0:
        raise argparse.ArgumentTypeError(f"sizes must be >= 0, got {text!r}")
    return sizes


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m pytest_hpccomm.stacks.mpi.peer")
    p.add_argument(
        "--benchmark",
        type=parse_benchmarks,
        required=True,
        help=f"comma-separated, run in this order: {', '.join(BENCHMARKS)}",
    )
    p.add_argument(
        "--sizes", type=parse_sizes, default=[1, 8, 1024], help="comma-separated byte counts"
    )
    p.add_argument("--batches", type=int, default=30, help="most samples per size")
    p.add_argument("--min-batches", type=int, default=10, help="fewest samples per size")
    p.add_argument(
        "--budget",
        type=float,
        default=0.2,
        help="seconds of timed batches per size after --min-batches",
    )
    p.add_argument("--iterations", type=int, default=100, help="ping-pongs per batch (most)")
    p.add_argument("--loops", type=int, default=10, help="windows per batch (most)")
    p.add_argument(
        "--coll-iterations", type=int, default=50, help="collective operations per batch (most)"
    )
    p.add_argument(
        "--batch-bytes",
        type=int,
        default=1 << 20,
        help="fewer iterations per batch once a batch moves this many bytes "
        "(windowed benchmarks: per slot of the window)",
    )
    p.add_argument("--warmup", type=int, default=100, help="OSU skip (1/10 above 8 KiB)")
    p.add_argument("--window", type=int, default=64, help="window of osu_bw/bibw/mbw_mr")
    p.add_argument("--slowdown", type=float, default=1.0, help="canary stretch factor")
    p.add_argument(
        "--corrupt", action="store_true", help="test only: every block sent carries one wrong byte"
    )
    args = p.parse_args(argv)
    if not 1 <= args.min_batches <= args.batches:
        p.error("need 1 <= --min-batches <= --batches")
    if min(args.iterations, args.loops, args.coll_iterations, args.window, args.warmup) < 1:
        p.error("--iterations, --loops, --coll-iterations, --window, --warmup must be >= 1")
    if args.slowdown < 1.0 or args.budget < 0:
        p.error("--slowdown must be >= 1 and --budget >= 0")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    from mpi4py import MPI  # late: `--help` works without an MPI library

    comm = MPI.COMM_WORLD
    if comm.Get_size() < 2:
        print("needs at least 2 ranks", file=sys.stderr)
        return 2
    bench = Bench(comm, MPI, args)
    hosts = comm.gather(MPI.Get_processor_name(), root=0)
    timer = timer_cost(MPI.Wtime)
    head = {
        "ranks": comm.Get_size(),
        "hosts": hosts,
        "mpi_library": MPI.Get_library_version().rstrip("\x00").strip().splitlines()[0],
        "mpi_version": "%d.%d" % MPI.Get_version(),
        "mpi4py": _mpi4py_version(),
        "slowdown": args.slowdown,
        "timer_us": timer * 1e6,
    }
    for benchmark in args.benchmark:
        results = []
        started = time.monotonic()
        for size in [0] if benchmark in UNSIZED else args.sizes:
            t0 = time.monotonic()
            out = bench.run(benchmark, size)
            results.append({"size": size, "seconds": round(time.monotonic() - t0, 3), **out})
        errors = comm.gather(bench.errors, root=0)
        bench.errors = []
        if comm.Get_rank() == 0:
            doc = {
                "benchmark": benchmark,
                **head,
                "participants": participants(benchmark, comm.Get_size()),
                "seconds": round(time.monotonic() - started, 3),
                "results": results,
                "errors": [e for errs in errors or [] for e in errs],
                "time": time.time(),
            }
            sys.stdout.write(frame(doc))
            sys.stdout.flush()
    return 0


def _mpi4py_version() -> str:
    import mpi4py

    return str(mpi4py.__version__)


if __name__ == "__main__":
    sys.exit(main())
