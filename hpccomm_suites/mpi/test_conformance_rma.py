"""One-sided communication (MPI 4.1, chapter 12) against a NumPy simulation: Put, Get and
Accumulate in fence epochs over windows that start as known patterns, so a write to the wrong
rank, displacement or length shows. Within an epoch no two accesses conflict (puts from
different origins go to disjoint blocks; gets read what the accumulates do not touch;
accumulates to one place use one op, which the standard allows), so the answer is defined.

A failure prints the shrunk case and a command replaying it with mpirun alone.
"""

from __future__ import annotations

from collections.abc import Callable
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
    known_raise,
    run_covering,
)
from pytest_hpccomm.stacks.mpi.peer.payload import digest, pattern

pytestmark = [
    pytest.mark.conformance,
    pytest.mark.stack("mpi"),
    pytest.mark.fabric("ethernet", "ipoib", "ib", "roce"),
]

# ops whose result does not depend on the order accumulates from several origins land in, and
# never overflow (the standard leaves overflow undefined); every op is checked alone below
ACC_OPS = {"MAX": np.maximum, "MIN": np.minimum}


@st.composite
def rma_cases(draw: Any, n: int) -> dict[str, Any]:
    block = draw(st.integers(0, 12))
    put_len = [draw(st.integers(0, block)) for _ in range(n)]
    put_disp = [r * block + draw(st.integers(0, block - put_len[r])) for r in range(n)]
    acc_len = draw(st.integers(0, 8))
    acc_disp = n * block + draw(st.integers(0, 2))
    return {
        "kind": "rma",
        "dtype": draw(st.sampled_from(["int32", "int64", "uint16"])),
        "window": acc_disp + acc_len + draw(st.integers(0, 2)),
        "put_to": [draw(st.integers(0, n - 1)) for _ in range(n)],
        "put_len": put_len,
        "put_disp": put_disp,
        "get_to": [draw(st.integers(0, n - 1)) for _ in range(n)],
        "get_len": draw(st.integers(0, n * block)),
        "acc_to": [draw(st.integers(0, n - 1)) for _ in range(n)],
        "acc_len": acc_len,
        "acc_disp": acc_disp,
        "op": draw(st.sampled_from(sorted(ACC_OPS))),
        "seed": draw(st.integers(0, 1000)),
    }


def compared_as_signed(fold: Callable[..., Any], dtype: np.dtype[Any]) -> Callable[..., Any]:
    """`fold` (np.maximum, np.minimum) over `dtype`'s values read as the signed type of its
    width: what a MIN/MAX that compares an unsigned type as signed computes."""
    signed = np.dtype(f"int{dtype.itemsize * 8}")
    return lambda a, b: fold(a.view(signed), b.view(signed)).view(dtype)


def simulate(case: dict[str, Any], n: int, signed: bool = False) -> list[tuple[str, str]]:
    """(got, window) digests per rank after the two epochs, by the standard's semantics;
    `signed`: with MIN and MAX comparing an unsigned type's values as signed (a known defect)."""
    dtype, seed = case["dtype"], case["seed"]
    win = [pattern(dtype, case["window"], seed + 500 + r) for r in range(n)]
    for r in range(n):
        k, at = case["put_len"][r], case["put_disp"][r]
        win[case["put_to"][r]][at : at + k] = pattern(dtype, k, seed + r)
    got = [win[case["get_to"][r]][: case["get_len"]].copy() for r in range(n)]
    k, at = case["acc_len"], case["acc_disp"]
    fold: Callable[..., Any] = ACC_OPS[case["op"]]
    if signed:
        fold = compared_as_signed(fold, np.dtype(dtype))
    for r in range(n):
        target = win[case["acc_to"][r]]
        target[at : at + k] = fold(target[at : at + k], pattern(dtype, k, seed + 100 + r))
    return [(digest(got[r]), digest(win[r])) for r in range(n)]


def run_rma(peer: ConformancePeer, case: dict[str, Any]) -> list[dict[str, Any]]:
    """Every rank's report of a one-sided case; the known Open MPI 4.1 window defect, when
    this failure is it, is an xfail."""
    with known_raise(lambda raised: open_mpi_41_window(peer, raised.reports)):
        return peer.run(case)


def open_mpi_41_window(peer: ConformancePeer, reports: list[dict[str, Any]]) -> str | None:
    """Open MPI 4.x, and MPI_Win_create failed with MPI_ERR_WIN on every rank: its osc/pt2pt
    (the one-sided component for TCP-only BTLs) refuses MPI_THREAD_MULTIPLE, which mpi4py asks
    for and Open MPI grants (open-mpi/ompi#2614, #5200; 5.0 dropped osc/pt2pt)."""
    library = peer.info.library
    if not library.startswith("Open MPI v4."):
        return None
    if not reports or not all(
        r.get("call") == "MPI_Win_create" and "MPI_ERR_WIN" in r.get("error_string", "")
        for r in reports
    ):
        return None
    return (
        f"{peer.info.release} defect: MPI_Win_create failed with MPI_ERR_WIN on every "
        f"rank ({len(reports)}) (osc/pt2pt refuses the MPI_THREAD_MULTIPLE it granted; "
        "open-mpi/ompi#2614)"
    )


def accumulate_as_signed(
    peer: ConformancePeer,
    case: dict[str, Any],
    reports: list[dict[str, Any]],
    want: list[tuple[str, str]],
) -> str | None:
    """MIN and MAX over an unsigned type compared as signed (Debian 12's MPICH 4.0.2, as in
    its reductions: pmodels/mpich#6083). Keyed by every rank's Get and window being exactly
    what a signed comparison gives, where the unsigned one (`want`, simulate's) gives
    otherwise."""
    if not np.issubdtype(np.dtype(case["dtype"]), np.unsignedinteger):
        return None
    signed = simulate(case, peer.ranks, signed=True)
    if signed == want or [(r["got"], r["window"]) for r in reports] != signed:
        return None
    return (
        f"{peer.info.release} defect: Accumulate with MPI_{case['op']} over {case['dtype']} "
        "compared the values as signed (every window is what a signed comparison gives; "
        "docs/examples/defects/unsigned_min_max_as_signed.py)"
    )


def check_rma(peer: ConformancePeer, case: dict[str, Any]) -> None:
    reports = run_rma(peer, case)
    hint = peer.replay_hint(case)
    want = simulate(case, peer.ranks)
    if [(r["got"], r["window"]) for r in reports] != want and (
        why := accumulate_as_signed(peer, case, reports, want)
    ):
        raise KnownDefect(why)
    for rank, (got, window) in enumerate(want):
        assert reports[rank]["got"] == got, f"rank {rank}: its Get read other data\n{hint}"
        assert reports[rank]["window"] == window, (
            f"rank {rank}: its window after the epochs differs from the standard's "
            f"(a Put or an Accumulate landed wrong, or something wrote elsewhere)\n{hint}"
        )


@pytest.mark.covers("mpi", *cells(["rma_fence"], ["plain", "zero_count"]))
@settings(conformance_settings())
@given(data=st.data())
def test_put_get_accumulate_in_fence_epochs(
    mpi_conformance_peer: ConformancePeer, data: st.DataObject
) -> None:
    """Put, Get and Accumulate (MAX, MIN) between fences leave every window and every Get
    exactly as the standard's semantics say."""
    peer = mpi_conformance_peer
    check_rma(peer, data.draw(rma_cases(peer.ranks), label="case"))


@pytest.mark.covers("mpi", *cells(["rma_fence"], ["plain", "zero_count", "displacements"]))
def test_rma_covering_set(mpi_conformance_peer: ConformancePeer) -> None:
    """Every rank putting into and accumulating onto one rank (the last), a ring of gets, at
    non-zero displacements; every length zero; each rank on its own window only."""
    peer = mpi_conformance_peer
    n = peer.ranks
    block = 6
    base: dict[str, Any] = {"kind": "rma", "dtype": "int64", "op": "MAX", "seed": 3}
    cases = {
        "all-on-last": base
        | {
            "window": n * block + 9,
            "put_to": [n - 1] * n,
            "put_len": [block - 1] * n,
            "put_disp": [r * block + 1 for r in range(n)],
            "get_to": [(r + 1) % n for r in range(n)],
            "get_len": n * block,
            "acc_to": [n - 1] * n,
            "acc_len": 5,
            "acc_disp": n * block + 2,
        },
        "all-zero": base
        | {
            "window": 4,
            "put_to": [0] * n,
            "put_len": [0] * n,
            "put_disp": [0] * n,
            "get_to": [0] * n,
            "get_len": 0,
            "acc_to": [0] * n,
            "acc_len": 0,
            "acc_disp": 1,
        },
        "own-window": base  # origin and target the same process: the local path
        | {
            "window": n * block + 4,
            "put_to": list(range(n)),
            "put_len": [block] * n,
            "put_disp": [r * block for r in range(n)],
            "get_to": list(range(n)),
            "get_len": n * block,
            "acc_to": list(range(n)),
            "acc_len": 3,
            "acc_disp": n * block,
        },
    }
    run_covering(cases, lambda case: check_rma(peer, case))


# every predefined op the standard allows in MPI_Accumulate (MPI 4.1, 12.3.4), on values whose
# result is exact: (target's initial values, the origin's values)
INITIAL, VALUE = [1000, 0, 7, -3], [5007, 0, 0, 2]
ACCUMULATE: dict[str, Callable[[np.ndarray, np.ndarray], Any]] = {
    "SUM": lambda a, b: a + b,
    "PROD": lambda a, b: a * b,
    "MAX": np.maximum,
    "MIN": np.minimum,
    "BAND": np.bitwise_and,
    "BOR": np.bitwise_or,
    "BXOR": np.bitwise_xor,
    "LAND": lambda a, b: np.logical_and(a, b).astype(a.dtype),
    "LOR": lambda a, b: np.logical_or(a, b).astype(a.dtype),
    "LXOR": lambda a, b: np.logical_xor(a, b).astype(a.dtype),
    "REPLACE": lambda a, b: b,
}


@pytest.mark.covers("mpi", *cells(["rma_fence"], ["plain"]) + cells(["predefined_ops"], ["plain"]))
@pytest.mark.parametrize("origin", ["local", "remote"])
@pytest.mark.parametrize("dtype", ["int32", "int64"])
@pytest.mark.parametrize("op", sorted(ACCUMULATE))
def test_accumulate_applies_each_predefined_op(
    mpi_conformance_peer: ConformancePeer, op: str, dtype: str, origin: str
) -> None:
    """MPI_Accumulate with each predefined op (and MPI_REPLACE) applies it elementwise to the
    target window, whether the origin is the target's own process or another."""
    peer = mpi_conformance_peer
    target = peer.ranks - 1
    case = {
        "kind": "accumulate_op",
        "dtype": dtype,
        "op": op,
        "initial": INITIAL,
        "value": VALUE,
        "target": target,
        "origin": target if origin == "local" else 0,
    }
    got = run_rma(peer, case)[target]["window"]
    want = ACCUMULATE[op](np.array(INITIAL, dtype), np.array(VALUE, dtype)).tolist()
    if got != want and (why := open_mpi_remote_accumulate(peer, op, origin, got)) is not None:
        raise KnownDefect(why)
    assert got == want, (
        f"Accumulate {op} over {dtype} from the {origin} process: the window holds {got}, "
        f"{INITIAL} {op} {VALUE} is {want}\n{peer.replay_hint(case)}"
    )


# what Open MPI's osc/rdma was seen to do: an Accumulate from another process with a bitwise
# or logical op left the target window unchanged, or zeroed it (BXOR); the same op from the
# target's own process, and every arithmetic op, were right
OPEN_MPI_REMOTE_ACC_OPS = ("BAND", "BOR", "BXOR", "LAND", "LOR", "LXOR")


def open_mpi_remote_accumulate(
    peer: ConformancePeer, op: str, origin: str, got: list[int]
) -> str | None:
    """The known Open MPI defect, when this failure is it: Open MPI, a remote origin, a
    bitwise/logical op, and the window unchanged or zero. Anything else is not it."""
    library = peer.info.library
    if (
        not library.startswith("Open MPI")
        or origin != "remote"
        or op not in OPEN_MPI_REMOTE_ACC_OPS
    ):
        return None
    if got == INITIAL:
        seen = "left the target window unchanged"
    elif got == [0] * len(INITIAL):
        seen = "zeroed the target window"
    else:
        return None
    return (
        f"{peer.info.release} defect: MPI_Accumulate with MPI_{op} from another process {seen} "
        f"({got}); from the target's own process it is right"
    )
