"""Groups, communicator constructors, intercommunicators, process topologies and the barrier
(MPI 4.1 chapters 6.3, 7, 8) against the standard's definitions, computed here in Python:
Group_incl/excl/union/intersection/difference/translate_ranks/compare, Comm_create(_group),
Intercomm_create + traffic + Intercomm_merge, Dims_create, Cart_create/coords/rank/shift/sub,
Dist_graph_create_adjacent + Neighbor_allgather/alltoall, Barrier, Comm_dup/idup; each on the
world, on MPI_COMM_SELF and on a Split communicator of odd size.

The odd-size cases need 3 ranks: at a 2-rank placement (netns, default --hpc-vhosts) each of
them skips alone, naming the size it needs.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_hpccomm.coverage import cells
from pytest_hpccomm.stacks.mpi.conformance import (
    CaseRaised,
    ConformancePeer,
    conformance_settings,
    known_loss,
    known_raise,
    run_covering,
)
from pytest_hpccomm.stacks.mpi.peer.payload import digest, pattern

pytestmark = [
    pytest.mark.conformance,
    pytest.mark.stack("mpi"),
    pytest.mark.fabric("ethernet", "ipoib", "ib", "roce"),
]

SIZES = ("world", "self", "odd")
BARRIER_DELAY = 0.05  # s the late rank waits before it enters


def odd_members(n: int) -> list[int]:
    """The first k world ranks, k the largest odd number in 3..n; skips the case (alone) when
    the peer has fewer than 3 ranks."""
    k = n if n % 2 else n - 1
    if k < 3:
        pytest.skip(
            f"a communicator of odd size > 1 needs 3 ranks; this peer has {n} "
            "(netns: --hpc-vhosts 3)"
        )
    return list(range(k))


def on(size: str, n: int) -> dict[str, Any]:
    """The case field choosing the communicator: the world's duplicate, COMM_SELF, or an odd
    Split one (peer/conformance_topology.py)."""
    if size == "world":
        return {}
    return {"members": "self" if size == "self" else odd_members(n)}


def comm_of(case: dict[str, Any], rank: int, n: int) -> list[int] | None:
    """The world ranks of `rank`'s communicator in the case, by their rank in it; None if it
    has none."""
    members = case.get("members")
    if members is None:
        return list(range(n))
    if members == "self":
        return [rank]
    return list(members) if rank in members else None


def reports_by_comm(
    peer: ConformancePeer, case: dict[str, Any], timeout: float | None = None
) -> list[tuple[int, Any, list[int]]]:
    """(world rank, report, its communicator's world ranks) for each rank in the case's
    communicator; a rank outside it must have reported {}."""
    reports, hint = peer.run(case, timeout), peer.replay_hint(case)
    out = []
    for rank, rep in enumerate(reports):
        members = comm_of(case, rank, peer.ranks)
        if members is None:
            assert rep == {}, f"rank {rank} is outside the case's communicator: {rep}\n{hint}"
            continue
        out.append((rank, rep, members))
    return out


# -- barrier ---------------------------------------------------------------------------------


@pytest.mark.covers("mpi", *cells(["barrier"], ["plain", "size_1", "odd_size"]))
@pytest.mark.parametrize("size", SIZES)
def test_barrier_waits_for_the_last_rank(mpi_conformance_peer: ConformancePeer, size: str) -> None:
    """MPI_Barrier: no member leaves before every member has entered; the last rank of the
    communicator enters BARRIER_DELAY s late."""
    peer = mpi_conformance_peer
    base = on(size, peer.ranks)
    members = comm_of(base, 0, peer.ranks) or []
    case = {"kind": "barrier", "late": len(members) - 1, "delay": BARRIER_DELAY} | base
    got = reports_by_comm(peer, case)
    hint = peer.replay_hint(case)
    for _, rep, members in got:
        assert rep["size"] == len(members), f"barrier communicator of size {rep['size']}\n{hint}"
    groups: dict[tuple[int, ...], list[dict[str, Any]]] = {}
    for _, rep, members in got:
        groups.setdefault(tuple(members), []).append(rep)
    for members_key, reps in groups.items():
        last_in = max(r["enter"] for r in reps)
        first_out = min(r["exit"] for r in reps)
        assert first_out >= last_in, (
            f"communicator {list(members_key)}: a rank left the barrier "
            f"{last_in - first_out:.4f} s before the last one entered\n{hint}"
        )


# -- Comm_dup on sizes -----------------------------------------------------------------------


@pytest.mark.covers("mpi", *cells(["comm_dup"], ["size_1", "odd_size"]))
@pytest.mark.parametrize("idup", [False, True], ids=["dup", "idup"])
@pytest.mark.parametrize("size", ["self", "odd"])
def test_comm_dup_on_sizes(mpi_conformance_peer: ConformancePeer, size: str, idup: bool) -> None:
    """Comm_dup/Comm_idup of COMM_SELF and of an odd communicator: congruent, same size and
    rank, and a wildcard receive on either gets only its own communicator's message (on
    COMM_SELF each rank's messages go to itself)."""
    peer = mpi_conformance_peer
    case = {"kind": "dup_sized", "tag": 4, "count": 5, "seed": 11, "idup": idup}
    case |= on(size, peer.ranks)
    hint = peer.replay_hint(case)
    for rank, rep, members in reports_by_comm(peer, case):
        m, r = len(members), members.index(rank)
        frm = (r - 1) % m
        want = {
            "size": m,
            "rank": r,
            "congruent": True,
            "got": {
                "dup": [frm, 4, 5, digest(pattern("int32", 5, 11 + 1000 + frm))],
                "base": [frm, 4, 5, digest(pattern("int32", 5, 11 + frm))],
            },
        }
        assert rep == want, f"rank {rank}: got {rep}, expected {want}\n{hint}"


# -- groups ----------------------------------------------------------------------------------


def group_expected(case: dict[str, Any], m: int, me: int) -> dict[str, Any]:
    """The standard's group algebra (MPI 4.1, 7.3.2): union = A, then B's members not in A;
    intersection and difference keep A's order."""
    a = case["a"]
    b = [x for x in range(m) if x not in case["b"]] if case["b_excl"] else case["b"]
    lists = {
        "a": a,
        "b": b,
        "union": a + [x for x in b if x not in a],
        "intersection": [x for x in a if x in b],
        "difference": [x for x in a if x not in b],
    }
    out: dict[str, Any] = {
        k: {"ranks": v, "size": len(v), "me": v.index(me) if me in v else None}
        for k, v in lists.items()
    }
    perm = case["perm"]
    out["compare_perm"] = (
        "ident" if perm == a else "similar" if sorted(perm) == sorted(a) else "unequal"
    )
    out["compare_self"] = "ident"
    out["translate"] = [a[i] for i in case["translate"]]
    out["size"] = m
    return out


def check_groups(peer: ConformancePeer, case: dict[str, Any]) -> None:
    hint = peer.replay_hint(case)
    for rank, rep, members in reports_by_comm(peer, case):
        want = group_expected(case, len(members), members.index(rank))
        assert rep == want, f"rank {rank}: got {rep}, expected {want}\n{hint}"


@st.composite
def group_cases(draw: Any, m: int) -> dict[str, Any]:
    ranks = st.lists(st.integers(0, m - 1), unique=True, max_size=m)
    a = draw(ranks)
    perm_kind = draw(st.sampled_from(["same", "permuted", "other"]))
    perm = (
        a
        if perm_kind == "same"
        else draw(st.permutations(a))
        if perm_kind == "permuted"
        else draw(ranks)
    )
    return {
        "kind": "groups",
        "a": a,
        "b": draw(ranks),
        "b_excl": draw(st.booleans()),
        "perm": list(perm),
        "translate": draw(st.lists(st.integers(0, len(a) - 1), max_size=4)) if a else [],
    }


@pytest.mark.covers("mpi", *cells(["groups"], ["plain"]))
@settings(conformance_settings(share=0.3))
@given(data=st.data())
def test_group_algebra(mpi_conformance_peer: ConformancePeer, data: st.DataObject) -> None:
    """Incl/Excl/Union/Intersection/Difference/Translate_ranks/Compare on the world's group
    give exactly the members, order and ranks the standard defines."""
    peer = mpi_conformance_peer
    check_groups(peer, data.draw(group_cases(peer.ranks), label="case"))


@pytest.mark.covers("mpi", *cells(["groups"], ["plain", "size_1", "odd_size"]))
@pytest.mark.parametrize("size", SIZES)
def test_group_algebra_covering_set(mpi_conformance_peer: ConformancePeer, size: str) -> None:
    """Fixed cases: reversed Incl against Excl of the first rank, empty groups (Excl of all,
    Incl of none), a permuted (SIMILAR) and a different (UNEQUAL) comparison."""
    peer = mpi_conformance_peer
    base = on(size, peer.ranks)
    m = len(comm_of(base, 0, peer.ranks) or [])
    everyone = list(range(m))
    cases = [
        {"a": everyone[::-1], "b": [0], "b_excl": True, "perm": everyone, "translate": [0]},
        {"a": [], "b": everyone, "b_excl": True, "perm": [], "translate": []},
        {"a": [m - 1], "b": [], "b_excl": False, "perm": [m - 1], "translate": [0]},
        {"a": everyone, "b": everyone[1:], "b_excl": False, "perm": everyone[:1], "translate": []},
    ]
    for c in cases:
        check_groups(peer, {"kind": "groups"} | c | base)


# -- Comm_create and Comm_create_group -------------------------------------------------------


def check_create(peer: ConformancePeer, case: dict[str, Any]) -> None:
    hint = peer.replay_hint(case)
    for rank, rep, members in reports_by_comm(peer, case):
        me = members.index(rank)
        if me not in case["group"]:
            assert rep == {"null": True}, f"rank {rank} is not in the group: {rep}\n{hint}"
            continue
        world = [members[g] for g in case["group"]]
        want = {
            "size": len(world),
            "rank": case["group"].index(me),
            "members": world,
            "sum": sum(w + 1 for w in world),
        }
        assert rep == want, f"rank {rank}: got {rep}, expected {want}\n{hint}"


@pytest.mark.covers("mpi", *cells(["comm_create"], ["plain"]))
@settings(conformance_settings(share=0.3))
@given(data=st.data())
def test_comm_create(mpi_conformance_peer: ConformancePeer, data: st.DataObject) -> None:
    """Comm_create / Comm_create_group over any ordered subset of the world: its members get
    a communicator ranked in the group's order whose traffic stays among them, the others
    MPI_COMM_NULL."""
    n = mpi_conformance_peer.ranks
    case = {
        "kind": "comm_create",
        "group": data.draw(st.lists(st.integers(0, n - 1), unique=True), label="group"),
        "how": data.draw(st.sampled_from(["create", "create_group"]), label="how"),
        "tag": data.draw(st.integers(0, 100), label="tag"),
    }
    check_create(mpi_conformance_peer, case)


@pytest.mark.covers("mpi", *cells(["comm_create"], ["plain", "size_1", "odd_size"]))
@pytest.mark.parametrize("how", ["create", "create_group"])
@pytest.mark.parametrize("size", SIZES)
def test_comm_create_covering_set(
    mpi_conformance_peer: ConformancePeer, size: str, how: str
) -> None:
    """The whole group reversed, the last rank alone, the empty group; on the world, on
    COMM_SELF and on an odd communicator."""
    peer = mpi_conformance_peer
    base = on(size, peer.ranks)
    m = len(comm_of(base, 0, peer.ranks) or [])
    for group in (list(range(m))[::-1], [m - 1], []):
        check_create(peer, {"kind": "comm_create", "group": group, "how": how, "tag": 7} | base)


# -- intercommunicators ----------------------------------------------------------------------


def check_intercomm(peer: ConformancePeer, case: dict[str, Any]) -> None:
    n, hint = peer.ranks, peer.replay_hint(case)
    a = sorted(case["low"])
    b = [r for r in range(n) if r not in a]
    merged = b + a if case["high_a"] else a + b
    for rank, rep in enumerate(peer.run(case)):
        mine, theirs = (a, b) if rank in a else (b, a)
        i, k = mine.index(rank), case["count"]
        want = {
            "inter": True,
            "size": len(mine),
            "rank": i,
            "remote_size": len(theirs),
            "got": [
                [j, k, digest(pattern("int32", k, case["seed"] + 100 * s + i))]
                for j, s in enumerate(theirs)
            ],
            "remote": theirs,
            "merged": {"size": n, "rank": merged.index(rank), "members": merged},
        }
        assert rep == want, f"rank {rank}: got {rep}, expected {want}\n{hint}"


@pytest.mark.covers("mpi", *cells(["intercommunicators"], ["plain"]))
@settings(conformance_settings(share=0.3))
@given(data=st.data())
def test_intercomm(mpi_conformance_peer: ConformancePeer, data: st.DataObject) -> None:
    """Intercomm_create between any split of the world in two: sizes, remote size, traffic to
    each remote rank, an Allgather that returns the remote group; Intercomm_merge puts the
    group that passed high=false first."""
    n = mpi_conformance_peer.ranks
    low = data.draw(
        st.lists(st.integers(0, n - 1), unique=True, min_size=1, max_size=n - 1), label="low"
    )
    case = {
        "kind": "intercomm",
        "low": sorted(low),
        "high_a": data.draw(st.booleans(), label="high_a"),
        "count": data.draw(st.sampled_from([0, 1, 7, 5000]), label="count"),
        "tag": data.draw(st.integers(0, 100), label="tag"),
        "seed": data.draw(st.integers(0, 1000), label="seed"),
    }
    check_intercomm(mpi_conformance_peer, case)


@pytest.mark.covers("mpi", *cells(["intercommunicators"], ["plain", "size_1", "odd_size"]))
@pytest.mark.parametrize("high_a", [False, True], ids=["a-low", "a-high"])
@pytest.mark.parametrize("size", ["size_1", "odd_size"])
def test_intercomm_covering_set(
    mpi_conformance_peer: ConformancePeer, size: str, high_a: bool
) -> None:
    """size_1: a group of one process (rank 0) against the rest; odd_size: groups of 1 and 2
    (or more) merged into a communicator of odd size, with either group high."""
    peer = mpi_conformance_peer
    if size == "odd_size" and peer.ranks % 2 == 0:
        pytest.skip(
            f"an intercommunicator over an odd number of processes needs an odd world; this "
            f"peer has {peer.ranks} ranks (netns: --hpc-vhosts 3)"
        )
    low = [0] if size == "size_1" else [peer.ranks - 1]
    case = {"kind": "intercomm", "low": low, "high_a": high_a, "count": 3, "tag": 9, "seed": 5}
    check_intercomm(peer, case)


# -- Cartesian topologies --------------------------------------------------------------------


@pytest.mark.covers("mpi", *cells(["cartesian"], ["plain"]))
def test_dims_create_matches_the_standards_examples(mpi_conformance_peer: ConformancePeer) -> None:
    """MPI_Dims_create: the standard's own examples (MPI 4.1, 8.5.2) and balanced splits
    with fixed entries kept."""
    calls = [
        ([6, [0, 0]], [3, 2]),
        ([7, [0, 0]], [7, 1]),
        ([6, [0, 3, 0]], [2, 3, 1]),
        ([1, [0, 0]], [1, 1]),
        ([12, [0, 0, 0]], [3, 2, 2]),
        ([16, [0, 0]], [4, 4]),
        ([8, [0, 2, 0]], [2, 2, 2]),
        ([3, [0]], [3]),
    ]
    case = {"kind": "dims", "calls": [c for c, _ in calls]}
    got = mpi_conformance_peer.run(case)[0]["dims"]
    assert got == [want for _, want in calls], mpi_conformance_peer.replay_hint(case)


def cart_expected(
    case: dict[str, Any], members: list[int], me: int, proc_null: int
) -> dict[str, Any]:
    dims, periods = case["dims"], case["periods"]
    grid = int(np.prod(dims))
    coords = [int(x) for x in np.unravel_index(me, dims)] if dims else []
    shifts = []
    for direction, disp in case["shifts"]:
        ends = []
        for step in (-disp, disp):
            x = coords[direction] + step
            if periods[direction]:
                x %= dims[direction]
            elif not 0 <= x < dims[direction]:
                ends.append(proc_null)
                continue
            ends.append(
                int(np.ravel_multi_index([*coords[:direction], x, *coords[direction + 1 :]], dims))
            )
        source, dest = ends
        shifts.append([source, dest, -1 if source == proc_null else source, source])
    keep = [d for d, r in enumerate(case["remain"]) if not r]
    same = [q for q in range(grid) if all(np.unravel_index(q, dims)[d] == coords[d] for d in keep)]
    return {
        "rank": me,
        "topo": True,
        "ndims": len(dims),
        "get": [dims, periods, coords],
        "coords": coords,
        "cart_rank": list(range(grid)),
        "shifts": shifts,
        "proc_null": proc_null,
        "sub": {"size": len(same), "rank": same.index(me), "members": [members[q] for q in same]},
    }


def mpich_cart_sub_null(peer: ConformancePeer, case: dict[str, Any], exc: CaseRaised) -> str | None:
    """MPICH before pmodels/mpich#7837: MPI_Cart_sub with every remain_dims false gives the
    zero-dimensional communicator to the grid's rank 0 only and MPI_COMM_NULL to the others,
    whose MPI_Comm_free of it then fails "Null communicator". Keyed by exactly those ranks
    failing exactly so."""
    if not peer.info.library.startswith("MPICH") or any(case["remain"]):
        return None
    raised = [r for r, rep in enumerate(exc.reports) if "error" in rep]
    if not raised or not all(
        "MPI_Comm_free" in exc.reports[r]["error"]
        and "Null communicator" in exc.reports[r]["error"]
        for r in raised
    ):
        return None
    return (
        f"{peer.info.release} defect: MPI_Cart_sub with every remain_dims false gave "
        f"MPI_COMM_NULL on ranks {raised}, not a zero-dimensional communicator "
        "(pmodels/mpich#7832; docs/examples/defects/mpich_cart_sub_zero_dims.py)"
    )


def check_cart(peer: ConformancePeer, case: dict[str, Any]) -> None:
    hint = peer.replay_hint(case)
    proc_null = peer.info.constants["PROC_NULL"]
    grid = int(np.prod(case["dims"]))
    with known_raise(lambda raised: mpich_cart_sub_null(peer, case, raised)):
        reports = reports_by_comm(peer, case)
    for rank, rep, members in reports:
        me = members.index(rank)
        if me >= grid:
            assert rep == {"null": True}, f"rank {rank} is past the grid: {rep}\n{hint}"
            continue
        want = cart_expected(case, members, me, proc_null)
        assert rep == want, f"rank {rank}: got {rep}, expected {want}\n{hint}"


@st.composite
def cart_cases(draw: Any, n: int) -> dict[str, Any]:
    ndims = draw(st.integers(1, 3))
    dims: list[int] = []
    for _ in range(ndims):
        room = n // max(1, int(np.prod(dims)))
        dims.append(draw(st.integers(1, max(1, room))))
    shifts = st.tuples(st.integers(0, ndims - 1), st.integers(-2, 2)).map(list)
    return {
        "kind": "cart",
        "dims": dims,
        "periods": draw(st.lists(st.booleans(), min_size=ndims, max_size=ndims)),
        "shifts": draw(st.lists(shifts, min_size=1, max_size=3)),
        "remain": draw(st.lists(st.booleans(), min_size=ndims, max_size=ndims)),
    }


@pytest.mark.covers("mpi", *cells(["cartesian"], ["plain", "proc_null"]))
@settings(conformance_settings(share=0.3))
@given(data=st.data())
def test_cart(mpi_conformance_peer: ConformancePeer, data: st.DataObject) -> None:
    """Cart_create over any grid that fits the world (ranks past it get MPI_COMM_NULL):
    row-major coordinates, Cart_rank, Cart_get, Cart_shift (MPI_PROC_NULL off a non-periodic
    edge, and a Sendrecv along it leaves the buffer alone), Cart_sub."""
    check_cart(
        mpi_conformance_peer, data.draw(cart_cases(mpi_conformance_peer.ranks), label="case")
    )


@pytest.mark.covers("mpi", *cells(["cartesian"], ["plain", "proc_null", "size_1", "odd_size"]))
@pytest.mark.parametrize("size", SIZES)
def test_cart_covering_set(mpi_conformance_peer: ConformancePeer, size: str) -> None:
    """A non-periodic ring (both ends shift to MPI_PROC_NULL) and a periodic one, 2-D grids
    with Cart_sub of each dimension, and a grid one rank short of the communicator."""
    peer = mpi_conformance_peer
    base = on(size, peer.ranks)
    m = len(comm_of(base, 0, peer.ranks) or [])
    two = [m, 1] if m % 2 else [m // 2, 2]
    cases = [
        {"dims": [m], "periods": [False], "shifts": [[0, 1], [0, -1], [0, 2]], "remain": [True]},
        {"dims": [m], "periods": [True], "shifts": [[0, 1], [0, -2]], "remain": [False]},
        {
            "dims": two,
            "periods": [False, True],
            "shifts": [[0, 1], [1, 1]],
            "remain": [True, False],
        },
        {"dims": two, "periods": [True, False], "shifts": [[1, -1]], "remain": [False, True]},
    ]
    if m > 1:
        cases.append({"dims": [m - 1], "periods": [False], "shifts": [[0, 1]], "remain": [True]})
    run_covering(
        {f"dims {c['dims']} periods {c['periods']} remain {c['remain']}": c for c in cases},
        lambda c: check_cart(peer, {"kind": "cart"} | c | base),
    )


# -- distributed graphs ----------------------------------------------------------------------


def graph_case(edges: list[tuple[int, int]], m: int, base: dict[str, Any]) -> dict[str, Any]:
    """Adjacency lists of `edges` (each edge once: which of two parallel edges' blocks
    matches which is left to matching order), sources in edge order, destinations reversed."""
    return {
        "kind": "graph",
        "sources": [[i for i, j in edges if j == r] for r in range(m)],
        "destinations": [[j for i, j in edges if i == r][::-1] for r in range(m)],
        "count": 3,
        "seed": 17,
    } | base


def check_graph(peer: ConformancePeer, case: dict[str, Any], timeout: float | None = None) -> None:
    hint, n = peer.replay_hint(case), case["count"]
    srcs, dsts, seed = case["sources"], case["destinations"], case["seed"]
    for rank, rep, members in reports_by_comm(peer, case, timeout):
        r = members.index(rank)
        want = {
            "topo": True,
            "count": [len(srcs[r]), len(dsts[r])],
            "neighbors": [srcs[r], dsts[r]],
            "allgather": [digest(pattern("int32", n, seed + s)) for s in srcs[r]],
            "alltoall": [
                digest(
                    pattern("int32", n * len(dsts[s]), seed + 100 + s)[
                        dsts[s].index(r) * n : (dsts[s].index(r) + 1) * n
                    ]
                )
                for s in srcs[r]
            ],
        }
        assert rep == want, f"rank {rank}: got {rep}, expected {want}\n{hint}"


@pytest.mark.covers("mpi", *cells(["graphs"], ["plain"]))
@settings(conformance_settings(share=0.3))
@given(data=st.data())
def test_dist_graph(mpi_conformance_peer: ConformancePeer, data: st.DataObject) -> None:
    """Dist_graph_create_adjacent over any graph of the world (self-loops, isolated ranks):
    its neighbor lists come back as given, and Neighbor_allgather/alltoall deliver each
    source's block in the sources' order."""
    n = mpi_conformance_peer.ranks
    pairs = [(i, j) for i in range(n) for j in range(n)]
    edges = data.draw(st.lists(st.sampled_from(pairs), unique=True), label="edges")
    check_graph(mpi_conformance_peer, graph_case(edges, n, {}))


@pytest.mark.covers("mpi", *cells(["graphs"], ["plain", "size_1", "odd_size"]))
@pytest.mark.parametrize("size", SIZES)
def test_dist_graph_covering_set(mpi_conformance_peer: ConformancePeer, size: str) -> None:
    """A ring both ways, the complete graph with self-loops, a graph without edges."""
    peer = mpi_conformance_peer
    base = on(size, peer.ranks)
    m = len(comm_of(base, 0, peer.ranks) or [])
    ring = [(i, (i + 1) % m) for i in range(m)] + [((i + 1) % m, i) for i in range(m)]
    complete = [(i, j) for i in range(m) for j in range(m)][::-1]
    for edges in (list(dict.fromkeys(ring)), complete, []):
        check_graph(peer, graph_case(edges, m, base))


ZERO_RECVCOUNT_TIMEOUT = 3.0  # s: the defect hangs the case; the rest of it takes ms


@pytest.mark.covers("mpi", *cells(["graphs"], ["plain"]))
def test_neighbor_allgather_recvcount_of_a_rank_without_sources(
    mpi_conformance_peer: ConformancePeer,
) -> None:
    """A rank without sources receives nothing, so its recvcount matches no one's signature:
    passing 0 (what mpi4py infers from its empty buffer) must not stop its sends. A chain
    0 -> 1 -> ... -> n-1: rank 0 has no sources."""
    peer = mpi_conformance_peer
    n = peer.ranks
    case = graph_case([(i, i + 1) for i in range(n - 1)], n, {}) | {"zero_recvcount": True}
    with known_loss(peer, lambda lost: open_mpi_neighbor_allgather_zero_recvcount(peer, str(lost))):
        check_graph(peer, case, timeout=ZERO_RECVCOUNT_TIMEOUT)


NEIGHBOR_ALLGATHER = "PMPI_Neighbor_allgather"


def open_mpi_neighbor_allgather_zero_recvcount(peer: ConformancePeer, lost: str) -> str | None:
    """Open MPI's MPI_Neighbor_allgather returns at once on a rank whose recvcount is 0,
    without sending to its destinations (its argument check, copied from MPI_Allgather where
    a 0 count means no data anywhere), so they wait forever; MPI_Ineighbor_allgather and
    MPICH deliver. Keyed by the case hanging with a rank's native stack in that call."""
    if not peer.info.library.startswith("Open MPI"):
        return None
    if not any("native:" in line and NEIGHBOR_ALLGATHER in line for line in lost.splitlines()):
        return None
    return (
        f"{peer.info.release} defect: MPI_Neighbor_allgather with recvcount 0 on a rank "
        "without sources skips that rank's sends; its destinations hung in "
        f"{NEIGHBOR_ALLGATHER} (docs/examples/defects/open_mpi_neighbor_allgather_zero_recvcount.py)"
    )
