"""Reductions against a NumPy reference: every predefined op over the dtypes it applies to,
Reduce and Allreduce, with and without MPI.IN_PLACE, and a non-commutative user-defined op
(2x2 matrix product) whose result depends on rank order.

Values are drawn so the exact answer is defined by the standard: integers never overflow in
SUM/PROD (MPI does not define it; Open MPI's AVX ops saturate, ompi#8045), floats are small
dyadic numbers whose sums and products are exact in any association order (MPI may reduce in
any order).
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
    COMPLEX_DTYPES,
    FLOAT_DTYPES,
    INT_DTYPES,
    ConformancePeer,
    conformance_settings,
    run_covering,
)
from pytest_hpccomm.stacks.mpi.peer.payload import MATMUL, PAIR_TYPES, from_json, np_dtype

pytestmark = [
    pytest.mark.conformance,
    pytest.mark.stack("mpi"),
    pytest.mark.fabric("ethernet", "ipoib", "ib", "roce"),
]

NUMERIC = INT_DTYPES + FLOAT_DTYPES + COMPLEX_DTYPES
OPS: dict[str, tuple[str, ...]] = {  # op -> dtypes it applies to (MPI 4.1, 6.9.2); first = simplest
    "SUM": NUMERIC,
    "PROD": NUMERIC,
    "MIN": INT_DTYPES + FLOAT_DTYPES,
    "MAX": INT_DTYPES + FLOAT_DTYPES,
    "LAND": INT_DTYPES + ("bool",),
    "LOR": INT_DTYPES + ("bool",),
    "LXOR": INT_DTYPES + ("bool",),
    "BAND": INT_DTYPES,
    "BOR": INT_DTYPES,
    "BXOR": INT_DTYPES,
    "MAXLOC": tuple(PAIR_TYPES),
    "MINLOC": tuple(PAIR_TYPES),
}
VARIANTS = ["allreduce", "reduce", "allreduce_inplace", "reduce_inplace"]
MAX_COUNT = 64


def iroot(x: int, n: int) -> int:
    """Largest r with r**n <= x."""
    r = int(round(x ** (1.0 / n)))
    while r**n > x:
        r -= 1
    while (r + 1) ** n <= x:
        r += 1
    return r


def values(op: str, dtype: str, n: int) -> st.SearchStrategy[Any]:
    """One element of one rank's input, as JSON (complex [re, im], pairs [value, index])."""
    if dtype in PAIR_TYPES:
        v = st.integers(-3, 3)  # few distinct values: ties, where the lowest index must win
        return st.tuples(
            v.map(float) if np_dtype(dtype)["v"].kind == "f" else v, st.integers(0, 10)
        ).map(list)
    if dtype == "bool":
        return st.booleans()
    dt = np.dtype(dtype)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        if op in ("LAND", "LOR", "LXOR"):  # any non-zero is true, not only 1
            return st.integers(max(-2, int(info.min)), 3)
        if op in ("SUM", "PROD"):
            # no overflow: MPI leaves it undefined, and Open MPI's AVX ops saturate unsigned
            # sums (found by this property: uint8 0+89+167 -> 255; ompi#8045, "wontfix")
            top = int(info.max) // n if op == "SUM" else iroot(int(info.max), n)
            return st.integers(-top if dt.kind == "i" else 0, top)
        return st.integers(int(info.min), int(info.max))
    mantissa = 24 if dt in (np.float32, np.complex64) else 53
    if op == "SUM":
        part = st.integers(-(1 << 16), 1 << 16).map(lambda k: k / 4)
    elif op == "PROD":
        top = iroot(1 << mantissa, n) if dt.kind == "f" else max(1, iroot(1 << 20, n) // 2)
        part = st.integers(-min(top, 10**4), min(top, 10**4)).map(float)
    else:
        part = st.floats(
            allow_nan=False, allow_infinity=False, width=32 if dt == np.float32 else 64
        )
    return st.tuples(part, part).map(list) if dt.kind == "c" else part


PAIRS = [(op, dtype) for op, dtypes in OPS.items() for dtype in dtypes]


@st.composite
def reduce_cases(
    draw: Any, n: int, op: str | None = None, dtype: str | None = None
) -> dict[str, Any]:
    op = op or draw(st.sampled_from(list(OPS)))
    dtype = dtype or draw(st.sampled_from(OPS[op]))
    variant = draw(st.sampled_from(VARIANTS))
    root = draw(st.integers(0, n - 1))
    count = draw(st.integers(0, MAX_COUNT))
    elem = values(op, dtype, n)
    inputs = [draw(st.lists(elem, min_size=count, max_size=count)) for _ in range(n)]
    return {
        "kind": "reduce",
        "op": op,
        "dtype": dtype,
        "variant": variant,
        "root": root,
        "count": count,
        "inputs": inputs,
    }


UFUNCS = {
    "SUM": np.add,
    "PROD": np.multiply,
    "MIN": np.minimum,
    "MAX": np.maximum,
    "BAND": np.bitwise_and,
    "BOR": np.bitwise_or,
    "BXOR": np.bitwise_xor,
    "LAND": np.logical_and,
    "LOR": np.logical_or,
    "LXOR": np.logical_xor,
}


def reference(op: str, dtype: str, inputs: list[np.ndarray]) -> np.ndarray:
    if op in ("MAXLOC", "MINLOC"):
        vals = np.stack([a["v"] for a in inputs])
        idx = np.stack([a["i"] for a in inputs])
        best = vals.max(axis=0) if op == "MAXLOC" else vals.min(axis=0)
        out = np.zeros_like(inputs[0])
        out["v"] = best
        out["i"] = np.where(vals == best, idx, np.iinfo(np.int32).max).min(axis=0)  # ties: lowest
        return out
    fold = UFUNCS[op]
    logical = op in ("LAND", "LOR", "LXOR")
    acc = inputs[0] != 0 if logical else inputs[0].copy()
    for a in inputs[1:]:
        acc = fold(acc, a != 0 if logical else a)
    return np.asarray(acc).astype(np_dtype(dtype))


def holders(case: dict[str, Any], n: int) -> list[int]:
    return list(range(n)) if case["variant"].startswith("allreduce") else [case["root"]]


# unsigned -> the signed type of its width: what a MIN/MAX that compares as signed computes
SIGNED = {"uint8": "int8", "uint16": "int16", "uint32": "int32", "uint64": "int64"}


def as_signed(case: dict[str, Any]) -> dict[str, Any] | None:
    """The case with its unsigned inputs read as signed, for MIN and MAX; None otherwise."""
    dtype = case["dtype"]
    if case["op"] not in ("MIN", "MAX") or dtype not in SIGNED:
        return None
    inputs = [from_json(x, dtype).view(SIGNED[dtype]).tolist() for x in case["inputs"]]
    return {**case, "dtype": SIGNED[dtype], "inputs": inputs}


def signed_compare(
    peer: ConformancePeer, case: dict[str, Any], got: np.ndarray, want: np.ndarray, alt: Any
) -> str | None:
    """The defect of Debian 12's MPICH 4.0.2 and Open MPI 4.1.4 (docs: defects), when this
    result is it: MIN or MAX over an unsigned type, and the result exactly what comparing the
    values as signed gives. Anything else is not it."""
    if alt is None or not np.array_equal(got, np.asarray(alt).view(case["dtype"])):
        return None
    i = next(i for i in range(len(want)) if got[i] != want[i])
    return (
        f"{peer.info.release} defect: MPI_{case['op']} over {case['dtype']} compared the values "
        f"as signed: {int(got[i])} where the unsigned {case['op']} is {int(want[i])}"
    )


def check_reduce(peer: ConformancePeer, case: dict[str, Any]) -> None:
    reports = peer.run(case)
    want = reference(
        case["op"], case["dtype"], [from_json(x, case["dtype"]) for x in case["inputs"]]
    )
    signed = as_signed(case)
    alt = None
    if signed is not None:
        alt = reference(
            signed["op"], signed["dtype"], [from_json(x, signed["dtype"]) for x in signed["inputs"]]
        )
    hint = peer.replay_hint(case)
    known: list[str] = []
    for rank in holders(case, peer.ranks):
        got = from_json(reports[rank]["result"], case["dtype"])
        bad = [i for i in range(len(want)) if got[i] != want[i]]
        if bad and (why := signed_compare(peer, case, got, want, alt)) is not None:
            known.append(f"rank {rank}: {why}")
            continue
        assert not bad, (
            f"rank {rank}: {case['variant']} {case['op']} over {case['dtype']} "
            f"x{case['count']}: element {bad[0]} is {got[bad[0]]!r}, NumPy says "
            f"{want[bad[0]]!r} ({len(bad)} wrong)\n{hint}"
        )
    if known:
        raise KnownDefect(known[0] + f" (and {len(known) - 1} more ranks)" * (len(known) > 1))


@pytest.mark.covers(
    "mpi",
    *cells(["reduce", "allreduce", "predefined_ops"], ["plain", "zero_count"])
    + cells(["reduce", "allreduce"], ["in_place"])
    + cells(["reduce"], ["nonzero_root"]),
)
@pytest.mark.parametrize("op,dtype", PAIRS, ids=[f"{o}-{d}" for o, d in PAIRS])
@settings(conformance_settings(share=0.2))
@given(data=st.data())
def test_reduce_predefined_ops(
    mpi_conformance_peer: ConformancePeer, op: str, dtype: str, data: st.DataObject
) -> None:
    """Reduce/Allreduce (and their IN_PLACE forms) of every predefined op over every dtype it
    applies to equal NumPy's fold of the ranks' inputs (MAXLOC/MINLOC: lowest index on ties).
    One item per (op, dtype), so every pair runs every time; Hypothesis draws the rest."""
    peer = mpi_conformance_peer
    check_reduce(peer, data.draw(reduce_cases(peer.ranks, op, dtype), label="case"))


@pytest.mark.covers(
    "mpi",
    *cells(["reduce", "allreduce", "predefined_ops"], ["plain", "zero_count"])
    + cells(["reduce", "allreduce"], ["in_place"])
    + cells(["reduce"], ["nonzero_root"]),
)
@settings(conformance_settings())
@given(data=st.data())
def test_reduce_any_predefined_op(
    mpi_conformance_peer: ConformancePeer, data: st.DataObject
) -> None:
    """The same property with the op and dtype drawn too: a failure shrinks to the simplest
    op and dtype that show it (SUM over int8 comes first), and to the shortest vector."""
    peer = mpi_conformance_peer
    check_reduce(peer, data.draw(reduce_cases(peer.ranks), label="case"))


@st.composite
def matmul_cases(draw: Any, n: int) -> dict[str, Any]:
    count = draw(st.integers(0, 6))  # 2x2 matrices per rank
    entry = st.integers(-3, 3)
    inputs = [draw(st.lists(entry, min_size=4 * count, max_size=4 * count)) for _ in range(n)]
    return {
        "kind": "reduce",
        "op": MATMUL,
        "dtype": "int64",
        "variant": draw(st.sampled_from(VARIANTS)),
        "root": draw(st.integers(0, n - 1)),
        "count": count,
        "inputs": inputs,
    }


@pytest.mark.covers(
    "mpi",
    # the matrices travel as Peer.matrix, a contiguous type of 4 int64: a derived datatype
    *cells(["user_ops"], ["plain", "zero_count", "derived_type"])
    + cells(["reduce", "allreduce"], ["derived_type"]),
)
@settings(conformance_settings())
@given(data=st.data())
def test_reduce_noncommutative_user_op(
    mpi_conformance_peer: ConformancePeer, data: st.DataObject
) -> None:
    """A user op created with commute=False (2x2 matrix product) reduces in rank order:
    the result is A0 @ A1 @ ... @ A(n-1), never a reordering."""
    peer = mpi_conformance_peer
    case = data.draw(matmul_cases(peer.ranks), label="case")
    reports = peer.run(case)
    mats = [np.array(x, np.int64).reshape(-1, 2, 2) for x in case["inputs"]]
    want = mats[0]
    for m in mats[1:]:
        want = want @ m
    hint = peer.replay_hint(case)
    for rank in holders(case, peer.ranks):
        got = np.array(reports[rank]["result"], np.int64).reshape(-1, 2, 2)
        assert np.array_equal(got, want), (
            f"rank {rank}: {case['variant']} of the "
            f"non-commutative op gave {got.tolist()}, rank-order product is {want.tolist()}"
            f"\n{hint}"
        )


PREFIX_SCATTER = ["scan", "exscan", "reduce_scatter_block", "reduce_scatter"]


def prefix_scatter_case(
    op: str,
    dtype: str,
    variant: str,
    recvcounts: list[int],
    inputs: list[list[Any]],
) -> dict[str, Any]:
    return {
        "kind": "reduce",
        "op": op,
        "dtype": dtype,
        "variant": variant,
        "root": 0,
        "count": len(inputs[0]),
        "recvcounts": recvcounts,
        "inputs": inputs,
    }


@st.composite
def prefix_scatter_cases(draw: Any, n: int) -> dict[str, Any]:
    op = draw(st.sampled_from(list(OPS)))
    dtype = draw(st.sampled_from(OPS[op]))
    base = draw(st.sampled_from(PREFIX_SCATTER))
    variant = base + ("_inplace" if draw(st.booleans()) else "")
    if base == "reduce_scatter_block":
        recvcounts = [draw(st.integers(0, MAX_COUNT // n))] * n
    elif base == "reduce_scatter":
        recvcounts = draw(st.lists(st.integers(0, MAX_COUNT // n), min_size=n, max_size=n))
    else:
        recvcounts = []
    count = sum(recvcounts) if recvcounts else draw(st.integers(0, MAX_COUNT))
    elem = values(op, dtype, n)
    inputs = [draw(st.lists(elem, min_size=count, max_size=count)) for _ in range(n)]
    return prefix_scatter_case(op, dtype, variant, recvcounts, inputs)


def prefix_scatter_wants(case: dict[str, Any], n: int) -> dict[int, np.ndarray]:
    """What each rank must hold (MPI 4.1, 6.10-6.11): Scan the reduction of ranks 0..r,
    Exscan of ranks 0..r-1 (rank 0: undefined), Reduce_scatter(_block) rank r's block of the
    whole reduction."""
    arrays = [from_json(x, case["dtype"]) for x in case["inputs"]]
    base = case["variant"].removesuffix("_inplace")

    def fold(upto: int) -> np.ndarray:
        # one process's value is the reduction of itself: no op applies (LAND keeps -1)
        return arrays[0] if upto == 1 else reference(case["op"], case["dtype"], arrays[:upto])

    if base == "scan":
        return {r: fold(r + 1) for r in range(n)}
    if base == "exscan":
        return {r: fold(r) for r in range(1, n)}
    whole = reference(case["op"], case["dtype"], arrays)
    starts = np.cumsum([0, *case["recvcounts"]])
    return {r: whole[starts[r] : starts[r + 1]] for r in range(n)}


def check_prefix_scatter(peer: ConformancePeer, case: dict[str, Any]) -> None:
    reports = peer.run(case)
    hint = peer.replay_hint(case)
    signed = as_signed(case)
    alts = prefix_scatter_wants(signed, peer.ranks) if signed is not None else {}
    known: list[str] = []
    for rank, want in prefix_scatter_wants(case, peer.ranks).items():
        got = from_json(reports[rank]["result"], case["dtype"])
        assert len(got) == len(want), (
            f"rank {rank}: {case['variant']} returned {len(got)} elements, not {len(want)}\n{hint}"
        )
        bad = [i for i in range(len(want)) if got[i] != want[i]]
        if bad and (why := signed_compare(peer, case, got, want, alts.get(rank))) is not None:
            known.append(f"rank {rank}: {why}")
            continue
        assert not bad, (
            f"rank {rank}: {case['variant']} {case['op']} over {case['dtype']}: element "
            f"{bad[0]} is {got[bad[0]]!r}, NumPy says {want[bad[0]]!r} ({len(bad)} wrong)\n{hint}"
        )
    if known:
        raise KnownDefect(known[0] + f" (and {len(known) - 1} more ranks)" * (len(known) > 1))


@pytest.mark.covers(
    "mpi",
    *cells(["scan", "exscan", "reduce_scatter", "reduce_scatter_block"], ["plain"])
    + cells(["predefined_ops"], ["plain"]),
)
@settings(conformance_settings())
@given(data=st.data())
def test_scan_and_reduce_scatter(
    mpi_conformance_peer: ConformancePeer, data: st.DataObject
) -> None:
    """Scan/Exscan give each rank the reduction of the ranks before it (and itself, for Scan),
    Reduce_scatter(_block) its block of the whole reduction, for every predefined op, with
    and without MPI.IN_PLACE and with zero counts."""
    peer = mpi_conformance_peer
    check_prefix_scatter(peer, data.draw(prefix_scatter_cases(peer.ranks), label="case"))


@pytest.mark.covers(
    "mpi",
    *cells(
        ["scan", "exscan", "reduce_scatter", "reduce_scatter_block"],
        ["plain", "in_place", "zero_count"],
    ),
)
@pytest.mark.parametrize("variant", PREFIX_SCATTER)
def test_scan_and_reduce_scatter_covering_set(
    mpi_conformance_peer: ConformancePeer, variant: str
) -> None:
    """SUM over int32 and MAXLOC over pairs, each with and without MPI.IN_PLACE, uneven
    blocks (one of them empty) for Reduce_scatter, and every count zero."""
    peer = mpi_conformance_peer
    n = peer.ranks
    if variant == "reduce_scatter":
        counts = [(r * 2) % 3 for r in range(n)]  # 0, 2, 1, ...: uneven, one empty
    elif variant == "reduce_scatter_block":
        counts = [3] * n
    else:
        counts = []
    total = sum(counts) if counts else 5
    cases = []
    for inplace in ("", "_inplace"):
        sums = [[(r + 1) * (i + 1) for i in range(total)] for r in range(n)]
        cases.append(prefix_scatter_case("SUM", "int32", variant + inplace, counts, sums))
        pairs = [[[float((r * 7 + i) % 4), r] for i in range(total)] for r in range(n)]
        cases.append(prefix_scatter_case("MAXLOC", "double_int", variant + inplace, counts, pairs))
        zero = [0] * len(counts)
        cases.append(
            prefix_scatter_case("SUM", "int32", variant + inplace, zero, [[] for _ in range(n)])
        )
    run_covering(
        {f"{c['op']} over {c['dtype']}, {c['variant']}, count {c['count']}": c for c in cases},
        lambda case: check_prefix_scatter(peer, case),
    )


# -- on a communicator of one process and of an odd number -----------------------------------

SIZED = ["reduce", "allreduce", "reduce_inplace", "allreduce_inplace", *PREFIX_SCATTER]
# the matrix product runs through Reduce and Allreduce only (peer: case_reduce)
SIZED_OPS = [
    (v, o)
    for v in SIZED
    for o in ("SUM", "MAXLOC", MATMUL)
    if o != MATMUL or v.removesuffix("_inplace") in ("reduce", "allreduce")
]


def sized_case(variant: str, size: str, n: int, op: str) -> dict[str, Any]:
    """A case on COMM_SELF ("self") or an odd Split communicator ("odd"): SUM over int32,
    MAXLOC over pairs, or the non-commutative matrix product (MATMUL); for Reduce the last
    rank is the root."""
    from hpccomm_suites.mpi.test_conformance_topology import comm_of, on

    base = on(size, n)
    m = len(comm_of(base, 0, n) or [])
    root = m - 1
    if op == MATMUL:
        mats = [[(r + i) % 3 - 1 for i in range(8)] for r in range(m)]  # 2 matrices each
        case = {"kind": "reduce", "op": MATMUL, "dtype": "int64", "count": 2, "inputs": mats}
        return case | {"variant": variant, "root": root} | base
    if variant.removesuffix("_inplace") == "reduce_scatter":
        counts = [(r * 2) % 3 + (m == 1) for r in range(m)]
    elif variant.removesuffix("_inplace") == "reduce_scatter_block":
        counts = [3] * m
    else:
        counts = []
    total = sum(counts) if counts else 5
    if op == "SUM":
        inputs: list[list[Any]] = [[(r + 1) * (i + 1) for i in range(total)] for r in range(m)]
        dtype = "int32"
    else:
        inputs = [[[float((r * 7 + i) % 4), r] for i in range(total)] for r in range(m)]
        dtype = "double_int"
    case = prefix_scatter_case(op, dtype, variant, counts, inputs)
    return case | {"root": root if variant.startswith("reduce") else 0} | base


def sized_wants(case: dict[str, Any], m: int) -> dict[int, Any]:
    """What each rank of the communicator must hold, by its rank in it."""
    base = case["variant"].removesuffix("_inplace")
    if case["op"] == MATMUL:
        mats = [np.array(x, np.int64).reshape(-1, 2, 2) for x in case["inputs"]]
        product = mats[0]
        for x in mats[1:]:
            product = product @ x
        return {r: product for r in holders(case, m)}
    if base in PREFIX_SCATTER:
        return prefix_scatter_wants(case, m)
    arrays = [from_json(x, case["dtype"]) for x in case["inputs"]]
    whole = arrays[0] if m == 1 else reference(case["op"], case["dtype"], arrays)
    return {r: whole for r in holders(case, m)}


@pytest.mark.covers(
    "mpi",
    *cells(
        ["reduce", "allreduce", "scan", "exscan", "reduce_scatter", "reduce_scatter_block"],
        ["size_1", "odd_size"],
    )
    + cells(["predefined_ops", "user_ops"], ["size_1", "odd_size"]),
)
@pytest.mark.parametrize("size", ["self", "odd"])
@pytest.mark.parametrize("variant,op", SIZED_OPS, ids=[f"{v}-{o}" for v, o in SIZED_OPS])
def test_reductions_on_sizes(
    mpi_conformance_peer: ConformancePeer, variant: str, size: str, op: str
) -> None:
    """Every reduction on MPI_COMM_SELF (the result is the one process's input: no op
    applies; Exscan's is undefined, so only its completion counts) and on an odd Split
    communicator (the last rank as Reduce's root; the matrix product in rank order)."""
    from hpccomm_suites.mpi.test_conformance_topology import reports_by_comm

    peer = mpi_conformance_peer
    case = sized_case(variant, size, peer.ranks, op)
    hint = peer.replay_hint(case)
    for rank, rep, members in reports_by_comm(peer, case):
        want = sized_wants(case, len(members)).get(members.index(rank))
        if want is None:  # not the root, or Exscan's rank 0
            continue
        if op == MATMUL:
            got: Any = np.array(rep["result"], np.int64).reshape(-1, 2, 2)
        else:
            got = from_json(rep["result"], case["dtype"])
        assert got.shape == want.shape and (got == want).all(), (
            f"rank {rank}: {variant} {op} on a communicator of {len(members)}: got "
            f"{got.tolist()}, expected {want.tolist()}\n{hint}"
        )


@pytest.mark.covers("mpi", *cells(["user_ops"], ["zero_count"]))
@pytest.mark.parametrize("variant", VARIANTS)
def test_user_op_on_zero_matrices(mpi_conformance_peer: ConformancePeer, variant: str) -> None:
    """The non-commutative user op over count 0: the call completes, the result is empty
    (the op is never called with data, and nothing is written)."""
    peer = mpi_conformance_peer
    n = peer.ranks
    case = {
        "kind": "reduce",
        "op": MATMUL,
        "dtype": "int64",
        "variant": variant,
        "root": n - 1,
        "count": 0,
        "inputs": [[] for _ in range(n)],
    }
    reports = peer.run(case)
    for rank in holders(case, n):
        assert reports[rank]["result"] == [], (
            f"rank {rank}: {reports[rank]}\n{peer.replay_hint(case)}"
        )


PROTOCOL_COUNT = 40000  # int32 per rank: 160 KB, past every eager limit here


@pytest.mark.covers(
    "mpi",
    *cells(
        ["reduce", "allreduce", "scan", "exscan", "reduce_scatter", "reduce_scatter_block"],
        ["protocol_sizes"],
    ),
)
@pytest.mark.parametrize("variant", SIZED)
def test_reductions_past_the_eager_limit(
    mpi_conformance_peer: ConformancePeer, variant: str
) -> None:
    """SUM over 160 KB of int32 per rank (the pipelined/segmented paths), on the world."""
    peer = mpi_conformance_peer
    n = peer.ranks
    base = variant.removesuffix("_inplace")
    if base == "reduce_scatter":
        counts = [PROTOCOL_COUNT // n + r for r in range(n)]
    elif base == "reduce_scatter_block":
        counts = [PROTOCOL_COUNT // n] * n
    else:
        counts = []
    total = sum(counts) if counts else PROTOCOL_COUNT
    inputs = [[(r + 1) * (i % 7) for i in range(total)] for r in range(n)]
    case = prefix_scatter_case("SUM", "int32", variant, counts, inputs) | {"root": n - 1}
    if base in PREFIX_SCATTER:
        check_prefix_scatter(peer, case)
    else:
        check_reduce(peer, case)


@pytest.mark.covers(
    "mpi",
    *cells(["scan", "exscan", "reduce_scatter", "reduce_scatter_block"], ["derived_type"])
    + cells(["user_ops"], ["derived_type"]),
)
@pytest.mark.parametrize("variant", PREFIX_SCATTER + [v + "_inplace" for v in PREFIX_SCATTER])
def test_prefix_and_scatter_of_matrices(
    mpi_conformance_peer: ConformancePeer, variant: str
) -> None:
    """Scan/Exscan/Reduce_scatter(_block) with the non-commutative matrix product over the
    derived type of a 2x2 int64 matrix (Peer.matrix): Scan gives rank r A0 @ ... @ Ar,
    Exscan A0 @ ... @ A(r-1), the scatters rank r its matrices of the rank-order product."""
    peer = mpi_conformance_peer
    n = peer.ranks
    base = variant.removesuffix("_inplace")
    if base == "reduce_scatter":
        counts = [(r * 2) % 3 + 1 for r in range(n)]
    elif base == "reduce_scatter_block":
        counts = [2] * n
    else:
        counts = []
    total = sum(counts) if counts else 3
    inputs = [[(r * 5 + i) % 5 - 2 for i in range(4 * total)] for r in range(n)]
    case = {
        "kind": "reduce",
        "op": MATMUL,
        "dtype": "int64",
        "variant": variant,
        "root": 0,
        "count": total,
        "recvcounts": counts,
        "inputs": inputs,
    }
    mats = [np.array(x, np.int64).reshape(-1, 2, 2) for x in inputs]

    def product(ranks: range) -> np.ndarray:
        out = mats[ranks[0]]
        for q in ranks[1:]:
            out = out @ mats[q]
        return out

    if base == "scan":
        wants = {r: product(range(r + 1)) for r in range(n)}
    elif base == "exscan":
        wants = {r: product(range(r)) for r in range(1, n)}
    else:
        whole, starts = product(range(n)), np.cumsum([0, *counts])
        wants = {r: whole[starts[r] : starts[r + 1]] for r in range(n)}
    reports, hint = peer.run(case), peer.replay_hint(case)
    for r, want in wants.items():
        got = np.array(reports[r]["result"], np.int64).reshape(-1, 2, 2)
        assert np.array_equal(got, want), (
            f"rank {r}: {variant} of the matrix product gave {got.tolist()}, the rank-order "
            f"product is {want.tolist()}\n{hint}"
        )
