"""Communicators: Split by (color, key) and Dup, checked by their sizes and ranks and by
traffic that must stay inside them."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_hpccomm.cluster.placement import LOOPBACK
from pytest_hpccomm.coverage import cells
from pytest_hpccomm.stacks.mpi.conformance import (
    LOOPBACK_RANKS,
    ConformancePeer,
    conformance_settings,
)
from pytest_hpccomm.stacks.mpi.peer.payload import digest, pattern

pytestmark = [
    pytest.mark.conformance,
    pytest.mark.stack("mpi"),
    pytest.mark.fabric("ethernet", "ipoib", "ib", "roce"),
]


@st.composite
def split_cases(draw: Any, n: int) -> dict[str, Any]:
    color = st.one_of(st.integers(0, 3), st.none())  # None: MPI.UNDEFINED
    return {
        "kind": "split",
        "colors": draw(st.lists(color, min_size=n, max_size=n)),
        "keys": draw(st.lists(st.integers(-3, 3), min_size=n, max_size=n)),
    }


@pytest.mark.covers(
    "mpi",
    *cells(["comm_split"], ["plain"]) + cells(["allgather", "allreduce"], ["plain"]),
)
@settings(conformance_settings())
@given(data=st.data())
def test_comm_split(mpi_conformance_peer: ConformancePeer, data: st.DataObject) -> None:
    """Split(color, key): each color gets a communicator of its ranks ordered by (key, old
    rank); UNDEFINED gets COMM_NULL; an Allgather/Allreduce in it sees only its members."""
    check_split(
        mpi_conformance_peer, data.draw(split_cases(mpi_conformance_peer.ranks), label="case")
    )


def covering_splits(n: int) -> list[tuple[str, list[int | None], list[int]]]:
    """Splits the quick profile must cover every run: keys that reverse and rotate the old
    order (a Split that sorts by old rank only passes anything else), equal keys (ties go by
    old rank), colors that interleave, UNDEFINED, one rank alone."""
    return [
        ("one-color-reversed", [0] * n, list(range(n, 0, -1))),
        ("one-color-rotated", [0] * n, [(r + 1) % n for r in range(n)]),
        ("equal-keys", [0] * n, [1] * n),
        ("interleaved-negative-keys", [r % 2 for r in range(n)], [-r for r in range(n)]),
        ("undefined-and-alone", [None] + [1] * (n - 2) + [2], [0] * n),
    ]


@pytest.mark.covers(
    "mpi",
    *cells(["comm_split"], ["plain", "size_1"])
    + cells(["allgather", "allreduce"], ["plain", "size_1"]),
)
def test_comm_split_covering_set(mpi_conformance_peer: ConformancePeer) -> None:
    for name, colors, keys in covering_splits(mpi_conformance_peer.ranks):
        check_split(mpi_conformance_peer, {"kind": "split", "colors": colors, "keys": keys}, name)


@pytest.mark.covers("mpi", *cells(["comm_split"], ["odd_size"]))
def test_comm_split_into_an_odd_communicator(mpi_conformance_peer: ConformancePeer) -> None:
    """A Split whose first color has 3 ranks (keys reversing them) and whose others, if any,
    go alone or to UNDEFINED; the 3-rank communicator is then split again by parity of its
    new ranks (Split of an odd communicator): sizes 2 and 1."""
    peer = mpi_conformance_peer
    n = peer.ranks
    if n < 3:
        pytest.skip(
            f"a communicator of odd size > 1 needs 3 ranks; this peer has {n} "
            "(netns: --hpc-vhosts 3)"
        )
    colors: list[int | None] = [0, 0, 0]
    colors += [None if r % 2 else r for r in range(3, n)]
    keys = [3 - r if r < 3 else 0 for r in range(n)]
    check_split(peer, {"kind": "split", "colors": colors, "keys": keys}, "odd")
    # again inside the odd communicator: case_split's `members` runs it on their Split
    inner = {"kind": "split", "members": [2, 1, 0], "colors": [0, 1, 0], "keys": [0, 0, 0]}
    reports = peer.run(inner)
    hint = peer.replay_hint(inner)
    for rank, rep in enumerate(reports):
        if rank > 2:
            assert rep == {}, f"rank {rank} is outside the odd communicator: {rep}\n{hint}"
            continue
        local = [2, 1, 0].index(rank)
        same = [w for i, w in enumerate([2, 1, 0]) if i % 2 == local % 2]
        want = {"size": len(same), "rank": same.index(rank), "members": same}
        want["sum"] = sum(m + 1 for m in same)
        assert rep == want, f"rank {rank}: got {rep}, expected {want}\n{hint}"


def check_split(peer: ConformancePeer, case: dict[str, Any], name: str = "") -> None:
    reports = peer.run(case)
    hint = (f"covering case {name}\n" if name else "") + peer.replay_hint(case)
    colors, keys = case["colors"], case["keys"]
    for rank, rep in enumerate(reports):
        if colors[rank] is None:
            assert rep == {"null": True}, (
                f"rank {rank}: UNDEFINED color must give COMM_NULL, got {rep}\n{hint}"
            )
            continue
        members = sorted(
            (r for r in range(peer.ranks) if colors[r] == colors[rank]), key=lambda r: (keys[r], r)
        )
        want = {
            "size": len(members),
            "rank": members.index(rank),
            "members": members,
            "sum": sum(m + 1 for m in members),
        }
        assert rep == want, (
            f"rank {rank} (color {colors[rank]}, key {keys[rank]}): got "
            f"{rep}, expected {want}\n{hint}"
        )


@st.composite
def dup_cases(draw: Any, n: int) -> dict[str, Any]:
    order = st.permutations(["base", "dup"])
    return {
        "kind": "dup",
        "src": draw(st.integers(0, n - 1)),
        "dst": draw(st.integers(0, n - 1)),
        "tag": draw(st.integers(0, 100)),
        "dtype": draw(st.sampled_from(["uint8", "int32", "float64"])),
        "count": draw(st.one_of(st.integers(0, 16), st.integers(0, 40000))),
        "send_order": draw(order),
        "recv_order": draw(order),
        "wild": draw(st.booleans()),
        "seed": draw(st.integers(0, 1000)),
    }


@pytest.mark.covers(
    "mpi",
    *cells(["comm_dup"], ["plain"]),
)
@settings(conformance_settings())
@given(data=st.data())
def test_comm_dup_isolation(mpi_conformance_peer: ConformancePeer, data: st.DataObject) -> None:
    """Dup gives a congruent communicator (same size, same ranks) whose traffic never matches
    a receive on the original, even with the same source and tag or with wildcards."""
    peer = mpi_conformance_peer
    case = data.draw(dup_cases(peer.ranks), label="case")
    reports = peer.run(case)
    hint = peer.replay_hint(case)
    for rank, rep in enumerate(reports):
        assert (rep["size"], rep["rank"], rep["congruent"]) == (peer.ranks, rank, True), (
            f"rank {rank}: Dup has size {rep['size']}, rank {rep['rank']}, congruent "
            f"{rep['congruent']}\n{hint}"
        )
    got = reports[case["dst"]]["got"]
    for which, seed in (("base", case["seed"]), ("dup", case["seed"] + 1)):
        g = got[which]
        want = (
            case["src"],
            case["tag"],
            case["count"],
            digest(pattern(case["dtype"], case["count"], seed)),
        )
        assert (g["source"], g["tag"], g["count"], g["sha"]) == want, (
            f"the receive on {which} did not get the message sent on {which}\n{hint}"
        )


@pytest.mark.covers("mpi")  # the harness's placement, no cell of the standard
def test_peer_world_matches_placement(
    mpi_conformance_peer: ConformancePeer, hpc_placement: str
) -> None:
    """Not a property, the premise of all of them: the peer's COMM_WORLD is what the placement
    promises and, on the virtual cluster, its bytes cross the veth fabric (namespaces share
    /dev/shm: a silent shared-memory path would test the wrong transport)."""
    peer = mpi_conformance_peer
    info = peer.info
    if hpc_placement == LOOPBACK:
        assert (info.ranks, len(set(info.hosts))) == (LOOPBACK_RANKS, 1), info
        return
    cluster = peer.cluster
    assert cluster is not None
    assert info.hosts == [h.name for h in cluster.hosts], "not one rank per virtual host"
    size = 1 << 20
    before = cluster.counters(info.hosts[0])
    peer.run(
        {
            "kind": "p2p",
            "dtype": "uint8",
            "count": size,
            "send": "send",
            "recv": "recv",
            "src": 0,
            "dst": 1,
            "tag": 0,
            "slack": 0,
            "seed": 0,
        }
    )
    sent = cluster.counters(info.hosts[0])[1] - before[1]
    assert sent >= size, f"rank 0's fab0 sent {sent} bytes for a {size}-byte message"
