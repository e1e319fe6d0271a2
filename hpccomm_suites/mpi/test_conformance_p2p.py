"""Point-to-point semantics: data integrity, non-overtaking order, wildcard receives and probes,
and errors under MPI.ERRORS_RETURN. Each property drives the session's conformance peer.

A failure prints the shrunk case ("Draw 1 (case): ..."), an @reproduce_failure line, and a
command replaying the case with mpirun alone (see stacks/mpi/conformance.py).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_hpccomm.config import HpcConfig
from pytest_hpccomm.coverage import cells
from pytest_hpccomm.errors import KnownDefect
from pytest_hpccomm.stacks.mpi.conformance import (
    MAX_BYTES,
    P2P_DTYPES,
    ConformancePeer,
    byte_sizes,
    conformance_settings,
    known_loss,
    run_covering,
)
from pytest_hpccomm.stacks.mpi.peer.payload import digest, pattern

pytestmark = [
    pytest.mark.conformance,
    pytest.mark.stack("mpi"),
    pytest.mark.fabric("ethernet", "ipoib", "ib", "roce"),
]

INT32_MAX = 2**31 - 1


def sha(dtype: str, count: int, seed: int) -> str:
    return digest(pattern(dtype, count, seed))


def tags(peer: ConformancePeer) -> st.SearchStrategy[int]:
    return st.one_of(st.integers(0, 100), st.integers(0, peer.info.constants["TAG_UB"]))


def other_rank(draw: Any, n: int, rank: int) -> int:
    return (rank + draw(st.integers(1, n - 1))) % n


@st.composite
def p2p_cases(draw: Any, peer: ConformancePeer, max_bytes: int) -> dict[str, Any]:
    n = peer.ranks
    dtype = draw(st.sampled_from(P2P_DTYPES))
    send = draw(st.sampled_from(["send", "isend", "ssend", "sendrecv"]))
    src = draw(st.integers(0, n - 1))
    # a blocking send to oneself may deadlock by the standard: only Isend/Sendrecv may
    dst = draw(st.integers(0, n - 1)) if send in ("isend", "sendrecv") else other_rank(draw, n, src)
    return {
        "kind": "p2p",
        "dtype": dtype,
        "count": draw(byte_sizes(max_bytes)) // np.dtype(dtype).itemsize,
        "send": send,
        "recv": draw(st.sampled_from(["recv", "irecv"])),
        "src": src,
        "dst": dst,
        "tag": draw(tags(peer)),
        "slack": draw(st.integers(0, 3)),
        "seed": draw(st.integers(0, 1000)),
    }


@pytest.mark.covers(
    "mpi",
    *cells(["send_modes", "nonblocking", "sendrecv"], ["plain", "zero_count"])
    + cells(["wait_test", "all"], ["plain"]),
)
@settings(conformance_settings())
@given(data=st.data())
def test_p2p_integrity(
    mpi_conformance_peer: ConformancePeer, hpc_config: HpcConfig, data: st.DataObject
) -> None:
    """Send/Isend/Ssend/Sendrecv -> Recv/Irecv deliver exactly the bytes sent, for any size
    (0 too), dtype and tag; Status reports count/source/tag; the buffer past count is intact."""
    peer = mpi_conformance_peer
    case = data.draw(
        p2p_cases(peer, MAX_BYTES.get(hpc_config.profile, MAX_BYTES["quick"])), label="case"
    )
    check_p2p(peer, case)


# Boundaries the quick profile must cover every run, not by chance: 0 and 1 element, both sides
# of the eager/rendezvous switch (64 KiB and 128 KiB: Open MPI's TCP eager limit and MPICH's)
# and 1 MiB, by each way of sending and receiving.
PROTOCOL_BYTES = (0, 8, 65536 - 8, 65536, 65536 + 8, 131072 + 8, 1 << 20)


@pytest.mark.covers(
    "mpi",
    *cells(["send_modes", "nonblocking", "sendrecv"], ["zero_count", "protocol_sizes"]),
)
@pytest.mark.parametrize("recv", ["recv", "irecv"])
@pytest.mark.parametrize("send", ["send", "isend", "ssend", "sendrecv"])
def test_p2p_across_the_protocol_limits(
    mpi_conformance_peer: ConformancePeer, send: str, recv: str
) -> None:
    peer = mpi_conformance_peer
    for i, nbytes in enumerate(PROTOCOL_BYTES):
        check_p2p(
            peer,
            {
                "kind": "p2p",
                "dtype": "uint64",
                "count": nbytes // 8,
                "send": send,
                "recv": recv,
                "src": i % 2,
                "dst": 1 - i % 2,
                "tag": 7 + i,
                "slack": 2,
                "seed": i,
            },
        )


def check_p2p(peer: ConformancePeer, case: dict[str, Any]) -> None:
    reports = peer.run(case)
    src, dst, count, dtype = case["src"], case["dst"], case["count"], case["dtype"]
    want: dict[int, list[tuple[int, str]]] = {dst: [(src, sha(dtype, count, case["seed"]))]}
    if case["send"] == "sendrecv" and src != dst:
        want[src] = [(dst, sha(dtype, count, case["seed"] + 1))]
    hint = peer.replay_hint(case)
    for rank, rep in enumerate(reports):
        got, exp = rep["got"], want.get(rank, [])
        assert len(got) == len(exp), (
            f"rank {rank} received {len(got)} messages, not {len(exp)}\n{hint}"
        )
        for g, (frm, digest_) in zip(got, exp):
            seen = (g["source"], g["tag"], g["count"])
            assert seen == (frm, case["tag"], count), (
                f"rank {rank}: Status (source, tag, "
                f"count) = {seen}, sent {(frm, case['tag'], count)}\n{hint}"
            )
            assert g["sha"] == digest_, (
                f"rank {rank}: data differs from what rank {frm} sent\n{hint}"
            )
            assert g["guard"], (
                f"rank {rank}: receive wrote past the message's {count} elements\n{hint}"
            )


@st.composite
def order_cases(draw: Any, peer: ConformancePeer) -> dict[str, Any]:
    n = peer.ranks
    dtype = draw(st.sampled_from(["uint8", "int32", "float64"]))
    item = np.dtype(dtype).itemsize
    # mixed sizes: a small message must not overtake a large (rendezvous) one sent before it
    counts = draw(st.lists(byte_sizes(256 << 10).map(lambda b: b // item), min_size=2, max_size=12))
    src = draw(st.integers(0, n - 1))
    return {
        "kind": "order",
        "dtype": dtype,
        "counts": counts,
        "src": src,
        "dst": other_rank(draw, n, src),
        "tag": draw(st.integers(0, 1000)),
        "send": draw(st.sampled_from(["isend", "send"])),
        "recv": draw(st.sampled_from(["recv", "irecv", "any_source", "any_tag"])),
        "noise": draw(st.booleans()),
        "seed": draw(st.integers(0, 1000)),
    }


@pytest.mark.covers(
    "mpi",
    *cells(["send_modes", "nonblocking"], ["any_source", "any_tag", "protocol_sizes"])
    + cells(["all"], ["plain", "status_ignore"]),
)
@settings(conformance_settings())
@given(data=st.data())
def test_non_overtaking(mpi_conformance_peer: ConformancePeer, data: st.DataObject) -> None:
    """Messages with the same (source, tag, comm) are received in the order they were sent,
    whatever their sizes, by blocking, pre-posted or wildcard receives, with other traffic."""
    peer = mpi_conformance_peer
    case = data.draw(order_cases(peer), label="case")
    got = peer.run(case)[case["dst"]]["got"]
    hint = peer.replay_hint(case)
    assert len(got) == len(case["counts"]), hint
    for i, (g, count) in enumerate(zip(got, case["counts"])):
        assert (g["source"], g["tag"]) == (case["src"], case["tag"]), f"receive {i}\n{hint}"
        assert (g["count"], g["sha"]) == (count, sha(case["dtype"], count, case["seed"] + i)), (
            f"receive {i} got a {g['count']}-element message that is not message {i} "
            f"(overtaken or corrupted)\n{hint}"
        )


@st.composite
def wildcard_cases(draw: Any, peer: ConformancePeer) -> dict[str, Any]:
    n = peer.ranks
    sends = draw(
        st.lists(
            st.fixed_dictionaries(
                {
                    "rank": st.integers(0, n - 1),
                    "tag": tags(peer),
                    "count": st.one_of(st.integers(0, 16), st.integers(0, 20000)),
                }
            ),
            min_size=1,
            max_size=8,
        )
    )
    for i, s in enumerate(sends):
        s["seed"] = i
    return {
        "kind": "wildcard",
        "dtype": draw(st.sampled_from(["int16", "float32", "uint64"])),
        "dst": draw(st.integers(0, n - 1)),
        "sends": sends,
        "how": draw(st.sampled_from(["recv", "probe", "iprobe", "mprobe"])),
    }


@pytest.mark.covers(
    "mpi",
    *cells(["send_modes", "probe", "mprobe"], ["any_source", "any_tag", "zero_count"]),
)
@settings(conformance_settings())
@given(data=st.data())
def test_wildcard_receive_and_probe(
    mpi_conformance_peer: ConformancePeer, data: st.DataObject
) -> None:
    """ANY_SOURCE/ANY_TAG receives (plain, after Probe, Iprobe or Mprobe) get every message
    once, with the right Status (Get_source/Get_tag/Get_count), each source's in send order."""
    check_wildcard(
        mpi_conformance_peer, data.draw(wildcard_cases(mpi_conformance_peer), label="case")
    )


# Every source at once into one wildcard receiver, at the protocol boundaries (PROTOCOL_BYTES),
# by each way of receiving.


@pytest.mark.covers(
    "mpi",
    *cells(["send_modes", "probe", "mprobe"], ["any_source", "any_tag", "protocol_sizes"]),
)
@pytest.mark.parametrize("how", ["recv", "probe", "iprobe", "mprobe"])
def test_wildcard_across_the_eager_limit(mpi_conformance_peer: ConformancePeer, how: str) -> None:
    peer = mpi_conformance_peer
    n, dst = peer.ranks, peer.ranks - 1
    sends = [
        {"rank": i % n, "tag": i % 3, "count": nbytes // 8, "seed": i}
        for i, nbytes in enumerate(PROTOCOL_BYTES * 2)
    ]  # each size from two sources
    check_wildcard(
        peer, {"kind": "wildcard", "dtype": "uint64", "dst": dst, "sends": sends, "how": how}
    )


def check_wildcard(peer: ConformancePeer, case: dict[str, Any]) -> None:
    with known_loss(peer, lambda lost: mpich_genq_abort(peer, lost.output)):
        got = peer.run(case)[case["dst"]]["got"]
    hint = peer.replay_hint(case)
    pending: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for s in case["sends"]:
        pending[s["rank"]].append(s)
    assert len(got) == len(case["sends"]), hint
    for i, g in enumerate(got):
        assert pending[g["source"]], (
            f"receive {i}: Get_source()={g['source']}, which had nothing (more) to send\n{hint}"
        )
        s = pending[g["source"]].pop(0)  # the earliest unreceived from that source
        seen = (g["tag"], g["count"], g["sha"])
        assert seen == (s["tag"], s["count"], sha(case["dtype"], s["count"], s["seed"])), (
            f"receive {i} from rank {g['source']}: (tag, count) = {seen[:2]}, expected its "
            f"next message {(s['tag'], s['count'])} (or its data differs)\n{hint}"
        )
        if "probed" in g:
            assert g["probed"] == [g["source"], g["tag"], g["count"]], (
                f"receive {i}: the probe's Status {g['probed']} is not the message received\n{hint}"
            )


GENQ_ABORT = "Invalid GenQ flag"


def mpich_genq_abort(peer: ConformancePeer, output: str) -> str | None:
    """MPICH 3.4.3's ch4 abort on a wildcard Mprobe/Improbe of a message past the eager
    limit over libfabric's tcp provider (no shared memory between the ranks): an assertion in
    its generic queue, the job gone. Keyed by the assertion the ranks printed."""
    if not peer.info.library.startswith("MPICH") or GENQ_ABORT not in output:
        return None
    line = next(ln for ln in output.splitlines() if GENQ_ABORT in ln)
    return (
        f"{peer.info.release} defect: a wildcard receive by Mprobe/Improbe aborted the job: "
        f"{line.strip()}"
    )


def invalid_ranks(peer: ConformancePeer) -> st.SearchStrategy[int]:
    c = peer.info.constants
    special = {c["PROC_NULL"], c["ANY_SOURCE"], c["ROOT"]}  # valid (or intercomm) values
    return st.one_of(st.integers(peer.ranks, INT32_MAX), st.integers(-INT32_MAX - 1, -1)).filter(
        lambda v: v not in special
    )


def invalid_tags(peer: ConformancePeer) -> st.SearchStrategy[int]:
    c = peer.info.constants
    neg = st.integers(-INT32_MAX - 1, -1).filter(lambda v: v != c["ANY_TAG"])
    if c["TAG_UB"] < INT32_MAX:
        return st.one_of(neg, st.integers(c["TAG_UB"] + 1, INT32_MAX))
    return neg


CALLS = ["send", "isend", "recv", "irecv", "probe", "iprobe"]


@pytest.mark.covers(
    "mpi",
    *cells(["error_handlers", "error_classes"], ["plain"]),
)
@pytest.mark.parametrize("what,error", [("rank", "ERR_RANK"), ("tag", "ERR_TAG")])
@settings(conformance_settings())
@given(data=st.data())
def test_errors_return(
    mpi_conformance_peer: ConformancePeer, what: str, error: str, data: st.DataObject
) -> None:
    """Under MPI.ERRORS_RETURN an invalid rank raises MPI.Exception of class ERR_RANK and an
    invalid tag ERR_TAG, in every call that takes one, and the communicator keeps working."""
    peer = mpi_conformance_peer
    values = invalid_ranks(peer) if what == "rank" else invalid_tags(peer)
    case = {
        "kind": "error",
        "what": what,
        "call": data.draw(st.sampled_from(CALLS), label="call"),
        "value": data.draw(values, label="value"),
    }
    data.draw(st.just(case), label="case")  # shown whole in the falsifying example
    want = peer.info.constants[error]
    hint = peer.replay_hint(case)
    for rank, rep in enumerate(peer.run(case)):
        assert rep["error_class"] == want, (
            f"rank {rank}: {case['call']} with {what} "
            f"{case['value']} gave error class {rep['error_class']} ({rep.get('message')}), "
            f"not MPI.{error} ({want})\n{hint}"
        )
        assert rep["ring_ok"], f"rank {rank}: communicator broken after the error\n{hint}"


PROC_NULL_CALLS = ("recv", "irecv", "sendrecv", "probe", "iprobe", "mprobe", "mrecv", "recv_init")


@pytest.mark.covers(
    "mpi",
    *cells(
        ["send_modes", "nonblocking", "sendrecv", "probe", "mprobe", "persistent"], ["proc_null"]
    )
    + cells(["wait_test"], ["proc_null"]),
)
@settings(conformance_settings())
@given(data=st.data())
def test_proc_null_completes_at_once_with_the_standard_status(
    mpi_conformance_peer: ConformancePeer, data: st.DataObject
) -> None:
    """Send/Ssend/Isend/Recv/Irecv/Sendrecv/Probe/Iprobe/Mprobe+Mrecv/Send_init+Recv_init
    with MPI_PROC_NULL as the peer complete at once; every Status says source MPI_PROC_NULL,
    tag MPI_ANY_TAG, count 0; no receive buffer is written; Iprobe finds a "message";
    Mprobe returns MPI_MESSAGE_NO_PROC."""
    peer = mpi_conformance_peer
    case = {
        "kind": "proc_null",
        "dtype": data.draw(st.sampled_from(P2P_DTYPES), label="dtype"),
        "count": data.draw(st.integers(0, 64), label="count"),
        "tag": data.draw(tags(peer), label="tag"),
        "seed": data.draw(st.integers(0, 1000), label="seed"),
    }
    data.draw(st.just(case), label="case")
    c = peer.info.constants
    hint = peer.replay_hint(case)
    known: list[str] = []
    for rank, rep in enumerate(peer.run(case)):
        want = [c["PROC_NULL"], c["ANY_TAG"], 0, rep["expected_buffer"]]
        bad = {call: rep[call] for call in PROC_NULL_CALLS if rep[call] != want}
        if (why := mpich_irecv_proc_null(peer, bad, want)) is not None:
            known.append(f"rank {rank}: {why}")
            bad.pop("irecv")
        if (why := mpich_persistent_proc_null(peer, bad, want)) is not None:
            known.append(f"rank {rank}: {why}")
            bad = {}
        for call, got in bad.items():
            raise AssertionError(
                f"rank {rank}: {call} from MPI_PROC_NULL: [source, tag, count] = {got[:3]}"
                f"{' (buffer written)' if got[3] != want[3] else ''}, the standard says "
                f"{want[:3]} (buffer untouched)\n{hint}"
            )
        assert rep["iprobe_flag"], f"rank {rank}: Iprobe(MPI_PROC_NULL) found nothing\n{hint}"
        assert rep["mprobe_no_proc"], (
            f"rank {rank}: Mprobe(MPI_PROC_NULL) did not return MPI_MESSAGE_NO_PROC\n{hint}"
        )
    if known:
        raise KnownDefect(
            "; ".join(known[:1]) + f" (and {len(known) - 1} more ranks)" * (len(known) > 1)
        )


def mpich_persistent_proc_null(
    peer: ConformancePeer, bad: dict[str, list[Any]], want: list[Any]
) -> str | None:
    """MPICH's known defect, as this run shows it: the persistent receive alone reports source
    MPI_ANY_SOURCE (the rest of its status and the buffer right); its MPI_Irecv had the same
    defect, fixed upstream (pmodels/mpich#6805, #6819). Anything else is not it."""
    got = bad.get("recv_init")
    if list(bad) != ["recv_init"] or got is None or not peer.info.library.startswith("MPICH"):
        return None
    if [got[0], *got[1:]] != [peer.info.constants["ANY_SOURCE"], *want[1:]]:
        return None
    return (
        f"{peer.info.release} defect: a persistent receive (MPI_Recv_init + MPI_Start) from "
        f"MPI_PROC_NULL completed with status source {got[0]} (MPI_ANY_SOURCE), not "
        f"MPI_PROC_NULL ({want[0]}); tag, count and buffer as the standard says"
    )


def mpich_irecv_proc_null(
    peer: ConformancePeer, bad: dict[str, list[Any]], want: list[Any]
) -> str | None:
    """MPICH's MPI_Irecv from MPI_PROC_NULL as pmodels/mpich#6805 reports it: the request
    comes back completed with its status never set (source and tag seen as 0, or whatever the
    memory held), count 0 and the buffer untouched; fixed by #6819. Anything else is not it."""
    got = bad.get("irecv")
    if got is None or not peer.info.library.startswith("MPICH"):
        return None
    if got[2] != want[2] or got[3] != want[3] or got[0] == want[0]:
        return None
    return (
        f"{peer.info.release} defect: MPI_Irecv from MPI_PROC_NULL completed with status "
        f"source {got[0]}, tag {got[1]}, not MPI_PROC_NULL ({want[0]}) and MPI_ANY_TAG "
        f"({want[1]}): the status is not set (pmodels/mpich#6805, fixed by #6819)"
    )


COMPLETIONS = ["waitany", "testany", "waitsome", "testsome", "waitall", "testall"]


@st.composite
def completion_cases(draw: Any, peer: ConformancePeer, how: str) -> dict[str, Any]:
    n = peer.ranks
    counts = draw(st.lists(st.integers(0, 3000), min_size=0, max_size=6))
    extra = draw(st.lists(st.sampled_from(["null", "proc_null"]), max_size=3))
    slots = draw(st.permutations(["msg"] * len(counts) + extra))
    src = draw(st.integers(0, n - 1))
    return {
        "kind": "completion",
        "how": how,
        "statuses": draw(st.booleans()),
        "dtype": draw(st.sampled_from(["uint8", "int32", "float64"])),
        "counts": counts,
        "slots": list(slots),
        "src": src,
        "dst": draw(st.integers(0, n - 1)),
        "seed": draw(st.integers(0, 1000)),
    }


def check_completion(peer: ConformancePeer, case: dict[str, Any]) -> None:
    rep = peer.run(case)[case["dst"]]
    hint = peer.replay_hint(case)
    consts = peer.info.constants
    slots, how, with_st = case["slots"], case["how"], case["statuses"]
    msg_of = {k: i for i, k in enumerate(k for k, s in enumerate(slots) if s == "msg")}
    every = how in ("waitall", "testall")
    reported = [d[0] for d in rep["done"]]
    if every:
        assert reported == list(range(len(slots))), f"{how}: statuses {reported}\n{hint}"
    else:
        active = [k for k, s in enumerate(slots) if s != "null"]
        assert sorted(reported) == active, (
            f"{how} returned indices {reported}: every active request exactly once "
            f"({active}), never a null one, then MPI_UNDEFINED\n{hint}"
        )
    for d in rep["done"]:
        k = d[0]
        if not with_st:
            continue
        if slots[k] == "msg":
            i = msg_of[k]
            want = [case["src"], i, case["counts"][i]]
            what = f"message {i}"
        elif slots[k] == "proc_null":
            want, what = [consts["PROC_NULL"], consts["ANY_TAG"], 0], "a receive from MPI_PROC_NULL"
        else:  # only Waitall/Testall report a null request: the empty status (MPI 4.1, 3.7.3)
            want, what = [consts["ANY_SOURCE"], consts["ANY_TAG"], 0], "MPI_REQUEST_NULL"
        assert d[1:] == want, (
            f"{how}: the status of slot {k} ({what}) is [source, tag, count] = {d[1:]}, "
            f"not {want}\n{hint}"
        )
    for k, i in msg_of.items():
        assert rep["sha"][str(k)] == sha(case["dtype"], case["counts"][i], case["seed"] + i), (
            f"{how}: message {i} (slot {k}) arrived with other data\n{hint}"
        )


@pytest.mark.covers("mpi", *cells(["all", "any", "some"], ["plain"]))
@pytest.mark.parametrize("how", COMPLETIONS)
@settings(conformance_settings())
@given(data=st.data())
def test_completion_calls(
    mpi_conformance_peer: ConformancePeer, how: str, data: st.DataObject
) -> None:
    """Waitany/Testany/Waitsome/Testsome return every active request exactly once, never a
    null one, then MPI_UNDEFINED; Waitall/Testall complete all; each status names its
    message (MPI_PROC_NULL's and a null request's as the standard says); data intact; with
    or without statuses, with no request active at all."""
    peer = mpi_conformance_peer
    check_completion(peer, data.draw(completion_cases(peer, how), label="case"))


@pytest.mark.covers(
    "mpi", *cells(["all", "any", "some"], ["plain", "proc_null", "zero_count", "status_ignore"])
)
@pytest.mark.parametrize("how", COMPLETIONS)
def test_completion_calls_covering_set(mpi_conformance_peer: ConformancePeer, how: str) -> None:
    """No request at all; only null requests; messages (one empty, one past the eager limit)
    among a null request and a receive from MPI_PROC_NULL; each with and without statuses."""
    peer = mpi_conformance_peer
    layouts = {
        "none": ([], []),
        "all-null": ([], ["null", "null"]),
        "mixed": ([0, 5, 20000], ["msg", "null", "msg", "proc_null", "msg"]),
    }
    cases = {
        f"{name}, statuses={statuses}": {
            "kind": "completion",
            "how": how,
            "statuses": statuses,
            "dtype": "int32",
            "counts": counts,
            "slots": slots,
            "src": 0,
            "dst": peer.ranks - 1,
            "seed": 11,
        }
        for name, (counts, slots) in layouts.items()
        for statuses in (True, False)
    }
    run_covering(cases, lambda case: check_completion(peer, case))


@pytest.mark.covers(
    "mpi",
    *cells(["persistent"], ["plain", "zero_count", "protocol_sizes"]),
)
@pytest.mark.parametrize("nbytes", [0, 24, 65536 + 8, 1 << 20], ids=lambda b: f"{b}B")
def test_persistent_requests_send_the_buffer_at_each_start(
    mpi_conformance_peer: ConformancePeer, nbytes: int
) -> None:
    """Send_init/Recv_init made once and started three times (Startall) deliver, each time,
    what the send buffer holds at that Start: a restart must not resend the first round's
    data, nor miss a round."""
    peer = mpi_conformance_peer
    case: dict[str, Any] = {
        "kind": "persistent",
        "dtype": "uint64",
        "count": nbytes // 8,
        "tag": 21,
        "src": 0,
        "dst": peer.ranks - 1,
        "rounds": 3,
        "seed": 5,
    }
    got = peer.run(case)[case["dst"]]["got"]
    hint = peer.replay_hint(case)
    assert len(got) == case["rounds"], hint
    for r, g in enumerate(got):
        want = [0, 21, case["count"], sha("uint64", case["count"], case["seed"] + r)]
        assert g == want, (
            f"round {r}: [source, tag, count, data] = {g[:3]}"
            f"{' (data of another round)' if g[3] != want[3] else ''}, sent {want[:3]}\n{hint}"
        )


MODES = ["bsend", "rsend", "issend", "sendrecv_replace"]


@pytest.mark.covers(
    "mpi",
    *cells(["send_modes", "nonblocking", "sendrecv"], ["plain", "zero_count", "protocol_sizes"]),
)
@pytest.mark.parametrize("nbytes", [0, 24, 65536 + 8, 1 << 20], ids=lambda b: f"{b}B")
@pytest.mark.parametrize("mode", MODES)
def test_send_modes_deliver(mpi_conformance_peer: ConformancePeer, mode: str, nbytes: int) -> None:
    """Bsend (buffered), Rsend (ready: the receive posted first), Issend and
    Sendrecv_replace deliver exactly the bytes sent, with the right Status, on both sides of
    the eager limits."""
    peer = mpi_conformance_peer
    n = peer.ranks
    for src, dst in ((0, n - 1), (n - 1, n - 1)):  # to another rank, and to oneself
        case: dict[str, Any] = {
            "kind": "modes",
            "mode": mode,
            "dtype": "uint64",
            "count": nbytes // 8,
            "tag": 33,
            "src": src,
            "dst": dst,
            "seed": 9,
        }
        got = peer.run(case)[dst]["got"]
        seed = case["seed"] + 1 if mode == "sendrecv_replace" and src == dst else case["seed"]
        want = [src, 33, case["count"], sha("uint64", case["count"], seed)]
        assert got == want, (
            f"{mode} from {src} to {dst}: [source, tag, count, data] = {got[:3]}"
            f"{' (data differs)' if got[3] != want[3] else ''}, sent {want[:3]}\n"
            f"{peer.replay_hint(case)}"
        )
