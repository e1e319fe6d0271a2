"""The conformance peer's cases for groups, communicator constructors and process topologies
(MPI 4.1 chapters 7 and 8), and the barrier: a mixin of conformance_cases.Cases. Each case runs
on every rank and reports what THIS rank saw; pytest judges it (hpccomm_suites/mpi).

A case's `members` picks the communicator it runs on: absent, the world's duplicate; "self",
MPI_COMM_SELF; a list of world ranks, their communicator from MPI_Comm_split (ranked in the
list's order). Ranks outside it report {}.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from pytest_hpccomm.stacks.mpi.peer.payload import digest, pattern


@contextmanager
def member_comm(MPI: Any, comm: Any, rank: int, c: dict[str, Any]) -> Iterator[Any]:
    """The communicator a case's `members` names (the module's docstring), None on a world
    rank outside it; a Split one is freed after the case."""
    members = c.get("members")
    if members is None:
        yield comm
        return
    if members == "self":
        yield MPI.COMM_SELF
        return
    inside = rank in members
    sub = comm.Split(0 if inside else MPI.UNDEFINED, members.index(rank) if inside else 0)
    try:
        yield sub if inside else None
    finally:
        if sub != MPI.COMM_NULL:
            sub.Free()


class TopologyCases:
    """Cases on groups, MPI_Comm_create(_group), intercommunicators, Cartesian and distributed
    graph topologies, MPI_Barrier and MPI_Comm_dup on a communicator of the case's size."""

    MPI: Any
    rank: int
    size: int

    def member_comm(self, comm: Any, c: dict[str, Any]) -> Any:
        """The case's communicator (module docstring): a context giving None off it."""
        return member_comm(self.MPI, comm, self.rank, c)

    def _world_ranks(self, comm: Any) -> list[int]:
        """The world ranks of `comm`'s members, by their rank in it (an Allgather on it)."""
        out = np.zeros(comm.Get_size(), np.int32)
        comm.Allgather(np.array([self.rank], np.int32), out)
        return [int(x) for x in out]

    # -- barrier and dup ---------------------------------------------------------------------
    def case_barrier(self, comm: Any, c: dict[str, Any]) -> dict[str, Any]:
        """Rank `late` of the communicator sleeps `delay` s before MPI_Barrier; every member
        reports when it entered and left (time.time(): one kernel's clock on loopback and on
        the virtual hosts). No one may leave before the last has entered."""
        with self.member_comm(comm, c) as sub:
            if sub is None:
                return {}
            sub.Barrier()  # line up, so the late rank's delay is what the check measures
            if sub.Get_rank() == c["late"]:
                time.sleep(c["delay"])
            enter = time.time()
            if c.get("nonblocking"):
                sub.Ibarrier().Wait()
            else:
                sub.Barrier()
            return {"enter": enter, "exit": time.time(), "size": sub.Get_size()}

    def case_dup_sized(self, comm: Any, c: dict[str, Any]) -> dict[str, Any]:
        """MPI_Comm_dup (or MPI_Comm_idup if `idup`) of the case's communicator: each member
        sends pattern(seed + rank) on the original and pattern(seed + 1000 + rank) on the
        duplicate to rank + 1 (mod size; itself on one process), same tag, then receives on
        the duplicate first, with wildcards: each receive must get its own communicator's."""
        MPI = self.MPI
        with self.member_comm(comm, c) as base:
            if base is None:
                return {}
            if c.get("idup"):
                dup, req = base.Idup()
                req.Wait()
            else:
                dup = base.Dup()
            try:
                r, m, tag, n = base.Get_rank(), base.Get_size(), c["tag"], c["count"]
                to = (r + 1) % m
                reqs = [
                    base.Isend(pattern("int32", n, c["seed"] + r), dest=to, tag=tag),
                    dup.Isend(pattern("int32", n, c["seed"] + 1000 + r), dest=to, tag=tag),
                ]
                got = {}
                for name, cm in (("dup", dup), ("base", base)):
                    buf, st = np.zeros(n, np.int32), MPI.Status()
                    cm.Recv(buf, source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, status=st)
                    got[name] = [st.Get_source(), st.Get_tag(), st.Get_count(MPI.INT32_T)]
                    got[name].append(digest(buf))
                MPI.Request.Waitall(reqs)
                return {
                    "size": dup.Get_size(),
                    "rank": dup.Get_rank(),
                    "congruent": MPI.Comm.Compare(base, dup) == MPI.CONGRUENT,
                    "got": got,
                }
            finally:
                dup.Free()

    # -- groups and communicator constructors ------------------------------------------------
    def _group_ranks(self, g: Any, parent: Any) -> list[int | None]:
        """`g`'s members as ranks of `parent`, in g's order (None: not in parent)."""
        MPI = self.MPI
        out = g.Translate_ranks(list(range(g.Get_size())), parent)
        return [None if x == MPI.UNDEFINED else x for x in out]

    def case_groups(self, comm: Any, c: dict[str, Any]) -> dict[str, Any]:
        """On the group G of the case's communicator: A = Incl(a), B = Incl(b) or Excl(b);
        reports Union, Intersection, Difference (as ranks of G, in order), this rank's place in
        each (None: MPI_UNDEFINED), Translate_ranks(A -> G) and Compare of A with Incl(perm)
        and of G with its communicator's Comm_group."""
        MPI = self.MPI
        names = {MPI.IDENT: "ident", MPI.SIMILAR: "similar", MPI.UNEQUAL: "unequal"}
        with self.member_comm(comm, c) as sub:
            if sub is None:
                return {}
            g = sub.Get_group()
            a = g.Incl(c["a"])
            b = g.Excl(c["b"]) if c["b_excl"] else g.Incl(c["b"])
            made = {
                "a": a,
                "b": b,
                "union": MPI.Group.Union(a, b),
                "intersection": MPI.Group.Intersection(a, b),
                "difference": MPI.Group.Difference(a, b),
            }
            perm = g.Incl(c["perm"])
            again = sub.Get_group()
            try:
                out: dict[str, Any] = {
                    k: {
                        "ranks": self._group_ranks(x, g),
                        "size": x.Get_size(),
                        "me": None if x.Get_rank() == MPI.UNDEFINED else x.Get_rank(),
                    }
                    for k, x in made.items()
                }
                back = a.Translate_ranks(c["translate"], g)
                out["translate"] = [None if x == MPI.UNDEFINED else x for x in back]
                out["compare_perm"] = names.get(MPI.Group.Compare(a, perm), "other")
                out["compare_self"] = names.get(MPI.Group.Compare(g, again), "other")
                out["size"] = g.Get_size()
                return out
            finally:
                for x in (*made.values(), perm, again, g):
                    if x != MPI.GROUP_EMPTY:
                        x.Free()

    def case_comm_create(self, comm: Any, c: dict[str, Any]) -> dict[str, Any]:
        """MPI_Comm_create (every rank of the case's communicator calls it) or
        MPI_Comm_create_group (only the group's members call it) over Incl(group): members
        report their size, rank, the world ranks by new rank and a sum over it; others
        {"null": True} (Comm_create returns MPI_COMM_NULL to them)."""
        MPI = self.MPI
        with self.member_comm(comm, c) as sub:
            if sub is None:
                return {}
            g = sub.Get_group()
            grp = g.Incl(c["group"])
            try:
                if c["how"] == "create":
                    new = sub.Create(grp)
                elif sub.Get_rank() in c["group"]:
                    new = sub.Create_group(grp, tag=c["tag"])
                else:
                    new = MPI.COMM_NULL
                if new == MPI.COMM_NULL:
                    return {"null": True}
                try:
                    total = np.zeros(1, np.int64)
                    new.Allreduce(np.array([self.rank + 1], np.int64), total, op=MPI.SUM)
                    return {
                        "size": new.Get_size(),
                        "rank": new.Get_rank(),
                        "members": self._world_ranks(new),
                        "sum": int(total[0]),
                    }
                finally:
                    new.Free()
            finally:
                if grp != MPI.GROUP_EMPTY:
                    grp.Free()
                g.Free()

    def case_intercomm(self, comm: Any, c: dict[str, Any]) -> dict[str, Any]:
        """World ranks in `low` form group A, the rest group B (each by world order);
        MPI_Intercomm_create joins them (leaders: each group's rank 0, over the world's
        duplicate). Every rank sends pattern(seed + 100 * world rank + j) to each remote rank j
        and receives from each; an Allgather over the intercommunicator gives each rank the
        remote group's world ranks. Then MPI_Intercomm_merge with high = high_a on A and not
        high_a on B."""
        MPI, low = self.MPI, c["low"]
        in_a = self.rank in low
        other = [r for r in range(self.size) if (r in low) != in_a]
        local = comm.Split(0 if in_a else 1, self.rank)
        try:
            inter = local.Create_intercomm(0, comm, other[0], tag=c["tag"])
        finally:
            local.Free()
        try:
            rsize = inter.Get_remote_size()
            out: dict[str, Any] = {
                "inter": bool(inter.Is_inter()),
                "size": inter.Get_size(),
                "rank": inter.Get_rank(),
                "remote_size": rsize,
            }
            n = c["count"]
            reqs = [
                inter.Isend(pattern("int32", n, c["seed"] + 100 * self.rank + j), dest=j, tag=3)
                for j in range(rsize)
            ]
            got = []
            for j in range(rsize):
                buf, st = np.zeros(n, np.int32), MPI.Status()
                inter.Recv(buf, source=j, tag=3, status=st)
                got.append([st.Get_source(), st.Get_count(MPI.INT32_T), digest(buf)])
            MPI.Request.Waitall(reqs)
            out["got"] = got
            remote = np.zeros(rsize, np.int32)
            inter.Allgather(np.array([self.rank], np.int32), remote)
            out["remote"] = remote.tolist()
            merged = inter.Merge(high=c["high_a"] if in_a else not c["high_a"])
            try:
                out["merged"] = {
                    "size": merged.Get_size(),
                    "rank": merged.Get_rank(),
                    "members": self._world_ranks(merged),
                }
            finally:
                merged.Free()
            return out
        finally:
            inter.Free()

    # -- topologies --------------------------------------------------------------------------
    def case_dims(self, comm: Any, c: dict[str, Any]) -> dict[str, Any]:
        """MPI_Dims_create(nnodes, dims) for each [nnodes, dims] of `calls` (local: rank 0
        reports)."""
        if self.rank != 0:
            return {}
        return {"dims": [self.MPI.Compute_dims(n, d) for n, d in c["calls"]]}

    def case_cart(self, comm: Any, c: dict[str, Any]) -> dict[str, Any]:
        """MPI_Cart_create(dims, periods, reorder=false) on the case's communicator; members of
        the grid report their coordinates, MPI_Cart_rank of every coordinate, MPI_Cart_get,
        each shift's (source, dest) from MPI_Cart_shift and what an MPI_Sendrecv along it got
        (its buffer stays -1 when the source is MPI_PROC_NULL), and MPI_Cart_sub(remain)'s
        size, rank and members (world ranks). Ranks past the grid report {"null": True}."""
        MPI = self.MPI
        with self.member_comm(comm, c) as sub:
            if sub is None:
                return {}
            cart = sub.Create_cart(c["dims"], periods=c["periods"], reorder=False)
            if cart == MPI.COMM_NULL:
                return {"null": True}
            try:
                me = cart.Get_rank()
                dims, periods, coords = cart.Get_topo()
                out: dict[str, Any] = {
                    "rank": me,
                    "topo": cart.Get_topology() == MPI.CART,
                    "ndims": cart.Get_dim(),
                    "get": [list(dims), [bool(p) for p in periods], list(coords)],
                    "coords": cart.Get_coords(me),
                    "cart_rank": [cart.Get_cart_rank(list(x)) for x in np.ndindex(*c["dims"])],
                }
                shifts = []
                for direction, disp in c["shifts"]:
                    source, dest = cart.Shift(direction, disp)
                    buf, st = np.full(1, -1, np.int32), MPI.Status()
                    cart.Sendrecv(
                        np.array([me], np.int32),
                        dest=dest,
                        sendtag=direction,
                        recvbuf=buf,
                        source=source,
                        recvtag=direction,
                        status=st,
                    )
                    shifts.append([source, dest, int(buf[0]), st.Get_source()])
                out["shifts"] = shifts
                out["proc_null"] = int(MPI.PROC_NULL)
                part = cart.Sub(c["remain"])
                try:
                    out["sub"] = {
                        "size": part.Get_size(),
                        "rank": part.Get_rank(),
                        "members": self._world_ranks(part),
                    }
                finally:
                    part.Free()
                return out
            finally:
                cart.Free()

    def case_graph(self, comm: Any, c: dict[str, Any]) -> dict[str, Any]:
        """MPI_Dist_graph_create_adjacent(sources[r], destinations[r]) on the case's
        communicator; each member reports MPI_Dist_graph_neighbors(_count), then
        MPI_Neighbor_allgather of pattern(seed + r) (count elements) and MPI_Neighbor_alltoall
        of pattern(seed + 100 + r) (count elements per destination) as digests of the receive
        buffers (one block per source, in sources' order)."""
        MPI = self.MPI
        with self.member_comm(comm, c) as sub:
            if sub is None:
                return {}
            r, n = sub.Get_rank(), c["count"]
            srcs, dsts = c["sources"][r], c["destinations"][r]
            graph = sub.Create_dist_graph_adjacent(srcs, dsts, reorder=False)
            try:
                got_srcs, got_dsts, _ = graph.Get_dist_neighbors()
                out: dict[str, Any] = {
                    "topo": graph.Get_topology() == MPI.DIST_GRAPH,
                    "count": list(graph.Get_dist_neighbors_count()[:2]),
                    "neighbors": [list(got_srcs), list(got_dsts)],
                }
                i32 = MPI.INT32_T
                mine = pattern("int32", n, c["seed"] + r)
                recv = np.full(n * len(srcs), -1, np.int32)
                # counts given, not inferred from the buffers (mpi4py infers 0 for a rank
                # without sources); `zero_recvcount`: such a rank passes 0 (it receives
                # nothing, so any count matches no sender's signature)
                rcount = 0 if c.get("zero_recvcount") and not srcs else n
                graph.Neighbor_allgather([mine, n, i32], [recv, rcount, i32])
                out["allgather"] = [digest(recv[i * n : (i + 1) * n]) for i in range(len(srcs))]
                blocks = pattern("int32", n * len(dsts), c["seed"] + 100 + r)
                recv = np.full(n * len(srcs), -1, np.int32)
                graph.Neighbor_alltoall([blocks, n, i32], [recv, n, i32])
                out["alltoall"] = [digest(recv[i * n : (i + 1) * n]) for i in range(len(srcs))]
                return out
            finally:
                graph.Free()
