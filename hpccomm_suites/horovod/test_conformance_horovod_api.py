"""Horovod's API as its own test suite (test_torch.py) exercises it, beyond the values of the
collectives: process sets for every op, the errors ranks must get, autograd through every op,
async fusion, Python objects, barriers, join, and the rank/size/init state. Every rank's input
is drawn here; the references are the ops' definitions (stacks/horovod/conformance.py), never
Horovod's own backward functions.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_hpccomm.coverage import cells
from pytest_hpccomm.stacks.horovod.conformance import (
    Reduction,
    alltoall_received,
    array_of,
    check_reduced,
    gradients,
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
from pytest_hpccomm.stacks.horovod.wire import PARTITION

pytestmark = [
    pytest.mark.conformance,
    pytest.mark.stack("horovod"),
    pytest.mark.fabric("ethernet", "ipoib"),
]

ERROR_WITHIN = 30.0  # seconds: an error must come back as an error, not a hang
# a barrier's sleeper sleeps this long: ranks it holds must leave after it woke, ranks it does
# not hold before (the order is the definition; the length only has to dwarf a message's trip)
BARRIER_SLEEP = 3.0


def _int_valued(dtype: str, shape: tuple[int, ...]) -> st.SearchStrategy[np.ndarray]:
    """Small integers in a float or int dtype (unsigned: 0-50): sums of a few are exact in
    every dtype."""
    size = int(np.prod(shape))
    low = 0 if np.dtype(dtype).kind == "u" else -50
    return st.lists(st.integers(low, 50), min_size=size, max_size=size).map(
        lambda v: np.array(v, dtype=dtype).reshape(shape)
    )


# -- process sets: every op restricted to a static process set -------------------------------

SET_OPS = [
    "allreduce",
    "grouped_allreduce",
    "allgather",
    "grouped_allgather",
    "broadcast",
    "alltoall",
    "reducescatter",
    "grouped_reducescatter",
]


@pytest.mark.covers("horovod", *cells([f"{op}_process_sets" for op in SET_OPS], CONTROLLERS))
@pytest.mark.parametrize("of", SET_OPS)
@horovod_settings()
@given(data=st.data())
def test_every_op_in_a_process_set(
    horovod_peers: HorovodPeers, of: str, data: st.DataObject
) -> None:
    """The op in each of two process sets that partition the ranks, at once (upstream's
    even/odd sets): each set's members get the op over their own inputs alone (broadcast from
    a member, alltoall with the members' splits), whatever the other set does."""
    n, sets = horovod_peers.size, horovod_peers.ranks[0].process_sets
    case: dict[str, Any] = {"kind": of, "process_set": PARTITION}
    inputs: list[Any] = [None] * n
    checks: list[tuple[int, Any]] = []  # (rank, what it must get: Reduction or array(s))
    grouped = of.startswith("grouped_")
    reducing = of in ("allreduce", "grouped_allreduce", "reducescatter", "grouped_reducescatter")
    scatter = "reducescatter" in of
    if reducing:
        ops = ["sum", "average"] if scatter else ["sum", "average", "min", "max", "product"]
        case["op"] = data.draw(st.sampled_from(ops), label="op")
    dtype = data.draw(st.sampled_from(["int32", "float32", "float64", "uint8"]), label="dtype")
    if dtype == "uint8" and reducing:
        dtype = "int32"  # Horovod reduces the DTYPES; uint8 only moves
    count = data.draw(st.integers(1, 3), label="tensors") if grouped else 1
    splits: list[Any] = [None] * n
    roots: list[int] = [0] * n
    for members in sets:
        m = len(members)
        if reducing:
            group = []
            for t in range(count):
                shape = data.draw(shapes(first=st.integers(m, 3 * m)) if scatter else shapes())
                group.append(
                    data.draw(
                        reductions(m, ops=[case["op"]], dtypes=[dtype], scaled=False, shape=shape),
                        label=f"set {members} tensor {t}",
                    )
                )
            for i, rank in enumerate(members):
                inputs[rank] = [wire(r.inputs[i]) for r in group]
                checks.append((rank, [reducescatter_share(r, i) if scatter else r for r in group]))
            continue
        tail = tuple(data.draw(st.lists(st.integers(1, 3), max_size=2), label="trailing dims"))
        if of in ("allgather", "grouped_allgather"):
            firsts = [
                data.draw(st.lists(st.integers(1, 3), min_size=m, max_size=m)) for _ in range(count)
            ]
            ins = [[data.draw(_int_valued(dtype, (f[i], *tail))) for f in firsts] for i in range(m)]
            wants = [np.concatenate([ins[i][t] for i in range(m)]) for t in range(count)]
            for i, rank in enumerate(members):
                inputs[rank] = [wire(a) for a in ins[i]]
                checks.append((rank, wants))
        elif of == "broadcast":
            root = members[data.draw(st.integers(0, m - 1), label=f"root of {members}")]
            ins1 = {rank: data.draw(_int_valued(dtype, (2, *tail))) for rank in members}
            for rank in members:
                inputs[rank], roots[rank] = [wire(ins1[rank])], root
                checks.append((rank, [ins1[root]]))
        else:
            table = data.draw(
                st.lists(
                    st.lists(st.integers(0, 2), min_size=m, max_size=m), min_size=m, max_size=m
                ),
                label=f"splits in {members}",
            )
            ins1l = [data.draw(_int_valued(dtype, (sum(row), *tail))) for row in table]
            for i, rank in enumerate(members):
                inputs[rank], splits[rank] = [wire(ins1l[i])], table[i]
                checks.append((rank, [alltoall_received(ins1l, table, i)]))
    case["inputs"] = inputs if grouped else [x[0] for x in inputs]
    if of == "broadcast":
        case["roots"] = roots
    if of == "alltoall":
        case["splits"] = splits
    key = "outputs" if grouped else "output"
    got = outputs(horovod_peers.run(case), key)
    for rank, wants in checks:
        outs = got[rank] if grouped else [got[rank]]
        assert len(outs) == len(wants), f"rank {rank}: {len(outs)} outputs for {len(wants)}"
        for t, (o, want) in enumerate(zip(outs, wants)):
            what = f"rank {rank} tensor {t} ({of} in its process set)"
            if isinstance(want, Reduction):
                try:
                    check_reduced(array_of(o), want, what)
                except AssertionError as exc:
                    raise AssertionError(f"{exc}{horovod_peers.context(case)}") from None
                continue
            a = array_of(o)
            assert a.shape == want.shape and a.tobytes() == want.tobytes(), (
                f"{what}: gave {a.tolist()}, expected {want.tolist()}{horovod_peers.context(case)}"
            )


# -- grouped allgather and reducescatter -------------------------------------------------------


@pytest.mark.covers(
    "horovod",
    *cells(
        [
            "grouped_reducescatter",
            "grouped_reducescatter_average",
            "grouped_reducescatter_prescale",
            "grouped_reducescatter_postscale",
        ],
        CONTROLLERS,
    ),
)
@horovod_settings()
@given(data=st.data())
def test_grouped_reducescatter(horovod_peers: HorovodPeers, data: st.DataObject) -> None:
    """grouped_reducescatter of 1-3 tensors (one op and scales for the group): each is its
    own reducescatter."""
    n = horovod_peers.size
    op = data.draw(st.sampled_from(["sum", "average"]), label="op")
    dtype = data.draw(st.sampled_from(["int32", "int64", "float32", "float64"]), label="dtype")
    scale = st.sampled_from([1.0, 2.0, 3.0] if dtype.startswith("int") else [1.0, 0.5, 2.0])
    pre, post = data.draw(scale, label="prescale"), data.draw(scale, label="postscale")
    group = []
    for i in range(data.draw(st.integers(1, 3), label="tensors")):
        shape = data.draw(shapes(first=st.integers(n, 3 * n)), label=f"shape {i}")
        r = data.draw(reductions(n, ops=[op], dtypes=[dtype], scaled=False, shape=shape))
        group.append(Reduction(op, r.inputs, pre, post))
    case = {
        "kind": "grouped_reducescatter",
        "op": op,
        "prescale": pre,
        "postscale": post,
        "inputs": [[wire(r.inputs[rank]) for r in group] for rank in range(n)],
    }
    for rank, outs in enumerate(outputs(horovod_peers.run(case), "outputs")):
        assert len(outs) == len(group), f"rank {rank}: {len(outs)} outputs for {len(group)}"
        for t, (o, r) in enumerate(zip(outs, group)):
            try:
                check_reduced(array_of(o), reducescatter_share(r, rank), f"rank {rank} tensor {t}")
            except AssertionError as exc:
                raise AssertionError(f"{exc}{horovod_peers.context(case)}") from None


@pytest.mark.covers("horovod", *cells(["grouped_allgather"], CONTROLLERS))
@horovod_settings()
@given(data=st.data())
def test_grouped_allgather(horovod_peers: HorovodPeers, data: st.DataObject) -> None:
    """grouped_allgather of 1-3 tensors, first dimensions differing per rank: each is its own
    allgather, concatenated in rank order."""
    n = horovod_peers.size
    count = data.draw(st.integers(1, 3), label="tensors")
    specs = [
        (
            data.draw(st.sampled_from(["int8", "int32", "float16", "float64"]), label="dtype"),
            tuple(data.draw(st.lists(st.integers(1, 3), max_size=2), label="trailing dims")),
            data.draw(st.lists(st.integers(1, 3), min_size=n, max_size=n), label="first dims"),
        )
        for _ in range(count)
    ]
    ins = [[data.draw(_int_valued(d, (f[r], *tail))) for d, tail, f in specs] for r in range(n)]
    case = {"kind": "grouped_allgather", "inputs": [[wire(a) for a in mine] for mine in ins]}
    for rank, outs in enumerate(outputs(horovod_peers.run(case), "outputs")):
        for t, o in enumerate(outs):
            want, got = np.concatenate([ins[r][t] for r in range(n)]), array_of(o)
            assert got.shape == want.shape and got.tobytes() == want.tobytes(), (
                f"rank {rank} tensor {t}: gave {got.tolist()}, expected {want.tolist()}"
                f"{horovod_peers.context(case)}"
            )


# -- errors: what ranks must get, and the peers keep working after it -------------------------


def _error_inputs(scenario: str, n: int) -> dict[str, Any]:
    """Upstream's error cases, as one case every rank runs (its input per rank)."""

    def per_rank(make: Any) -> list[dict[str, Any]]:
        return [wire(make(rank)) for rank in range(n)]

    dims = lambda rank: np.ones((2 * n, 2 + rank, 2), np.float32)  # noqa: E731
    types = lambda rank: np.ones((2 * n, 3), np.int32 if rank % 2 else np.float32)  # noqa: E731
    ones = lambda rank: np.ones((2 * n, 3), np.float32)  # noqa: E731
    table: dict[str, dict[str, Any]] = {
        "allgather_error": {"kind": "allgather", "inputs": per_rank(dims)},
        "allgather_type_error": {"kind": "allgather", "inputs": per_rank(types)},
        "broadcast_error": {"kind": "broadcast", "root": 0, "inputs": per_rank(dims)},
        "broadcast_type_error": {"kind": "broadcast", "root": 0, "inputs": per_rank(types)},
        "broadcast_rank_error": {
            "kind": "broadcast",
            "roots": list(range(n)),
            "inputs": per_rank(ones),
        },
        "alltoall_type_error": {"kind": "alltoall", "inputs": per_rank(types)},
        "alltoall_rank_error": {"kind": "alltoall", "inputs": per_rank(dims)},
        "reducescatter_error": {"kind": "reducescatter", "op": "sum", "inputs": per_rank(dims)},
        "reducescatter_type_error": {
            "kind": "reducescatter",
            "op": "sum",
            "inputs": per_rank(types),
        },
        # local: each rank's own call is refused, before any negotiation
        "alltoall_equal_split_length_error": {
            "kind": "alltoall",
            "inputs": per_rank(lambda r: np.ones((n + 1,), np.float32)),
        },
        "alltoall_splits_error": {
            "kind": "alltoall",
            "splits": [[1] * n for _ in range(n)],
            "inputs": per_rank(lambda r: np.ones((n - 1,), np.float32)),
        },
        "alltoall_splits_type_error": {
            "kind": "alltoall",
            "splits": [[1.0] * n for _ in range(n)],
            "splits_dtype": "float32",
            "inputs": per_rank(lambda r: np.ones((n,), np.float32)),
        },
        "reducescatter_scalar_error": {
            "kind": "reducescatter",
            "op": "sum",
            "inputs": per_rank(lambda r: np.array(1.0, np.float32)),
        },
        "reducescatter_adasum": {"kind": "reducescatter", "op": "adasum", "inputs": per_rank(ones)},
        "grouped_reducescatter_scalar_error": {
            "kind": "grouped_reducescatter",
            "op": "sum",
            "inputs": [[wire(np.array(1.0, np.float32))] * 2 for _ in range(n)],
        },
    }
    return table[scenario]


ERRORS = [
    "allgather_error",
    "allgather_type_error",
    "broadcast_error",
    "broadcast_type_error",
    "broadcast_rank_error",
    "alltoall_type_error",
    "alltoall_rank_error",
    "reducescatter_error",
    "reducescatter_type_error",
    "alltoall_equal_split_length_error",
    "alltoall_splits_error",
    "alltoall_splits_type_error",
    "reducescatter_scalar_error",
    "reducescatter_adasum",
    "grouped_reducescatter_scalar_error",
]


@pytest.mark.covers("horovod", *cells(ERRORS, CONTROLLERS))
@pytest.mark.parametrize("scenario", ERRORS)
def test_invalid_calls_are_errors_not_hangs(horovod_peers: HorovodPeers, scenario: str) -> None:
    """Every rank gets an error within ERROR_WITHIN seconds (ranks disagreeing on shape, dtype
    or root; splits that do not fit; a scalar; Adasum for reducescatter), and the peers keep
    working."""
    n = horovod_peers.size
    case = _error_inputs(scenario, n)
    reports = horovod_peers.run(case, timeout=ERROR_WITHIN)
    for rank, rep in enumerate(reports):
        assert "raised" in rep, f"rank {rank}: no error for {scenario}, got {rep}"
    good = Reduction("sum", [np.full((3,), rank, np.int64) for rank in range(n)])
    for rank, out in enumerate(outputs(horovod_peers.run(good.case()))):
        check_reduced(array_of(out), good, f"rank {rank} after {scenario}")


DUPLICATES = ["allreduce", "allgather", "broadcast", "reducescatter"]


@pytest.mark.covers(
    "horovod", *cells([f"{op}_duplicate_name_error" for op in DUPLICATES], CONTROLLERS)
)
@pytest.mark.parametrize("of", DUPLICATES)
def test_a_duplicate_name_is_an_error(horovod_peers: HorovodPeers, of: str) -> None:
    """A second op under the name of one still pending is refused on every rank (each rank's
    first is held pending: no other rank has enqueued that name yet), and the first still
    completes."""
    reports = outputs(
        horovod_peers.run({"kind": "duplicate_name", "of": of}, ERROR_WITHIN), "second"
    )
    for rank, second in enumerate(reports):
        assert second is not None, (
            f"rank {rank}: the second {of} named like a pending one was taken"
        )


# -- autograd ---------------------------------------------------------------------------------

GRADS = {
    # test id -> (op, reduction op, upstream cases it covers: plain, in a process set)
    "allreduce": ("allreduce", "sum", ["allreduce_grad"], "allreduce_grad_process_sets"),
    "allreduce-average": ("allreduce", "average", ["allreduce_grad_average"], None),
    "grouped_allreduce": (
        "grouped_allreduce",
        "sum",
        ["grouped_allreduce_grad"],
        "grouped_allreduce_grad_process_sets",
    ),
    "grouped_allreduce-average": (
        "grouped_allreduce",
        "average",
        ["grouped_allreduce_grad_average"],
        None,
    ),
    "allgather": ("allgather", "sum", ["allgather_grad"], "allgather_grad_process_sets"),
    "grouped_allgather": ("grouped_allgather", "sum", ["grouped_allgather_grad"], None),
    "broadcast": ("broadcast", "sum", ["broadcast_grad"], "broadcast_grad_process_sets"),
    "alltoall": (
        "alltoall",
        "sum",
        ["alltoall_grad", "alltoall_equal_split_grad"],
        "alltoall_grad_process_sets",
    ),
    "reducescatter": (
        "reducescatter",
        "sum",
        ["reducescatter_grad"],
        "reducescatter_grad_process_sets",
    ),
    "reducescatter-average": ("reducescatter", "average", ["reducescatter_grad_average"], None),
    "grouped_reducescatter": ("grouped_reducescatter", "sum", ["grouped_reducescatter_grad"], None),
}
GRAD_CELLS = [c for _, _, plain, ps in GRADS.values() for c in [*plain, *([ps] if ps else [])]]


@pytest.mark.covers("horovod", *cells(GRAD_CELLS, CONTROLLERS))
@pytest.mark.parametrize("which", list(GRADS))
@horovod_settings()
@given(data=st.data())
def test_gradients_follow_horovods_rules(
    horovod_peers: HorovodPeers, which: str, data: st.DataObject
) -> None:
    """x.grad after y = op(x) and y.backward(g) on every rank is what Horovod defines from
    all the ranks' g (conformance.gradients: allreduce and alltoall the adjoint of the summed
    losses, allgather and broadcast of the mean, reducescatter n times it for sum), for
    float32 and float64, over all ranks or in process sets."""
    of, op, _, ps = GRADS[which]
    n, sets = horovod_peers.size, horovod_peers.ranks[0].process_sets
    in_sets = data.draw(st.booleans(), label="in process sets") if ps else False
    dtype = data.draw(st.sampled_from(["float32", "float64"]), label="dtype")
    grouped = of.startswith("grouped_")
    base = of.removeprefix("grouped_")
    count = data.draw(st.integers(1, 3), label="tensors") if grouped else 1
    tail = tuple(data.draw(st.lists(st.integers(1, 3), max_size=2), label="trailing dims"))
    equal = base == "alltoall" and data.draw(st.booleans(), label="equal splits")
    case: dict[str, Any] = {
        "kind": "grad",
        "of": of,
        "op": op,
        "process_set": PARTITION if in_sets else None,
    }
    inputs: list[Any] = [None] * n
    grads: list[Any] = [None] * n
    splits: list[Any] = [None] * n
    roots = [0] * n
    wants: dict[int, list[np.ndarray]] = {}
    for members in sets if in_sets else [list(range(n))]:
        m = len(members)
        table = None
        if base == "alltoall":
            k = data.draw(st.integers(1, 2))
            table = (
                [[k] * m for _ in range(m)]
                if equal
                else data.draw(
                    st.lists(
                        st.lists(st.integers(0, 2), min_size=m, max_size=m),
                        min_size=m,
                        max_size=m,
                    )
                )
            )
            in_rows = [[sum(row)] for row in table]
        elif base == "allgather":
            in_rows = [
                data.draw(st.lists(st.integers(1, 3), min_size=count, max_size=count))
                for _ in range(m)
            ]
        else:
            low, high = (m, 2 * m) if base == "reducescatter" else (1, 3)
            rows = data.draw(st.lists(st.integers(low, high), min_size=count, max_size=count))
            in_rows = [rows for _ in range(m)]
        root = data.draw(st.integers(0, m - 1), label="root (member)") if base == "broadcast" else 0
        ins = [[data.draw(_int_valued(dtype, (r, *tail))) for r in in_rows[i]] for i in range(m)]
        # the output's rows on each member: what its upstream gradient must match
        out_rows: list[list[int]] = []
        for i in range(m):
            per = []
            for t in range(count):
                if base == "allgather":
                    per.append(sum(in_rows[j][t] for j in range(m)))
                elif base == "alltoall":
                    assert table is not None
                    per.append(sum(table[s][i] for s in range(m)))
                elif base == "reducescatter":
                    per.append(in_rows[0][t] // m + (1 if i < in_rows[0][t] % m else 0))
                else:
                    per.append(in_rows[i][t])
            out_rows.append(per)
        gs = [[data.draw(_int_valued(dtype, (r, *tail))) for r in out_rows[i]] for i in range(m)]
        per_tensor = [
            gradients(
                base, [gs[i][t] for i in range(m)], [ins[i][t] for i in range(m)], op, root, table
            )
            for t in range(count)
        ]
        for i, rank in enumerate(members):
            inputs[rank], grads[rank] = ins[i], gs[i]
            splits[rank], roots[rank] = (table[i] if table else None), members[root]
            wants[rank] = [per_tensor[t][i] for t in range(count)]
    pack = (lambda xs: [wire(a) for a in xs]) if grouped else (lambda xs: wire(xs[0]))
    case["inputs"] = [pack(x) for x in inputs]
    case["grads"] = [pack(g) for g in grads]
    if base == "alltoall" and not equal:
        case["splits"] = splits
    if base == "broadcast":
        case["roots"] = roots
    got = outputs(horovod_peers.run(case), "grads")
    rtol = 4 * (n + 2) * float(np.finfo(dtype).eps)
    for rank, want in wants.items():
        for t, w in enumerate(want):
            a = array_of(got[rank][t])
            ok = a.shape == w.shape and np.allclose(a.astype(np.float64), w, rtol=rtol, atol=0)
            assert ok, (
                f"rank {rank} tensor {t}: grad of {of} ({op}) is {a.tolist()}, expected "
                f"{w.tolist()}{horovod_peers.context(case)}"
            )


# -- async fusion -----------------------------------------------------------------------------


@pytest.mark.covers(
    "horovod", *cells(["allgather_async_fused", "reducescatter_async_fused"], CONTROLLERS)
)
@pytest.mark.parametrize("of", ["allgather", "reducescatter"])
@horovod_settings()
@given(data=st.data())
def test_async_ops_are_asynchronous_and_fused_right(
    horovod_peers: HorovodPeers, of: str, data: st.DataObject
) -> None:
    """2-6 async ops enqueued at once: at least one is not done when its call returns (the
    call did not wait), and each synchronizes to its own result."""
    n = horovod_peers.size
    dtype = data.draw(st.sampled_from(["int32", "float32", "float64"]), label="dtype")
    count = data.draw(st.integers(2, 6), label="tensors")
    if of == "allgather":
        ins = [
            [data.draw(_int_valued(dtype, (data.draw(st.integers(1, 3)), 2))) for _ in range(count)]
            for _ in range(n)
        ]
    else:
        rows = data.draw(st.lists(st.integers(n, 2 * n), min_size=count, max_size=count))
        ins = [[data.draw(_int_valued(dtype, (r, 2))) for r in rows] for _ in range(n)]
    case = {
        "kind": "async_fused",
        "of": of,
        "op": "sum",
        "inputs": [[wire(a) for a in x] for x in ins],
    }
    reports = horovod_peers.run(case)
    for rank, outs in enumerate(outputs(reports, "outputs")):
        for t, o in enumerate(outs):
            if of == "allgather":
                want = np.concatenate([ins[r][t] for r in range(n)])
                got = array_of(o)
                assert got.tobytes() == want.tobytes() and got.shape == want.shape, (
                    f"rank {rank} tensor {t}: {got.tolist()} != {want.tolist()}"
                    f"{horovod_peers.context(case)}"
                )
            else:
                r = Reduction("sum", [ins[q][t] for q in range(n)])
                check_reduced(array_of(o), reducescatter_share(r, rank), f"rank {rank} tensor {t}")
    pending = [rep["pending"] for rep in reports]
    assert any(p > 0 for p in pending), (
        f"every {of}_async of {count} was done when its call returned (pending per rank "
        f"{pending}): not asynchronous{horovod_peers.context(case)}"
    )


# -- Python objects ---------------------------------------------------------------------------

JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.text(max_size=8)
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)


@pytest.mark.covers(
    "horovod",
    *cells(["broadcast_object", "broadcast_object_process_sets", "allgather_object"], CONTROLLERS),
)
@pytest.mark.parametrize("of", ["broadcast_object", "allgather_object"])
@horovod_settings()
@given(data=st.data())
def test_objects(horovod_peers: HorovodPeers, of: str, data: st.DataObject) -> None:
    """broadcast_object gives every member the root's object (over all ranks or a process
    set); allgather_object gives every rank the list of all ranks' objects."""
    n, sets = horovod_peers.size, horovod_peers.ranks[0].process_sets
    objects = [data.draw(JSON_VALUES, label=f"rank {r}") for r in range(n)]
    case: dict[str, Any] = {"kind": "object", "of": of, "objects": objects}
    wants: list[Any]
    if of == "allgather_object":
        wants = [objects] * n
    else:
        in_sets = data.draw(st.booleans(), label="in process sets")
        groups = sets if in_sets else [list(range(n))]
        roots = [0] * n
        for members in groups:
            root = members[data.draw(st.integers(0, len(members) - 1), label="root (member)")]
            for rank in members:
                roots[rank] = root
        case.update(process_set=PARTITION if in_sets else None, roots=roots)
        wants = [objects[roots[rank]] for rank in range(n)]
    canon = lambda v: json.dumps(v, sort_keys=True)  # noqa: E731  (the reports travel as JSON)
    for rank, got in enumerate(outputs(horovod_peers.run(case), "object")):
        assert canon(got) == canon(wants[rank]), (
            f"rank {rank}: {of} gave {got!r}, expected {wants[rank]!r}{horovod_peers.context(case)}"
        )


# -- barriers ---------------------------------------------------------------------------------


@pytest.mark.covers("horovod", *cells(["global_barrier_op", "process_set_barrier_op"], CONTROLLERS))
@pytest.mark.parametrize("scope", ["global", "process_set"])
def test_a_barrier_holds_exactly_its_members(horovod_peers: HorovodPeers, scope: str) -> None:
    """Rank 0 sleeps BARRIER_SLEEP s before its barriers. Global: every rank leaves the
    barrier after rank 0 woke. Process sets: the members of the set without rank 0 pass its
    barrier before rank 0 wakes; then the members of rank 0's set leave theirs after it woke.
    Times are compared between ranks on rank 0's host only (one clock)."""
    sets = horovod_peers.ranks[0].process_sets
    order: list[int | None] = [None] if scope == "global" else [1, 0]  # rank 0: set 0 only
    case = {"kind": "barrier", "sleeper": 0, "seconds": BARRIER_SLEEP, "sets": order}
    reports = horovod_peers.run(case, timeout=ERROR_WITHIN + BARRIER_SLEEP)
    outputs(reports, "exits")
    woke = float(reports[0]["woke"])
    here = [r for r, rep in enumerate(reports) if rep["host"] == reports[0]["host"]]
    for rank in here:
        for index, left in reports[rank]["exits"]:
            held = index is None or 0 in sets[index]
            assert (left >= woke) if held else (left < woke), (
                f"rank {rank} left the barrier of {'all ranks' if index is None else sets[index]}"
                f" {left - woke:+.3f}s after rank 0 woke: "
                + ("it did not wait for rank 0" if held else "a set without rank 0 waited for it")
            )
    expected = [[i for i in order if i is None or rank in sets[i]] for rank in range(len(reports))]
    assert [[i for i, _ in rep["exits"]] for rep in reports] == expected


@pytest.mark.covers("horovod", *cells(["barrier_with_multiple_collectives"], CONTROLLERS))
@horovod_settings()
@given(data=st.data())
def test_a_barrier_among_pending_collectives(
    horovod_peers: HorovodPeers, data: st.DataObject
) -> None:
    """A broadcast, two allgathers and an allreduce enqueued, a barrier, then synchronized:
    each gives its own result."""
    n = horovod_peers.size
    shape = data.draw(shapes(max_dims=2), label="shape")
    ins = [[data.draw(_int_valued("float32", shape)) for _ in range(4)] for _ in range(n)]
    case = {"kind": "barrier_mixed", "inputs": [[wire(a) for a in x] for x in ins]}
    wants = [
        ins[0][0],
        np.concatenate([x[1] for x in ins]),
        np.concatenate([x[2] for x in ins]),
        np.sum([x[3] for x in ins], axis=0, dtype=np.float32),
    ]
    for rank, outs in enumerate(outputs(horovod_peers.run(case), "outputs")):
        for what, o, want in zip(["broadcast", "allgather", "allgather", "allreduce"], outs, wants):
            got = array_of(o)
            assert got.shape == want.shape and got.tobytes() == want.tobytes(), (
                f"rank {rank}: {what} gave {got.tolist()}, expected {want.tolist()}"
                f"{horovod_peers.context(case)}"
            )


# -- join -------------------------------------------------------------------------------------


@pytest.mark.covers(
    "horovod", *cells(["join_allreduce", "join_allgather", "join_broadcast"], CONTROLLERS)
)
@pytest.mark.parametrize("of", ["allreduce", "allgather", "broadcast"])
@horovod_settings()
@given(data=st.data())
def test_join(horovod_peers: HorovodPeers, of: str, data: st.DataObject) -> None:
    """One rank joins first. An allreduce (average) of the others counts it as zeros; an
    allgather or a broadcast is refused with an error. join() returns the same rank on every
    rank, never the one that joined first."""
    n = horovod_peers.size
    first = data.draw(st.integers(0, n - 1), label="first to join")
    dtype = data.draw(st.sampled_from(["int32", "float32", "float64"]), label="dtype")
    count = data.draw(st.integers(1, 2), label="tensors") if of == "allreduce" else 1
    shape = data.draw(shapes(max_dims=2), label="shape")
    ins = [[data.draw(_int_valued(dtype, shape)) for _ in range(count)] for _ in range(n)]
    root = (first + 1) % n
    case = {"kind": "join", "of": of, "first": first, "root": root}
    case["inputs"] = [[wire(a) for a in x] for x in ins]
    reports = horovod_peers.run(case, timeout=ERROR_WITHIN)
    joins = outputs(reports, "join")
    assert len(set(joins)) == 1 and joins[0] != first, (
        f"join() returned {joins} (first to join: {first}){horovod_peers.context(case)}"
    )
    assert all(rep["joins"] == joins for rep in reports), [rep["joins"] for rep in reports]
    # the joined rank skipped ops, one handle each: the peers catch its count up (a request
    # of its own, Peer._align_handles), or the next unnamed op would have two names
    behind = outputs(horovod_peers.run({"kind": "align"}), "behind")
    assert behind == [count if r == first else 0 for r in range(n)], f"handles behind: {behind}"
    for rank, rep in enumerate(reports):
        if rank == first:
            continue
        if of != "allreduce":
            assert "op_error" in rep, (
                f"rank {rank}: {of} with rank {first} joined was not refused: {rep}"
                f"{horovod_peers.context(case)}"
            )
            continue
        assert "op_error" not in rep, f"rank {rank}: {rep['op_error']}{horovod_peers.context(case)}"
        for t, o in enumerate(rep["outputs"]):
            zeroed = [np.zeros_like(ins[r][t]) if r == first else ins[r][t] for r in range(n)]
            try:
                check_reduced(array_of(o), Reduction("average", zeroed), f"rank {rank} tensor {t}")
            except AssertionError as exc:
                raise AssertionError(f"{exc}{horovod_peers.context(case)}") from None


# -- rank, size, init state -------------------------------------------------------------------


@pytest.mark.covers("horovod", *cells(["rank", "size"], CONTROLLERS), "is_initialized:mpi")
def test_rank_size_and_init_state(horovod_peers: HorovodPeers) -> None:
    """rank() and size() are what the launcher gave each process (Gloo: Horovod's variables;
    MPI: the launcher's) and is_initialized() is True after init."""
    n = horovod_peers.size
    for rank, info in enumerate(horovod_peers.ranks):
        assert (info.rank, info.size, info.initialized) == (rank, n, True), info
        assert (info.launcher_rank, info.launcher_size) == (rank, n), (
            f"rank {rank}: hvd says {info.rank}/{info.size}, its launcher "
            f"{info.launcher_rank}/{info.launcher_size}"
        )


@pytest.mark.covers("horovod", "reinit:gloo", "is_initialized:gloo")
@pytest.mark.horovod_controllers("gloo")
def test_init_again_after_shutdown(
    horovod_env: HorovodEnv, horovod_controller: str, hpc_placement: str, horovod_site: Site
) -> None:
    """init -> shutdown -> init (Gloo; MPI cannot be initialized again): is_initialized() is
    True, then False after shutdown, then True again; rank and size are what they were, and
    an allreduce over the new context sums every rank's value. Own peers: this shuts them
    down."""
    with HorovodPeers(horovod_env, horovod_controller, hpc_placement, horovod_site) as peers:
        outs = outputs(peers.run({"kind": "reinit"}, timeout=120.0))
    n = len(outs)
    total = float(n * (n + 1) // 2)
    for rank, out in enumerate(outs):
        assert out["before"] == [rank, n, True] and out["down"] is False, f"rank {rank}: {out}"
        assert out["after"] == [rank, n, True], f"rank {rank} after init again: {out}"
        assert out["sum"] == [total] * 4, f"rank {rank}: allreduce after init again: {out}"


# upstream's files in turn: [mark_cycles, start_timeline calls, allreduces]; the last file is
# started twice (a second start of the same file while it is open) and has two allreduces
TIMELINE_FILES = [[True, 1, 1], [True, 1, 1], [False, 1, 1], [True, 1, 1], [False, 2, 2]]


@pytest.mark.covers("horovod", *cells(["timeline_api"], CONTROLLERS))
def test_timeline_started_and_stopped_at_run_time(
    horovod_env: HorovodEnv, horovod_controller: str, hpc_placement: str, horovod_site: Site
) -> None:
    """start_timeline/stop_timeline with HOROVOD_TIMELINE=DYNAMIC, five times in turn, each
    to a new file (cycle marks on and off, one file started twice): each file is JSON and
    names the allreduce (allreduce.test_allreduce), its negotiation (NEGOTIATE_ALLREDUCE) and
    its start time since the epoch; those with cycle marks hold CYCLE_START. Own peers: the
    session's run without the timeline."""
    env = {"HOROVOD_TIMELINE": "DYNAMIC"}
    with HorovodPeers(
        horovod_env, horovod_controller, hpc_placement, horovod_site, env=env
    ) as peers:
        texts = outputs(peers.run({"kind": "timeline", "files": TIMELINE_FILES}, timeout=120.0))
    assert len(texts[0]) == len(TIMELINE_FILES), f"rank 0 returned {len(texts[0])} timelines"
    for i, ((mark, _, _), text) in enumerate(zip(TIMELINE_FILES, texts[0])):
        json.loads(text)  # raises on a timeline that is not JSON
        want = ["allreduce.test_allreduce", "start_time_since_epoch_in_micros"]
        want += ["NEGOTIATE_ALLREDUCE", "ALLREDUCE"] + (["CYCLE_START"] if mark else [])
        missing = [w for w in want if w not in text]
        assert not missing, f"timeline {i + 1} (mark_cycles={mark}) lacks {missing}:\n{text}"


# -- DistributedOptimizer, broadcast of state, timeline, sparse allreduce ----------------------

OPTIMIZER_VARIANTS: dict[str, tuple[dict[str, Any], list[str]]] = {
    # variant -> (case options, upstream cases it covers)
    "named": ({"named": True}, []),
    "unnamed": ({"named": False}, ["no_named_parameters", "optimizer_no_named_parameters"]),
    "process_set": ({"named": True, "process_set": PARTITION}, ["optimizer_process_sets"]),
    "clip": ({"named": True}, ["gradient_clipping"]),
    "fp16": ({"named": True, "fp16": True}, ["compression_fp16"]),
    "sparse": ({"named": True, "sparse": True}, ["sparse_embeddings"]),
}
FP16_EPS = float(np.finfo(np.float16).eps)


def _clipped(grads: list[np.ndarray], max_norm: float) -> list[np.ndarray]:
    """torch.nn.utils.clip_grad_norm_ (2-norm over all gradients, 1e-6 in the divisor)."""
    total = float(np.sqrt(sum(float(np.sum(g * g)) for g in grads)))
    coef = max_norm / (total + 1e-6)
    return [g * coef for g in grads] if coef < 1.0 else grads


@pytest.mark.covers(
    "horovod",
    *cells([c for _, cs in OPTIMIZER_VARIANTS.values() for c in cs], CONTROLLERS),
)
@pytest.mark.parametrize("variant", list(OPTIMIZER_VARIANTS))
@horovod_settings()
@given(data=st.data())
def test_distributed_optimizer_averages_gradients(
    horovod_peers: HorovodPeers, variant: str, data: st.DataObject
) -> None:
    """Each rank's own batch through one model: after synchronize() every member of the set
    holds the mean of the members' local gradients (fp16 compression: of the gradients
    rounded to float16; a sparse embedding's too), and step() moves every parameter by -lr
    times it (clipped first by clip_grad_norm_ under skip_synchronize()): the members end
    with the same parameters."""
    n, sets = horovod_peers.size, horovod_peers.ranks[0].process_sets
    options, _ = OPTIMIZER_VARIANTS[variant]
    sparse = bool(options.get("sparse"))
    value = st.integers(-4, 4).map(float)
    xs = [
        data.draw(
            st.lists(st.integers(0, 5), min_size=4, max_size=4)
            if sparse
            else st.lists(st.lists(value, min_size=3, max_size=3), min_size=4, max_size=4),
            label=f"x of rank {r}",
        )
        for r in range(n)
    ]
    ys = [
        data.draw(st.lists(st.lists(value, min_size=2, max_size=2), min_size=4, max_size=4))
        for _ in range(n)
    ]
    lr = data.draw(st.sampled_from([0.5, 0.1, 0.01]), label="lr")
    clip = data.draw(st.sampled_from([0.1, 1.0]), label="clip") if variant == "clip" else None
    case = {
        "kind": "optimizer",
        "scenario": "sync",
        "x": xs,
        "y": ys,
        "lr": lr,
        "clip": clip,
        **options,
    }
    reports = horovod_peers.run(case)
    outputs(reports, "synced")  # none raised
    groups = sets if options.get("process_set") else [list(range(n))]
    for members in groups:
        for rank in members:
            rep = reports[rank]
            locals_ = [[np.array(g) for g in reports[m]["local"]] for m in members]
            if options.get("fp16"):  # each rank's gradient travels as float16
                locals_ = [[g.astype(np.float16).astype(np.float64) for g in lg] for lg in locals_]
            mean = [np.mean([lg[k] for lg in locals_], axis=0) for k in range(len(locals_[0]))]
            synced = [np.array(g) for g in rep["synced"]]
            scale = max(1.0, *(float(np.max(np.abs(g), initial=0.0)) for g in mean))
            atol = (8 * FP16_EPS if options.get("fp16") else 1e-5) * scale
            for k, (got, want) in enumerate(zip(synced, mean)):
                assert got.shape == want.shape and np.allclose(got, want, rtol=0, atol=atol), (
                    f"rank {rank} parameter {k}: synchronized gradient {got.tolist()}, the "
                    f"mean of {members}' local ones is {want.tolist()}"
                    f"{horovod_peers.context(case)}"
                )
            step = _clipped(synced, clip) if clip is not None else synced
            for k, (b, a, g) in enumerate(zip(rep["before"], rep["after"], step)):
                want = np.array(b) - lr * g
                assert np.allclose(np.array(a), want, rtol=0, atol=1e-5 * max(1.0, lr * scale)), (
                    f"rank {rank} parameter {k}: after step() {a}, expected {want.tolist()}"
                    f" (lr {lr}, clip {clip}){horovod_peers.context(case)}"
                )
        firsts = reports[members[0]]["after"]
        for rank in members[1:]:
            for k, (a, b) in enumerate(zip(reports[rank]["after"], firsts)):
                assert np.allclose(a, b, rtol=0, atol=1e-6), (
                    f"after step() rank {rank} parameter {k} is {a}, rank {members[0]}'s {b}"
                )
    if options.get("fp16"):
        for rank, rep in enumerate(reports):
            for dt, (compressed, restored, ones) in rep["fp16_trips"].items():
                floating = dt.startswith("float")
                assert compressed == ("torch.float16" if floating else f"torch.{dt}"), (dt, rep)
                assert restored == f"torch.{dt}" and ones, (rank, dt, restored, ones)


@pytest.mark.covers("horovod", *cells(["duplicate_names", "missing_named_parameters"], CONTROLLERS))
def test_distributed_optimizer_rejects_bad_names(horovod_peers: HorovodPeers) -> None:
    """Named parameters with a name twice, or naming only some of the parameters: the
    DistributedOptimizer refuses them with a ValueError."""
    case = {"kind": "optimizer", "scenario": "construct"}
    for rank, rep in enumerate(horovod_peers.run(case)):
        assert "raised" not in rep, rep["raised"]
        for what in ("duplicate", "missing"):
            got = rep[what]
            assert got is not None and got.startswith("ValueError"), f"rank {rank} {what}: {got}"


@pytest.mark.covers("horovod", *cells(["synchronize_step_warning"], CONTROLLERS))
def test_step_after_synchronize_warns(horovod_peers: HorovodPeers) -> None:
    """synchronize() then step() outside skip_synchronize(): step() warns about it."""
    want = "optimizer.step() called without optimizer.skip_synchronize()"
    case = {"kind": "optimizer", "scenario": "step_warning"}
    for rank, ws in enumerate(outputs(horovod_peers.run(case), "warnings")):
        assert any(want in w for w in ws), f"rank {rank}: warnings {ws}"


@pytest.mark.covers(
    "horovod",
    *cells(["broadcast_state", "broadcast_state_options", "broadcast_state_no_grad"], CONTROLLERS),
)
@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
@pytest.mark.parametrize("no_grad", [False, True], ids=["all-grad", "no-grad-param"])
def test_broadcast_state(horovod_peers: HorovodPeers, optimizer: str, no_grad: bool) -> None:
    """Ranks that start from their own parameters, optimizer state and options (lr,
    momentum or betas) all hold rank 0's after broadcast_parameters and
    broadcast_optimizer_state, also with a parameter that takes no gradient."""
    n = horovod_peers.size
    case = {
        "kind": "optimizer",
        "scenario": "broadcast_state",
        "optimizer": optimizer,
        "no_grad": no_grad,
        "lr": [0.01 * (r + 1) for r in range(n)],
    }
    reports = horovod_peers.run(case)
    outputs(reports, "after")
    root = reports[0]["before"]
    assert reports[1]["before"] != root, "the ranks started equal: nothing to broadcast"
    for rank, rep in enumerate(reports):
        after = rep["after"]
        assert after["params"] == root["params"], f"rank {rank} parameters {after['params']}"
        assert after["options"] == root["options"], f"rank {rank} options {after['options']}"
        assert after["state"] == root["state"], f"rank {rank} optimizer state {after['state']}"


@pytest.mark.covers(
    "horovod",
    *cells(["async_sparse_allreduce", "async_sparse_allreduce_process_sets"], CONTROLLERS),
)
@horovod_settings()
@given(data=st.data())
def test_sparse_allreduce_equals_dense(horovod_peers: HorovodPeers, data: st.DataObject) -> None:
    """sparse_allreduce_async (average) of mostly-zero tensors made sparse equals the mean of
    the dense tensors, over all ranks or in each process set."""
    n, sets = horovod_peers.size, horovod_peers.ranks[0].process_sets
    in_sets = data.draw(st.booleans(), label="in process sets")
    rows = data.draw(st.lists(st.integers(1, 6), min_size=1, max_size=3), label="rows")
    sparse_value = st.one_of(st.just(0.0), st.just(0.0), st.integers(-9, 9).map(float))
    ins = [
        [
            np.array(
                data.draw(st.lists(sparse_value, min_size=r * 3, max_size=r * 3)), np.float32
            ).reshape(r, 3)
            for r in rows
        ]
        for _ in range(n)
    ]
    case = {
        "kind": "optimizer",
        "scenario": "sparse_allreduce",
        "tag": data.draw(st.integers(0, 10**6)),
        "process_set": PARTITION if in_sets else None,
        "inputs": [[wire(a) for a in mine] for mine in ins],
    }
    got = outputs(horovod_peers.run(case), "outputs")
    for members in sets if in_sets else [list(range(n))]:
        for rank in members:
            for t, o in enumerate(got[rank]):
                want = np.mean([ins[m][t] for m in members], axis=0)
                a = array_of(o)
                assert a.shape == want.shape and np.allclose(a, want, rtol=1e-6, atol=1e-6), (
                    f"rank {rank} tensor {t}: {a.tolist()}, the mean is {want.tolist()}"
                    f"{horovod_peers.context(case)}"
                )


@pytest.mark.covers("horovod", *cells(["force_allreduce"], CONTROLLERS))
@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
@horovod_settings()
@given(data=st.data())
def test_step_allreduces_every_gradient(
    horovod_peers: HorovodPeers, optimizer: str, data: st.DataObject
) -> None:
    """Rank 0's loss leaves the last layer without a gradient, the others' do not: step()
    still allreduces every gradient (no rank waits on another), and every rank holds the mean
    of the local gradients with rank 0's missing ones as zeros."""
    n = horovod_peers.size
    value = st.integers(-3, 3).map(float)
    xs = [
        data.draw(st.lists(st.lists(value, min_size=3, max_size=3), min_size=2, max_size=2))
        for _ in range(n)
    ]
    ys = [
        data.draw(st.lists(st.lists(value, min_size=2, max_size=2), min_size=2, max_size=2))
        for _ in range(n)
    ]
    case = {"kind": "optimizer", "scenario": "force", "optimizer": optimizer, "x": xs, "y": ys}
    reports = horovod_peers.run(case, timeout=ERROR_WITHIN)
    outputs(reports, "synced")
    locals_ = [[np.array(g) for g in rep["local"]] for rep in reports]
    for rank, rep in enumerate(reports):
        for k, got in enumerate(rep["synced"]):
            want = np.mean([lg[k] for lg in locals_], axis=0)
            assert np.allclose(
                np.array(got),
                want,
                rtol=0,
                atol=1e-5 * max(1.0, float(np.max(np.abs(want), initial=0.0))),
            ), (
                f"rank {rank} parameter {k}: {got}, the mean is {want.tolist()}"
                f"{horovod_peers.context(case)}"
            )


@pytest.mark.covers("horovod", *cells(["dynamic_requires_grad"], CONTROLLERS))
def test_requires_grad_switched_between_steps(horovod_peers: HorovodPeers) -> None:
    """A generator and a discriminator trained in turn by switching requires_grad, each with
    its own DistributedOptimizer: each step gives a nonzero gradient to the trained model's
    parameters only, and its synchronized gradients are the same on every rank."""
    n = horovod_peers.size
    xs = [[[float(r + 1), 0.5, -1.0]] for r in range(n)]
    case = {"kind": "optimizer", "scenario": "dynamic", "x": xs, "rounds": 3}
    reports = horovod_peers.run(case, timeout=ERROR_WITHIN)
    steps = outputs(reports, "steps")
    for i, step in enumerate(steps[0]):
        gen = step["gen"]
        for rank in range(n):
            mine = steps[rank][i]
            nonzero = mine["nonzero"]
            want = {"gen": [gen] * len(nonzero["gen"]), "disc": [not gen] * len(nonzero["disc"])}
            assert nonzero == want, (
                f"step {i} (training the {'generator' if gen else 'discriminator'}), rank "
                f"{rank}: nonzero gradients {nonzero}"
            )
            assert mine["synced"] == step["synced"], (
                f"step {i}: rank {rank}'s synchronized gradients differ from rank 0's"
            )
