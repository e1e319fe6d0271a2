"""Peer side of the OSU benchmarks (peer/__main__.py): the data pattern every batch carries, and the
table of collective operations — for each OSU collective, the operation timed, how its buffers
are filled before a batch and checked after it (OSU's -c), and the bytes one operation moves."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, Protocol

import numpy as np

from pytest_hpccomm.stacks.mpi.wire import GATHERS, SCATTERS


class Bench(Protocol):
    """What an operation of this table uses of the peer's benchmark (peer.Bench)."""

    comm: Any
    MPI: Any
    rank: int
    size: int

    @property
    def modulo(self) -> int: ...

    def buf(self, name: str, nbytes: int) -> np.ndarray: ...

    def fill(self, view: np.ndarray, s: int, modulo: int = 256) -> None: ...

    def expect(self, got: np.ndarray, s: int, what: str) -> None: ...

    def expect_sum(self, got: np.ndarray, offset: int, seeds: Sequence[int], what: str) -> None: ...


def seed(batch: int, rank: int = 0, block: int = 0) -> int:
    """Pattern offset for (batch, source rank, block): consecutive batches always differ."""
    return (batch * 31 + rank * 7 + block * 3 + 1) & 0xFF


def collective_op(
    bench: Bench, benchmark: str, size: int
) -> tuple[Callable[[], Any], Callable[[int], None], Callable[[int], None], int]:
    """(the timed operation, prepare(batch), verify(batch), bytes per operation)."""
    comm, SUM, me, n = bench.comm, bench.MPI.SUM, bench.rank, bench.size
    s = bench.buf("s", size * (n if benchmark in SCATTERS else 1))
    r = bench.buf("r", size * (n if benchmark in GATHERS else 1))
    what = f"{benchmark} size={size}"

    def block(buf: np.ndarray, q: int) -> np.ndarray:
        return buf[q * size : (q + 1) * size]

    def own(b: int) -> None:
        bench.fill(s, seed(b, me))

    def addend(b: int) -> None:
        bench.fill(s, seed(b, me), bench.modulo)

    def nothing(b: int) -> None:
        pass

    def summed(got: np.ndarray, offset: int = 0, root: int | None = None) -> Callable[[int], None]:
        def verify(b: int) -> None:
            if root is None or me == root:
                bench.expect_sum(got, offset, [seed(b, q) for q in range(n)], f"{what} batch={b}")

        return verify

    if benchmark == "osu_barrier":
        return comm.Barrier, nothing, nothing, 0
    if benchmark == "osu_allreduce":
        return partial(comm.Allreduce, s, r, SUM), addend, summed(r), size
    if benchmark == "osu_reduce":
        return partial(comm.Reduce, s, r, SUM, 0), addend, summed(r, root=0), size
    if benchmark == "osu_reduce_scatter":
        # osu_reduce_scatter.c: `size` is the whole vector, rank i gets size/n (+1 for the
        # first size % n ranks)
        counts = [size // n + (1 if q < size % n else 0) for q in range(n)]
        mine = bench.buf("r", counts[me])
        return (
            partial(comm.Reduce_scatter, s, mine, counts, SUM),
            addend,
            summed(mine, sum(counts[:me])),
            size,
        )
    if benchmark == "osu_bcast":

        def root_fills(b: int) -> None:
            if me == 0:
                bench.fill(s, seed(b, 0))

        return (
            partial(comm.Bcast, s, 0),
            root_fills,
            lambda b: bench.expect(s, seed(b, 0), f"{what} batch={b}"),
            size,
        )
    if benchmark in ("osu_allgather", "osu_gather"):
        everyone = benchmark == "osu_allgather"

        def gathered(b: int) -> None:
            if everyone or me == 0:
                for q in range(n):
                    bench.expect(block(r, q), seed(b, q), f"{what} batch={b} block={q}")

        op = partial(comm.Allgather, s, r) if everyone else partial(comm.Gather, s, r, 0)
        return op, own, gathered, size * n
    if benchmark == "osu_alltoall":

        def to_each(b: int) -> None:
            for q in range(n):
                bench.fill(block(s, q), seed(b, me, q))

        def from_each(b: int) -> None:
            for q in range(n):
                bench.expect(block(r, q), seed(b, q, me), f"{what} batch={b} block={q}")

        return partial(comm.Alltoall, s, r), to_each, from_each, size * n
    if benchmark == "osu_scatter":

        def deal(b: int) -> None:
            if me == 0:
                for q in range(n):
                    bench.fill(block(s, q), seed(b, 0, q))

        return (
            partial(comm.Scatter, s, r, 0),
            deal,
            lambda b: bench.expect(r, seed(b, 0, me), f"{what} batch={b}"),
            size * n,
        )
    raise ValueError(f"not a collective: {benchmark}")
