"""MPI_Alltoallw against a NumPy reference: per-pair counts, byte displacements with gaps and
reordered blocks, a datatype per block (MPI_INT32_T or a vector of every other element, on
either side), MPI_IN_PLACE, zero counts, blocks past the eager limits, on the world, on
MPI_COMM_SELF and on an odd Split communicator (peer/conformance_alltoallw.py). Receive buffers
start as a known pattern, so a write outside the blocks shows; send buffers must come back
unchanged.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hpccomm_suites.mpi.test_conformance_collectives import layout
from hpccomm_suites.mpi.test_conformance_topology import comm_of, on, reports_by_comm
from pytest_hpccomm.coverage import cells
from pytest_hpccomm.errors import KnownDefect
from pytest_hpccomm.stacks.mpi.conformance import ConformancePeer, conformance_settings
from pytest_hpccomm.stacks.mpi.peer.conformance_alltoallw import STRIDE
from pytest_hpccomm.stacks.mpi.peer.payload import digest, pattern

pytestmark = [
    pytest.mark.conformance,
    pytest.mark.stack("mpi"),
    pytest.mark.fabric("ethernet", "ipoib", "ib", "roce"),
]

Matrix = list[list[Any]]


def extent(k: int, strided: bool) -> int:
    """Elements a block of k spans."""
    return (STRIDE * (k - 1) + 1 if k else 0) if strided else k


def picks(k: int, strided: bool, at: int) -> np.ndarray:
    """The elements a block of k at element `at` selects."""
    return at + np.arange(k) * (STRIDE if strided else 1)


def build(
    counts: Matrix,
    send_strided: Matrix,
    recv_strided: Matrix,
    order: list[int],
    gaps: list[int],
    *,
    base: dict[str, Any] | None = None,
    inplace: bool = False,
    nonblocking: bool = False,
    seed: int = 0,
) -> dict[str, Any]:
    """A case on a communicator of len(counts) ranks: counts[i][j] elements from i to j;
    send blocks in `order`, receive blocks in reverse order, `gaps` before each."""
    m = len(counts)
    sends = [
        layout([extent(counts[i][j], send_strided[i][j]) for j in range(m)], order, gaps)
        for i in range(m)
    ]
    recvs = [
        layout([extent(counts[j][i], recv_strided[i][j]) for j in range(m)], order[::-1], gaps)
        for i in range(m)
    ]
    return {
        "kind": "alltoallw",
        "counts": counts,
        "send_strided": send_strided,
        "recv_strided": recv_strided,
        "send_displs": [d for d, _ in sends],
        "send_extent": [0 if inplace else e for _, e in sends],
        "recv_displs": [d for d, _ in recvs],
        "recv_extent": [e for _, e in recvs],
        "inplace": inplace,
        "nonblocking": nonblocking,
        "seed": seed,
    } | (base or {})


def expected(case: dict[str, Any], m: int) -> list[tuple[str, str]]:
    """(receive, send) digests of each rank of the communicator, by the call's definition."""
    seed, counts = case["seed"], case["counts"]
    ss, rs = case["send_strided"], case["recv_strided"]
    sd, rd = case["send_displs"], case["recv_displs"]
    sb = [pattern("int32", case["send_extent"][i], seed + i) for i in range(m)]
    rb = [pattern("int32", case["recv_extent"][i], seed + 500 + i) for i in range(m)]
    old = [b.copy() for b in rb]
    for i in range(m):
        for j in range(m):
            k = counts[i][j]
            if case["inplace"]:  # i sends the block of its receive buffer that j's goes to
                block = old[i][picks(k, rs[i][j], rd[i][j])]
            else:
                block = sb[i][picks(k, ss[i][j], sd[i][j])]
            rb[j][picks(k, rs[j][i], rd[j][i])] = block
    return [(digest(rb[i]), digest(sb[i])) for i in range(m)]


def check(
    peer: ConformancePeer, case: dict[str, Any], name: str = "", timeout: float | None = None
) -> None:
    hint = (f"covering case {name}\n" if name else "") + peer.replay_hint(case)
    want = expected(case, len(case["counts"]))
    what = ("Ialltoallw" if case["nonblocking"] else "Alltoallw") + (
        " IN_PLACE" if case["inplace"] else ""
    )
    for rank, rep, members in reports_by_comm(peer, case, timeout):
        recv, send = want[members.index(rank)]
        if (why := open_mpi_self_alltoallw(peer, case, rep)) is not None:
            raise KnownDefect(f"rank {rank}: {why}")
        assert rep.get("guard", True), (
            f"rank {rank}: {what} wrote past the end of its receive buffer\n{hint}"
        )
        assert rep["send"] == send, f"rank {rank}: {what} changed its send buffer\n{hint}"
        assert rep["recv"] == recv, (
            f"rank {rank}: {what}'s receive buffer differs from the definition's (a block "
            f"misplaced, missing, or a write outside the blocks)\n{hint}"
        )


@st.composite
def alltoallw_cases(draw: Any, n: int) -> dict[str, Any]:
    flags = st.lists(st.lists(st.booleans(), min_size=n, max_size=n), min_size=n, max_size=n)
    counts = [[draw(st.integers(0, 6)) for _ in range(n)] for _ in range(n)]
    inplace = draw(st.booleans())
    if inplace:  # MPI_IN_PLACE: what i sends j is what i receives from j
        counts = [[counts[min(i, j)][max(i, j)] for j in range(n)] for i in range(n)]
    return build(
        counts,
        draw(flags),
        draw(flags),
        list(draw(st.permutations(range(n)))),
        draw(st.lists(st.integers(0, 3), min_size=n, max_size=n)),
        inplace=inplace,
        nonblocking=draw(st.booleans()),
        seed=draw(st.integers(0, 1000)),
    )


@pytest.mark.covers(
    "mpi", *cells(["alltoallw"], ["plain", "in_place", "displacements", "derived_type"])
)
@settings(conformance_settings(share=0.3))
@given(data=st.data())
def test_alltoallw(mpi_conformance_peer: ConformancePeer, data: st.DataObject) -> None:
    """Each rank ends with exactly the blocks the definition puts in its receive buffer,
    through whichever datatype each side names, nothing written elsewhere."""
    peer = mpi_conformance_peer
    check(peer, data.draw(alltoallw_cases(peer.ranks), label="case"))


def covering(name: str, n: int) -> dict[str, Any]:
    """The cases every run includes, by name."""
    base = on({"self": "self", "odd": "odd"}.get(name, "world"), n)
    m = len(comm_of(base, 0, n) or [])
    rev, ms = list(range(m))[::-1], range(m)

    def mixed(a: int) -> Matrix:
        return [[(i + j + a) % 2 == 0 for j in ms] for i in ms]

    def grid(f: Any) -> Matrix:
        return [[f(i, j) for j in ms] for i in ms]

    if name == "zero":
        return build(grid(lambda i, j: 0), mixed(0), mixed(1), rev, [1] * m, base=base)
    if name == "in_place":
        sym = grid(lambda i, j: (i + j) % 3 + 1)
        return build(sym, mixed(0), mixed(1), rev, [2] * m, base=base, inplace=True, seed=2)
    if name == "derived":
        every = grid(lambda i, j: True)
        counts = grid(lambda i, j: (i + 2 * j) % 4 + 1)
        return build(counts, every, every, rev, [1] * m, base=base, nonblocking=True, seed=3)
    if name == "large":  # 160 KB blocks: past every eager limit, contiguous and strided
        counts = grid(lambda i, j: 40000 + i - j)
        return build(counts, mixed(0), mixed(1), rev, [1] * m, base=base, seed=4)
    if name == "self":  # guard: Open MPI writes past the buffer (open_mpi_self_alltoallw)
        return build([[3]], [[False]], [[False]], [0], [2], base=base, seed=1) | {"guard": 64}
    counts = grid(lambda i, j: (i + 2 * j) % 4 + 1)  # plain, odd
    return build(counts, mixed(0), mixed(1), rev, [1] * m, base=base, seed=1)


@pytest.mark.covers(
    "mpi",
    *cells(
        ["alltoallw"],
        [
            "plain",
            "in_place",
            "zero_count",
            "size_1",
            "odd_size",
            "displacements",
            "derived_type",
            "protocol_sizes",
        ],
    ),
)
@pytest.mark.parametrize("name", ["plain", "self", "odd", "zero", "in_place", "derived", "large"])
def test_alltoallw_covering_set(mpi_conformance_peer: ConformancePeer, name: str) -> None:
    """Mixed datatypes with reversed, gapped displacements on the world, COMM_SELF and an odd
    communicator; every count zero; MPI_IN_PLACE; vectors on both sides (the I-variant);
    160 KB blocks."""
    peer = mpi_conformance_peer
    check(peer, covering(name, peer.ranks), name)


def open_mpi_self_alltoallw(
    peer: ConformancePeer, case: dict[str, Any], rep: dict[str, Any]
) -> str | None:
    """Open MPI's MPI_Alltoallw on a one-process communicator (coll/self) multiplies the
    byte displacements by the datatype's extent: the block lands (and is read) that many
    times further, here past the receive buffer, into the guard behind it. Keyed by the
    receive buffer left as it was and the guard written."""
    if not peer.info.library.startswith("Open MPI") or case.get("members") != "self":
        return None
    untouched = digest(pattern("int32", case["recv_extent"][0], case["seed"] + 500))
    if rep.get("guard", True) or rep["recv"] != untouched or case["recv_displs"][0][0] == 0:
        return None
    return (
        f"{peer.info.release} defect: MPI_Alltoallw on MPI_COMM_SELF took the byte "
        f"displacement {4 * case['recv_displs'][0][0]} as a count of extents: the block "
        "landed past the receive buffer (docs/examples/defects/open_mpi_self_alltoallw.py)"
    )


EMPTY_TYPE_LIMIT = 2.0  # s the peer polls the request; the call takes ms


@pytest.mark.covers("mpi", *cells(["alltoallw"], ["in_place", "zero_count", "derived_type"]))
def test_ialltoallw_in_place_with_empty_datatypes(mpi_conformance_peer: ConformancePeer) -> None:
    """MPI_Ialltoallw with MPI_IN_PLACE where every block but rank 0's own is count 1 of an
    empty vector (a zero-size type map: nothing moves, the same as count 0)."""
    peer = mpi_conformance_peer
    n = peer.ranks
    counts = [[int(i == j == 0) for j in range(n)] for i in range(n)]
    every = [[True] * n for _ in range(n)]
    case = build(counts, every, every, list(range(n)), [1] * n, inplace=True, nonblocking=True)
    case |= {"empty_types": True, "poll_limit": EMPTY_TYPE_LIMIT}
    reports = peer.run(case)
    if (why := open_mpi_ialltoallw_empty_types(peer, reports)) is not None:
        raise KnownDefect(why)
    check(peer, case)


def open_mpi_ialltoallw_empty_types(
    peer: ConformancePeer, reports: list[dict[str, Any]]
) -> str | None:
    """Open MPI's MPI_Ialltoallw with MPI_IN_PLACE never completes on the rank with a
    non-empty block when another rank's blocks are all count 1 of an empty datatype (the
    blocking call, and count 0, complete). Keyed by rank 0's request alone incomplete."""
    if not peer.info.library.startswith("Open MPI"):
        return None
    if [bool(r.get("incomplete")) for r in reports] != [True] + [False] * (len(reports) - 1):
        return None
    return (
        f"{peer.info.release} defect: MPI_Ialltoallw with MPI_IN_PLACE did not complete on "
        f"rank 0 in {EMPTY_TYPE_LIMIT:.0f}s when the other ranks' blocks are all count 1 of "
        "an empty datatype (docs/examples/defects/open_mpi_ialltoallw_in_place_empty_types.py)"
    )
