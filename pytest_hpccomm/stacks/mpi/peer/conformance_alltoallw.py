"""The conformance peer's MPI_Alltoallw case (MPI 4.1, 6.8): a mixin of
conformance_cases.Cases. Rank i of the case's communicator (conformance_topology.member_comm)
sends counts[i][j] int32 elements to rank j, each block through its own datatype: MPI_INT32_T,
or a vector of every other element (`strided`), at byte displacements; pytest computes what
every receive buffer must hold (hpccomm_suites/mpi/test_conformance_alltoallw.py)."""

from __future__ import annotations

import time
from typing import Any

from pytest_hpccomm.stacks.mpi.peer.conformance_topology import member_comm
from pytest_hpccomm.stacks.mpi.peer.payload import digest, pattern

STRIDE = 2  # a strided block takes every STRIDE-th element
PARKED: list[Any] = []  # requests a defect left incomplete, kept with their buffers


class AlltoallwCases:
    """MPI_Alltoallw and MPI_Ialltoallw, with MPI_IN_PLACE."""

    MPI: Any
    rank: int

    def case_alltoallw(self, comm: Any, c: dict[str, Any]) -> dict[str, Any]:
        """Rank i sends pattern(int32, send_extent[i], seed + i) and receives into
        pattern(int32, recv_extent[i], seed + 500 + i): to j, counts[i][j] elements at element
        send_displs[i][j], strided if send_strided[i][j]; from j, counts[j][i] elements at
        recv_displs[i][j], strided if recv_strided[i][j] (displacements go to MPI in bytes).
        `inplace`: MPI_IN_PLACE, the receive buffer's blocks are sent (counts symmetric).
        A strided block of 0 elements is count 0 of MPI_INT32_T, or with `empty_types` count 1
        of an empty vector. `guard`: the buffers have that many more elements, and the report
        says whether the receive buffer's stayed untouched. `poll_limit`: the I-variant is
        polled that many seconds, then reported {"incomplete": True}."""
        MPI = self.MPI
        with member_comm(MPI, comm, self.rank, c) as sub:
            if sub is None:
                return {}
            i, m, i32 = sub.Get_rank(), sub.Get_size(), MPI.INT32_T
            made: list[Any] = []

            def block(k: int, strided: bool) -> tuple[int, Any]:
                if not strided or (k == 0 and not c.get("empty_types")):
                    return k, i32
                t = i32.Create_vector(k, 1, STRIDE).Commit()
                made.append(t)
                return 1, t

            try:
                sends = [block(c["counts"][i][j], c["send_strided"][i][j]) for j in range(m)]
                recvs = [block(c["counts"][j][i], c["recv_strided"][i][j]) for j in range(m)]
                size = i32.Get_size()
                # `guard` elements past each buffer, so a write (or read) past it stays in ours
                g, rn = c.get("guard", 0), c["recv_extent"][i]
                sbuf = pattern("int32", c["send_extent"][i] + g, c["seed"] + i)
                rbuf = pattern("int32", rn + g, c["seed"] + 500 + i)
                tail = digest(rbuf[rn:])
                recv = [
                    rbuf,
                    ([k for k, _ in recvs], [d * size for d in c["recv_displs"][i]]),
                    [t for _, t in recvs],
                ]
                send: Any = (
                    MPI.IN_PLACE
                    if c["inplace"]
                    else [
                        sbuf,
                        ([k for k, _ in sends], [d * size for d in c["send_displs"][i]]),
                        [t for _, t in sends],
                    ]
                )
                if c["nonblocking"] and c.get("poll_limit"):
                    req, start = sub.Ialltoallw(send, recv), time.monotonic()
                    while not req.Test():
                        if time.monotonic() - start > c["poll_limit"]:
                            # a collective request cannot be cancelled: park it with its
                            # buffers (it never completes) and say so, the peer lives on
                            PARKED.append((req, sbuf, rbuf))
                            made.clear()
                            return {"incomplete": True}
                        time.sleep(1e-3)
                elif c["nonblocking"]:
                    sub.Ialltoallw(send, recv).Wait()
                else:
                    sub.Alltoallw(send, recv)
                out = {"recv": digest(rbuf[:rn]), "send": digest(sbuf[: len(sbuf) - g])}
                return out | ({"guard": digest(rbuf[rn:]) == tail} if g else {})
            finally:
                for t in made:
                    t.Free()
