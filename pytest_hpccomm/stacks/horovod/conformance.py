"""Horovod conformance on the orchestrator side: Hypothesis strategies that draw every rank's
input, and the NumPy references the reports are judged against.

Semantics judged (Horovod 0.28.1 on CPU, both controllers):
- integers are exact. Values are drawn so sums and products never overflow; Horovod scales
  (prescale, postscale, and Average as postscale / size) by a double multiply converted back
  to the integer type, i.e. truncated toward zero, so the reference does the same.
- floats: |got - ref| <= tol(dtype, n) * sum_r |pre * x_r| * |post|, tol = 4 (n + 2) eps of the
  dtype (Horovod may add in any order, float16 through float32 and back), ref in float64.
- min, max, broadcast, allgather, alltoall move or pick values: exact for every dtype.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Literal, Sequence

import numpy as np
from hypothesis import settings
from hypothesis import strategies as st

from pytest_hpccomm.properties import register_profile
from pytest_hpccomm.stacks.horovod.wire import DTYPES, INT_DTYPES, decode, encode

MAX_ELEMENTS = 64
# ranks of the conformance peers on loopback: 3, so a static process set has two members
# ([0, 1], [1, 2]) and ring steps are not all pairwise
LOOPBACK_RANKS = 3
REPLAY_NOTE = "the case (every rank's input) is in the message above"


# -- drawing ----------------------------------------------------------------------------------


def shapes(
    min_dims: int = 1, max_dims: int = 3, first: st.SearchStrategy[int] | None = None
) -> st.SearchStrategy[tuple[int, ...]]:
    """1-3 dimensional shapes of at most MAX_ELEMENTS elements (first dimension optional)."""

    def build(dims: list[int]) -> tuple[int, ...]:
        return tuple(dims)

    dim = st.integers(1, 4)
    return (
        st.lists(dim, min_size=min_dims, max_size=max_dims)
        .map(build)
        .filter(lambda s: int(np.prod(s)) <= MAX_ELEMENTS)
        if first is None
        else st.tuples(first, st.lists(dim, min_size=min_dims - 1, max_size=max_dims - 1))
        .map(lambda t: (t[0], *t[1]))
        .filter(lambda s: int(np.prod(s)) <= MAX_ELEMENTS)
    )


def element_bound(dtype: str, op: str, n: int) -> int | float | None:
    """The largest |element| the op can reduce over n ranks (and scales up to 3 each) with no
    overflow; None: the dtype's whole range (min and max only pick values)."""
    integer = np.dtype(dtype).kind in "iu"
    if op == "product":  # |x| ** n stays in range
        top = float(np.iinfo(dtype).max) if integer else float(np.finfo(dtype).max)
        return max(1, min(5 if integer else 8, int(top ** (1.0 / max(n, 1)))))
    if integer:
        return 1000 if op in ("sum", "average") else None
    # a sum of n elements scaled by 3 twice stays finite (float16: 65504); a power of two below
    # that, as Hypothesis needs bounds the float width represents exactly
    return min(
        1000.0 if dtype == "float16" else 1e6,
        2.0 ** math.floor(math.log2(float(np.finfo(dtype).max) / (9 * max(n, 1)))),
    )


def element(dtype: str, op: str, n: int) -> st.SearchStrategy[float | int]:
    """One input element: no overflow for the op over n ranks (element_bound)."""
    bound = element_bound(dtype, op, n)
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        return (
            st.integers(int(info.min), int(info.max))
            if bound is None
            else st.integers(-int(bound), int(bound))
        )
    assert bound is not None
    if op == "product":  # small integers: a product of floats is then exact
        return st.integers(-int(bound), int(bound)).map(float)
    width: Literal[16, 32, 64] = 16 if dtype == "float16" else 32 if dtype == "float32" else 64
    return st.floats(-bound, bound, allow_nan=False, allow_infinity=False, width=width)


def arrays(dtype: str, shape: Sequence[int], op: str, n: int) -> st.SearchStrategy[np.ndarray]:
    size = int(np.prod(shape))
    return st.lists(element(dtype, op, n), min_size=size, max_size=size).map(
        lambda v: np.array(v, dtype=dtype).reshape(shape)
    )


def wire(a: np.ndarray) -> dict[str, Any]:
    a = np.require(a, requirements="C")  # ascontiguousarray would make a 0-D array 1-D
    return encode(str(a.dtype), a.shape, a.tobytes())


def array_of(obj: dict[str, Any]) -> np.ndarray:
    dtype, shape, data = decode(obj)
    return np.frombuffer(data, dtype).reshape(shape)


@dataclass(frozen=True)
class Reduction:
    """One allreduce-like case: every rank's input, op and scales."""

    op: str
    inputs: list[np.ndarray]
    prescale: float = 1.0
    postscale: float = 1.0

    def case(self, kind: str = "allreduce", **extra: Any) -> dict[str, Any]:
        return {
            "kind": kind,
            "op": self.op,
            "inputs": [wire(a) for a in self.inputs],
            "prescale": self.prescale,
            "postscale": self.postscale,
            **extra,
        }


@st.composite
def reductions(
    draw: st.DrawFn,
    n: int,
    ops: Sequence[str] = ("sum", "average", "min", "max", "product"),
    dtypes: Sequence[str] = DTYPES,
    scaled: bool = True,
    shape: tuple[int, ...] | None = None,
) -> Reduction:
    op = draw(st.sampled_from(ops))
    dtype = draw(st.sampled_from(dtypes))
    shp = shape if shape is not None else draw(shapes())
    pre = post = 1.0
    if scaled and op in ("sum", "average"):  # integers: integral scales keep the sum exact
        scale = (
            st.sampled_from([1.0, 2.0, 3.0])
            if dtype in INT_DTYPES
            else st.sampled_from([1.0, 0.5, 2.0, 0.25, 3.0])
        )
        pre, post = draw(scale), draw(scale)
    inputs = [draw(arrays(dtype, shp, op, n)) for _ in range(n)]
    return Reduction(op, inputs, pre, post)


# -- references -------------------------------------------------------------------------------


def _scaled(x: np.ndarray, factor: float) -> np.ndarray:
    """Horovod's ScaleBuffer: a double multiply, converted back (integers truncate)."""
    if factor == 1.0:
        return x
    y = np.float64(factor) * x.astype(np.float64)
    return np.trunc(y).astype(x.dtype) if x.dtype.kind in "iu" else y.astype(x.dtype)


def reduced(r: Reduction) -> tuple[np.ndarray, np.ndarray]:
    """(reference in float64 or the integer dtype, magnitude bound for the float tolerance)."""
    n, dtype = len(r.inputs), r.inputs[0].dtype
    ins = [_scaled(x, r.prescale) for x in r.inputs]
    if dtype.kind in "iu":
        stack = np.stack(ins).astype(np.int64)
        post = r.postscale / n if r.op == "average" else r.postscale
        ref = {
            "sum": stack.sum(0),
            "average": stack.sum(0),
            "min": stack.min(0),
            "max": stack.max(0),
            "product": stack.prod(0),
        }[r.op]
        out = _scaled(ref.astype(dtype), post) if post != 1.0 else ref.astype(dtype)
        return out, np.zeros(ref.shape)
    stack = np.stack(ins).astype(np.float64)
    post = r.postscale / n if r.op == "average" else r.postscale
    ref = {
        "sum": stack.sum(0),
        "average": stack.sum(0),
        "min": stack.min(0),
        "max": stack.max(0),
        "product": stack.prod(0),
    }[r.op] * post
    bound = np.abs(stack).sum(0) * abs(post) if r.op in ("sum", "average") else np.abs(ref)
    return ref, bound


def tolerance(dtype: np.dtype[Any], n: int) -> float:
    return 0.0 if dtype.kind in "iu" else 4 * (n + 2) * float(np.finfo(dtype).eps)


def check_reduced(got: np.ndarray, r: Reduction, what: str) -> None:
    """AssertionError naming the worst element when `got` is not the reduction of r."""
    ref, bound = reduced(r)
    dtype = r.inputs[0].dtype
    assert got.dtype == dtype and got.shape == ref.shape, (
        f"{what}: got {got.dtype}{list(got.shape)}, expected {dtype}{list(ref.shape)}"
    )
    if dtype.kind in "iu" or r.op in ("min", "max"):
        bad = np.flatnonzero(got.astype(ref.dtype).ravel() != ref.ravel())
    else:
        tol = tolerance(dtype, len(r.inputs))
        err = np.abs(got.astype(np.float64) - ref).ravel()
        bad = np.flatnonzero(err > tol * bound.ravel() + float(np.finfo(dtype).tiny))
    if bad.size:
        i = int(bad[0])
        raise AssertionError(
            f"{what}: {bad.size} of {ref.size} elements wrong; element {i}: got "
            f"{got.ravel()[i]!r}, expected {ref.ravel()[i]!r} ({r.op}, {dtype}, "
            f"prescale {r.prescale}, postscale {r.postscale}, {len(r.inputs)} ranks"
            + (
                f", tolerance {tolerance(dtype, len(r.inputs)):.2g} x magnitude"
                if dtype.kind == "f" and r.op not in ("min", "max")
                else ""
            )
            + ")"
        )


def outputs(reports: Sequence[dict[str, Any]], key: str = "output") -> list[Any]:
    """Every rank's output(s); AssertionError with the rank's error when one raised."""
    raised = [f"rank {i}: {rep['raised']}" for i, rep in enumerate(reports) if "raised" in rep]
    assert not raised, "case raised on " + "; ".join(raised)
    return [rep[key] for rep in reports]


def describe_case(case: dict[str, Any]) -> str:
    """The case as the assertion message shows it (inputs decoded, per rank)."""

    def plain(v: Any) -> Any:
        if isinstance(v, dict) and "data" in v:
            return array_of(v).tolist()
        if isinstance(v, list):
            return [plain(x) for x in v]
        return v

    return json.dumps({k: plain(v) for k, v in case.items()})[:3000]


# -- Hypothesis -------------------------------------------------------------------------------

SETTINGS_PROFILE = "hpccomm-horovod-conformance"
EXAMPLES = {"quick": 25, "full": 200}


def register_settings(profile: str) -> settings:
    """The suite's Hypothesis profile for --hpc-profile."""
    return register_profile(SETTINGS_PROFILE, EXAMPLES, profile)


register_settings("quick")  # a default, so the suite imports without the plugin's configure


def horovod_settings() -> settings:
    return settings.get_profile(SETTINGS_PROFILE)


# -- the ops that move values, and their gradients --------------------------------------------
# Every function takes the members' inputs in rank order (a process set's members, or all
# ranks) and gives what each member must receive.


def scatter_rows(total: int, n: int) -> list[int]:
    """How reducescatter splits the first dimension: as evenly as possible, the first
    total % n ranks one row more."""
    return [total // n + (1 if r < total % n else 0) for r in range(n)]


def row_starts(rows: Sequence[int]) -> list[int]:
    return [0, *np.cumsum(rows).tolist()]


def alltoall_received(
    inputs: Sequence[np.ndarray], table: Sequence[Sequence[int]], dst: int
) -> np.ndarray:
    """What `dst` receives: from each source s in order, the rows table[s][dst] of its input."""
    starts = [row_starts(row) for row in table]
    return np.concatenate(
        [inputs[s][starts[s][dst] : starts[s][dst + 1]] for s in range(len(inputs))]
    )


def reducescatter_share(r: Reduction, member: int) -> Reduction:
    """The reduction whose result `member` receives from reducescatter: its rows of each input."""
    starts = row_starts(scatter_rows(r.inputs[0].shape[0], len(r.inputs)))
    rows = slice(starts[member], starts[member + 1])
    return Reduction(r.op, [x[rows] for x in r.inputs], r.prescale, r.postscale)


def gradients(
    of: str,
    grads: Sequence[np.ndarray],
    inputs: Sequence[np.ndarray],
    op: str = "sum",
    root: int = 0,
    table: Sequence[Sequence[int]] | None = None,
) -> list[np.ndarray]:
    """x.grad on every member r, in float64, after y = of(x) and y.backward(g_s) on every
    member s, as Horovod defines it (its test_torch.py asserts each; they are not one rule):
    - allreduce, alltoall: the adjoint of sum_s <g_s, y_s> (allreduce: sum_s g_s, over n for
      average; alltoall: the rows sent back where they came from);
    - allgather, broadcast: the adjoint of the *mean* over ranks, i.e. the mean of the g_s
      (allgather: the rank's rows of it; broadcast: on the root, zeros elsewhere; horovod#2687);
    - reducescatter: every g concatenated, times n for sum (its backward scales by the set's
      size before the allgather), as is for average.
    `root` is the member index of a broadcast's root."""
    n = len(grads)
    g = [np.asarray(x, np.float64) for x in grads]
    if of in ("allreduce", "allgather", "broadcast"):  # one output shape on every rank
        total: np.ndarray = np.sum(g, axis=0)
    if of == "allreduce":
        return [total / n if op == "average" else total for _ in range(n)]
    if of == "allgather":
        starts = row_starts([x.shape[0] for x in inputs])
        return [total[starts[r] : starts[r + 1]] / n for r in range(n)]
    if of == "broadcast":
        return [total / n if r == root else np.zeros_like(total) for r in range(n)]
    if of == "alltoall":  # x_s's rows for d arrive in y_d, after the rows of sources < s
        assert table is not None
        out = []
        for s in range(n):
            parts = []
            for d in range(n):
                before = sum(table[q][d] for q in range(s))
                parts.append(g[d][before : before + table[s][d]])
            out.append(np.concatenate(parts))
        return out
    if of == "reducescatter":
        return [np.concatenate(g) * (1.0 if op == "average" else n) for _ in range(n)]
    raise ValueError(f"no gradient rule for {of!r}")
