"""Point-to-point on a communicator of any size: every rank sends to the next and receives from
the previous (on MPI_COMM_SELF, itself), by each send mode, Isend/Issend, Sendrecv(_replace),
Probe/Iprobe, Mprobe/Improbe and persistent requests; with MPI_ANY_SOURCE/MPI_ANY_TAG,
MPI_STATUS_IGNORE, a derived (vector) send type, zero counts and MPI_Test completion
(peer/conformance_ring.py). Each receive must get its left neighbour's data, and its status
(unless ignored) that neighbour, the tag and the count."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

from hpccomm_suites.mpi.test_conformance_topology import on, reports_by_comm
from pytest_hpccomm.cluster.placement import LOOPBACK
from pytest_hpccomm.coverage import cells
from pytest_hpccomm.errors import KnownDefect
from pytest_hpccomm.stacks.mpi.conformance import (
    CaseRaised,
    ConformancePeer,
    known_loss,
    known_raise,
)
from pytest_hpccomm.stacks.mpi.env import MpiRuntime
from pytest_hpccomm.stacks.mpi.peer.payload import digest, pattern

pytestmark = [
    pytest.mark.conformance,
    pytest.mark.stack("mpi"),
    pytest.mark.fabric("ethernet", "ipoib", "ib", "roce"),
]

FAMILY = {
    "send": "send_modes",
    "ssend": "send_modes",
    "bsend": "send_modes",
    "rsend": "send_modes",
    "isend": "nonblocking",
    "issend": "nonblocking",
    "sendrecv": "sendrecv",
    "sendrecv_replace": "sendrecv",
    "probe": "probe",
    "iprobe": "probe",
    "mprobe": "mprobe",
    "improbe": "mprobe",
    "persistent": "persistent",
}
# (name, options): plain, wildcards, statuses ignored, a vector send type (not for
# Sendrecv_replace: one buffer, one type), count 0 completed by MPI_Test
VARIANTS: list[tuple[str, dict[str, Any]]] = [
    ("plain", {}),
    ("wild", {"wild": True}),
    ("ignore", {"ignore": True, "test": True}),
    ("derived", {"derived": True, "count": 1000}),
    ("zero-test", {"count": 0, "test": True}),
]


def ring_case(call: str, size: str, n: int, variant: dict[str, Any]) -> dict[str, Any]:
    case = {
        "kind": "ring",
        "call": call,
        "dtype": "int32",
        "count": 7,
        "tag": 5,
        "seed": 3,
        "wild": False,
        "ignore": False,
        "derived": False,
        "test": False,
    }
    return case | variant | on(size, n)


def check_ring(peer: ConformancePeer, case: dict[str, Any], name: str) -> None:
    hint = f"variant {name}\n" + peer.replay_hint(case)
    k, dtype, seed = case["count"], case["dtype"], case["seed"]
    rounds = 2 if case["call"] == "persistent" else 1
    for rank, rep, members in reports_by_comm(peer, case):
        m = len(members)
        left = (members.index(rank) - 1) % m
        want = []
        for j in range(rounds):
            s = seed + left + 10 * j
            data = (
                pattern(dtype, max(2 * k - 1, 0), s)[::2]
                if case["derived"]
                else pattern(dtype, k, s)
            )
            status = [None] * 3 if case["ignore"] else [left, case["tag"], k]
            want.append([*status, digest(data)])
        assert rep == {"got": want}, (
            f"rank {rank} (communicator of {m}): got {rep['got']}, expected {want} "
            f"([source, tag, count, data] from rank {left})\n{hint}"
        )


def covered(calls: list[str], classes: list[str]) -> list[str]:
    return cells(sorted({FAMILY[c] for c in calls}), classes)


@pytest.mark.covers(
    "mpi",
    *covered(list(FAMILY), ["plain", "size_1", "odd_size", "status_ignore", "zero_count"])
    + covered(list(FAMILY), ["any_source", "any_tag"])
    + covered([c for c in FAMILY if c != "sendrecv_replace"], ["derived_type"])
    + cells(["wait_test"], ["plain", "zero_count", "status_ignore"]),
)
@pytest.mark.parametrize("size", ["world", "self", "odd"])
@pytest.mark.parametrize("call", list(FAMILY))
def test_ring(mpi_conformance_peer: ConformancePeer, call: str, size: str) -> None:
    """Each variant (VARIANTS) of `call` on the world, on MPI_COMM_SELF and on an odd
    communicator."""
    peer = mpi_conformance_peer
    for name, variant in VARIANTS:
        if name == "derived" and call == "sendrecv_replace":
            continue
        check_ring(peer, ring_case(call, size, peer.ranks, variant), name)


# derived last: Open MPI's defect with it ends the test (open_mpi_partitioned_offsets)
PARTITIONED: list[tuple[str, dict[str, Any]]] = [
    ("plain", {}),
    # MPI_PROC_NULL: test_partitioned_with_proc_null, on a job of its own
    ("zero", {"count": 0}),
    ("ignore", {"ignore": True}),
    ("large", {"count": 10000, "partitions": 4}),  # 160 KB
    ("derived", {"derived": True}),
]
PARTITIONED_CASE = {
    "kind": "partitioned",
    "partitions": 3,
    "count": 5,
    "tag": 6,
    "seed": 8,
    "proc_null": False,
    "derived": False,
    "ignore": False,
}


def skip_unsupported(peer: ConformancePeer, rep: dict[str, Any]) -> None:
    """Skip, naming the call, where the library lacks partitioned communication."""
    if "unsupported" in rep:
        pytest.skip(
            f"{peer.info.release} lacks MPI 4.0 partitioned communication: {rep['unsupported']}"
        )


def check_partitioned(peer: ConformancePeer, case: dict[str, Any], name: str) -> None:
    hint = f"variant {name}\n" + peer.replay_hint(case)
    k, parts, seed = case["count"], case["partitions"], case["seed"]
    for rank, rep, members in reports_by_comm(peer, case):
        skip_unsupported(peer, rep)
        m = len(members)
        left = (members.index(rank) - 1) % m
        if case["derived"]:
            data = pattern("int32", 4 * k * parts, seed + left).reshape(-1, 4)[:, [0, 2]].ravel()
            status = [left, case["tag"], 2 * k * parts]
        else:
            data = pattern("int32", k * parts, seed + left)
            status = [left, case["tag"], k * parts]
        if case["ignore"]:
            status = [None] * 3
        want = {"got": [*status, digest(data)], "arrived": list(range(parts))}
        if rep != want and (why := open_mpi_partitioned_offsets(peer, case, rep, left)):
            raise KnownDefect(f"rank {rank}: {why}")
        assert rep == want, f"rank {rank} (communicator of {m}): got {rep}, expected {want}\n{hint}"


def open_mpi_partitioned_offsets(
    peer: ConformancePeer, case: dict[str, Any], rep: dict[str, Any], left: int
) -> str | None:
    """Open MPI's partitioned send of a datatype whose size is less than its extent (the
    resized vector: size 2, extent 4 int32), received as int32: 5.0.11 starts partition p at
    p * count * SIZE (element 2 * p * count), not its extent; 5.0.8-5.0.10 deliver only the
    first half of the message and leave the rest of the receive buffer as it was (zeros).
    Keyed by the received data being exactly one of the two."""
    if not peer.info.library.startswith("Open MPI") or not case["derived"] or case["proc_null"]:
        return None
    k, parts = case["count"], case["partitions"]
    src = pattern("int32", 4 * k * parts, case["seed"] + left)
    by_size = np.concatenate(
        [src[2 * p * k : 2 * p * k + 4 * k].reshape(-1, 4)[:, [0, 2]].ravel() for p in range(parts)]
    )
    right = src.reshape(-1, 4)[:, [0, 2]].ravel()
    half = np.concatenate([right[: k * parts], np.zeros(k * parts, np.int32)])
    if rep["got"][3] == digest(by_size):
        how = "sent partition p from p * count * size bytes, not p * count * extent"
    elif rep["got"][3] == digest(half):
        how = "delivered only the first half of the message, the rest of the buffer untouched"
    else:
        return None
    return (
        f"{peer.info.release} defect: MPI_Psend_init with a datatype of size < extent {how} "
        "(docs/examples/defects/open_mpi_partitioned_derived_offsets.py)"
    )


@pytest.mark.covers(
    "mpi",
    *cells(
        ["partitioned"],
        [
            "plain",
            "zero_count",
            "size_1",
            "odd_size",
            "derived_type",
            "protocol_sizes",
            "status_ignore",
        ],
    ),
)
@pytest.mark.parametrize("size", ["world", "self", "odd"])
def test_partitioned(mpi_conformance_peer: ConformancePeer, size: str) -> None:
    """Psend_init/Precv_init around the ring: every partition Parrived, the whole message
    with its status; skipped, naming the call, where the library lacks partitioned
    communication."""
    peer = mpi_conformance_peer
    for name, variant in PARTITIONED:
        check_partitioned(peer, PARTITIONED_CASE | variant | on(size, peer.ranks), name)


@pytest.mark.covers("mpi", "partitioned:proc_null")
def test_partitioned_with_proc_null(mpi_runtime: MpiRuntime) -> None:
    """Psend_init/Precv_init with MPI_PROC_NULL as the peer (MPI 4.1, 3.10): they complete at
    once, every partition Parrived, the receive's status source MPI_PROC_NULL, tag
    MPI_ANY_TAG, count 0, its buffer untouched. On a peer job of its own over lo: no message
    travels (the placement is no part of it), and a library that crashes on it ends the job
    whose output keys the crash."""
    with ConformancePeer(mpi_runtime, LOOPBACK) as peer:
        case: dict[str, Any] = PARTITIONED_CASE | {"proc_null": True}
        with (
            known_loss(peer, lambda lost: partitioned_proc_null_crash(peer, lost.output)),
            known_raise(lambda raised: partitioned_proc_null_never_arrives(peer, raised)),
        ):
            reports = reports_by_comm(peer, case)
        c, hint = peer.info.constants, peer.replay_hint(case)
        untouched = digest(np.zeros(case["count"] * case["partitions"], np.int32))
        for rank, rep, _ in reports:
            skip_unsupported(peer, rep)
            want = {
                "got": [c["PROC_NULL"], c["ANY_TAG"], 0, untouched],
                "arrived": list(range(case["partitions"])),
            }
            assert rep == want, f"rank {rank}: got {rep}, expected {want}\n{hint}"


NEVER_ARRIVED = re.compile(r"TimeoutError: MPI_Parrived: \[\] of (\d+) partitions")


def partitioned_proc_null_never_arrives(peer: ConformancePeer, raised: CaseRaised) -> str | None:
    """MPICH 4.0.3-4.3.2 do not crash on MPI_PROC_NULL (5.0.0 and later do) but never complete
    it: every rank's MPI_Parrived reports no partition until the case gives up. Keyed by every
    rank raising exactly that."""
    if not peer.info.library.startswith("MPICH"):
        return None
    errors = [str(r.get("error", "")) for r in raised.reports]
    if not errors or not all(NEVER_ARRIVED.search(e) for e in errors):
        return None
    return (
        f"{peer.info.release} defect: partitioned communication with MPI_PROC_NULL never "
        "completed, no partition arrived on any rank (docs/examples/defects/"
        "partitioned_proc_null_crash.py never returns there)"
    )


SEGFAULT = re.compile(r"signal 11\b|segmentation fault", re.I)


def partitioned_proc_null_crash(peer: ConformancePeer, output: str) -> str | None:
    """MPICH's MPI_Psend_init/MPI_Precv_init look up the address of rank MPI_PROC_NULL, and
    Open MPI's before 5.0.11 (open-mpi/ompi#14155, #14295) start a receive from it in pml ob1:
    the ranks die of SIGSEGV before any report. Keyed by the lost job's output saying so
    (MPICH's launcher: "signal 11"; Open MPI's handlers: "Segmentation fault")."""
    library = peer.info.library
    seen = SEGFAULT.search(output)
    if not library.startswith(("MPICH", "Open MPI")) or seen is None:
        return None
    return (
        f"{peer.info.release} defect: MPI_Psend_init/MPI_Precv_init with MPI_PROC_NULL ended "
        f"the ranks ({seen.group(0)}; docs/examples/defects/partitioned_proc_null_crash.py)"
    )
