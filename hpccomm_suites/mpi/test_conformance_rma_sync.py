"""One-sided communication by each synchronisation mode (MPI 4.1, 12.5): fence, passive target
(MPI_Win_lock/unlock, MPI_Win_lock_all + MPI_Win_flush) and post/start/complete/wait, with
MPI_PROC_NULL targets, zero counts, target displacements, vector datatypes on both sides,
160 KB transfers, on the world, MPI_COMM_SELF and an odd Split communicator; and the atomics
(MPI_Fetch_and_op, MPI_Compare_and_swap, MPI_Get_accumulate) from every rank at once
(peer/conformance_rma_sync.py)."""

from __future__ import annotations

from itertools import accumulate
from typing import Any

import numpy as np
import pytest

from hpccomm_suites.mpi.test_conformance_rma import open_mpi_41_window
from hpccomm_suites.mpi.test_conformance_topology import on, reports_by_comm
from pytest_hpccomm.coverage import cells
from pytest_hpccomm.stacks.mpi.conformance import ConformancePeer, known_raise
from pytest_hpccomm.stacks.mpi.peer.payload import digest, pattern

pytestmark = [
    pytest.mark.conformance,
    pytest.mark.stack("mpi"),
    pytest.mark.fabric("ethernet", "ipoib", "ib", "roce"),
]

SYNCS = {"fence": "rma_fence", "lock": "rma_lock", "lock_all": "rma_lock", "pscw": "rma_pscw"}
# (name, options): PROC_NULL targets (not for pscw: its groups name real ranks), count 0,
# vectors on both sides at a displacement, 160 KB
VARIANTS: list[tuple[str, dict[str, Any]]] = [
    ("plain", {}),
    ("proc_null", {"proc_null": True}),
    ("zero", {"count": 0}),
    ("derived", {"derived": True, "disp": 3}),
    ("large", {"count": 40000, "disp": 1}),
]


def sync_case(sync: str, size: str, n: int, variant: dict[str, Any]) -> dict[str, Any]:
    case: dict[str, Any] = {
        "kind": "rma_sync",
        "sync": sync,
        "count": 5,
        "disp": 2,
        "derived": False,
        "seed": 4,
    }
    case |= variant
    k = case["count"]
    span = max(2 * k - 1, 0) if case["derived"] else k
    return case | {"window": case["disp"] + span + 3} | on(size, n)


def rma_reports(peer: ConformancePeer, case: dict[str, Any]) -> list[tuple[int, Any, list[int]]]:
    """reports_by_comm() of a one-sided case; Open MPI 4.1's window defect, when this failure
    is it, is an xfail (test_conformance_rma.open_mpi_41_window)."""
    with known_raise(lambda raised: open_mpi_41_window(peer, raised.reports)):
        return reports_by_comm(peer, case)


def check_sync(peer: ConformancePeer, case: dict[str, Any], name: str) -> None:
    hint = f"variant {name}\n" + peer.replay_hint(case)
    k, disp, seed = case["count"], case["disp"], case["seed"]
    step = 2 if case["derived"] else 1
    for rank, rep, members in rma_reports(peer, case):
        m, r = len(members), members.index(rank)
        left = (r - 1) % m
        window = pattern("int32", case["window"], seed + 500 + r)
        mine = pattern("int32", max(2 * k - 1, 0) if case["derived"] else k, seed + r)[::step]
        if case.get("proc_null"):
            got = np.zeros(k, np.int32)  # nothing moves: the Get leaves its buffer
        else:
            theirs = pattern("int32", max(2 * k - 1, 0) if case["derived"] else k, seed + left)
            window[disp + step * np.arange(k)] = theirs[::step]
            got = mine
        want = {"got": digest(got), "window": digest(window)}
        assert rep == want, (
            f"rank {rank} (communicator of {m}, {case['sync']}): got "
            f"{'the right' if rep['got'] == want['got'] else 'wrong'} Get data and "
            f"{'the right' if rep['window'] == want['window'] else 'a wrong'} window\n{hint}"
        )


@pytest.mark.covers(
    "mpi",
    *cells(["rma_fence", "rma_lock", "rma_pscw"], ["plain", "size_1", "odd_size"])
    + cells(["rma_fence", "rma_lock"], ["proc_null", "zero_count", "displacements"])
    + cells(["rma_fence", "rma_lock"], ["derived_type", "protocol_sizes"]),
)
@pytest.mark.parametrize("size", ["world", "self", "odd"])
@pytest.mark.parametrize("sync", list(SYNCS))
def test_rma_by_synchronisation(
    mpi_conformance_peer: ConformancePeer, sync: str, size: str
) -> None:
    """Each rank Puts into its right neighbour's window and Gets it back in the next epoch;
    every window ends with exactly its left neighbour's data at the displacement, nothing
    else changed; with MPI_PROC_NULL targets nothing moves."""
    peer = mpi_conformance_peer
    for name, variant in VARIANTS:
        if name == "proc_null" and sync == "pscw":
            continue
        check_sync(peer, sync_case(sync, size, peer.ranks, variant), name)


@pytest.mark.covers("mpi", *cells(["rma_lock"], ["plain", "size_1", "odd_size"]))
@pytest.mark.parametrize("size", ["world", "self", "odd"])
def test_rma_atomics(mpi_conformance_peer: ConformancePeer, size: str) -> None:
    """Every rank at once on rank 0's window: Fetch_and_op hands out 0..m-1, each once, and
    leaves m; exactly one Compare_and_swap finds -1, and its rank is what the others find
    and what stays; Get_accumulate's fetched values are the prefix sums in some order."""
    peer = mpi_conformance_peer
    case = {"kind": "rma_atomic"} | on(size, peer.ranks)
    hint = peer.replay_hint(case)
    groups: dict[tuple[int, ...], list[tuple[int, dict[str, Any]]]] = {}
    for rank, rep, members in rma_reports(peer, case):
        groups.setdefault(tuple(members), []).append((members.index(rank), rep))
    for group, reps in groups.items():
        members = list(group)
        m = len(members)
        fetched = [rep["fetched"] for _, rep in reps]
        window = next(rep["window"] for r, rep in reps if r == 0)
        assert sorted(f[0] for f in fetched) == list(range(m)) and window[0] == m, (
            f"Fetch_and_op over {members}: fetched {[f[0] for f in fetched]}, "
            f"counter {window[0]}\n{hint}"
        )
        winners = [r for r, rep in reps if rep["fetched"][1] == -1]
        others = {rep["fetched"][1] for r, rep in reps if r not in winners}
        assert len(winners) == 1 and window[1] == winners[0] and others <= {winners[0]}, (
            f"Compare_and_swap over {members}: winners {winners}, the others found "
            f"{sorted(others)}, the slot holds {window[1]}\n{hint}"
        )
        order = sorted(reps, key=lambda x: x[1]["fetched"][2])
        prefix = [0, *accumulate(r + 1 for r, _ in order)]
        assert [rep["fetched"][2] for _, rep in order] == prefix[:-1] and window[2] == prefix[-1], (
            f"Get_accumulate over {members}: {fetched}, total {window[2]}\n{hint}"
        )
