"""The MPI suites' known-defect keys take exactly the symptom observed, nothing near it."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np

from hpccomm_suites.mpi.test_conformance_p2p import (
    GENQ_ABORT,
    mpich_genq_abort,
    mpich_irecv_proc_null,
    mpich_persistent_proc_null,
)
from pytest_hpccomm.stacks.mpi.conformance import PeerInfo
from pytest_hpccomm.stacks.mpi.peer.payload import PIECE

MPICH = "MPICH Version:      5.0.2\nMPICH Release date: Fri Sep 25 20:45:26 UTC 2026"
CONSTANTS = {"PROC_NULL": -1, "ANY_SOURCE": -2, "ANY_TAG": -1}
WANT = [-1, -1, 0, "abc"]


def peer(library: str = MPICH) -> Any:
    """What a key reads of the peer: its hello (the real record, so its release name too)."""
    info = PeerInfo(3, ["h0"], library, "4.1.1", CONSTANTS, None)
    return SimpleNamespace(info=info)


def test_the_observed_mpich_symptom_is_keyed() -> None:
    """The run's values (MPICH 5.0.2, 2 and 3 ranks): Recv_init's status source -2."""
    why = mpich_persistent_proc_null(peer(), {"recv_init": [-2, -1, 0, "abc"]}, WANT)
    assert why is not None and "MPICH 5.0.2 defect" in why and "source -2" in why


def test_anything_else_stays_a_failure() -> None:
    cases: list[tuple[Any, dict[str, list[Any]]]] = [
        (peer("Open MPI v5.0.11"), {"recv_init": [-2, -1, 0, "abc"]}),  # not MPICH
        (peer(), {"recv_init": [-2, -1, 0, "xyz"]}),  # its buffer written too
        (peer(), {"recv_init": [-2, 0, 0, "abc"]}),  # a wrong tag too
        (peer(), {"recv_init": [3, -1, 0, "abc"]}),  # another wrong source
        (peer(), {"recv_init": [-2, -1, 0, "abc"], "irecv": [-2, -1, 0, "abc"]}),  # not alone
        (peer(), {"irecv": [-2, -1, 0, "abc"]}),  # another call
    ]
    for p, bad in cases:
        assert mpich_persistent_proc_null(p, bad, WANT) is None, bad


OPEN_MPI = "Open MPI v5.0.11, package: Open MPI user@localhost Distribution, ident: 5.0.11"


def test_the_observed_open_mpi_accumulate_symptoms_are_keyed() -> None:
    """The run's values: BOR from the other process left [1000, 0, 7, -3]; BXOR zeroed it."""
    from hpccomm_suites.mpi.test_conformance_rma import INITIAL, open_mpi_remote_accumulate

    p = peer(OPEN_MPI)
    why = open_mpi_remote_accumulate(p, "BOR", "remote", list(INITIAL))
    assert why is not None and why.startswith("Open MPI v5.0.11 defect") and "unchanged" in why
    zeroed = open_mpi_remote_accumulate(p, "BXOR", "remote", [0, 0, 0, 0])
    assert zeroed is not None and "zeroed" in zeroed


def test_other_accumulate_failures_stay_failures() -> None:
    from hpccomm_suites.mpi.test_conformance_rma import INITIAL, open_mpi_remote_accumulate

    p = peer(OPEN_MPI)
    assert open_mpi_remote_accumulate(peer(), "BOR", "remote", list(INITIAL)) is None  # MPICH
    assert open_mpi_remote_accumulate(p, "BOR", "local", list(INITIAL)) is None  # own process
    assert open_mpi_remote_accumulate(p, "SUM", "remote", list(INITIAL)) is None  # arithmetic
    assert open_mpi_remote_accumulate(p, "BOR", "remote", [1000, 0, 7, 1]) is None  # other value


def test_the_irecv_status_key_takes_an_unset_status_only() -> None:
    """MPICH 4.0.3's run: Irecv from MPI_PROC_NULL reported source 0, tag 0, count 0."""
    p = peer("MPICH Version:\t4.0.3\nMPICH Release date: x")
    why = mpich_irecv_proc_null(p, {"irecv": [0, 0, 0, "abc"]}, WANT)
    assert why is not None and why.startswith("MPICH 4.0.3 defect") and "#6805" in why
    assert mpich_irecv_proc_null(p, {"irecv": [0, 0, 0, "xyz"]}, WANT) is None  # buffer written
    assert mpich_irecv_proc_null(p, {"irecv": [0, 0, 4, "abc"]}, WANT) is None  # a count
    assert mpich_irecv_proc_null(peer(OPEN_MPI), {"irecv": [0, 0, 0, "abc"]}, WANT) is None


def test_the_genq_abort_key_takes_that_assertion_only() -> None:
    line = 'Assertion failed in file mpidu_genq_shmem_queue.h at line 260: 0 && "Invalid GenQ flag"'
    why = mpich_genq_abort(peer(), f"noise\n{line}\nAbort(1) on node 2")
    assert why is not None and GENQ_ABORT in why and why.startswith("MPICH 5.0.2 defect")
    assert mpich_genq_abort(peer(), "Abort(1) on node 2: Internal error") is None
    assert mpich_genq_abort(peer(OPEN_MPI), line) is None


def test_the_open_mpi_41_window_key_needs_every_rank_and_that_error() -> None:
    from hpccomm_suites.mpi.test_conformance_rma import open_mpi_41_window

    v4 = peer("Open MPI v4.1.8, package: Open MPI")
    failed = {"call": "MPI_Win_create", "error_string": "MPI_ERR_WIN: invalid window"}
    assert open_mpi_41_window(v4, [failed, failed]) is not None
    assert open_mpi_41_window(v4, [failed, {"got": 1}]) is None  # one rank made it
    assert open_mpi_41_window(peer(OPEN_MPI), [failed, failed]) is None  # 5.0
    other = failed | {"error_string": "MPI_ERR_OTHER"}
    assert open_mpi_41_window(v4, [other, other]) is None


def test_the_unsigned_compare_key_takes_the_signed_result_only() -> None:
    from hpccomm_suites.mpi.test_conformance_reduce import as_signed, reference, signed_compare

    case = {"op": "MIN", "dtype": "uint8", "inputs": [[0], [0], [128]]}
    signed = as_signed(case)
    assert signed is not None and signed["inputs"] == [[0], [0], [-128]]
    alt = reference("MIN", "int8", [np.array(x, np.int8) for x in signed["inputs"]])
    want = np.array([0], np.uint8)
    why = signed_compare(peer(), case, np.array([128], np.uint8), want, alt)
    assert why is not None and "compared the values as signed: 128" in why
    assert signed_compare(peer(), case, np.array([7], np.uint8), want, alt) is None
    assert as_signed({**case, "op": "SUM"}) is None and as_signed({**case, "dtype": "int8"}) is None


def test_the_neighbor_allgather_key_takes_that_hang_only() -> None:
    from hpccomm_suites.mpi.test_conformance_topology import (
        NEIGHBOR_ALLGATHER,
        open_mpi_neighbor_allgather_zero_recvcount,
    )

    hung = (
        "openmpi loopback: peer lost during case {...}: no reply within 3s\n"
        "  rank 1: case_graph (conformance_topology.py:334) < run (conformance.py:85)\n"
        "  rank 1 native: __GI_sched_yield < opal_progress < ompi_request_default_wait_all < "
        f"mca_coll_basic_neighbor_allgather < {NEIGHBOR_ALLGATHER}\n"
    )
    why = open_mpi_neighbor_allgather_zero_recvcount(peer(OPEN_MPI), hung)
    assert why is not None and why.startswith("Open MPI v5.0.11 defect")
    assert open_mpi_neighbor_allgather_zero_recvcount(peer(), hung) is None  # MPICH
    elsewhere = hung.replace(NEIGHBOR_ALLGATHER, "PMPI_Neighbor_alltoall")
    assert open_mpi_neighbor_allgather_zero_recvcount(peer(OPEN_MPI), elsewhere) is None
    python_only = "\n".join(ln for ln in hung.splitlines() if "native:" not in ln)
    assert open_mpi_neighbor_allgather_zero_recvcount(peer(OPEN_MPI), python_only) is None


def test_the_persistent_scatter_key_takes_that_hang_only() -> None:
    """The hang MPICH 4.1.3 showed (the run's case and stacks): rank 1 in PMPI_Wait."""
    from hpccomm_suites.mpi.test_conformance_collectives import mpich_persistent_scatter_lost

    case = {"op": "scatter", "root": 2, "inplace": True, "persistent": True}
    hung = (
        "mpich==4.1.3 loopback: peer lost during case {...}: no reply within 30s\n"
        "  rank 0 native: epoll_wait < PMPI_Gather_c < __pyx_pw_6mpi4py_3MPI_4Comm_123Gather\n"
        "  rank 1 native: epoll_wait < PMPI_Wait < __pyx_pw_6mpi4py_3MPI_7Request_15Wait\n"
    )
    why = mpich_persistent_scatter_lost(peer(), case, hung)
    assert why is not None and why.startswith("MPICH 5.0.2 defect") and "root 2" in why
    for seen in ({"root": 0}, {"inplace": False}):  # every root, in place or not
        assert mpich_persistent_scatter_lost(peer(), case | seen, hung) is not None, seen
    for other in ({"persistent": False}, {"op": "gather"}, {"op": "scatterv"}):
        assert mpich_persistent_scatter_lost(peer(), case | other, hung) is None, other
    assert mpich_persistent_scatter_lost(peer(OPEN_MPI), case, hung) is None
    no_wait = hung.replace("PMPI_Wait", "PMPI_Barrier")
    assert mpich_persistent_scatter_lost(peer(), case, no_wait) is None


def test_the_persistent_scatter_key_takes_mpich_431s_abort() -> None:
    """MPICH 4.3.1, three processes: the root asserted in ofi_send.h and the job aborted."""
    from hpccomm_suites.mpi.test_conformance_collectives import mpich_persistent_scatter_lost

    case = {"op": "scatter", "root": 2, "inplace": True, "persistent": True}
    lost = "mpich==4.3.1 loopback: peer lost during case {...}: peer ? closed the channel"
    output = (
        "Assertion failed in file /mpich-4.3.1/src/mpid/ch4/netmod/ofi/ofi_send.h at line 765: "
        "errflag == 0\nAbort(1) on node 2: Internal error\n"
    )
    why = mpich_persistent_scatter_lost(peer(), case, lost, output)
    assert why is not None and "asserted" in why
    assert mpich_persistent_scatter_lost(peer(), case, lost, "Abort(1) on node 2") is None
    assert mpich_persistent_scatter_lost(peer(), case | {"op": "scatterv"}, lost, output) is None


def test_the_scatter_restart_key_needs_the_untouched_buffer() -> None:
    """MPICH 4.1.3, two processes: rank 0's buffer after the second start was its reset
    pattern (the run's case)."""
    from hpccomm_suites.mpi.test_conformance_collectives import (
        mpich_scatter_restart_delivers_nothing,
    )
    from pytest_hpccomm.stacks.mpi.peer.payload import digest, pattern

    case = {
        "op": "scatter", "dtype": "int32", "root": 1, "inplace": True, "persistent": True,
        "seed": 2, "count": 5, "send_extent": [10, 10], "recv_extent": [7, 7],
    }  # fmt: skip
    untouched = digest(pattern("int32", 7, 2 + 500))
    why = mpich_scatter_restart_delivers_nothing(peer(), case, 0, {"recv": untouched})
    assert why is not None and "never arrived" in why
    other = digest(pattern("int32", 7, 9))
    assert mpich_scatter_restart_delivers_nothing(peer(), case, 0, {"recv": other}) is None
    assert mpich_scatter_restart_delivers_nothing(peer(), case, 1, {"recv": untouched}) is None
    assert (
        mpich_scatter_restart_delivers_nothing(peer(OPEN_MPI), case, 0, {"recv": untouched}) is None
    )
    plain = case | {"inplace": False}  # MPICH 4.1.3's root 1 without MPI_IN_PLACE: the same
    assert mpich_scatter_restart_delivers_nothing(peer(), plain, 0, {"recv": untouched}) is not None
    v = case | {"op": "scatterv"}
    assert mpich_scatter_restart_delivers_nothing(peer(), v, 0, {"recv": untouched}) is None


def test_the_partitioned_proc_null_key_needs_every_rank_without_a_partition() -> None:
    """MPICH 4.1.3-4.3.2 (the release run): every rank's MPI_Parrived saw none of 3."""
    from hpccomm_suites.mpi.test_conformance_ring import partitioned_proc_null_never_arrives
    from pytest_hpccomm.stacks.mpi.conformance import CaseRaised

    never = {"error": "TimeoutError: MPI_Parrived: [] of 3 partitions"}
    raised = CaseRaised("case raised", [never, never, never])
    why = partitioned_proc_null_never_arrives(peer(), raised)
    assert why is not None and "never completed" in why
    some = {"error": "TimeoutError: MPI_Parrived: [0] of 3 partitions"}
    assert partitioned_proc_null_never_arrives(peer(), CaseRaised("", [never, some])) is None
    other = {"error": "MPI error class 5: Invalid communicator"}
    assert partitioned_proc_null_never_arrives(peer(), CaseRaised("", [never, other])) is None
    assert partitioned_proc_null_never_arrives(peer(OPEN_MPI), raised) is None


def test_the_cart_sub_key_needs_every_failure_to_be_the_null_free() -> None:
    from hpccomm_suites.mpi.test_conformance_topology import mpich_cart_sub_null
    from pytest_hpccomm.stacks.mpi.conformance import CaseRaised

    null = "MPI error class 5: Invalid communicator, PMPI_Comm_free(83).: Null communicator"
    case = {"remain": [False]}
    raised = CaseRaised("case raised", [{"cart": 1}, {"error": null}, {"error": null}])
    why = mpich_cart_sub_null(peer(), case, raised)
    assert why is not None and "ranks [1, 2]" in why
    assert mpich_cart_sub_null(peer(), {"remain": [False, True]}, raised) is None
    assert mpich_cart_sub_null(peer(OPEN_MPI), case, raised) is None
    mixed = CaseRaised("case raised", [{"cart": 1}, {"error": null}, {"error": "MPI_ERR_TOPOLOGY"}])
    assert mpich_cart_sub_null(peer(), case, mixed) is None


def test_the_partitioned_proc_null_key_takes_a_segfault_only() -> None:
    from hpccomm_suites.mpi.test_conformance_ring import partitioned_proc_null_crash

    mpich = "YOUR APPLICATION TERMINATED WITH THE EXIT STRING: Segmentation fault (signal 11)"
    ompi = "[vm:04058] *** Process received signal ***\n[vm:04058] Signal: Segmentation fault (11)"
    assert partitioned_proc_null_crash(peer(), mpich) is not None
    assert partitioned_proc_null_crash(peer(OPEN_MPI), ompi) is not None
    assert partitioned_proc_null_crash(peer(OPEN_MPI), "MPI_ERR_RANK: invalid rank") is None


def test_the_partitioned_derived_key_takes_the_two_observed_layouts_only() -> None:
    """5.0.11's size-based offsets and 5.0.8-5.0.10's half message (the digests those runs
    reported for rank 0, left neighbour 2), nothing else."""
    from hpccomm_suites.mpi.test_conformance_ring import open_mpi_partitioned_offsets
    from pytest_hpccomm.stacks.mpi.peer.payload import digest, pattern

    case = {"count": 5, "partitions": 3, "seed": 8, "derived": True, "proc_null": False}
    src = pattern("int32", 60, 10)
    right = src.reshape(-1, 4)[:, [0, 2]].ravel()
    half = np.concatenate([right[:15], np.zeros(15, np.int32)])
    assert digest(half) == "680c1683c61fe2c26328f833"  # what Open MPI 5.0.8 delivered
    why = open_mpi_partitioned_offsets(peer(OPEN_MPI), case, {"got": [2, 6, 30, digest(half)]}, 2)
    assert why is not None and "first half" in why
    other = np.concatenate([right[:10], np.zeros(20, np.int32)])
    assert (
        open_mpi_partitioned_offsets(peer(OPEN_MPI), case, {"got": [2, 6, 30, digest(other)]}, 2)
        is None
    )
    assert open_mpi_partitioned_offsets(peer(), case, {"got": [2, 6, 30, digest(half)]}, 2) is None


def test_a_loss_explained_as_a_known_defect_is_excused() -> None:
    """known_loss: an explained loss becomes a KnownDefect and is excused from the restart
    limit; an unexplained one is raised as it was and counts."""
    import pytest

    from pytest_hpccomm.errors import KnownDefect
    from pytest_hpccomm.stacks.mpi.conformance import PeerLost, known_loss

    held = SimpleNamespace(excused=0)
    with pytest.raises(KnownDefect, match="seen"):
        with known_loss(held, lambda lost: "seen" if "segv" in lost.output else None):  # type: ignore[arg-type]
            raise PeerLost("lost", "segv")
    assert held.excused == 1
    with pytest.raises(PeerLost):
        with known_loss(held, lambda lost: None):  # type: ignore[arg-type]
            raise PeerLost("lost", "hang")
    assert held.excused == 1


MPICH_403 = "MPICH Version:\t4.0.3\nMPICH Release date: x"
ALLGATHER = {
    "kind": "collective", "op": "allgather", "dtype": "int32", "root": 0, "inplace": False,
    "nonblocking": False, "self": False, "seed": 3, "count": 4, "send_extent": [5, 5],
    "recv_extent": [9, 9], "persistent": True,
}  # fmt: skip


def test_the_allgather_restart_key_takes_one_block_of_a_reset_buffer_only() -> None:
    """MPICH 4.0.3, two processes (the run's case and a standalone script): after the second
    start rank 1's block 1 held what rank 0's buffer held there before the start."""
    from hpccomm_suites.mpi.test_conformance_collectives import (
        expected_buffers,
        mpich_allgather_restart_leaves_a_block,
    )
    from pytest_hpccomm.stacks.mpi.peer.payload import digest, piece_digests

    p = peer(MPICH_403)
    for inplace in (False, True):
        case = ALLGATHER | {"inplace": inplace}
        want, _, before = expected_buffers(case, 2)
        seen = want[1].copy()
        seen[4:8] = before[0][4:8]
        why = mpich_allgather_restart_leaves_a_block(p, case, 2, 1, {"recv": digest(seen)})
        assert why is not None and "block 1 on rank 1 holds what rank 0's" in why, why
        two = seen.copy()
        two[0:4] = before[1][0:4]  # two blocks wrong: not this symptom
        assert mpich_allgather_restart_leaves_a_block(p, case, 2, 1, {"recv": digest(two)}) is None
        for lo, hi in ((5, 7), (6, 8)):  # a block's middle or its end: not this symptom
            part = want[1].copy()
            part[lo:hi] = before[0][lo:hi]
            rep = {"recv": digest(part), "pieces": piece_digests(part)}
            assert mpich_allgather_restart_leaves_a_block(p, case, 2, 1, rep) is None
        for other in (peer(OPEN_MPI), None):  # another MPI; the blocking form
            q, c = (other, case) if other else (p, case | {"persistent": False})
            assert (
                mpich_allgather_restart_leaves_a_block(q, c, 2, 1, {"recv": digest(seen)}) is None
            )


def test_the_allgather_restart_key_takes_a_stale_prefix_of_a_large_block() -> None:
    """MPICH 4.0.3, two processes between namespaces, the covering set's 20000 x int64 in-place
    case (a dump of the run's buffers): after the second start the first 3884 elements of
    rank 1's block 1 held what rank 0's buffer held there before the start, the rest right.
    Near misses: the same prefix one element off the block's start, a second stale run, and
    no piece digests (a report without them cannot be placed)."""
    from hpccomm_suites.mpi.test_conformance_collectives import (
        covering_cases,
        expected_buffers,
        mpich_allgather_restart_leaves_a_block,
    )
    from pytest_hpccomm.stacks.mpi.peer.payload import digest, piece_digests

    p = peer(MPICH_403)
    case = covering_cases("allgather", 2)["large-nonblocking-in-place"] | {"persistent": True}
    want, _, before = expected_buffers(case, 2)
    c = case["count"]

    def rep(a: np.ndarray, pieces: bool = True) -> dict[str, Any]:
        return {"recv": digest(a.ravel())} | ({"pieces": piece_digests(a)} if pieces else {})

    for m in (3884, 1, PIECE, c - 1):
        seen = want[1].copy()
        seen[c : c + m] = before[0][c : c + m]
        why = mpich_allgather_restart_leaves_a_block(p, case, 2, 1, rep(seen))
        assert why is not None, m
        assert f"the first {m} of the {c} elements of block 1 on rank 1 hold what rank 0's" in why
        assert mpich_allgather_restart_leaves_a_block(p, case, 2, 1, rep(seen, False)) is None
    off = want[1].copy()
    off[c + 1 : c + 3885] = before[0][c + 1 : c + 3885]
    two = want[1].copy()
    two[c : c + 3884] = before[0][c : c + 3884]
    two[c + 9000 : c + 9100] = before[0][c + 9000 : c + 9100]
    for wrong in (off, two):
        assert mpich_allgather_restart_leaves_a_block(p, case, 2, 1, rep(wrong)) is None


def test_the_type_free_key_takes_that_assertion_after_that_case_only() -> None:
    from hpccomm_suites.mpi.test_conformance_collectives import (
        mpich_type_free_after_persistent_allgather as key,
    )

    said = (
        "Assertion failed in file /mpich-4.0.3/src/mpi/datatype/datatype_impl.c at line 177: "
        "(((datatype_ptr)))->ref_count >= 0\nAbort(1) on node 1: Internal error"
    )
    case = ALLGATHER | {"inplace": True, "derived": True}
    why = key(peer(MPICH_403), case, said)
    assert why is not None and "MPI_Type_free" in why
    assert key(peer(MPICH_403), case, "Abort(1) on node 1: Internal error") is None
    assert key(peer(MPICH_403), case | {"derived": False}, said) is None
    assert key(peer(MPICH_403), case | {"persistent": False}, said) is None
    assert key(peer(OPEN_MPI), case, said) is None


DARRAY: dict[str, Any] = {
    "kind": "datatype", "dtype": "int32", "typed": "send", "src": 0, "dst": 1, "seed": 0,
    "layout": "darray", "reps": 1, "darray": {
        "size": 4, "rank": 3, "gsizes": [6, 5], "distribs": ["cyclic", "block"],
        "dargs": [2, 0], "psizes": [2, 2], "order": "C",
    },
}  # fmt: skip


def test_the_packed_rows_model_is_what_the_ch3_wheel_selected() -> None:
    """Selections the mpich 3.4.3.post1 wheel's darray made (a standalone sweep; its other
    44 wrong selections agree too), and none where the rows fill whole rows."""
    from hpccomm_suites.mpi.test_conformance_datatypes import packed_rows

    d = DARRAY["darray"]
    assert packed_rows(d) == [13, 14, 15, 16]
    assert packed_rows(d | {"gsizes": [7, 4], "rank": 0}) == [0, 1, 2, 3, 16, 17, 18, 19]
    fortran = {"gsizes": [7, 4], "distribs": ["block", "cyclic"], "dargs": [0, 2], "order": "F"}
    assert packed_rows(d | fortran | {"rank": 2}) == [4, 5, 6, 7, 8, 9]
    assert packed_rows(d | {"distribs": ["block", "cyclic"], "dargs": [0, 2]}) is None


def test_the_darray_key_takes_the_packed_selection_only() -> None:
    from hpccomm_suites.mpi.test_conformance_datatypes import mpich_darray_rows_packed as key
    from pytest_hpccomm.stacks.mpi.peer.payload import digest, pattern

    flat = pattern("int32", 30, 0)
    p = peer("MPICH Version:\t3.4.3\nMPICH Release date: x")
    why = key(p, DARRAY, {"count": 4, "sha": digest(flat[[13, 14, 15, 16]])}, flat, 4)
    assert why is not None and "back to back" in why
    into = pattern("int32", 30, 1)
    received = into.copy()
    received[[13, 14, 15, 16]] = pattern("int32", 4, 0)
    recv = DARRAY | {"typed": "recv"}
    assert key(p, recv, {"count": 4, "sha": digest(received)}, into, 4) is not None
    right = {"count": 4, "sha": digest(flat[[13, 14, 18, 19]])}
    assert key(p, DARRAY, right, flat, 4) is None
    other = {"count": 4, "sha": digest(flat[[13, 14, 15, 17]])}
    assert key(p, DARRAY, other, flat, 4) is None
    packed = {"count": 4, "sha": digest(flat[[13, 14, 15, 16]])}
    assert key(peer(OPEN_MPI), DARRAY, packed, flat, 4) is None
    assert key(p, DARRAY, packed | {"count": 3}, flat, 4) is None


def test_the_accumulate_key_takes_a_signed_result_on_every_rank_only() -> None:
    """Debian's MPICH 4.0.2 (the run): MIN over uint16 compared as signed."""
    from hpccomm_suites.mpi.test_conformance_rma import accumulate_as_signed, simulate

    case = {
        "kind": "rma", "dtype": "uint16", "window": 9, "put_to": [1, 0], "put_len": [2, 1],
        "put_disp": [0, 3], "get_to": [0, 1], "get_len": 4, "acc_to": [1, 1], "acc_len": 3,
        "acc_disp": 6, "op": "MIN", "seed": 7,
    }  # fmt: skip
    p = SimpleNamespace(info=peer("MPICH Version:\t4.0.2\nx").info, ranks=2)
    signed, right = simulate(case, 2, signed=True), simulate(case, 2)
    assert signed != right, "the case must tell the comparisons apart"
    reports = [{"got": g, "window": w} for g, w in signed]
    why = accumulate_as_signed(p, case, reports, right)  # type: ignore[arg-type]
    assert why is not None and "as signed" in why
    mixed = [reports[0], {"got": right[1][0], "window": right[1][1]}]
    assert accumulate_as_signed(p, case, mixed, right) is None  # type: ignore[arg-type]
    for other in ({"dtype": "int16"}, {"op": "MAX", "acc_len": 0}):
        c = case | other
        rep = [{"got": g, "window": w} for g, w in simulate(c, 2, signed=True)]
        assert accumulate_as_signed(p, c, rep, simulate(c, 2)) is None  # type: ignore[arg-type]


def test_a_covering_set_runs_every_case_past_a_known_defect() -> None:
    import pytest

    from pytest_hpccomm.errors import KnownDefect
    from pytest_hpccomm.stacks.mpi.conformance import run_covering

    seen: list[str] = []

    def check(case: str) -> None:
        seen.append(case)
        if case == "a":
            raise KnownDefect("known")
        assert case != "c", "wrong"

    with pytest.raises(KnownDefect, match="covering case 'a': known"):
        run_covering({"a": "a", "b": "b"}, check)
    assert seen == ["a", "b"]
    with pytest.raises(AssertionError, match="covering case 'c': wrong"):
        run_covering({"a": "a", "c": "c", "d": "d"}, check)
    assert seen[-2:] == ["a", "c"]


def test_the_allgather_ofi_key_takes_that_completion_error_only() -> None:
    """MPICH 4.0.3 between namespaces (two module runs): the large case's MPI_Wait failed."""
    from hpccomm_suites.mpi.test_conformance_collectives import (
        mpich_allgather_restart_fails_in_ofi as key,
    )

    said = (
        "Abort(941794703) on node 1 (rank 1 in comm 480): Fatal error in internal_Wait: Other "
        "MPI error, error stack:\nMPIDI_OFI_handle_cq_error(619): OFI poll failed "
        "(ofi_events.c:621:MPIDI_OFI_handle_cq_error:Bad address)\n"
    )
    case = ALLGATHER | {"dtype": "int64", "count": 20000}
    why = key(peer(MPICH_403), case, said)
    assert why is not None and "Bad address" in why
    assert key(peer(MPICH_403), case | {"persistent": False}, said) is None
    assert key(peer(MPICH_403), case | {"op": "allgatherv"}, said) is None
    assert key(peer(MPICH_403), case, said.replace("Bad address", "Connection reset")) is None
    assert key(peer(OPEN_MPI), case, said) is None
