"""Data of the MPI conformance cases that both sides compute (NumPy only, no MPI, no pytest).

The peer fills buffers with pattern(), reports digest()s or to_json() values; the suites build
the same pattern and the NumPy reference result, so only digests and small arrays travel.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

# numpy dtype name -> what the property tests may use; pair types for MAXLOC/MINLOC
PAIR_TYPES: dict[str, tuple[str, str]] = {  # name -> (value dtype, MPI pair type attribute)
    "float_int": ("f4", "FLOAT_INT"),
    "double_int": ("f8", "DOUBLE_INT"),
    "long_int": ("i8", "LONG_INT"),
    "2int": ("i4", "INT_INT"),
    "short_int": ("i2", "SHORT_INT"),
}
MATMUL = "MATMUL"  # the non-commutative user-defined op: 2x2 int64 matrix product


def np_dtype(name: str) -> np.dtype[Any]:
    if name in PAIR_TYPES:
        # aligned: the C layout of MPI's pair structs (struct {double; int;} is 16 bytes)
        return np.dtype([("v", PAIR_TYPES[name][0]), ("i", "i4")], align=True)
    return np.dtype(name)


def pattern(dtype: str, count: int, seed: int) -> np.ndarray:
    """Deterministic, seed-dependent contents with no NaN (so equal data compares equal);
    both sides compute it, so only a digest travels back."""
    dt = np.dtype(dtype)
    i = np.arange(count, dtype=np.uint64)
    raw = i * np.uint64(0x9E3779B97F4A7C15) + np.uint64((seed * 40503 + 12345) % (1 << 63))
    raw ^= raw >> np.uint64(29)
    if dt.kind in "iu":
        return raw.astype(dt)
    if dt.kind == "b":
        return (raw & np.uint64(1)).astype(dt)
    if dt.kind == "f":
        return ((raw % np.uint64(1 << 20)).astype(np.float64) / 16 - 32768).astype(dt)
    if dt.kind == "c":
        re = (raw % np.uint64(1 << 16)).astype(np.float64)
        im = ((raw >> np.uint64(32)) % np.uint64(1 << 16)).astype(np.float64)
        return (re + 1j * im).astype(dt)
    raise ValueError(f"no pattern for dtype {dtype}")


def digest(a: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()[:24]


PIECE = 1024  # elements per piece_digests() entry


def piece_digests(a: np.ndarray) -> list[str]:
    """digest() of each run of PIECE elements of the flattened array: where a large buffer
    differs, to the piece, without sending it."""
    flat = np.ascontiguousarray(a).ravel()
    return [digest(flat[i : i + PIECE]) for i in range(0, max(len(flat), 1), PIECE)]


def to_json(a: np.ndarray) -> list[Any]:
    """Values as JSON: complex as [re, im], pairs as [value, index]."""
    if a.dtype.kind == "c":
        return [[float(x.real), float(x.imag)] for x in a]
    if a.dtype.names:
        return [[v.item(), int(i)] for v, i in zip(a["v"], a["i"])]
    out: list[Any] = a.tolist()
    return out


def from_json(values: list[Any], dtype: str) -> np.ndarray:
    dt = np_dtype(dtype)
    if dt.kind == "c":
        return np.array([complex(re, im) for re, im in values], dtype=dt)
    if dt.names:
        return np.array([tuple(p) for p in values], dtype=dt)
    return np.array(values, dtype=dt)
