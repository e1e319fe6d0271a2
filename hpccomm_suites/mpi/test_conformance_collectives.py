"""Data-movement collectives against a NumPy reference: Bcast, Gather(v), Scatter(v),
Allgather(v), Alltoall(v), blocking and as I-variants, with any root, MPI.IN_PLACE where the
standard defines it, zero counts, gaps and reordered displacements, on the world and on
COMM_SELF. Every receive buffer starts as a known pattern, so a write outside the blocks the
call owns shows, and every send buffer must come back unchanged.

A failure prints the shrunk case ("Draw 1 (case): ...") and a command replaying it with mpirun
alone (see stacks/mpi/conformance.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_hpccomm.coverage import cells
from pytest_hpccomm.errors import KnownDefect
from pytest_hpccomm.stacks.mpi.conformance import (
    ConformancePeer,
    conformance_settings,
    known_loss,
    run_covering,
)
from pytest_hpccomm.stacks.mpi.peer.conformance_cases import DERIVED_SPAN
from pytest_hpccomm.stacks.mpi.peer.payload import PIECE, digest, pattern, piece_digests

pytestmark = [
    pytest.mark.conformance,
    pytest.mark.stack("mpi"),
    pytest.mark.fabric("ethernet", "ipoib", "ib", "roce"),
]

ROOTED = ("bcast", "gather", "gatherv", "scatter", "scatterv")
IN_PLACE = ("gather", "gatherv", "scatter", "scatterv", "allgather", "allgatherv")
OPS = ROOTED + ("allgather", "allgatherv", "alltoall", "alltoallv")
MAX_COUNT = 40


def layout(counts: list[int], order: list[int], gaps: list[int]) -> tuple[list[int], int]:
    """Displacements for blocks of `counts`, placed in `order` with `gaps` before each (no two
    overlap: MPI forbids receiving twice into one element), and the extent they need."""
    displs, at = [0] * len(counts), 0
    for j, gap in zip(order, gaps):
        at += gap
        displs[j] = at
        at += counts[j]
    return displs, at + gaps[-1] % 3


def build(
    op: str,
    n: int,
    counts: list[int] | list[list[int]],
    order: list[int],
    gaps: list[int],
    *,
    root: int = 0,
    inplace: bool = False,
    nonblocking: bool = False,
    on_self: bool = False,
    dtype: str = "int32",
    seed: int = 0,
) -> dict[str, Any]:
    """A case: `counts` is one count per rank for the v-forms (a matrix for alltoallv, counts
    [i][j] from i to j) and [count] for the plain forms; blocks go in `order` with `gaps`."""
    case: dict[str, Any] = {
        "kind": "collective",
        "op": op,
        "dtype": dtype,
        "root": root if op in ROOTED else 0,
        "inplace": inplace and op in IN_PLACE,
        "nonblocking": nonblocking,
        "self": on_self,
        "seed": seed,
    }
    slack = gaps[0] % 3
    if op == "alltoallv":
        m: list[list[int]] = counts  # type: ignore[assignment]
        sends = [layout(row, order, gaps) for row in m]
        recvs = [layout([row[j] for row in m], order[::-1], gaps) for j in range(n)]
        return case | {
            "counts": m,
            "displs": [d for d, _ in sends],
            "recv_displs": [d for d, _ in recvs],
            "send_extent": [e for _, e in sends],
            "recv_extent": [e for _, e in recvs],
        }
    if op.endswith("v"):
        per: list[int] = counts  # type: ignore[assignment]
        displs, extent = layout(per, order, gaps)
        own = [k + slack for k in per]  # a rank's own block, with slack behind it
        ext = (
            {"send_extent": [extent] * n, "recv_extent": own}
            if op == "scatterv"
            else {"send_extent": own, "recv_extent": [extent] * n}
        )
        return case | {"counts": per, "displs": displs} | ext
    c = int(counts[0])  # type: ignore[arg-type]
    whole = c * n
    if op == "bcast":
        ext = {"send_extent": [0] * n, "recv_extent": [c + slack] * n}
    elif op == "scatter":
        ext = {"send_extent": [whole] * n, "recv_extent": [c + slack] * n}
    elif op == "alltoall":
        ext = {"send_extent": [whole] * n, "recv_extent": [whole + slack] * n}
    else:
        ext = {"send_extent": [c + slack] * n, "recv_extent": [whole + slack] * n}
    return case | {"count": c} | ext


@st.composite
def collective_cases(draw: Any, n_world: int, op: str) -> dict[str, Any]:
    on_self = draw(st.integers(0, 3)) == 0
    n = 1 if on_self else n_world
    count = st.one_of(st.just(0), st.integers(0, MAX_COUNT))
    counts: Any = (
        [[draw(count) for _ in range(n)] for _ in range(n)]
        if op == "alltoallv"
        else [draw(count) for _ in range(n if op.endswith("v") else 1)]
    )
    return build(
        op,
        n,
        counts,
        list(draw(st.permutations(range(n)))),
        draw(st.lists(st.integers(0, 3), min_size=n, max_size=n)),
        root=draw(st.integers(0, n - 1)),
        inplace=draw(st.booleans()),
        nonblocking=draw(st.booleans()),
        on_self=on_self,
        dtype=draw(st.sampled_from(["int8", "int32", "float64", "complex64"])),
        seed=draw(st.integers(0, 1000)),
    )


def covering_cases(op: str, n: int) -> dict[str, dict[str, Any]]:
    """Cases each run must include, not by chance: COMM_SELF, every count zero, the last rank
    as root with IN_PLACE, the I-variant with reversed, gapped displacements, and blocks past
    the eager limits (blocking, and the I-variant with IN_PLACE)."""

    def counts(k: int, m: int) -> Any:
        if op == "alltoallv":
            return [[(k + i + 2 * j) % (k + 2) for j in range(m)] for i in range(m)]
        return [(k + i) % (k + 2) for i in range(m)] if op.endswith("v") else [k]

    rev = list(range(n))[::-1]
    zeros: Any = (
        [[0] * n for _ in range(n)] if op == "alltoallv" else [0] * (n if op.endswith("v") else 1)
    )
    return {
        "self": build(op, 1, counts(3, 1), [0], [1], on_self=True, seed=1),
        "zero": build(op, n, zeros, rev, [0] * n),
        "last-root-in-place": build(
            op, n, counts(5, n), list(range(n)), [2] * n, root=n - 1, inplace=True, seed=2
        ),
        "nonblocking-reversed": build(
            op, n, counts(4, n), rev, [1] * n, root=n - 1, nonblocking=True, seed=3
        ),
        # blocks of ~160 KB: past every eager limit, so the rendezvous paths run
        "large": build(op, n, counts(20000, n), rev, [1] * n, root=n - 1, dtype="int64", seed=4),
        "large-nonblocking-in-place": build(
            op, n, counts(20000, n), rev, [0] * n, inplace=True, nonblocking=True, seed=5
        ),
    }


def expected(case: dict[str, Any], n: int) -> list[tuple[str, str]]:
    """(receive, send) digests each rank of the communicator must end with: NumPy's reading of
    the call's definition on the same patterns."""
    rb, sb, _ = expected_buffers(case, n)
    return [(digest(rb[i].ravel()), digest(sb[i].ravel())) for i in range(n)]


def expected_buffers(
    case: dict[str, Any], n: int
) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]:
    """Each rank's receive and send buffer after the call, and its receive buffer before it
    (rows of DERIVED_SPAN for a derived datatype, of 1 otherwise)."""
    dtype, seed, op, root = case["dtype"], case["seed"], case["op"], case["root"]
    # derived: one element of the type is a row of DERIVED_SPAN, of which it moves 0 and 2
    w = DERIVED_SPAN if case.get("derived") else 1
    sb = [pattern(dtype, case["send_extent"][i] * w, seed + i).reshape(-1, w) for i in range(n)]
    rb = [
        pattern(dtype, case["recv_extent"][i] * w, seed + 500 + i).reshape(-1, w) for i in range(n)
    ]
    untouched = [b.copy() for b in rb]
    inplace = case["inplace"]
    if op.endswith("v") and op != "alltoallv":
        counts, displs = case["counts"], case["displs"]
    elif op != "alltoallv":
        c = case["count"]
        counts, displs = [c] * n, [c * i for i in range(n)]
    if op == "bcast":
        for i in range(n):
            rb[i][: case["count"]] = rb[root][: case["count"]]
    elif op in ("gather", "gatherv"):
        for i in range(n):
            if not (inplace and i == root):  # IN_PLACE: the root's block is already there
                rb[root][displs[i] : displs[i] + counts[i]] = sb[i][: counts[i]]
    elif op in ("scatter", "scatterv"):
        for i in range(n):
            if not (inplace and i == root):  # IN_PLACE: the root keeps its receive buffer
                rb[i][: counts[i]] = sb[root][displs[i] : displs[i] + counts[i]]
    elif op in ("allgather", "allgatherv"):
        blocks = [
            (rb[i] if inplace else sb[i])[
                displs[i] if inplace else 0 : (displs[i] if inplace else 0) + counts[i]
            ].copy()
            for i in range(n)
        ]
        for r in range(n):
            for i in range(n):
                rb[r][displs[i] : displs[i] + counts[i]] = blocks[i]
    elif op == "alltoall":  # IN_PLACE: rank i sends from its receive buffer
        c = case["count"]
        for i in range(n):
            for j in range(n):
                src = untouched[i] if inplace else sb[i]
                rb[j][i * c : (i + 1) * c] = src[j * c : (j + 1) * c]
    else:
        counts, sd, rd = case["counts"], case["displs"], case["recv_displs"]
        for i in range(n):
            for j in range(n):
                k = counts[i][j]
                src, at = (untouched[i], rd[i][j]) if inplace else (sb[i], sd[i][j])
                rb[j][rd[j][i] : rd[j][i] + k] = src[at : at + k]
    gaps = [k for k in range(w) if k not in (0, 2)]  # the columns the type skips
    for i in range(n):
        rb[i][:, gaps] = untouched[i][:, gaps]
    return rb, sb, untouched


def check_collective(peer: ConformancePeer, case: dict[str, Any]) -> None:
    with known_loss(
        peer,
        lambda lost: (
            mpich_persistent_scatter_lost(peer, case, str(lost), lost.output)
            or mpich_type_free_after_persistent_allgather(peer, case, lost.output)
            or mpich_allgather_restart_fails_in_ofi(peer, case, lost.output)
        ),
    ):
        reports = peer.run(case)
    members = case.get("members") or []
    n = 1 if case["self"] else len(members) or peer.ranks
    want = expected(case, n)
    hint = peer.replay_hint(case)
    what = f"{'I' if case['nonblocking'] else ''}{case['op']}" + (
        " IN_PLACE" if case["inplace"] else ""
    )
    if missing := next((r["unsupported"] for r in reports if "unsupported" in r), None):
        pytest.skip(f"{peer.info.release} lacks the MPI 4.0 persistent collective {missing}")
    for rank, rep in enumerate(reports):
        if members and rank not in members:
            assert rep == {}, f"rank {rank} is outside the case's communicator: {rep}\n{hint}"
            continue
        recv, send = want[0 if case["self"] else members.index(rank) if members else rank]
        assert rep["send"] == send, f"rank {rank}: {what} changed its send buffer\n{hint}"
        if rep["recv"] != recv and (why := mpich_self_allgatherv(peer, case, rep)) is not None:
            raise KnownDefect(f"rank {rank}: {why}")
        if rep["recv"] != recv and (
            why := mpich_scatter_restart_delivers_nothing(peer, case, rank, rep)
            or mpich_allgather_restart_leaves_a_block(peer, case, n, rank, rep)
        ):
            raise KnownDefect(why)
        assert rep["recv"] == recv, (
            f"rank {rank}: {what}'s receive buffer differs from the definition's (a block "
            f"misplaced, missing, or a write outside the blocks)\n{hint}"
        )


def _mpich_persistent(peer: ConformancePeer, case: dict[str, Any], op: str) -> bool:
    """MPICH and the persistent form of `op` (MPI_Scatter_init: any root, in place or not;
    MPI_Scatterv_init is right; MPI_Allgather_init)."""
    return bool(
        peer.info.library.startswith("MPICH") and case["op"] == op and case.get("persistent")
    )


def _persistent_case(case: dict[str, Any]) -> str:
    where = f" at root {case['root']}" if case["op"] in ROOTED else ""
    return f"persistent {case['op']}{' with MPI_IN_PLACE' if case['inplace'] else ''}{where}"


# MPICH 4.3.1's root with three processes: its schedule trips this assertion and the job aborts
OFI_SEND_ERRFLAG = "ofi_send.h at line 765: errflag == 0"


def mpich_persistent_scatter_lost(
    peer: ConformancePeer, case: dict[str, Any], lost: str, output: str = ""
) -> str | None:
    """MPICH 4.0-4.3.1's persistent MPI_Scatter_init on three or more processes: a start's
    request fails in its schedule (MPIDU_Sched_progress_state) and never completes, so the
    others wait in MPI_Wait for their blocks; or (4.3.1) the root asserts `errflag == 0` in
    ofi_send.h and the job aborts. Keyed by the hung case's stacks showing a rank in
    PMPI_Wait, or by that assertion in the lost job's output."""
    if not _mpich_persistent(peer, case, "scatter"):
        return None
    where = (
        "docs/examples/defects/mpich_persistent_scatter_in_place.py, "
        "mpich_persistent_collective_restart.py"
    )
    if OFI_SEND_ERRFLAG in output:
        return (
            f"{peer.info.release} defect: {_persistent_case(case)}: the root asserted "
            f"{OFI_SEND_ERRFLAG!r} and the job aborted ({where})"
        )
    if "native: " not in lost or "PMPI_Wait" not in lost:
        return None
    return (
        f"{peer.info.release} defect: {_persistent_case(case)}: a start's request failed and "
        f"never completed, the other ranks waited in MPI_Wait ({where})"
    )


def mpich_scatter_restart_delivers_nothing(
    peer: ConformancePeer, case: dict[str, Any], rank: int, rep: dict[str, Any]
) -> str | None:
    """The same defect with two processes: the persistent Scatter's second start completes,
    but the non-root rank's receive buffer holds the pattern it was reset to (its block never
    arrived). Keyed by that rank's buffer being exactly that pattern."""
    if not _mpich_persistent(peer, case, "scatter") or rank == case["root"]:
        return None
    w = DERIVED_SPAN if case.get("derived") else 1
    members = case.get("members") or []
    i = members.index(rank) if members else rank
    untouched = digest(pattern(case["dtype"], case["recv_extent"][i] * w, case["seed"] + 500 + i))
    if rep["recv"] != untouched:
        return None
    return (
        f"{peer.info.release} defect: {_persistent_case(case)}: after the last MPI_Start rank "
        f"{rank}'s block never arrived "
        "(docs/examples/defects/mpich_persistent_collective_restart.py scatter)"
    )


def mpich_allgather_restart_leaves_a_block(
    peer: ConformancePeer, case: dict[str, Any], n: int, rank: int, rep: dict[str, Any]
) -> str | None:
    """MPICH 4.0's persistent MPI_Allgather_init: the second start does not redo the whole
    operation, and one block of a rank's receive buffer ends holding what some rank's buffer
    held at that block before the start (the reset pattern: its own, or, seen with two
    processes, the other rank's): the whole block, or, past the eager limit, its first part
    and the rest right. Keyed by the buffer being exactly the definition's but for one such
    block or prefix (found to the element from the report's piece digests)."""
    if not _mpich_persistent(peer, case, "allgather") or case["self"] or case.get("members"):
        return None
    want, _, before = expected_buffers(case, n)
    c, cols = case["count"], [0, 2] if case.get("derived") else [0]
    where = "(docs/examples/defects/mpich_persistent_collective_restart.py allgather)"
    last = last_piece_differing(want[rank], rep)
    for k in range(n):
        for s in range(n):
            got = want[rank].copy()
            got[k * c : (k + 1) * c, cols] = before[s][k * c : (k + 1) * c, cols]
            if digest(got.ravel()) == rep["recv"]:
                return (
                    f"{peer.info.release} defect: {_persistent_case(case)}: after the last "
                    f"MPI_Start block {k} on rank {rank} holds what rank {s}'s receive buffer "
                    f"held there before the start {where}"
                )
            if (m := stale_prefix(want[rank], before[s], k * c, c, last, rep)) is not None:
                return (
                    f"{peer.info.release} defect: {_persistent_case(case)}: after the last "
                    f"MPI_Start the first {m} of the {c} elements of block {k} on rank {rank} "
                    f"hold what rank {s}'s receive buffer held there before the start {where}"
                )
    return None


def last_piece_differing(want: np.ndarray, rep: dict[str, Any]) -> int | None:
    """The last piece (PIECE elements) where the report's piece digests differ from `want`'s;
    None without them, for a derived (not plain) buffer, or where none differs."""
    pieces, flat = rep.get("pieces"), want.ravel()
    if not pieces or want.shape[1] != 1 or len(pieces) != -(-len(flat) // PIECE):
        return None
    differ = [j for j, d in enumerate(piece_digests(flat)) if d != pieces[j]]
    return differ[-1] if differ else None


def stale_prefix(
    want: np.ndarray, before: np.ndarray, lo: int, c: int, last: int | None, rep: dict[str, Any]
) -> int | None:
    """m when the reported buffer is `want` but for its elements lo..lo+m-1 (0 < m < c),
    which hold `before`'s: the last piece that differs (`last`) bounds where the prefix ends,
    and the whole buffer's digest decides."""
    if last is None:
        return None
    flat, old = want.ravel(), before.ravel()
    for end in range(max(last * PIECE + 1, lo + 1), min((last + 1) * PIECE, lo + c - 1) + 1):
        trial = flat.copy()
        trial[lo:end] = old[lo:end]
        if digest(trial) == rep["recv"]:
            return end - lo
    return None


# MPICH 4.0.3's persistent Allgather past the eager limit, over libfabric's tcp provider
OFI_BAD_ADDRESS = "OFI poll failed (ofi_events.c:621:MPIDI_OFI_handle_cq_error:Bad address)"


def mpich_allgather_restart_fails_in_ofi(
    peer: ConformancePeer, case: dict[str, Any], output: str
) -> str | None:
    """The same Allgather defect past the eager limit (20000 int64 blocks, between network
    namespaces): a start's MPI_Wait fails with libfabric's completion error EFAULT, the rank
    aborts and the job hangs. Seen only after earlier cases in the same peer job. Keyed by
    that error in the lost job's output."""
    if not _mpich_persistent(peer, case, "allgather") or OFI_BAD_ADDRESS not in output:
        return None
    return (
        f"{peer.info.release} defect: persistent allgather of {case['count']} {case['dtype']}: "
        "a start's MPI_Wait failed with 'OFI poll failed (... Bad address)' and the job hung "
        "(docs/examples/defects/mpich_persistent_collective_restart.py allgather)"
    )


# MPICH 4.0's MPI_Type_free of a datatype a freed persistent in-place Allgather had used
TYPE_FREE_REFCOUNT = "datatype_impl.c at line 177"


def mpich_type_free_after_persistent_allgather(
    peer: ConformancePeer, case: dict[str, Any], output: str
) -> str | None:
    """MPICH 4.0: MPI_Type_free of a derived datatype after a persistent in-place Allgather
    over it was freed aborts on a negative reference count (the request released a reference
    it never took). Keyed by that assertion in the lost job's output."""
    if not (_mpich_persistent(peer, case, "allgather") and case["inplace"] and case.get("derived")):
        return None
    if TYPE_FREE_REFCOUNT not in output or "ref_count >= 0" not in output:
        return None
    return (
        f"{peer.info.release} defect: MPI_Type_free of the datatype a freed persistent "
        f"in-place allgather used asserted {TYPE_FREE_REFCOUNT!r} (ref_count >= 0) and the job "
        "aborted (docs/examples/defects/mpich_persistent_allgather_in_place_derived.py)"
    )


def mpich_self_allgatherv(
    peer: ConformancePeer, case: dict[str, Any], rep: dict[str, Any]
) -> str | None:
    """MPICH's Allgatherv on a one-process communicator copied the block to the start of the
    receive buffer, its displacement ignored (pmodels/mpich#6374: the early-return local copy
    "omitted considering displs"). Keyed by the buffer being exactly that."""
    if not (peer.info.library.startswith("MPICH") and case["op"] == "allgatherv"):
        return None
    if not case["self"] or case["inplace"] or case["displs"][0] == 0:
        return None
    if rep["recv"] != expected({**case, "displs": [0]}, 1)[0][0]:
        return None
    return (
        f"{peer.info.release} defect: Allgatherv on a one-process communicator put the block "
        f"at offset 0, not at its displacement {case['displs'][0]} (pmodels/mpich#6374)"
    )


@pytest.mark.covers(
    "mpi",
    *cells(OPS, ["plain"])
    + cells(["gatherv", "scatterv", "allgatherv", "alltoallv"], ["displacements"]),
)
@pytest.mark.parametrize("op", OPS)
@settings(conformance_settings(share=0.3))
@given(data=st.data())
def test_collective_moves_the_blocks_the_standard_says(
    mpi_conformance_peer: ConformancePeer, op: str, data: st.DataObject
) -> None:
    """Each rank ends with exactly the blocks the call's definition puts in its receive buffer,
    nothing written elsewhere, its send buffer untouched."""
    peer = mpi_conformance_peer
    check_collective(peer, data.draw(collective_cases(peer.ranks, op), label="case"))


@pytest.mark.covers(
    "mpi",
    *cells(OPS, ["plain", "zero_count", "size_1"])
    + cells(IN_PLACE, ["in_place"])
    + cells(ROOTED, ["nonzero_root"])
    + cells(["gatherv", "scatterv", "allgatherv", "alltoallv"], ["displacements"])
    + cells(OPS, ["protocol_sizes"])
    + cells(
        ["nonblocking_collectives"],
        ["plain", "zero_count", "size_1", "nonzero_root", "in_place", "protocol_sizes"],
    ),
)
@pytest.mark.parametrize("op", OPS)
def test_collective_covering_set(mpi_conformance_peer: ConformancePeer, op: str) -> None:
    """The cases every run includes (covering_cases), each judged as the property does."""
    peer = mpi_conformance_peer
    run_covering(covering_cases(op, peer.ranks), lambda case: check_collective(peer, case))


@pytest.mark.covers(
    "mpi",
    *cells(OPS, ["odd_size"])
    + cells(["nonblocking_collectives", "persistent_collectives"], ["odd_size"]),
)
@pytest.mark.parametrize("op", OPS)
def test_collective_on_an_odd_communicator(mpi_conformance_peer: ConformancePeer, op: str) -> None:
    """On a Split communicator of odd size (3 of the world's ranks, or all of an odd world):
    the last rank as root, gapped reversed displacements, blocking and the I-variant with
    IN_PLACE."""
    from hpccomm_suites.mpi.test_conformance_topology import odd_members

    peer = mpi_conformance_peer
    members = odd_members(peer.ranks)
    k = len(members)
    counts: Any = (
        [[(i + 2 * j) % 5 for j in range(k)] for i in range(k)]
        if op == "alltoallv"
        else [(3 + i) % 5 for i in range(k)]
        if op.endswith("v")
        else [4]
    )
    rev = list(range(k))[::-1]
    for mode in ("blocking", "nonblocking", "persistent"):
        case = build(op, k, counts, rev, [1] * k, root=k - 1, inplace=mode != "blocking")
        case |= {"nonblocking": mode == "nonblocking", "persistent": mode == "persistent"}
        check_collective(peer, case | {"members": members, "seed": 7 + len(mode)})


@pytest.mark.covers(
    "mpi",
    *cells(OPS, ["derived_type"])
    + cells(["nonblocking_collectives", "persistent_collectives"], ["derived_type"]),
)
@pytest.mark.parametrize("op", OPS)
def test_collective_with_a_derived_datatype(mpi_conformance_peer: ConformancePeer, op: str) -> None:
    """The buffers' datatype a resized vector (elements 0 and 2 of every 4): blocks move
    through it on both sides, the elements it skips stay untouched; blocking with the last
    rank as root and reversed gapped displacements, the I-variant with IN_PLACE."""
    peer = mpi_conformance_peer
    n = peer.ranks
    counts: Any = (
        [[(i + 2 * j) % 4 + 1 for j in range(n)] for i in range(n)]
        if op == "alltoallv"
        else [(3 + i) % 4 + 1 for i in range(n)]
        if op.endswith("v")
        else [3]
    )
    rev = list(range(n))[::-1]
    for mode in ("blocking", "nonblocking", "persistent"):
        case = build(op, n, counts, rev, [1] * n, root=n - 1, inplace=mode != "blocking")
        case |= {"nonblocking": mode == "nonblocking", "persistent": mode == "persistent"}
        check_collective(peer, case | {"derived": True, "seed": 9 + len(mode)})


@pytest.mark.covers(
    "mpi",
    *cells(
        ["persistent_collectives"],
        ["plain", "zero_count", "size_1", "nonzero_root", "in_place", "protocol_sizes"],
    ),
)
@pytest.mark.parametrize("op", OPS)
def test_persistent_collective_covering_set(mpi_conformance_peer: ConformancePeer, op: str) -> None:
    """The covering set (covering_cases) through the MPI 4.0 persistent form (MPI_X_init,
    then MPI_Start/MPI_Wait twice on the same request); skipped, naming the call, where the
    library lacks it."""
    peer = mpi_conformance_peer
    run_covering(
        covering_cases(op, peer.ranks),
        lambda case: check_collective(peer, case | {"nonblocking": False, "persistent": True}),
    )


@pytest.mark.covers(
    "mpi",
    *cells(["alltoall", "alltoallv"], ["in_place"])
    + cells(["nonblocking_collectives"], ["in_place"]),
)
@pytest.mark.parametrize("op", ["alltoall", "alltoallv"])
def test_alltoall_in_place(mpi_conformance_peer: ConformancePeer, op: str) -> None:
    """MPI_IN_PLACE for Alltoall(v) (MPI 2.2): each rank's receive buffer is its send
    buffer, the counts symmetric (i sends j what j sends i); blocking, the I-variant and the
    persistent form, with reversed gapped displacements."""
    peer = mpi_conformance_peer
    n = peer.ranks
    counts: Any = (
        [[(i + j) % 3 + 1 for j in range(n)] for i in range(n)] if op == "alltoallv" else [4]
    )
    rev = list(range(n))[::-1]
    for mode in ("blocking", "nonblocking", "persistent"):
        case = build(op, n, counts, rev, [1] * n, seed=11 + len(mode))
        case |= {
            "inplace": True,
            "nonblocking": mode == "nonblocking",
            "persistent": mode == "persistent",
            "starts": 1,  # a second run would exchange the blocks back
            "send_extent": [0] * n,
        }
        check_collective(peer, case)
