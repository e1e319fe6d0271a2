"""The MPI conformance peer's cases (peer/conformance.py runs them): one method per case
kind, run on every rank on a fresh duplicate of the world communicator, returning what THIS
rank saw. Judging against a NumPy reference is pytest's job (stacks/mpi/conformance.py)."""

from __future__ import annotations

import time
from typing import Any, Callable

import numpy as np

from pytest_hpccomm.stacks.mpi.peer.conformance_alltoallw import AlltoallwCases
from pytest_hpccomm.stacks.mpi.peer.conformance_ring import RingCases
from pytest_hpccomm.stacks.mpi.peer.conformance_rma_sync import RmaSyncCases
from pytest_hpccomm.stacks.mpi.peer.conformance_topology import TopologyCases
from pytest_hpccomm.stacks.mpi.peer.payload import (
    MATMUL,
    PAIR_TYPES,
    digest,
    from_json,
    np_dtype,
    pattern,
    piece_digests,
    to_json,
)
from pytest_hpccomm.stacks.mpi.wire import PLANT_THRESHOLD

INDEXED_LAYOUTS = ("contiguous", "indexed", "hindexed", "indexed_block", "struct", "resized")
DERIVED_SPAN = 4  # case_collective's derived type: elements 0 and 2 of every 4
IPROBE_LIMIT = 10.0  # seconds an Iprobe loop may spin before the case reports a lost message


class CallFailed(Exception):
    """An MPI call a case names when it fails (the orchestrator keys known defects by it)."""

    def __init__(self, call: str, error: Any) -> None:
        super().__init__(call)
        self.call, self.error = call, error


class Cases(TopologyCases, AlltoallwCases, RingCases, RmaSyncCases):
    """The case list (a mixin of peer.conformance.Peer, which sets the state below); groups,
    communicator constructors and topologies come from conformance_topology.TopologyCases,
    MPI_Alltoallw from conformance_alltoallw.AlltoallwCases, point-to-point on any size of
    communicator from conformance_ring.RingCases, one-sided synchronisation modes and atomics
    from conformance_rma_sync.RmaSyncCases."""

    MPI: Any
    plant: str | None
    rank: int
    size: int
    matrix: Any  # 2x2 int64 matrices, for the non-commutative reduction
    matmul: Any  # their product as a user-defined MPI.Op

    def mpi_type(self, dtype: str) -> Any:
        """The predefined MPI datatype of a dtype name (pairs: MPI's pair types)."""
        if dtype in PAIR_TYPES:
            return getattr(self.MPI, PAIR_TYPES[dtype][1])
        return self.MPI.Datatype.fromcode(np_dtype(dtype).char)

    def win_create(self, buf: np.ndarray, comm: Any) -> Any:
        """MPI_Win_create over `buf`, its failure named as the call's."""
        try:
            return self.MPI.Win.Create(buf, buf.itemsize, comm=comm)
        except self.MPI.Exception as e:
            raise CallFailed("MPI_Win_create", e) from None

    # -- receive helpers ---------------------------------------------------------------------
    def _report(self, buf: np.ndarray, status: Any) -> dict[str, Any]:
        """What a receive saw: Status count/source/tag and a digest of the data it counted."""
        n = status.Get_count(self.MPI.Datatype.fromcode(buf.dtype.char))
        return {
            "count": n,
            "source": status.Get_source(),
            "tag": status.Get_tag(),
            "sha": digest(buf[: max(n, 0)]),
        }

    # -- cases -------------------------------------------------------------------------------
    def case_p2p(self, comm: Any, c: dict[str, Any]) -> dict[str, Any]:
        """src sends pattern(seed) to dst (and, for sendrecv, dst sends pattern(seed+1) back);
        the receive buffer has `slack` spare elements that must stay untouched."""
        MPI, rank = self.MPI, self.rank
        src, dst, tag, count, slack = c["src"], c["dst"], c["tag"], c["count"], c["slack"]
        send, recv_mode = c["send"], c["recv"]
        got: list[dict[str, Any]] = []
        sentinel = pattern(c["dtype"], count + slack, c["seed"] + 7919)

        def note(buf: np.ndarray, st: Any, frm: int) -> None:
            rep = self._report(buf, st)
            rep["from"] = frm
            rep["guard"] = bool(np.array_equal(buf[count:], sentinel[count:]))
            got.append(rep)

        if send == "sendrecv":
            if rank in (src, dst):
                other = dst if rank == src else src
                seed = c["seed"] if rank == src else c["seed"] + 1
                buf, st = sentinel.copy(), MPI.Status()
                comm.Sendrecv(
                    pattern(c["dtype"], count, seed),
                    dest=other,
                    sendtag=tag,
                    recvbuf=buf,
                    source=other,
                    recvtag=tag,
                    status=st,
                )
                note(buf, st, other)
            return {"got": got}
        reqs = []
        if rank == src:
            data = pattern(c["dtype"], count, c["seed"])
            if send == "isend":
                reqs.append(comm.Isend(data, dest=dst, tag=tag))
            elif rank != dst:  # blocking self-sends are unsafe by the standard: never drawn
                (comm.Ssend if send == "ssend" else comm.Send)(data, dest=dst, tag=tag)
        if rank == dst:
            buf, st = sentinel.copy(), MPI.Status()
            if recv_mode == "irecv":
                req = comm.Irecv(buf, source=src, tag=tag)
                req.Wait(st)
            else:
                comm.Recv(buf, source=src, tag=tag, status=st)
            note(buf, st, src)
        MPI.Request.Waitall(reqs)
        return {"got": got}

    def case_order(self, comm: Any, c: dict[str, Any]) -> dict[str, Any]:
        """src sends len(counts) messages with one tag; dst receives them (by source+tag,
        ANY_SOURCE, ANY_TAG, or pre-posted Irecvs) and reports what arrived in which order.
        Other ranks send `noise` messages with another tag, received afterwards."""
        MPI, rank = self.MPI, self.rank
        src, dst, tag, counts, dtype = c["src"], c["dst"], c["tag"], c["counts"], c["dtype"]
        noise_tag = tag + 1
        reqs = []
        if rank == src:
            msgs = [pattern(dtype, n, c["seed"] + i) for i, n in enumerate(counts)]
            if c["send"] == "isend":
                reqs += [comm.Isend(m, dest=dst, tag=tag) for m in msgs]
            else:
                for m in msgs:
                    comm.Send(m, dest=dst, tag=tag)
        elif c["noise"] and rank != dst:
            reqs.append(comm.Isend(pattern(dtype, 3, rank), dest=dst, tag=noise_tag))
        got: list[dict[str, Any]] = []
        if rank == dst:
            cap = max(counts, default=0)
            bufs = [np.zeros(cap, np_dtype(dtype)) for _ in counts]
            sts = [MPI.Status() for _ in counts]
            how = c["recv"]
            if how == "irecv":
                MPI.Request.Waitall([comm.Irecv(b, source=src, tag=tag) for b in bufs], sts)
            else:
                source = MPI.ANY_SOURCE if how == "any_source" else src
                rtag = MPI.ANY_TAG if how == "any_tag" else tag
                for b, st in zip(bufs, sts):
                    comm.Recv(b, source=source, tag=rtag, status=st)
            got = [self._report(b, st) for b, st in zip(bufs, sts)]
            if c["noise"]:
                for r in range(self.size):
                    if r not in (src, dst):
                        comm.Recv(np.zeros(3, np_dtype(dtype)), source=r, tag=noise_tag)
        MPI.Request.Waitall(reqs)
        return {"got": got}

    def case_wildcard(self, comm: Any, c: dict[str, Any]) -> dict[str, Any]:
        """Every entry of `sends` ({rank, tag, count, seed}) is a message to dst; dst takes them
        all with ANY_SOURCE/ANY_TAG via Recv, Probe+Recv, Iprobe+Recv or Mprobe+Mrecv."""
        MPI, rank, dtype, dst = self.MPI, self.rank, c["dtype"], c["dst"]
        dt = np_dtype(dtype)
        mt = self.mpi_type(dtype)
        reqs = [
            comm.Isend(pattern(dtype, s["count"], s["seed"]), dest=dst, tag=s["tag"])
            for s in c["sends"]
            if s["rank"] == rank
        ]
        got: list[dict[str, Any]] = []
        if rank == dst:
            cap = max((s["count"] for s in c["sends"]), default=0)
            for _ in c["sends"]:
                st, st2 = MPI.Status(), MPI.Status()
                how = c["how"]
                if how == "recv":
                    buf = np.zeros(cap, dt)
                    comm.Recv(buf, source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, status=st)
                    got.append(self._report(buf, st))
                    continue
                if how == "iprobe":
                    deadline = time.monotonic() + IPROBE_LIMIT
                    while not comm.Iprobe(MPI.ANY_SOURCE, MPI.ANY_TAG, st):
                        if time.monotonic() > deadline:
                            return {
                                "got": got,
                                "error": f"Iprobe found no message in {IPROBE_LIMIT:.0f}s",
                            }
                        time.sleep(50e-6)
                    msg = None
                elif how == "mprobe":
                    msg = comm.Mprobe(MPI.ANY_SOURCE, MPI.ANY_TAG, st)
                else:
                    comm.Probe(MPI.ANY_SOURCE, MPI.ANY_TAG, st)
                    msg = None
                buf = np.zeros(st.Get_count(mt), dt)  # sized by what the probe said
                if msg is not None:
                    msg.Recv(buf, st2)
                else:
                    comm.Recv(buf, source=st.Get_source(), tag=st.Get_tag(), status=st2)
                rep = self._report(buf, st2)
                rep["probed"] = [st.Get_source(), st.Get_tag(), st.Get_count(mt)]
                got.append(rep)
        MPI.Request.Waitall(reqs)
        return {"got": got}

    def case_reduce(self, comm: Any, c: dict[str, Any]) -> dict[str, Any]:
        """Reduce/Allreduce (optionally MPI.IN_PLACE) of inputs[rank] with op over dtype; on
        the communicator `members` names (conformance_topology.member_comm), if any."""
        if c.get("members"):
            with self.member_comm(comm, c) as sub:
                return {} if sub is None else self._reduce(sub, c)
        return self._reduce(comm, c)

    def _reduce(self, comm: Any, c: dict[str, Any]) -> dict[str, Any]:
        MPI, rank = self.MPI, comm.Get_rank()
        op_name, variant, root = c["op"], c["variant"], c["root"]
        if op_name == MATMUL:
            mine = np.array(c["inputs"][rank], np.int64)
            spec: Callable[[np.ndarray], list[Any]] = lambda a: [a, len(a) // 4, self.matrix]
            op = self.matmul
        else:
            mine = from_json(c["inputs"][rank], c["dtype"])
            mt = self.mpi_type(c["dtype"])
            spec = lambda a: [a, len(a), mt]  # noqa: E731
            op = getattr(MPI, op_name)
        out = np.zeros_like(mine)
        inplace = variant.endswith("_inplace")
        if variant.removesuffix("_inplace") in (
            "scan",
            "exscan",
            "reduce_scatter_block",
            "reduce_scatter",
        ):
            return self._prefix_or_scatter(comm, c, mine, op, inplace)
        if variant.startswith("allreduce"):
            if inplace:
                out[...] = mine
                comm.Allreduce(MPI.IN_PLACE, spec(out), op=op)
            else:
                comm.Allreduce(spec(mine), spec(out), op=op)
            has = True
        else:
            has = rank == root
            if inplace and has:
                out[...] = mine
                comm.Reduce(MPI.IN_PLACE, spec(out), op=op, root=root)
            else:
                comm.Reduce(spec(mine), spec(out) if has else None, op=op, root=root)
        if not has:
            return {}
        n = len(out) // 4 if op_name == MATMUL else len(out)
        if self.plant == "corrupt-reduce" and op_name != MATMUL and n > PLANT_THRESHOLD:
            out.view(np.uint8)[(n - 1) * out.dtype.itemsize] ^= 1
        return {"result": out.tolist() if op_name == MATMUL else to_json(out)}

    def _prefix_or_scatter(
        self, comm: Any, c: dict[str, Any], mine: np.ndarray, op: Any, inplace: bool
    ) -> dict[str, Any]:
        """Scan, Exscan, Reduce_scatter_block, Reduce_scatter (optionally MPI.IN_PLACE, where
        the receive buffer holds the input) of inputs[rank]; rank 0's Exscan result is
        undefined and not reported. MATMUL: counts are in 2x2 matrices (Peer.matrix)."""
        MPI, rank, variant = self.MPI, comm.Get_rank(), c["variant"].removesuffix("_inplace")
        w = 4 if c["op"] == MATMUL else 1  # elements of the type
        mt = self.matrix if w == 4 else self.mpi_type(c["dtype"])
        dump: Callable[[np.ndarray], Any] = (lambda a: a.tolist()) if w == 4 else to_json
        if variant in ("scan", "exscan"):
            out = mine.copy() if inplace else np.zeros_like(mine)
            call = comm.Scan if variant == "scan" else comm.Exscan
            whole = [out, len(out) // w, mt]
            call(MPI.IN_PLACE if inplace else [mine, len(mine) // w, mt], whole, op=op)
            if variant == "exscan" and rank == 0:
                return {}
            return {"result": dump(out)}
        counts = c["recvcounts"]
        if inplace:
            buf = mine.copy()
            if variant == "reduce_scatter_block":
                comm.Reduce_scatter_block(MPI.IN_PLACE, [buf, mt], op=op)  # whole input
            else:
                comm.Reduce_scatter(MPI.IN_PLACE, [buf, mt], counts, op=op)
            return {"result": dump(buf[: counts[rank] * w])}
        out = np.zeros_like(mine[: counts[rank] * w])
        if variant == "reduce_scatter_block":
            # mpi4py reads the send buffer as `size` blocks of the receive count
            comm.Reduce_scatter_block([mine, mt], [out, mt], op=op)
        else:
            comm.Reduce_scatter([mine, mt], [out, mt], counts, op=op)
        return {"result": dump(out)}

    def _indexed_type(self, base: Any, c: dict[str, Any]) -> tuple[Any, int, int]:
        """The case's type built by the constructor its layout names, from blocks of
        `blocklengths` elements at `displs` (in elements; bytes for hindexed and struct);
        resized: a contiguous `block` resized to `stride` elements, `count` times.
        Returns (type, elements the buffer needs, elements the type selects)."""
        MPI, x, layout = self.MPI, c["indexed"], c["layout"]
        bls, ds, size = x["blocklengths"], x["displs"], base.Get_size()
        if layout == "contiguous":
            t = base.Create_contiguous(bls[0])
        elif layout == "indexed":
            t = base.Create_indexed(bls, ds)
        elif layout == "hindexed":
            t = base.Create_hindexed(bls, [d * size for d in ds])
        elif layout == "indexed_block":
            t = base.Create_indexed_block(bls[0], ds)
        elif layout == "struct":
            t = MPI.Datatype.Create_struct(bls, [d * size for d in ds], [base] * len(bls))
        else:  # resized
            inner = base.Create_contiguous(x["block"]).Create_resized(0, x["stride"] * size)
            t = inner.Create_contiguous(x["count"])
            inner.Free()
        extent = max((d + b for d, b in zip(ds, bls)), default=0)
        return t, extent, sum(bls)

    def case_datatype(self, comm: Any, c: dict[str, Any]) -> dict[str, Any]:
        """A derived datatype (vector, indexed, subarray, darray) on one side, contiguous on
        the other:
        `typed` says which side (send: gather the selection; recv: scatter into it); `reps`
        (default 1) elements of it, 0 or 1."""
        MPI, rank, src, dst, dtype = self.MPI, self.rank, c["src"], c["dst"], c["dtype"]
        base = self.mpi_type(dtype)
        if c["layout"] in INDEXED_LAYOUTS:
            derived, extent, picked = self._indexed_type(base, c)
        elif c["layout"] == "vector":
            v = c["vector"]
            derived = base.Create_vector(v["count"], v["blocklength"], v["stride"])
            extent = (v["count"] - 1) * v["stride"] + v["blocklength"] if v["count"] else 0
            picked = v["count"] * v["blocklength"]
        elif c["layout"] == "darray":
            d = c["darray"]
            order = MPI.ORDER_C if d["order"] == "C" else MPI.ORDER_FORTRAN
            how = {
                "block": MPI.DISTRIBUTE_BLOCK,
                "cyclic": MPI.DISTRIBUTE_CYCLIC,
                "none": MPI.DISTRIBUTE_NONE,
            }
            derived = base.Create_darray(
                d["size"],
                d["rank"],
                d["gsizes"],
                [how[x] for x in d["distribs"]],
                [a or MPI.DISTRIBUTE_DFLT_DARG for a in d["dargs"]],
                d["psizes"],
                order=order,
            )
            extent = int(np.prod(d["gsizes"]))
            picked = derived.Get_size() // base.Get_size()
        else:
            s = c["subarray"]
            order = MPI.ORDER_C if s["order"] == "C" else MPI.ORDER_FORTRAN
            derived = base.Create_subarray(s["sizes"], s["subsizes"], s["starts"], order=order)
            extent = int(np.prod(s["sizes"]))
            picked = int(np.prod(s["subsizes"]))
        derived.Commit()
        reps = c.get("reps", 1)  # elements of the derived type sent (0: nothing moves)
        try:
            reqs, out = [], {}
            if rank == src:
                if c["typed"] == "send":
                    reqs.append(
                        comm.Isend(
                            [pattern(dtype, extent, c["seed"]), reps, derived], dest=dst, tag=5
                        )
                    )
                else:
                    reqs.append(
                        comm.Isend(pattern(dtype, picked * reps, c["seed"]), dest=dst, tag=5)
                    )
            if rank == dst:
                st = MPI.Status()
                if c["typed"] == "send":
                    buf = np.zeros(picked * reps, np_dtype(dtype))
                    comm.Recv(buf, source=src, tag=5, status=st)
                else:  # the gaps keep the sentinel, so a write outside the selection shows
                    buf = pattern(dtype, extent, c["seed"] + 1)
                    comm.Recv([buf, reps, derived], source=src, tag=5, status=st)
                out = {"sha": digest(buf), "count": st.Get_count(base)}
            MPI.Request.Waitall(reqs)
            return out
        finally:
            derived.Free()

    def case_collective(self, comm: Any, c: dict[str, Any]) -> dict[str, Any]:
        """One data-movement collective, blocking or its I-variant, on the world's duplicate,
        on COMM_SELF (`self`) or on the communicator of the world ranks in `members`. Rank i
        of the communicator sends from pattern(dtype, send_extent[i], seed + i) and receives
        into pattern(dtype, recv_extent[i], seed + 500 + i), so a write outside a block shows.
        The v-forms take the case's counts and displacements; the plain forms one count
        (blocks back to back). `persistent`: the MPI 4.0 persistent form (X_init, then Start
        and Wait `starts` times, default 2, the receive buffer put back to its pattern before
        each: the last run alone makes the result), or {"unsupported": call} where the library
        lacks it. `derived`: the
        buffers' type is a vector of elements 0 and 2 of every DERIVED_SPAN (resized to that
        extent); extents, counts and displacements count those spans, the buffers hold
        DERIVED_SPAN elements each."""
        if c.get("members"):  # a Split communicator of those world ranks; the others idle
            with self.member_comm(comm, c) as sub:
                return {} if sub is None else self._collective(sub, c)
        return self._collective(self.MPI.COMM_SELF if c.get("self") else comm, c)

    def _collective(self, comm: Any, c: dict[str, Any]) -> dict[str, Any]:
        t = self.mpi_type(c["dtype"])
        span = DERIVED_SPAN if c.get("derived") else 1
        if span > 1:
            vec = t.Create_vector(2, 1, 2)
            t = vec.Create_resized(0, span * t.Get_extent()[1]).Commit()
            vec.Free()
        try:
            return self._collective_call(comm, c, t, span)
        finally:
            if span > 1:
                t.Free()

    def _collective_call(self, comm: Any, c: dict[str, Any], t: Any, span: int) -> dict[str, Any]:
        MPI, dtype, name, i, root = self.MPI, c["dtype"], c["op"], comm.Get_rank(), c["root"]
        sbuf = pattern(dtype, c["send_extent"][i] * span, c["seed"] + i)
        rbuf = pattern(dtype, c["recv_extent"][i] * span, c["seed"] + 500 + i)
        here = c["inplace"] and (i == root or name.startswith("all"))  # IN_PLACE on this rank
        if name.endswith("v"):
            counts, displs = c["counts"], c["displs"]
            mine: Any = counts[i]
            block: Any = (counts, displs)
        else:
            mine = block = c["count"]
        args: list[Any]
        if name == "bcast":
            args = [[rbuf, c["count"], t], root]
        elif name in ("gather", "gatherv"):
            recv = [rbuf, block, t] if i == root else None
            args = [MPI.IN_PLACE if here else [sbuf, mine, t], recv, root]
        elif name in ("scatter", "scatterv"):
            send = [sbuf, block, t] if i == root else None
            args = [send, MPI.IN_PLACE if here else [rbuf, mine, t], root]
        elif name in ("allgather", "allgatherv"):
            args = [MPI.IN_PLACE if here else [sbuf, mine, t], [rbuf, block, t]]
        elif name == "alltoall":
            send = MPI.IN_PLACE if here else [sbuf, c["count"], t]
            args = [send, [rbuf, c["count"], t]]
        else:  # alltoallv: counts[i][j] elements from i to j (IN_PLACE: symmetric counts)
            rc = [row[i] for row in c["counts"]]
            send = MPI.IN_PLACE if here else [sbuf, (c["counts"][i], c["displs"][i]), t]
            args = [send, [rbuf, (rc, c["recv_displs"][i]), t]]
        if c.get("persistent"):  # MPI 4.0: init once, start `starts` times (default 2)
            call = f"MPI_{name.capitalize()}_init"
            try:
                req = getattr(comm, name.capitalize() + "_init")(*args)
            except (AttributeError, NotImplementedError) as e:
                return {"unsupported": f"{call} ({type(e).__name__}: {e})"}
            except MPI.Exception as e:
                if e.Get_error_class() != MPI.ERR_UNSUPPORTED_OPERATION:
                    raise
                return {"unsupported": f"{call} (MPI_ERR_UNSUPPORTED_OPERATION)"}
            # every start from the same receive buffer: a start that wrote nothing (or only
            # part) must not pass on what the one before it wrote
            fresh = rbuf.copy()
            try:
                for k in range(c.get("starts", 2)):
                    if k:
                        rbuf[...] = fresh
                    req.Start()
                    req.Wait()
            finally:
                req.Free()
            # where a restart went wrong, to the piece (a partly rewritten block)
            return {"recv": digest(rbuf), "send": digest(sbuf), "pieces": piece_digests(rbuf)}
        elif c["nonblocking"]:
            getattr(comm, "I" + name)(*args).Wait()
        else:
            getattr(comm, name.capitalize())(*args)
        return {"recv": digest(rbuf), "send": digest(sbuf)}

    def case_proc_null(self, comm: Any, c: dict[str, Any]) -> dict[str, Any]:
        """Every point-to-point call with MPI_PROC_NULL as the peer, each receive's and probe's
        [source, tag, count, digest of its buffer]: the standard says PROC_NULL, ANY_TAG, 0,
        and the buffer untouched (MPI 4.1, 3.10)."""
        MPI, N, dtype, tag, n = self.MPI, self.MPI.PROC_NULL, c["dtype"], c["tag"], c["count"]
        t = self.mpi_type(dtype)
        data = pattern(dtype, n, c["seed"])
        out: dict[str, Any] = {}

        def fresh() -> tuple[np.ndarray, Any]:
            return pattern(dtype, n, c["seed"] + 1), MPI.Status()

        def seen(name: str, buf: np.ndarray, st: Any) -> None:
            out[name] = [st.Get_source(), st.Get_tag(), st.Get_count(t), digest(buf)]

        comm.Send(data, dest=N, tag=tag)
        comm.Ssend(data, dest=N, tag=tag)
        comm.Isend(data, dest=N, tag=tag).Wait()
        buf, st = fresh()
        comm.Recv(buf, source=N, tag=tag, status=st)
        seen("recv", buf, st)
        buf, st = fresh()
        comm.Irecv(buf, source=N, tag=tag).Wait(st)
        seen("irecv", buf, st)
        buf, st = fresh()
        comm.Sendrecv(data, dest=N, sendtag=tag, recvbuf=buf, source=N, recvtag=tag, status=st)
        seen("sendrecv", buf, st)
        buf, st = fresh()
        comm.Probe(source=N, tag=tag, status=st)
        seen("probe", buf, st)
        buf, st = fresh()
        out["iprobe_flag"] = bool(comm.Iprobe(source=N, tag=tag, status=st))
        seen("iprobe", buf, st)
        buf, st = fresh()
        msg = comm.Mprobe(source=N, tag=tag, status=st)
        seen("mprobe", buf, st)
        out["mprobe_no_proc"] = msg == MPI.MESSAGE_NO_PROC
        buf, st = fresh()
        msg.Recv(buf, status=st)
        seen("mrecv", buf, st)
        buf, st = fresh()
        req = comm.Recv_init(buf, source=N, tag=tag)
        send = comm.Send_init(data, dest=N, tag=tag)
        MPI.Prequest.Startall([req, send])
        send.Wait()
        req.Wait(st)
        seen("recv_init", buf, st)
        req.Free()
        send.Free()
        out["expected_buffer"] = digest(pattern(dtype, n, c["seed"] + 1))
        return out

    def case_completion(self, comm: Any, c: dict[str, Any]) -> dict[str, Any]:
        """Rank dst posts one request per slot (slots: "msg" receives message i of src with
        tag i, "null" is MPI_REQUEST_NULL, "proc_null" receives from MPI_PROC_NULL) and
        completes them with Waitany/Testany/Waitsome/Testsome/Waitall/Testall, with statuses
        or without (`statuses`); it reports each completion as [index, source, tag, count]
        in the order the calls returned them, then each message's digest."""
        MPI, rank, src, dst, dtype = self.MPI, self.rank, c["src"], c["dst"], c["dtype"]
        t, how, with_st = self.mpi_type(dtype), c["how"], c["statuses"]
        counts, slots = c["counts"], c["slots"]
        sends = []
        if rank == src:
            sends = [
                comm.Isend(pattern(dtype, n, c["seed"] + i), dest=dst, tag=i)
                for i, n in enumerate(counts)
            ]
        out: dict[str, Any] = {}
        if rank == dst:
            bufs: dict[int, np.ndarray] = {}
            reqs, msg = [], 0
            for k, kind in enumerate(slots):
                if kind == "null":
                    reqs.append(MPI.REQUEST_NULL)
                elif kind == "proc_null":
                    reqs.append(comm.Irecv(np.zeros(1, np_dtype(dtype)), MPI.PROC_NULL, 99))
                else:
                    bufs[k] = np.zeros(counts[msg], np_dtype(dtype))
                    reqs.append(comm.Irecv([bufs[k], t], source=src, tag=msg))
                    msg += 1
            done: list[list[Any]] = []

            def note(index: int, st: Any) -> None:
                done.append(
                    [index, st.Get_source(), st.Get_tag(), st.Get_count(t)] if with_st else [index]
                )

            deadline = time.monotonic() + IPROBE_LIMIT
            if how in ("waitany", "testany"):
                while True:
                    st = MPI.Status()
                    if how == "waitany":
                        idx = MPI.Request.Waitany(reqs, st if with_st else None)
                    else:
                        idx, flag = MPI.Request.Testany(reqs, st if with_st else None)
                        if not flag:
                            if time.monotonic() > deadline:
                                return {"error": f"Testany never completed in {IPROBE_LIMIT:.0f}s"}
                            continue
                    if idx == MPI.UNDEFINED:
                        break
                    note(idx, st)
            elif how in ("waitsome", "testsome"):
                while True:
                    sts = [MPI.Status() for _ in reqs]
                    call = MPI.Request.Waitsome if how == "waitsome" else MPI.Request.Testsome
                    idxs = call(reqs, sts if with_st else None)
                    if idxs is None:  # MPI_UNDEFINED: no active request left
                        break
                    if not idxs and time.monotonic() > deadline:
                        return {"error": f"Testsome never completed in {IPROBE_LIMIT:.0f}s"}
                    for j, idx in enumerate(idxs):
                        note(idx, sts[j])
            else:
                sts = [MPI.Status() for _ in reqs]
                if how == "waitall":
                    MPI.Request.Waitall(reqs, sts if with_st else None)
                else:
                    while not MPI.Request.Testall(reqs, sts if with_st else None):
                        if time.monotonic() > deadline:
                            return {"error": f"Testall never completed in {IPROBE_LIMIT:.0f}s"}
                for k, st in enumerate(sts):
                    note(k, st)
            out = {"done": done, "sha": {str(k): digest(b) for k, b in bufs.items()}}
        MPI.Request.Waitall(sends)
        return out

    def case_persistent(self, comm: Any, c: dict[str, Any]) -> dict[str, Any]:
        """Send_init/Recv_init once, then `rounds` Start/Wait pairs (Startall for both sides on
        one rank): each round sends what the buffer holds at its Start (pattern(seed + r)).
        dst reports each round's [source, tag, count, digest]."""
        MPI, rank, src, dst, dtype = self.MPI, self.rank, c["src"], c["dst"], c["dtype"]
        n, tag, t = c["count"], c["tag"], self.mpi_type(dtype)
        sbuf = np.zeros(n, np_dtype(dtype))
        rbuf = np.zeros(n, np_dtype(dtype))
        reqs = []
        if rank == src:
            reqs.append(("send", comm.Send_init([sbuf, t], dest=dst, tag=tag)))
        if rank == dst:
            reqs.append(("recv", comm.Recv_init([rbuf, t], source=src, tag=tag)))
        got = []
        for r in range(c["rounds"]):
            sbuf[...] = pattern(dtype, n, c["seed"] + r)
            rbuf[...] = 0
            st = MPI.Status()
            MPI.Prequest.Startall([q for _, q in reqs])
            for kind, q in reqs:
                q.Wait(st if kind == "recv" else None)
            if rank == dst:
                got.append([st.Get_source(), st.Get_tag(), st.Get_count(t), digest(rbuf)])
        for _, q in reqs:
            q.Free()
        return {"got": got} if rank == dst else {}

    def case_modes(self, comm: Any, c: dict[str, Any]) -> dict[str, Any]:
        """One message by Bsend (with an attached buffer), Rsend (the receive posted before a
        barrier), Issend or Sendrecv_replace; dst reports [source, tag, count, digest]."""
        MPI, rank, src, dst, dtype = self.MPI, self.rank, c["src"], c["dst"], c["dtype"]
        n, tag, t, mode = c["count"], c["tag"], self.mpi_type(dtype), c["mode"]
        data = pattern(dtype, n, c["seed"])
        buf, st = np.zeros(n, np_dtype(dtype)), MPI.Status()
        if mode == "sendrecv_replace":  # src and dst swap their buffers' contents
            if rank in (src, dst):
                mine = pattern(dtype, n, c["seed"] + (rank == dst))
                other = dst if rank == src else src
                comm.Sendrecv_replace(
                    [mine, t], dest=other, sendtag=tag, source=other, recvtag=tag, status=st
                )
                if rank == dst:
                    return {"got": [st.Get_source(), st.Get_tag(), st.Get_count(t), digest(mine)]}
            return {}
        req = comm.Irecv([buf, t], source=src, tag=tag) if rank == dst else None
        comm.Barrier()  # Rsend: the receive is posted before the send starts
        if rank == src:
            if mode == "bsend":
                attached = bytearray(MPI.BSEND_OVERHEAD + data.nbytes + 64)
                MPI.Attach_buffer(attached)
                comm.Bsend([data, t], dest=dst, tag=tag)
                MPI.Detach_buffer()  # blocks until the buffered message is out
            elif mode == "rsend":
                comm.Rsend([data, t], dest=dst, tag=tag)
            else:
                comm.Issend([data, t], dest=dst, tag=tag).Wait()
        if req is None:
            return {}
        req.Wait(st)
        return {"got": [st.Get_source(), st.Get_tag(), st.Get_count(t), digest(buf)]}

    def case_rma(self, comm: Any, c: dict[str, Any]) -> dict[str, Any]:
        """One-sided communication in fence epochs over a window of `window` elements per rank
        (starting as pattern(dtype, window, seed + 500 + rank)). Epoch 1: each rank r Puts
        pattern(seed + r) (put_len[r] elements) at put_disp[r] of rank put_to[r]. Epoch 2:
        it Gets get_len elements from rank get_to[r] at 0, and Accumulates (op) acc_len
        elements of pattern(seed + 100 + r) at acc_disp of rank acc_to[r]. Reports what it got
        and its window at the end."""
        MPI, rank, dtype = self.MPI, self.rank, c["dtype"]
        t = self.mpi_type(dtype)
        win_buf = pattern(dtype, c["window"], c["seed"] + 500 + rank)
        win = self.win_create(win_buf, comm)
        try:
            win.Fence()
            n_put = c["put_len"][rank]
            win.Put(
                [pattern(dtype, n_put, c["seed"] + rank), t],
                c["put_to"][rank],
                target=[c["put_disp"][rank], n_put, t],
            )
            win.Fence()
            got = np.zeros(c["get_len"], np_dtype(dtype))
            win.Get([got, t], c["get_to"][rank], target=[0, c["get_len"], t])
            n_acc = c["acc_len"]
            win.Accumulate(
                [pattern(dtype, n_acc, c["seed"] + 100 + rank), t],
                c["acc_to"][rank],
                target=[c["acc_disp"], n_acc, t],
                op=getattr(MPI, c["op"]),
            )
            win.Fence()
            return {"got": digest(got), "window": digest(win_buf)}
        finally:
            win.Free()

    def case_accumulate_op(self, comm: Any, c: dict[str, Any]) -> dict[str, Any]:
        """Rank `origin` Accumulates `value` with `op` onto rank `target`'s window, which holds
        `initial` (a fence epoch); the target reports its window after it."""
        MPI, rank, dtype = self.MPI, self.rank, c["dtype"]
        t = self.mpi_type(dtype)
        win_buf = np.array(c["initial"], np_dtype(dtype))
        win = self.win_create(win_buf, comm)
        try:
            win.Fence()
            if rank == c["origin"]:
                value = np.array(c["value"], np_dtype(dtype))
                win.Accumulate(
                    [value, t], c["target"], target=[0, len(value), t], op=getattr(MPI, c["op"])
                )
            win.Fence()
            return {"window": win_buf.tolist()} if rank == c["target"] else {}
        finally:
            win.Free()

    def case_split(self, comm: Any, c: dict[str, Any]) -> dict[str, Any]:
        """Split by colors[rank]/keys[rank] (None = MPI.UNDEFINED); each member reports its
        place and who else is in its communicator (Allgather of world ranks), plus a sum over
        it (traffic stays inside the new communicator). With `members`, the Split is of their
        communicator (conformance_topology.member_comm), colors and keys by rank in it."""
        if c.get("members"):
            with self.member_comm(comm, c) as sub:
                return {} if sub is None else self._split(sub, c, sub.Get_rank())
        return self._split(comm, c, self.rank)

    def _split(self, comm: Any, c: dict[str, Any], rank: int) -> dict[str, Any]:
        MPI = self.MPI
        color = c["colors"][rank]
        new = comm.Split(MPI.UNDEFINED if color is None else color, c["keys"][rank])
        if new == MPI.COMM_NULL:
            return {"null": True}
        try:
            members = np.zeros(new.Get_size(), np.int32)
            new.Allgather(np.array([self.rank], np.int32), members)  # world ranks
            total = np.zeros(1, np.int64)
            new.Allreduce(np.array([self.rank + 1], np.int64), total, op=MPI.SUM)
            return {
                "size": new.Get_size(),
                "rank": new.Get_rank(),
                "members": members.tolist(),
                "sum": int(total[0]),
            }
        finally:
            new.Free()

    def case_dup(self, comm: Any, c: dict[str, Any]) -> dict[str, Any]:
        """src sends one message on `comm` and one on its Dup (same tag, order `send_order`);
        dst receives in `recv_order`, with ANY_SOURCE/ANY_TAG if `wild`: each receive must
        get its own communicator's message."""
        MPI, rank, src, dst, tag, dtype = (
            self.MPI,
            self.rank,
            c["src"],
            c["dst"],
            c["tag"],
            c["dtype"],
        )
        dup = comm.Dup()
        try:
            comms = {"base": comm, "dup": dup}
            seeds = {"base": c["seed"], "dup": c["seed"] + 1}
            reqs = []
            if rank == src:
                reqs = [
                    comms[w].Isend(pattern(dtype, c["count"], seeds[w]), dest=dst, tag=tag)
                    for w in c["send_order"]
                ]
            out: dict[str, Any] = {
                "size": dup.Get_size(),
                "rank": dup.Get_rank(),
                "congruent": MPI.Comm.Compare(comm, dup) == MPI.CONGRUENT,
            }
            if rank == dst:
                got = {}
                for w in c["recv_order"]:
                    buf, st = np.zeros(c["count"], np_dtype(dtype)), MPI.Status()
                    source, rtag = (MPI.ANY_SOURCE, MPI.ANY_TAG) if c["wild"] else (src, tag)
                    comms[w].Recv(buf, source=source, tag=rtag, status=st)
                    got[w] = self._report(buf, st)
                out["got"] = got
            MPI.Request.Waitall(reqs)
            return out
        finally:
            dup.Free()

    def case_error(self, comm: Any, c: dict[str, Any]) -> dict[str, Any]:
        """Every rank makes one erroneous call (invalid rank or tag) under ERRORS_RETURN and
        reports the error class; then a ring exchange shows the communicator still works."""
        MPI, rank, n = self.MPI, self.rank, self.size
        comm.Set_errhandler(MPI.ERRORS_RETURN)
        peer, tag = (rank + 1) % n, 0
        if c["what"] == "rank":
            peer = c["value"]
        else:
            tag = c["value"]
        buf = np.zeros(4, np.int32)
        calls: dict[str, Callable[[], Any]] = {
            "send": lambda: comm.Send(buf, dest=peer, tag=tag),
            "isend": lambda: comm.Isend(buf, dest=peer, tag=tag),
            "recv": lambda: comm.Recv(buf, source=peer, tag=tag),
            "irecv": lambda: comm.Irecv(buf, source=peer, tag=tag),
            "probe": lambda: comm.Probe(source=peer, tag=tag),
            "iprobe": lambda: comm.Iprobe(source=peer, tag=tag),
        }
        out: dict[str, Any] = {"error_class": None}
        try:
            req = calls[c["call"]]()
            if isinstance(req, MPI.Request):  # not an error: do not leave it dangling
                req.Cancel()
                req.Wait()
        except MPI.Exception as e:
            out |= {"error_class": e.Get_error_class(), "message": e.Get_error_string()}
        ring = np.zeros(1, np.int64)
        comm.Sendrecv(
            np.array([rank], np.int64),
            dest=(rank + 1) % n,
            sendtag=1,
            recvbuf=ring,
            source=(rank - 1) % n,
            recvtag=1,
        )
        out["ring_ok"] = int(ring[0]) == (rank - 1) % n
        return out
