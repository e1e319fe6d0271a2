"""The conformance peer's ring case: one point-to-point call shape on a communicator of any
size (conformance_topology.member_comm: the world's duplicate, MPI_COMM_SELF, an odd Split
one), with wildcards, MPI_STATUS_IGNORE, a derived send type, MPI_Test completion. A mixin of
conformance_cases.Cases; pytest judges it (hpccomm_suites/mpi/test_conformance_ring.py)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from pytest_hpccomm.stacks.mpi.peer.conformance_topology import member_comm
from pytest_hpccomm.stacks.mpi.peer.payload import digest, np_dtype, pattern

RING_LIMIT = 10.0  # s a Test/Iprobe/Improbe loop may spin


class RingCases:
    """case_ring: every member sends to rank + 1 and receives from rank - 1 (itself alone)."""

    MPI: Any
    rank: int

    def mpi_type(self, dtype: str) -> Any:  # conformance_cases.Cases's
        raise NotImplementedError

    def case_ring(self, comm: Any, c: dict[str, Any]) -> dict[str, Any]:
        """Rank r of the case's communicator sends `count` elements of pattern(dtype, ...,
        seed + r) to r + 1 and receives from r - 1 (mod size) by `call`: send, ssend, bsend,
        rsend (blocking sends; the receive is an Irecv posted before a barrier), isend,
        issend, sendrecv, sendrecv_replace, probe, iprobe, mprobe, improbe (the sends are
        Isends) or persistent (Send_init/Recv_init, Startall, `rounds` 2: seed + 10 * round).
        `wild`: the receive side takes MPI_ANY_SOURCE/MPI_ANY_TAG; `ignore`: statuses are
        MPI_STATUS_IGNORE (reported as None); `derived`: the send buffer's type is a vector
        of every other element; `test`: requests complete by an MPI_Test loop. Reports per
        round [source, tag, count, digest of the received elements]."""
        MPI = self.MPI
        with member_comm(MPI, comm, self.rank, c) as sub:
            if sub is None:
                return {}
            made: list[Any] = []
            try:
                return {"got": self._ring(sub, c, made)}
            finally:
                for t in made:
                    t.Free()

    def _ring(self, comm: Any, c: dict[str, Any], made: list[Any]) -> list[list[Any]]:
        MPI, call, dtype, n, tag = self.MPI, c["call"], c["dtype"], c["count"], c["tag"]
        r, m = comm.Get_rank(), comm.Get_size()
        right, left = (r + 1) % m, (r - 1) % m
        base = self.mpi_type(dtype)
        source, rtag = (MPI.ANY_SOURCE, MPI.ANY_TAG) if c["wild"] else (left, tag)
        deadline = time.monotonic() + RING_LIMIT

        def send_spec(seed: int) -> list[Any]:
            if not c["derived"]:
                return [pattern(dtype, n, seed), n, base]
            vec = base.Create_vector(n, 1, 2).Commit()
            made.append(vec)
            return [pattern(dtype, max(2 * n - 1, 0), seed), 1, vec]

        def status() -> Any:
            return None if c["ignore"] else MPI.Status()

        def complete(req: Any, st: Any) -> None:
            if not c["test"]:
                req.Wait(st)
                return
            while not req.Test(st):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"MPI_Test never completed in {RING_LIMIT:.0f}s")
                time.sleep(20e-6)

        def seen(buf: np.ndarray, st: Any) -> list[Any]:
            if st is None:
                return [None, None, None, digest(buf)]
            return [st.Get_source(), st.Get_tag(), st.Get_count(base), digest(buf)]

        buf = np.zeros(n, np_dtype(dtype))
        if call == "persistent":
            sspec = send_spec(c["seed"] + r)
            sreq = comm.Send_init(sspec, dest=right, tag=tag)
            rreq = comm.Recv_init([buf, n, base], source=source, tag=rtag)
            got = []
            try:
                for k in range(c.get("rounds", 2)):
                    sspec[0][...] = pattern(dtype, len(sspec[0]), c["seed"] + r + 10 * k)
                    buf[...] = 0
                    MPI.Prequest.Startall([rreq, sreq])
                    st = status()
                    complete(sreq, None)
                    complete(rreq, st)
                    got.append(seen(buf, st))
            finally:
                sreq.Free()
                rreq.Free()
            return got
        st = status()
        if call in ("sendrecv", "sendrecv_replace"):
            if call == "sendrecv":
                comm.Sendrecv(
                    send_spec(c["seed"] + r), right, tag, [buf, n, base], source, rtag, st
                )
            else:
                buf[...] = pattern(dtype, n, c["seed"] + r)
                comm.Sendrecv_replace([buf, n, base], right, tag, source, rtag, st)
            return [seen(buf, st)]
        if call in ("send", "ssend", "bsend", "rsend"):
            req = comm.Irecv([buf, n, base], source=source, tag=rtag)
            comm.Barrier()  # every receive is posted: Rsend is correct, self-sends safe
            spec = send_spec(c["seed"] + r)
            if call == "bsend":
                nbytes = base.Get_size() * n + MPI.BSEND_OVERHEAD + 64
                MPI.Attach_buffer(bytearray(nbytes))
                try:
                    comm.Bsend(spec, dest=right, tag=tag)
                finally:
                    MPI.Detach_buffer()
            else:
                getattr(comm, call.capitalize())(spec, dest=right, tag=tag)
            complete(req, st)
            return [seen(buf, st)]
        isend = comm.Issend if call == "issend" else comm.Isend
        sreq = isend(send_spec(c["seed"] + r), dest=right, tag=tag)
        if call in ("isend", "issend"):
            rreq = comm.Irecv([buf, n, base], source=source, tag=rtag)
            complete(rreq, st)
        elif call in ("probe", "iprobe"):
            if call == "probe":
                comm.Probe(source, rtag, st)
            else:
                while not comm.Iprobe(source, rtag, st):
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"MPI_Iprobe found nothing in {RING_LIMIT:.0f}s")
                    time.sleep(20e-6)
            # the message probed is the one received: its source and tag, from the status
            # (or, with MPI_STATUS_IGNORE, the only one on its way here)
            frm, ftag = (left, tag) if st is None else (st.Get_source(), st.Get_tag())
            comm.Recv([buf, n, base], source=frm, tag=ftag)
        else:
            if call == "mprobe":
                msg = comm.Mprobe(source, rtag, st)
            else:
                while (msg := comm.Improbe(source, rtag, st)) is None:
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"MPI_Improbe found nothing in {RING_LIMIT:.0f}s")
                    time.sleep(20e-6)
            if call == "mprobe":
                msg.Recv([buf, n, base], None)
            else:
                msg.Irecv([buf, n, base]).Wait()
        complete(sreq, None)
        return [seen(buf, st)]

    def case_partitioned(self, comm: Any, c: dict[str, Any]) -> dict[str, Any]:
        """MPI 4.0 partitioned point-to-point around the ring of the case's communicator:
        MPI_Psend_init to rank + 1 (MPI_PROC_NULL if `proc_null`) and MPI_Precv_init from
        rank - 1 (idem), `partitions` of `count` int32 each (`derived`: of a resized vector
        taking elements 0 and 2 of every 4, on the send side); MPI_Start both, MPI_Pready the
        partitions in reverse order, poll MPI_Parrived until every partition is there, wait
        (MPI_STATUS_IGNORE if `ignore`). Reports [source, tag, count, digest] and the
        partitions Parrived saw, or {"unsupported": call} where the library lacks them."""
        MPI = self.MPI
        with member_comm(MPI, comm, self.rank, c) as sub:
            if sub is None:
                return {}
            r, m, parts, k, tag = (
                sub.Get_rank(),
                sub.Get_size(),
                c["partitions"],
                c["count"],
                c["tag"],
            )
            right = MPI.PROC_NULL if c["proc_null"] else (r + 1) % m
            left = MPI.PROC_NULL if c["proc_null"] else (r - 1) % m
            i32, made = MPI.INT32_T, []
            if c["derived"]:
                vec = i32.Create_vector(2, 1, 2)
                t = vec.Create_resized(0, 4 * i32.Get_size()).Commit()
                vec.Free()
                made.append(t)
                send = [pattern("int32", 4 * k * parts, c["seed"] + r), k, t]
                recv = np.zeros(2 * k * parts, np.int32)
            else:
                send = [pattern("int32", k * parts, c["seed"] + r), k, i32]
                recv = np.zeros(k * parts, np.int32)
            try:
                try:
                    sreq = sub.Psend_init(send, parts, right, tag)
                    # mpi4py passes a buffer's count as MPI's: elements per partition
                    rreq = sub.Precv_init([recv, len(recv) // parts, i32], parts, left, tag)
                except (AttributeError, NotImplementedError) as e:
                    return {"unsupported": f"MPI_Psend_init ({type(e).__name__}: {e})"}
                try:
                    MPI.Prequest.Startall([rreq, sreq])
                    for p in reversed(range(parts)):
                        sreq.Pready(p)
                    deadline = time.monotonic() + RING_LIMIT
                    arrived: list[int] = []
                    while len(arrived) < parts:
                        arrived = [p for p in range(parts) if rreq.Parrived(p)]
                        if time.monotonic() > deadline:
                            raise TimeoutError(f"MPI_Parrived: {arrived} of {parts} partitions")
                        time.sleep(20e-6)
                    st = None if c["ignore"] else MPI.Status()
                    rreq.Wait(st)
                    sreq.Wait()
                finally:
                    sreq.Free()
                    rreq.Free()
                seen = (
                    [None, None, None]
                    if st is None
                    else [
                        st.Get_source(),
                        st.Get_tag(),
                        st.Get_count(i32),
                    ]
                )
                return {"got": [*seen, digest(recv)], "arrived": arrived}
            finally:
                for x in made:
                    x.Free()
