"""The conformance peer's one-sided cases by synchronisation (MPI 4.1, 12.5): fence, passive
target (MPI_Win_lock/unlock, lock_all + flush) and post/start/complete/wait, on a
communicator of any size (conformance_topology.member_comm), and the atomic calls
(MPI_Fetch_and_op, MPI_Compare_and_swap, MPI_Get_accumulate). A mixin of
conformance_cases.Cases; pytest judges (hpccomm_suites/mpi/test_conformance_rma_sync.py)."""

from __future__ import annotations

from typing import Any

import numpy as np

from pytest_hpccomm.stacks.mpi.peer.conformance_topology import member_comm
from pytest_hpccomm.stacks.mpi.peer.payload import digest, pattern


class RmaSyncCases:
    """case_rma_sync and case_rma_atomic."""

    MPI: Any
    rank: int

    def win_create(self, buf: np.ndarray, comm: Any) -> Any:  # conformance_cases.Cases's
        raise NotImplementedError

    def case_rma_sync(self, comm: Any, c: dict[str, Any]) -> dict[str, Any]:
        """Rank r's window is pattern(int32, window, seed + 500 + r). In one epoch of `sync`
        (fence, lock, lock_all, pscw) r Puts `count` elements of pattern(int32, ...,
        seed + r) at element `disp` of rank r + 1 (mod size; MPI_PROC_NULL if `proc_null`),
        in the next it Gets them back; `derived`: both sides' type a vector of every other
        element. Reports what it got and its own window once every epoch has ended."""
        MPI = self.MPI
        with member_comm(MPI, comm, self.rank, c) as sub:
            if sub is None:
                return {}
            r, m, n, disp = sub.Get_rank(), sub.Get_size(), c["count"], c["disp"]
            right, left = (r + 1) % m, (r - 1) % m
            target = MPI.PROC_NULL if c.get("proc_null") else right
            i32 = MPI.INT32_T
            wbuf = pattern("int32", c["window"], c["seed"] + 500 + r)
            got = np.zeros(n, np.int32)
            made = []
            if c["derived"]:
                vec = i32.Create_vector(n, 1, 2).Commit()
                made.append(vec)
                origin = [pattern("int32", max(2 * n - 1, 0), c["seed"] + r), 1, vec]
                where = [disp, 1, vec]
            else:
                origin = [pattern("int32", n, c["seed"] + r), n, i32]
                where = [disp, n, i32]
            win = self.win_create(wbuf, sub)
            try:
                self._epochs(win, sub, c["sync"], target, left, right, origin, got, where)
                return {"got": digest(got), "window": digest(wbuf)}
            finally:
                win.Free()
                for t in made:
                    t.Free()

    def _epochs(
        self,
        win: Any,
        comm: Any,
        sync: str,
        target: int,
        left: int,
        right: int,
        origin: list[Any],
        got: np.ndarray,
        where: list[Any],
    ) -> None:
        """Put in one epoch, Get in the next; on return every epoch has ended and this
        rank's window holds what the others put (a lock on itself and MPI_Win_sync for the
        passive-target modes, after a barrier)."""
        MPI = self.MPI
        ops = (
            lambda: win.Put(origin, target, target=where),
            lambda: win.Get([got, MPI.INT32_T], target, target=where),
        )
        if sync == "fence":
            win.Fence()
            for op in ops:
                op()
                win.Fence()
            return
        if sync == "pscw":
            g = comm.Get_group()
            frm, to = g.Incl([left]), g.Incl([right])
            try:
                for op in ops:
                    win.Post(frm)
                    win.Start(to)
                    op()
                    win.Complete()
                    win.Wait()
            finally:
                for x in (frm, to, g):
                    x.Free()
            return
        # the passive-target calls name `right` (MPI_PROC_NULL is a target of the
        # communication calls only, MPI 4.1 12.3)
        if sync == "lock":
            for op, kind in zip(ops, (MPI.LOCK_EXCLUSIVE, MPI.LOCK_SHARED)):
                win.Lock(right, kind)
                op()
                win.Unlock(right)
                comm.Barrier()  # the Put is at its target before anyone Gets
        else:  # lock_all, with a flush after each operation
            win.Lock_all()
            ops[0]()
            win.Flush(right)
            comm.Barrier()
            ops[1]()
            win.Flush_all()
            win.Unlock_all()
            comm.Barrier()
        me = comm.Get_rank()
        win.Lock(me, MPI.LOCK_SHARED)
        win.Sync()  # the public copy into the private one (MPI_WIN_SEPARATE)
        win.Unlock(me)

    def case_rma_atomic(self, comm: Any, c: dict[str, Any]) -> dict[str, Any]:
        """In one lock_all epoch every rank of the case's communicator, against rank 0's
        window of int64 [0, -1, 0]: MPI_Fetch_and_op(1, SUM) on element 0, flush,
        MPI_Compare_and_swap(rank, compare -1) on element 1, flush, MPI_Get_accumulate(rank +
        1, SUM) on element 2. Reports what each fetched; rank 0 its window after a barrier."""
        MPI = self.MPI
        with member_comm(MPI, comm, self.rank, c) as sub:
            if sub is None:
                return {}
            r, i64 = sub.Get_rank(), MPI.INT64_T
            wbuf = np.array([0, -1, 0], np.int64)
            win = self.win_create(wbuf, sub)
            try:
                fetched = np.zeros(3, np.int64)
                win.Lock_all()
                win.Fetch_and_op([np.array([1], np.int64), i64], [fetched[0:1], i64], 0, 0, MPI.SUM)
                win.Flush(0)
                win.Compare_and_swap(
                    [np.array([r], np.int64), i64],
                    [np.array([-1], np.int64), i64],
                    [fetched[1:2], i64],
                    0,
                    1,
                )
                win.Flush(0)
                win.Get_accumulate(
                    [np.array([r + 1], np.int64), 1, i64],
                    [fetched[2:3], 1, i64],
                    0,
                    target=[2, 1, i64],
                    op=MPI.SUM,
                )
                win.Unlock_all()
                sub.Barrier()
                out: dict[str, Any] = {"fetched": fetched.tolist()}
                if r == 0:
                    win.Lock(0, MPI.LOCK_SHARED)
                    win.Sync()
                    win.Unlock(0)
                    out["window"] = wbuf.tolist()
                return out
            finally:
                win.Free()
