"""The MPI standard as the conformance suites cover it: function families x argument classes.

Rows follow the standard's chapters (MPI 4.1: point-to-point 3, datatypes 5, collectives 6,
groups/communicators 7, topologies 8, errors 9, one-sided 12); columns are the arguments whose
special values and shapes implementations get wrong. A cell that the standard does not define
is not applicable, with the rule that says so; every other cell is covered by a test's
`covers("mpi", ...)` marker, out of scope with a reason, or a gap (docs/reference/coverage.md).
"""

from __future__ import annotations

from pytest_hpccomm.coverage import Taxonomy

P2P = {
    "send_modes": "MPI_Send, MPI_Ssend, MPI_Bsend, MPI_Rsend with MPI_Recv",
    "nonblocking": "MPI_Isend, MPI_Issend, MPI_Irecv",
    "sendrecv": "MPI_Sendrecv, MPI_Sendrecv_replace",
    "probe": "MPI_Probe, MPI_Iprobe",
    "mprobe": "MPI_Mprobe, MPI_Improbe, MPI_Mrecv, MPI_Imrecv",
    "persistent": "MPI_Send_init, MPI_Recv_init, MPI_Start, MPI_Startall",
    "partitioned": "MPI_Psend_init, MPI_Precv_init, MPI_Pready, MPI_Parrived (MPI 4.0)",
}
COMPLETION = {
    "wait_test": "MPI_Wait, MPI_Test",
    "all": "MPI_Waitall, MPI_Testall",
    "any": "MPI_Waitany, MPI_Testany",
    "some": "MPI_Waitsome, MPI_Testsome",
}
ROOTED = ("bcast", "gather", "gatherv", "scatter", "scatterv", "reduce")
V_VARIANTS = ("gatherv", "scatterv", "allgatherv", "alltoallv", "alltoallw")
COLLECTIVES = {
    "barrier": "MPI_Barrier",
    "bcast": "MPI_Bcast",
    "gather": "MPI_Gather",
    "gatherv": "MPI_Gatherv",
    "scatter": "MPI_Scatter",
    "scatterv": "MPI_Scatterv",
    "allgather": "MPI_Allgather",
    "allgatherv": "MPI_Allgatherv",
    "alltoall": "MPI_Alltoall",
    "alltoallv": "MPI_Alltoallv",
    "alltoallw": "MPI_Alltoallw",
    "reduce": "MPI_Reduce",
    "allreduce": "MPI_Allreduce",
    "reduce_scatter": "MPI_Reduce_scatter",
    "reduce_scatter_block": "MPI_Reduce_scatter_block",
    "scan": "MPI_Scan",
    "exscan": "MPI_Exscan",
    "nonblocking_collectives": "MPI_Ibarrier, MPI_Ibcast, MPI_Iallreduce, ... (the I-variants)",
    "persistent_collectives": "MPI_Bcast_init, MPI_Allreduce_init, ... (MPI 4.0)",
}
OPS = {
    "predefined_ops": "MPI_SUM ... MPI_MINLOC over the datatypes each applies to",
    "user_ops": "MPI_Op_create (commutative and not)",
}
DATATYPES = {
    "contiguous": "MPI_Type_contiguous",
    "vector": "MPI_Type_vector, MPI_Type_create_hvector",
    "indexed": "MPI_Type_indexed, MPI_Type_create_hindexed, MPI_Type_create_indexed_block",
    "struct": "MPI_Type_create_struct",
    "resized": "MPI_Type_create_resized, MPI_Type_get_extent",
    "subarray": "MPI_Type_create_subarray",
    "darray": "MPI_Type_create_darray",
}
COMMUNICATORS = {
    "comm_dup": "MPI_Comm_dup, MPI_Comm_idup, MPI_Comm_compare",
    "comm_split": "MPI_Comm_split, MPI_Comm_split_type",
    "comm_create": "MPI_Comm_create, MPI_Comm_create_group",
    "groups": "MPI_Comm_group, MPI_Group_incl/excl/union/intersection, MPI_Group_translate_ranks",
    "intercommunicators": "MPI_Intercomm_create, MPI_Intercomm_merge",
    "cartesian": "MPI_Cart_create, MPI_Cart_shift, MPI_Cart_sub, MPI_Dims_create",
    "graphs": "MPI_Dist_graph_create_adjacent, MPI_Neighbor_allgather/alltoall",
}
ERRORS = {
    "error_handlers": "MPI_ERRORS_RETURN, MPI_Comm_set_errhandler, user error handlers",
    "error_classes": "MPI_ERR_RANK, MPI_ERR_TAG, MPI_ERR_COUNT, ... and MPI_Error_class",
    "fault_tolerance": "ULFM: MPIX_ERR_PROC_FAILED, MPIX_Comm_revoke/shrink/agree",
}
RMA = {
    "rma_fence": "MPI_Win_create/allocate, MPI_Put, MPI_Get, MPI_Accumulate, MPI_Win_fence",
    "rma_lock": "MPI_Win_lock/unlock(_all), MPI_Win_flush, MPI_Get_accumulate, "
    "MPI_Fetch_and_op, MPI_Compare_and_swap",
    "rma_pscw": "MPI_Win_post/start/complete/wait",
}
FAMILIES = P2P | COMPLETION | COLLECTIVES | OPS | DATATYPES | COMMUNICATORS | ERRORS | RMA

CLASSES = {
    "plain": "ordinary arguments",
    "proc_null": "MPI_PROC_NULL as the peer: the call completes at once, Status source "
    "MPI_PROC_NULL, tag MPI_ANY_TAG, count 0",
    "any_source": "MPI_ANY_SOURCE",
    "any_tag": "MPI_ANY_TAG",
    "in_place": "MPI_IN_PLACE",
    "zero_count": "count 0 (or every count 0)",
    "size_1": "a communicator of one process",
    "odd_size": "a communicator of an odd number (> 1) of processes",
    "nonzero_root": "a root other than rank 0",
    "displacements": "non-trivial displacements (gaps, reordering) and counts per rank",
    "derived_type": "a derived datatype as the buffer's type",
    "protocol_sizes": "message sizes on both sides of the eager/rendezvous switches",
    "status_ignore": "MPI_STATUS_IGNORE / MPI_STATUSES_IGNORE",
}

RECEIVING = ("send_modes", "nonblocking", "sendrecv", "probe", "mprobe", "persistent")
# partitioned receives take a source but no wildcard (MPI 4.1, 4.2.2): in P2P, not RECEIVING
IN_PLACE = (
    "gather",
    "gatherv",
    "scatter",
    "scatterv",
    "allgather",
    "allgatherv",
    "alltoall",
    "alltoallv",
    "alltoallw",
    "reduce",
    "allreduce",
    "reduce_scatter",
    "reduce_scatter_block",
    "scan",
    "exscan",
    "nonblocking_collectives",
    "persistent_collectives",
)
MOVES_DATA = (
    tuple(P2P) + tuple(c for c in COLLECTIVES if c != "barrier") + ("rma_fence", "rma_lock")
)
GROUPS_OF_PROCESSES = tuple(COLLECTIVES) + tuple(COMMUNICATORS) + tuple(OPS) + tuple(RMA)


def not_applicable(family: str, cls: str) -> str | None:
    """The standard's reason why `cls` is meaningless for `family`, or None."""
    if cls == "plain":
        return None
    if cls == "proc_null":
        if family in P2P or family in COMPLETION or family in ("rma_fence", "rma_lock"):
            return None
        if family == "cartesian":
            return None  # MPI_Cart_shift returns MPI_PROC_NULL off a non-periodic edge
        return "MPI_PROC_NULL is a peer rank: point-to-point and one-sided targets only"
    if cls in ("any_source", "any_tag"):
        if family in RECEIVING:
            return None
        if family == "partitioned":
            return "partitioned receives name their source and tag (no wildcards)"
        return "wildcards match receives and probes only"
    if cls == "in_place":
        if family in IN_PLACE:
            return None
        return "MPI_IN_PLACE is defined for the collectives that take a send and a receive buffer"
    if cls == "zero_count":
        if family in MOVES_DATA or family in COMPLETION or family in OPS:
            return None
        if family in DATATYPES:
            return None  # a type of count 0, or 0 elements of it
        return "no count argument"
    if cls in ("size_1", "odd_size"):
        if family in GROUPS_OF_PROCESSES or family in P2P:
            return None
        return "the call does not depend on the communicator's size"
    if cls == "nonzero_root":
        if family in ROOTED or family in ("nonblocking_collectives", "persistent_collectives"):
            return None
        return "no root argument"
    if cls == "displacements":
        if family in V_VARIANTS or family in (
            "indexed",
            "struct",
            "resized",
            "darray",
            "rma_fence",
            "rma_lock",
        ):
            return None
        return "no displacement argument"
    if cls == "derived_type":
        if family == "predefined_ops":
            # MPI 4.1, 6.9.1: "Predefined operators work only with the MPI types listed in
            # Section 6.9.2 and Section 6.9.4" (basic types; user-defined ops may take
            # derived ones). One-sided accumulate is the exception: rma_* rows.
            return "predefined reduction ops take the basic datatypes of 6.9.2/6.9.4 only"
        if family in MOVES_DATA or family in OPS:
            return None
        return "no buffer, or the family is itself a datatype constructor"
    if cls == "protocol_sizes":
        if family in MOVES_DATA:
            return None
        return "moves no payload"
    if cls == "status_ignore":
        if family in RECEIVING or family in COMPLETION or family == "partitioned":
            return None
        return "returns no status"
    return None


TAXONOMY = Taxonomy(
    stack="mpi",
    title="MPI: the standard's families x argument classes",
    families=FAMILIES,
    classes=CLASSES,
    not_applicable=not_applicable,
    out_of_scope={},
    modules=(
        "hpccomm_suites.mpi.test_conformance_p2p",
        "hpccomm_suites.mpi.test_conformance_ring",
        "hpccomm_suites.mpi.test_conformance_collectives",
        "hpccomm_suites.mpi.test_conformance_alltoallw",
        "hpccomm_suites.mpi.test_conformance_reduce",
        "hpccomm_suites.mpi.test_conformance_datatypes",
        "hpccomm_suites.mpi.test_conformance_comm",
        "hpccomm_suites.mpi.test_conformance_topology",
        "hpccomm_suites.mpi.test_conformance_rma",
        "hpccomm_suites.mpi.test_conformance_rma_sync",
        "hpccomm_suites.mpi.test_conformance_ulfm",
    ),
)
