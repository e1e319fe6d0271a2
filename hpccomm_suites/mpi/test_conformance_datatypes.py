"""Derived datatypes: a vector or subarray type on one side of a message, contiguous data on
the other, must select exactly what NumPy slicing selects (and write nothing outside it)."""

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
    run_covering,
)
from pytest_hpccomm.stacks.mpi.peer.payload import digest, pattern

pytestmark = [
    pytest.mark.conformance,
    pytest.mark.stack("mpi"),
    pytest.mark.fabric("ethernet", "ipoib", "ib", "roce"),
]

DTYPES = ["int32", "uint8", "int16", "float64", "complex128"]


def common(draw: Any, n: int) -> dict[str, Any]:
    return {
        "kind": "datatype",
        "dtype": draw(st.sampled_from(DTYPES)),
        "typed": draw(st.sampled_from(["send", "recv"])),
        "src": draw(st.integers(0, n - 1)),
        "dst": draw(st.integers(0, n - 1)),
        "seed": draw(st.integers(0, 1000)),
    }


@st.composite
def vector_cases(draw: Any, n: int) -> dict[str, Any]:
    blocklength = draw(st.integers(1, 6))
    vector = {
        "count": draw(st.integers(0, 40)),
        "blocklength": blocklength,
        "stride": blocklength + draw(st.integers(0, 6)),
    }  # no overlap: receivable
    return common(draw, n) | {"layout": "vector", "vector": vector}


@st.composite
def subarray_cases(draw: Any, n: int) -> dict[str, Any]:
    sizes = draw(st.lists(st.integers(1, 7), min_size=1, max_size=3))
    subsizes = [draw(st.integers(1, s)) for s in sizes]
    starts = [draw(st.integers(0, s - ss)) for s, ss in zip(sizes, subsizes)]
    sub = {
        "sizes": sizes,
        "subsizes": subsizes,
        "starts": starts,
        "order": draw(st.sampled_from(["C", "F"])),
    }
    return common(draw, n) | {"layout": "subarray", "subarray": sub}


def check(
    peer: ConformancePeer,
    case: dict[str, Any],
    picked: np.ndarray,
    view: np.ndarray,
    flat: np.ndarray,
) -> None:
    """picked: NumPy's selection of the typed buffer `flat`, in the type's order; view: that
    selection as a view of flat (typed receives: the sent data is written through it)."""
    rep = peer.run(case)[case["dst"]]
    hint = peer.replay_hint(case)
    assert rep["count"] == picked.size, (
        f"Get_count() = {rep['count']}, the type selects {picked.size} elements\n{hint}"
    )
    if case["typed"] == "send":
        want = digest(picked)
        what = "the contiguous receive does not hold the slice NumPy selects"
    else:
        view[...] = pattern(case["dtype"], picked.size, case["seed"]).reshape(
            view.shape, order=case.get("subarray", {}).get("order", "C")
        )
        want = digest(flat)
        what = "the typed receive did not scatter into exactly NumPy's slice"
    assert rep["sha"] == want, f"{what}\n{hint}"


@pytest.mark.covers(
    "mpi",
    *cells(["vector"], ["plain", "zero_count"]) + cells(["send_modes"], ["derived_type"]),
)
@settings(conformance_settings())
@given(data=st.data())
def test_vector_datatype(mpi_conformance_peer: ConformancePeer, data: st.DataObject) -> None:
    """Create_vector(count, blocklength, stride) sends/receives a[i*stride : i*stride+bl]."""
    peer = mpi_conformance_peer
    case = data.draw(vector_cases(peer.ranks), label="case")
    v, dtype = case["vector"], case["dtype"]
    count, bl, stride = v["count"], v["blocklength"], v["stride"]
    extent = (count - 1) * stride + bl if count else 0
    seed = case["seed"] if case["typed"] == "send" else case["seed"] + 1  # sender / sentinel
    # NumPy's idea of the vector type: rows of `stride` elements, the first bl of each
    padded = np.concatenate(
        [pattern(dtype, extent, seed), np.zeros(count * stride - extent, np.dtype(dtype))]
    )
    view = padded.reshape(count, stride)[:, :bl]
    check(peer, case, view.ravel(), view, padded[:extent])


@pytest.mark.covers(
    "mpi",
    *cells(["subarray"], ["plain"]) + cells(["send_modes"], ["derived_type"]),
)
@settings(conformance_settings())
@given(data=st.data())
def test_subarray_datatype(mpi_conformance_peer: ConformancePeer, data: st.DataObject) -> None:
    """Create_subarray(sizes, subsizes, starts, order C/Fortran) sends/receives
    a[starts:starts+subsizes] of the array laid out in that order."""
    check_subarray(
        mpi_conformance_peer, data.draw(subarray_cases(mpi_conformance_peer.ranks), label="case")
    )


# Both orders, each side typed: subarrays whose dimensions all differ (sizes,
# subsizes and starts), so a type that mixes up two dimensions or the order cannot pass by
# symmetry; the random draws above meet such shapes only by chance.
SUBARRAY_SHAPES = (
    {"sizes": [7], "subsizes": [3], "starts": [2]},
    {"sizes": [3, 5], "subsizes": [2, 3], "starts": [1, 2]},
    {"sizes": [2, 3, 4], "subsizes": [1, 2, 3], "starts": [1, 0, 1]},
    {"sizes": [4, 3, 5], "subsizes": [3, 1, 2], "starts": [0, 2, 3]},
)


@pytest.mark.covers(
    "mpi",
    *cells(["subarray"], ["plain"]) + cells(["send_modes"], ["derived_type"]),
)
@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("typed", ["send", "recv"])
def test_subarray_covering_set(
    mpi_conformance_peer: ConformancePeer, typed: str, order: str
) -> None:
    for i, shape in enumerate(SUBARRAY_SHAPES):
        check_subarray(
            mpi_conformance_peer,
            {
                "kind": "datatype",
                "dtype": DTYPES[i % len(DTYPES)],
                "typed": typed,
                "src": 0,
                "dst": 1,
                "seed": i,
                "layout": "subarray",
                "subarray": {**shape, "order": order},
            },
        )


def check_subarray(peer: ConformancePeer, case: dict[str, Any]) -> None:
    s, dtype = case["subarray"], case["dtype"]
    seed = case["seed"] if case["typed"] == "send" else case["seed"] + 1
    flat = pattern(dtype, int(np.prod(s["sizes"])), seed)
    full = flat.reshape(s["sizes"], order=s["order"])  # a view: writes reach flat
    view = full[tuple(slice(a, a + b) for a, b in zip(s["starts"], s["subsizes"]))]
    check(peer, case, view.ravel(order=s["order"]), view, flat)


INDEXED = ["contiguous", "indexed", "hindexed", "indexed_block", "struct", "resized"]


def blocks_case(
    layout: str, blocklengths: list[int], displs: list[int], **extra: Any
) -> dict[str, Any]:
    return {"layout": layout, "indexed": {"blocklengths": blocklengths, "displs": displs, **extra}}


@st.composite
def indexed_cases(draw: Any, n: int, layout: str) -> dict[str, Any]:
    """Blocks that never overlap (a receive type must not), placed in a drawn order with gaps:
    the type's order is the listed order, not the address order."""
    if layout == "contiguous":
        shape = blocks_case(layout, [draw(st.integers(0, 30))], [0])
    elif layout == "resized":
        bl, count = draw(st.integers(1, 5)), draw(st.integers(0, 8))
        stride = bl + draw(st.integers(0, 4))
        shape = blocks_case(
            layout,
            [bl] * count,
            [i * stride for i in range(count)],
            stride=stride,
            count=count,
            block=bl,
        )
    else:
        k = draw(st.integers(1, 6))
        same = draw(st.integers(0, 4))
        bls = (
            [same] * k if layout == "indexed_block" else [draw(st.integers(0, 4)) for _ in range(k)]
        )
        order = draw(st.permutations(range(k)))
        displs, at = [0] * k, 0
        for j in order:
            at += draw(st.integers(0, 3))
            displs[j] = at
            at += bls[j]
        shape = blocks_case(layout, bls, displs)
    return common(draw, n) | {"kind": "datatype"} | shape


def check_indexed(peer: ConformancePeer, case: dict[str, Any]) -> None:
    """NumPy's reading of the type: the elements at each block's displacement, block by block
    in the listed order; a typed send delivers them contiguous, a typed receive scatters the
    message into exactly them."""
    x, dtype = case["indexed"], case["dtype"]
    idx = np.array(
        [d + j for d, b in zip(x["displs"], x["blocklengths"]) for j in range(b)], np.intp
    )
    extent = max((d + b for d, b in zip(x["displs"], x["blocklengths"])), default=0)
    rep = peer.run(case)[case["dst"]]
    hint = peer.replay_hint(case)
    assert rep["count"] == idx.size, (
        f"Get_count() = {rep['count']}, the {case['layout']} type selects {idx.size} elements\n{hint}"
    )
    if case["typed"] == "send":
        want = digest(pattern(dtype, extent, case["seed"])[idx])
        what = f"the contiguous receive does not hold the {case['layout']} type's elements in order"
    else:
        flat = pattern(dtype, extent, case["seed"] + 1)
        flat[idx] = pattern(dtype, idx.size, case["seed"])
        want = digest(flat)
        what = (
            f"the typed receive did not scatter into exactly the {case['layout']} type's elements"
        )
    assert rep["sha"] == want, f"{what}\n{hint}"


@pytest.mark.covers(
    "mpi",
    *cells(["contiguous", "indexed", "struct", "resized"], ["plain"])
    + cells(["indexed", "struct", "resized"], ["displacements"])
    + cells(["send_modes"], ["derived_type"]),
)
@pytest.mark.parametrize("layout", INDEXED)
@settings(conformance_settings())
@given(data=st.data())
def test_indexed_family_datatype(
    mpi_conformance_peer: ConformancePeer, layout: str, data: st.DataObject
) -> None:
    """Create_contiguous, _indexed, _hindexed, _indexed_block, _struct (one base type) and
    _resized (then repeated) select exactly NumPy's elements, in the listed block order."""
    peer = mpi_conformance_peer
    check_indexed(peer, data.draw(indexed_cases(peer.ranks, layout), label="case"))


@pytest.mark.covers(
    "mpi",
    *cells(["contiguous", "indexed", "struct", "resized"], ["plain", "zero_count"])
    + cells(["indexed", "struct", "resized"], ["displacements"]),
)
@pytest.mark.parametrize("typed", ["send", "recv"])
@pytest.mark.parametrize("layout", INDEXED)
def test_indexed_family_covering_set(
    mpi_conformance_peer: ConformancePeer, layout: str, typed: str
) -> None:
    """Blocks listed against address order with an empty block among them, and a type that
    selects nothing, for each constructor and each side."""
    shapes = {
        "contiguous": [blocks_case(layout, [7], [0]), blocks_case(layout, [0], [0])],
        "resized": [
            blocks_case(layout, [2] * 4, [0, 5, 10, 15], stride=5, count=4, block=2),
            blocks_case(layout, [], [], stride=3, count=0, block=2),
        ],
        "indexed_block": [blocks_case(layout, [3] * 3, [9, 0, 4]), blocks_case(layout, [0], [2])],
    }.get(layout, [blocks_case(layout, [2, 0, 4, 1], [10, 3, 0, 5]), blocks_case(layout, [0], [1])])
    for i, shape in enumerate(shapes):
        case = {
            "kind": "datatype",
            "dtype": DTYPES[i % len(DTYPES)],
            "typed": typed,
            "src": 0,
            "dst": mpi_conformance_peer.ranks - 1,
            "seed": i,
        } | shape
        check_indexed(mpi_conformance_peer, case)


@pytest.mark.covers("mpi", *cells(["subarray"], ["zero_count"]))
@pytest.mark.parametrize("typed", ["send", "recv"])
def test_subarray_zero_elements(mpi_conformance_peer: ConformancePeer, typed: str) -> None:
    """0 elements of a subarray type: the receive completes with count 0 and its buffer (the
    whole array, on the typed receive side) untouched."""
    peer = mpi_conformance_peer
    shape, dst = SUBARRAY_SHAPES[2], peer.ranks - 1
    case: dict[str, Any] = {
        "kind": "datatype",
        "dtype": "int32",
        "typed": typed,
        "src": 0,
        "dst": dst,
        "seed": 3,
        "layout": "subarray",
        "subarray": {**shape, "order": "C"},
        "reps": 0,
    }
    rep = peer.run(case)[dst]
    untouched = (
        pattern("int32", int(np.prod(shape["sizes"])), 4) if typed == "recv" else np.zeros(0)
    )
    want = {"sha": digest(untouched.astype(np.int32)), "count": 0}
    assert rep == want, f"got {rep}, expected {want}\n{peer.replay_hint(case)}"


def darray_owned(d: dict[str, Any]) -> list[list[int]]:
    """Per dimension, the global indices process `rank` owns (MPI 4.1, 5.1.4): the process
    grid is row-major whatever the array's order; BLOCK(b) gives coordinate p indices
    [p*b, (p+1)*b) (b = ceil(g/P) by default), CYCLIC(k) the blocks of k whose number is p
    modulo P (k = 1 by default), NONE every index."""
    coords = np.unravel_index(d["rank"], d["psizes"])  # C order: row-major
    owned = []
    for g, how, arg, p, c in zip(d["gsizes"], d["distribs"], d["dargs"], d["psizes"], coords):
        if how == "none":
            owned.append(list(range(g)))
        elif how == "block":
            b = arg or -(-g // p)
            owned.append(list(range(c * b, min((c + 1) * b, g))))
        else:
            k = arg or 1
            owned.append([i for i in range(g) if (i // k) % p == c])
    return owned


@st.composite
def darray_cases(draw: Any, n: int) -> dict[str, Any]:
    ndims = draw(st.integers(1, 3))
    gsizes, distribs, dargs, psizes = [], [], [], []
    for _ in range(ndims):
        g = draw(st.integers(1, 7))
        how = draw(st.sampled_from(["block", "cyclic", "none"]))
        p = 1 if how == "none" else draw(st.integers(1, 3))
        if how == "block":  # b * p must reach g (5.1.4)
            arg = draw(st.one_of(st.just(0), st.integers(-(-g // p), -(-g // p) + 2)))
        elif how == "cyclic":
            arg = draw(st.integers(0, 3))
        else:
            arg = 0
        gsizes.append(g)
        distribs.append(how)
        dargs.append(arg)
        psizes.append(p)
    size = int(np.prod(psizes))
    darray = {
        "size": size,
        "rank": draw(st.integers(0, size - 1)),
        "gsizes": gsizes,
        "distribs": distribs,
        "dargs": dargs,
        "psizes": psizes,
        "order": draw(st.sampled_from(["C", "F"])),
    }
    return common(draw, n) | {"layout": "darray", "darray": darray}


def check_darray(peer: ConformancePeer, case: dict[str, Any]) -> None:
    d, dtype, reps = case["darray"], case["dtype"], case.get("reps", 1)
    owned = darray_owned(d)
    picked = int(np.prod([len(o) for o in owned])) * reps
    seed = case["seed"] if case["typed"] == "send" else case["seed"] + 1
    flat = pattern(dtype, int(np.prod(d["gsizes"])), seed)
    full = flat.reshape(d["gsizes"], order=d["order"])  # a view: writes reach flat
    where = np.ix_(*owned)
    rep = peer.run(case)[case["dst"]]
    hint = peer.replay_hint(case)
    if (why := mpich_darray_rows_packed(peer, case, rep, flat, picked)) is not None:
        raise KnownDefect(why)
    assert rep["count"] == picked, (
        f"Get_count() = {rep['count']}, the distribution gives rank {d['rank']} "
        f"{picked} elements\n{hint}"
    )
    if case["typed"] == "send":
        want = digest(full[where].ravel(order=d["order"]) if reps else np.zeros(0, flat.dtype))
        what = "the contiguous receive does not hold the elements the distribution gives"
    else:
        if reps:
            shape = full[where].shape
            full[where] = pattern(dtype, picked, case["seed"]).reshape(shape, order=d["order"])
        want = digest(flat)
        what = "the typed receive did not scatter into exactly the distribution's elements"
    assert rep["sha"] == want, f"{what}\n{hint}"


def packed_rows(d: dict[str, Any]) -> list[int] | None:
    """The flat indices (in the array's order) a 2-D darray of a CYCLIC(k) dimension over a
    BLOCK one selects when the block dimension's type is not resized to the array's row: the
    k rows of each cyclic block follow each other at the block's length, not the row's. None
    for another shape."""
    outer, inner = (0, 1) if d["order"] == "C" else (1, 0)
    dists = d["distribs"]
    if len(dists) != 2 or dists[outer] != "cyclic" or dists[inner] != "block":
        return None
    owned = darray_owned(d)
    rows, cols = owned[outer], owned[inner]
    stride = d["gsizes"][inner]  # the distance between rows of the outer dimension
    k = d["dargs"][outer] or 1
    out: list[int] = []
    for i in rows:
        first = next(r for r in rows if r // k == i // k)  # this cyclic block's first row
        base = first * stride + (cols[0] if cols else 0)
        out += [base + (i - first) * len(cols) + q for q in range(len(cols))]
    return out


def mpich_darray_rows_packed(
    peer: ConformancePeer, case: dict[str, Any], rep: dict[str, Any], flat: np.ndarray, picked: int
) -> str | None:
    """MPICH 3.4.3's ch3 build: a darray of a CYCLIC(k>1) dimension over a BLOCK one selects
    the k rows of each cyclic block back to back at the block's length (as if the block type
    were not resized to the row's extent; same symptom: pmodels/mpich#4943). Keyed by the
    transfer being exactly that selection."""
    d = case["darray"]
    if not peer.info.library.startswith("MPICH") or rep.get("count") != picked:
        return None
    if not case.get("reps", 1) or (wrong := packed_rows(d)) is None:
        return None
    right = np.ravel_multi_index(np.ix_(*darray_owned(d)), d["gsizes"], order=d["order"])
    if sorted(wrong) == sorted(right.ravel().tolist()):
        return None  # the rows fill whole rows: the defect has no symptom here
    if case["typed"] == "send":
        got = digest(flat[wrong])
    else:
        into = flat.copy()
        into[wrong] = pattern(case["dtype"], picked, case["seed"])
        got = digest(into)
    if rep["sha"] != got:
        return None
    return (
        f"{peer.info.release} defect: darray {d['distribs']} {d['dargs']} ({d['order']} order) "
        f"of process {d['rank']}: the type selected the rows of each cyclic block back to back "
        "at the block's length, not the row's (docs/examples/defects/mpich_darray_cyclic_block.py)"
    )


@pytest.mark.covers("mpi", *cells(["darray"], ["plain", "displacements"]))
@settings(conformance_settings(share=0.3))
@given(data=st.data())
def test_darray_datatype(mpi_conformance_peer: ConformancePeer, data: st.DataObject) -> None:
    """Create_darray(size, rank, gsizes, BLOCK/CYCLIC/NONE, dargs, psizes, C/Fortran order)
    sends/receives exactly the elements the standard's distribution gives that rank, in the
    array's order."""
    peer = mpi_conformance_peer
    check_darray(peer, data.draw(darray_cases(peer.ranks), label="case"))


# Fixed distributions every run includes: block-cyclic with gaps in both orders, the default
# block size, a rank whose block is empty (5 over 4: the last owns nothing), 0 elements sent.
DARRAY_COVERING = [
    ("cyclic2-x-block", [6, 5], ["cyclic", "block"], [2, 0], [2, 2], 3, "C", 1),
    ("cyclic2-x-block-fortran", [6, 5], ["cyclic", "block"], [2, 0], [2, 2], 2, "F", 1),
    ("none-x-cyclic", [3, 7], ["none", "cyclic"], [0, 0], [1, 3], 1, "C", 1),
    ("empty-block", [5], ["block"], [0], [4], 3, "C", 1),
    ("zero-elements", [6, 5], ["cyclic", "block"], [2, 0], [2, 2], 0, "C", 0),
]


@pytest.mark.covers("mpi", *cells(["darray"], ["plain", "zero_count", "displacements"]))
@pytest.mark.parametrize("typed", ["send", "recv"])
def test_darray_covering_set(mpi_conformance_peer: ConformancePeer, typed: str) -> None:
    peer = mpi_conformance_peer
    cases = {
        name: {
            "kind": "datatype",
            "dtype": "int32",
            "typed": typed,
            "src": 0,
            "dst": peer.ranks - 1,
            "seed": i,
            "layout": "darray",
            "darray": {
                "size": int(np.prod(psizes)),
                "rank": rank,
                "gsizes": gsizes,
                "distribs": distribs,
                "dargs": dargs,
                "psizes": psizes,
                "order": order,
            },
            "reps": reps,
        }
        for i, (name, gsizes, distribs, dargs, psizes, rank, order, reps) in enumerate(
            DARRAY_COVERING
        )
    }
    run_covering(cases, lambda case: check_darray(peer, case))
