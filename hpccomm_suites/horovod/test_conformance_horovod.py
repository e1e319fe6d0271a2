"""Horovod's collectives against NumPy, through Horovod's own runtime, for each controller
(MPI, Gloo) on loopback and the virtual cluster. Every rank's input is drawn here and travels
in the case; the peers report what Horovod gave them (stacks/horovod/conformance.py states the
semantics and float tolerances judged).

Failures print the shrunk case (every rank's input) and a command that replays it without
pytest; the quick profile is derandomized, so rerunning reproduces.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_hpccomm.cluster.remote_shell import is_this_host
from pytest_hpccomm.coverage import cells
from pytest_hpccomm.proc import proctree
from pytest_hpccomm.stacks.horovod.conformance import (
    Reduction,
    alltoall_received,
    array_of,
    check_reduced,
    element,
    horovod_settings,
    outputs,
    reducescatter_share,
    reductions,
    shapes,
    wire,
)
from pytest_hpccomm.stacks.horovod.coverage import CONTROLLERS
from pytest_hpccomm.stacks.horovod.driver import HorovodPeers, Site
from pytest_hpccomm.stacks.horovod.env import HorovodEnv
from pytest_hpccomm.stacks.horovod.fixtures import traffic
from pytest_hpccomm.stacks.horovod.wire import DTYPES, MOVE_DTYPES

pytestmark = [
    pytest.mark.conformance,
    pytest.mark.stack("horovod"),
    pytest.mark.fabric("ethernet", "ipoib"),
]

ERROR_WITHIN = 30.0  # seconds: a mismatch must come back as an error, not a hang


def _run(peers: HorovodPeers, case: dict[str, Any]) -> list[dict[str, Any]]:
    return peers.run(case)


def _judge(
    peers: HorovodPeers, case: dict[str, Any], out: dict[str, Any], r: Reduction, what: str
) -> None:
    """check_reduced, with the case and its replay command in the message."""
    try:
        check_reduced(array_of(out), r, what)
    except AssertionError as exc:
        raise AssertionError(f"{exc}{peers.context(case)}") from None


@pytest.mark.covers(
    "horovod",
    *cells(
        [
            "allreduce",
            "allreduce_average",
            "allreduce_min",
            "allreduce_max",
            "allreduce_product",
            "allreduce_inplace",
            "allreduce_prescale",
            "allreduce_postscale",
        ],
        CONTROLLERS,
    ),
)
@horovod_settings()
@given(data=st.data())
def test_allreduce_matches_numpy(horovod_peers: HorovodPeers, data: st.DataObject) -> None:
    """Sum, average, min, max, product over every dtype and 1-3 dimensional shapes, with
    prescale/postscale (sum, average) and in place (allreduce_)."""
    r = data.draw(reductions(horovod_peers.size), label="reduction")
    in_place = data.draw(st.booleans(), label="in_place")
    case = r.case(in_place=in_place)
    for rank, out in enumerate(outputs(_run(horovod_peers, case))):
        _judge(horovod_peers, case, out, r, f"rank {rank}")


@pytest.mark.covers(
    "horovod",
    *cells(
        ["grouped_allreduce", "grouped_allreduce_average", "grouped_allreduce_inplace"],
        CONTROLLERS,
    ),
)
@horovod_settings()
@given(data=st.data())
def test_grouped_allreduce(horovod_peers: HorovodPeers, data: st.DataObject) -> None:
    """grouped_allreduce of 1-4 tensors of different dtypes and shapes, or grouped_allreduce_
    in place: each is its own reduction."""
    n = horovod_peers.size
    op = data.draw(st.sampled_from(["sum", "average", "min", "max"]), label="op")
    group = data.draw(
        st.lists(reductions(n, ops=[op], scaled=False), min_size=1, max_size=4), label="group"
    )
    case = {
        "kind": "grouped_allreduce",
        "op": op,
        "in_place": data.draw(st.booleans(), label="in_place"),
        "inputs": [[wire(r.inputs[rank]) for r in group] for rank in range(n)],
    }
    for rank, outs in enumerate(outputs(_run(horovod_peers, case), "outputs")):
        assert len(outs) == len(group), f"rank {rank}: {len(outs)} outputs for {len(group)}"
        for i, (out, r) in enumerate(zip(outs, group)):
            _judge(horovod_peers, case, out, r, f"rank {rank} tensor {i}")


@pytest.mark.covers("horovod", *cells(["allreduce_async_fused"], CONTROLLERS))
@horovod_settings()
@given(data=st.data())
def test_fused_async_allreduces_equal_sequential(
    horovod_peers: HorovodPeers, data: st.DataObject
) -> None:
    """2-6 allreduces enqueued at once (Tensor Fusion packs them into one buffer) give what
    the same allreduces give one by one, and both are the reduction: bit for bit for integers
    and for floats over 2 ranks (a + b is a + b in any order); over more ranks the fused
    buffer's ring segments add floats in another order, so there both are judged within the
    float tolerance only. At least one of them is not done when its call returns (upstream's
    check that the call does not wait)."""
    n = horovod_peers.size
    op = data.draw(st.sampled_from(["sum", "average"]), label="op")
    dtype = data.draw(st.sampled_from(DTYPES), label="dtype")
    group = data.draw(
        st.lists(reductions(n, ops=[op], dtypes=[dtype], scaled=False), min_size=2, max_size=6),
        label="tensors",
    )
    case = {
        "kind": "fused_allreduce",
        "op": op,
        "inputs": [[wire(r.inputs[rank]) for r in group] for rank in range(n)],
    }
    reports = _run(horovod_peers, case)
    for rank, (fused, seq) in enumerate(
        zip(outputs(reports, "outputs"), outputs(reports, "sequential"))
    ):
        for i, (f, s, r) in enumerate(zip(fused, seq, group)):
            a, b = array_of(f), array_of(s)
            assert a.tobytes() == b.tobytes() or (a.dtype.kind == "f" and n > 2), (
                f"rank {rank} tensor {i}: fused {a.tolist()} != sequential {b.tolist()}"
                f"{horovod_peers.context(case)}"
            )
            _judge(horovod_peers, case, f, r, f"rank {rank} tensor {i} (fused)")
            _judge(horovod_peers, case, s, r, f"rank {rank} tensor {i} (sequential)")
    pending = [rep["pending"] for rep in reports]
    assert any(p > 0 for p in pending), (
        f"every allreduce_async was done when its call returned (pending per rank {pending}):"
        f" not asynchronous{horovod_peers.context(case)}"
    )


@pytest.mark.covers(
    "horovod",
    *cells(
        [
            "reducescatter",
            "reducescatter_average",
            "reducescatter_prescale",
            "reducescatter_postscale",
        ],
        CONTROLLERS,
    ),
)
@horovod_settings()
@given(data=st.data())
def test_reducescatter(horovod_peers: HorovodPeers, data: st.DataObject) -> None:
    """Sum or average, reduced over ranks, rows scattered: rank r gets its share of the first
    dimension."""
    n = horovod_peers.size
    shape = data.draw(shapes(first=st.integers(n, 3 * n)), label="shape")
    r = data.draw(reductions(n, ops=["sum", "average"], shape=shape), label="reduction")
    case = r.case("reducescatter")
    for rank, out in enumerate(outputs(_run(horovod_peers, case))):
        mine = reducescatter_share(r, rank)
        _judge(horovod_peers, case, out, mine, f"rank {rank}")


@pytest.mark.covers("horovod", *cells(["allgather", "allgather_variable_size"], CONTROLLERS))
@pytest.mark.parametrize("sizes", ["equal", "variable"])
@horovod_settings()
@given(data=st.data())
def test_allgather(horovod_peers: HorovodPeers, sizes: str, data: st.DataObject) -> None:
    """Every rank gets the ranks' tensors concatenated in rank order, for every dtype
    (8-bit and 16-bit integers too), with equal or differing first dimensions."""
    n = horovod_peers.size
    dtype = data.draw(st.sampled_from(MOVE_DTYPES), label="dtype")
    tail = data.draw(st.lists(st.integers(1, 3), max_size=2), label="trailing dims")
    first = st.integers(1, 4)
    firsts = (
        [data.draw(first, label="first dim")] * n
        if sizes == "equal"
        else data.draw(st.lists(first, min_size=n, max_size=n), label="first dims")
    )
    inputs = [
        data.draw(_values(dtype, (f, *tail)), label=f"rank {i}") for i, f in enumerate(firsts)
    ]
    case = {"kind": "allgather", "inputs": [wire(a) for a in inputs]}
    want = np.concatenate(inputs)
    for rank, out in enumerate(outputs(_run(horovod_peers, case))):
        got = array_of(out)
        assert got.shape == want.shape and got.tobytes() == want.tobytes(), (
            f"rank {rank}: allgather gave {got.tolist()}, expected {want.tolist()}"
            f"{horovod_peers.context(case)}"
        )


def _values(dtype: str, shape: tuple[int, ...]) -> st.SearchStrategy[np.ndarray]:
    size = int(np.prod(shape))
    return st.lists(element(dtype, "min", 1), min_size=size, max_size=size).map(
        lambda v: np.array(v, dtype=dtype).reshape(shape)
    )


@pytest.mark.covers("horovod", *cells(["broadcast", "broadcast_inplace"], CONTROLLERS))
@horovod_settings()
@given(data=st.data())
def test_broadcast_from_every_root(horovod_peers: HorovodPeers, data: st.DataObject) -> None:
    n = horovod_peers.size
    root = data.draw(st.integers(0, n - 1), label="root")
    dtype = data.draw(st.sampled_from(MOVE_DTYPES), label="dtype")
    shape = data.draw(shapes(), label="shape")
    inputs = [data.draw(_values(dtype, shape), label=f"rank {i}") for i in range(n)]
    case = {
        "kind": "broadcast",
        "root": root,
        "in_place": data.draw(st.booleans()),
        "inputs": [wire(a) for a in inputs],
    }
    for rank, out in enumerate(outputs(_run(horovod_peers, case))):
        got = array_of(out)
        assert got.tobytes() == inputs[root].tobytes(), (
            f"rank {rank}: broadcast from {root} gave {got.tolist()}, expected "
            f"{inputs[root].tolist()}{horovod_peers.context(case)}"
        )


@pytest.mark.covers("horovod", *cells(["alltoall", "alltoall_equal_split"], CONTROLLERS))
@pytest.mark.parametrize("splits", ["explicit", "equal"])
@horovod_settings()
@given(data=st.data())
def test_alltoall(horovod_peers: HorovodPeers, splits: str, data: st.DataObject) -> None:
    """Rank s sends rows splits[s][d] to rank d; rank d receives them in source order, and
    (explicit splits) received_splits[s] = splits[s][d]."""
    n = horovod_peers.size
    dtype = data.draw(st.sampled_from(MOVE_DTYPES), label="dtype")
    tail = tuple(data.draw(st.lists(st.integers(1, 3), max_size=2), label="trailing dims"))
    if splits == "explicit":
        table = data.draw(
            st.lists(
                st.lists(st.integers(0, 3), min_size=n, max_size=n), min_size=n, max_size=n
            ).filter(lambda t: all(sum(row) > 0 for row in t)),
            label="splits",
        )
    else:
        k = data.draw(st.integers(1, 3), label="rows per rank")
        table = [[k] * n for _ in range(n)]
    inputs = [
        data.draw(_values(dtype, (sum(row), *tail)), label=f"rank {i}")
        for i, row in enumerate(table)
    ]
    case = {
        "kind": "alltoall",
        "inputs": [wire(a) for a in inputs],
        "splits": table if splits == "explicit" else None,
    }
    reports = _run(horovod_peers, case)
    for dst, out in enumerate(outputs(reports)):
        want = alltoall_received(inputs, table, dst)
        got = array_of(out)
        assert got.shape == want.shape and got.tobytes() == want.tobytes(), (
            f"rank {dst}: alltoall gave {got.tolist()}, expected {want.tolist()}"
            f"{horovod_peers.context(case)}"
        )
        if splits == "explicit":
            assert reports[dst]["received_splits"] == [table[s][dst] for s in range(n)], (
                f"rank {dst}: received_splits {reports[dst]['received_splits']}"
                f"{horovod_peers.context(case)}"
            )


MISMATCHES = ["shape", "dims", "dtype"]


@pytest.mark.covers("horovod", *cells(["allreduce_error", "allreduce_type_error"], CONTROLLERS))
@pytest.mark.parametrize("mismatch", MISMATCHES)
def test_mismatch_is_an_error_not_a_hang(horovod_peers: HorovodPeers, mismatch: str) -> None:
    """Ranks disagreeing on an allreduce's shape, number of dimensions or dtype all get a
    Horovod error within ERROR_WITHIN seconds, and the peers keep working."""
    n = horovod_peers.size
    inputs = []
    for rank in range(n):
        dtype = ("float32" if rank == 0 else "int32") if mismatch == "dtype" else "float32"
        shape = {"shape": (2 + rank,), "dims": (2,) * (1 + rank), "dtype": (4,)}[mismatch]
        inputs.append(np.ones(shape, dtype=dtype))
    case = {"kind": "allreduce", "op": "sum", "inputs": [wire(a) for a in inputs]}
    reports = horovod_peers.run(case, timeout=ERROR_WITHIN)
    for rank, rep in enumerate(reports):
        assert "raised" in rep and "Mismatched" in rep["raised"], (
            f"rank {rank}: expected a 'Mismatched ...' error, got {rep}"
        )
    good = Reduction("sum", [np.full((3,), rank, np.int64) for rank in range(n)])
    for rank, out in enumerate(outputs(horovod_peers.run(good.case()))):
        check_reduced(array_of(out), good, f"rank {rank} after the error")


@pytest.mark.covers("horovod")  # no case of Horovod's own suite: ours alone
def test_peers_report_their_controller(
    horovod_peers: HorovodPeers, horovod_controller: str, hpc_placement: str
) -> None:
    """The controller asked for is the one running, on the hosts the placement names."""
    assert {r.controller for r in horovod_peers.ranks} == {horovod_controller}
    hosts = [r.host for r in horovod_peers.ranks]
    if hpc_placement == "netns":
        assert len(set(hosts)) == len(hosts), f"one rank per virtual host, got {hosts}"


@pytest.mark.covers("horovod")  # no case of Horovod's own suite: ours alone
def test_traffic_takes_the_fabric(horovod_peers: HorovodPeers, hpc_placement: str) -> None:
    """The collective's bytes cross the network the placement names: every virtual host's
    veth (netns), this host's fabric netdev (hosts), or TCP over lo (loopback: not shared
    memory). A ring allreduce of B bytes sends 2 (n-1)/n B from every rank; at least half of
    that must be counted."""
    n = horovod_peers.size
    r = Reduction("sum", [np.full((1 << 20,), rank, np.float32) for rank in range(n)])
    need = (n - 1) * (4 << 20) // n
    if hpc_placement == "hosts":
        assert horovod_peers.hosts is not None
        if not any(is_this_host(rank.host) for rank in horovod_peers.ranks):
            pytest.skip("no rank runs on this host, and only its netdev's counters are read")
    elif hpc_placement == "loopback":
        need *= n  # every rank's bytes cross the one lo
    with traffic(horovod_peers) as sent:
        outs = outputs(horovod_peers.run(r.case(), timeout=120.0))
    for rank, out in enumerate(outs):
        check_reduced(array_of(out), r, f"rank {rank}")
    assert all(v >= need for v in sent.values()), f"bytes sent {sent}, need {need} each"


KILL_ENDS_WITHIN = 60.0  # seconds for the survivors to error out or be ended


@pytest.mark.covers("horovod")  # no case of Horovod's own suite: ours alone
def test_a_killed_rank_ends_the_job(
    horovod_env: HorovodEnv, horovod_controller: str, hpc_placement: str, horovod_site: Site
) -> None:
    """A rank SIGKILLed inside an allreduce: within KILL_ENDS_WITHIN seconds every survivor has
    raised a Horovod error or been ended by its launcher, never waited on; and once the peers
    are closed no process of theirs is left (on hosts: of those on this host). Own peers: this
    ends them."""
    peers = HorovodPeers(horovod_env, horovod_controller, hpc_placement, horovod_site)
    try:
        peers.start()
        n = peers.size
        mine = [r.pid for r in peers.ranks if hpc_placement != "hosts" or is_this_host(r.host)]
        procs = [p for p in map(proctree.proc_of, mine) if p is not None]
        t0 = time.monotonic()
        outcomes = peers.outcomes(
            {"op": "case", "case": {"kind": "die_in_allreduce", "victim": n - 1}},
            timeout=KILL_ENDS_WITHIN,
        )
        took = time.monotonic() - t0
    finally:
        peers.close()
    assert outcomes[n - 1].kind == "closed", f"the victim: {outcomes[n - 1]}"
    for rank, got in enumerate(outcomes[: n - 1]):
        ended = got.kind == "closed"  # its launcher ended it
        raised = got.kind == "error" or (got.kind == "replied" and "raised" in got.reply)
        assert ended or raised, f"rank {rank} after {took:.1f}s: {got}"
    left = [p.pid for p in procs if proctree.alive(p)]
    assert not left, f"processes of the peers left behind: {left}"
