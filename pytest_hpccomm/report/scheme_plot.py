"""Families measured per payload scheme rather than per message size (TF-gRPC-Bench's
uniform-small/medium/large, random and skew payloads, stacks/grpc): a line plot like the MPI
sweeps, x = the scheme, ordered by its payload bytes and labelled with them, one line per
peer / mode / placement / runtime (whichever differ), the ratio-to-baseline panel below.

A category axis rather than a log2 size axis: with one buffer per payload two schemes can carry
the same bytes (random drew a small buffer: 10 B like uniform-small), and a scheme is what the
user chose, so each keeps its own tick.
"""

from __future__ import annotations

import statistics
from typing import Any, Mapping, Sequence

from pytest_hpccomm.baselines.result import RunResult
from pytest_hpccomm.report.plots import line_png
from pytest_hpccomm.report.series import BYTES, SCHEME, axis
from pytest_hpccomm.report.units import fmt_size


def is_scheme_family(members: Sequence[RunResult]) -> bool:
    return bool(members) and all(axis(r.measurement) == (SCHEME, BYTES) for r in members)


def scheme_order(members: Sequence[RunResult]) -> list[str]:
    """Schemes by their median payload bytes; at equal bytes uniform-* first, then by name."""
    by: dict[str, list[float]] = {}
    for r in members:
        p = r.measurement.params
        by.setdefault(str(p[SCHEME]), []).append(float(p[BYTES]))
    return sorted(by, key=lambda s: (statistics.median(by[s]), not s.startswith("uniform-"), s))


def _tick(scheme: str, sizes: Sequence[float]) -> str:
    lo, hi = min(sizes), max(sizes)
    size = fmt_size(lo) if lo == hi else f"{fmt_size(lo)}–{fmt_size(hi)}"
    return f"{scheme}\n{size}"


def scheme_png(members: Sequence[RunResult], title: str) -> bytes:
    order = scheme_order(members)
    pos = {s: float(i) for i, s in enumerate(order)}
    sizes: Mapping[str, list[float]] = {
        s: [
            float(r.measurement.params[BYTES]) for r in members if r.measurement.params[SCHEME] == s
        ]
        for s in order
    }

    def x_of(r: RunResult) -> float:
        return pos[str(r.measurement.params[SCHEME])]

    def set_x(ax: Any, _xs: Sequence[float]) -> None:
        ax.set_xticks(range(len(order)), [_tick(s, sizes[s]) for s in order], fontsize=9)
        ax.set_xlim(-0.4, len(order) - 0.6)

    return line_png(
        members,
        title,
        x_of=x_of,
        set_x=set_x,
        xlabel="payload scheme (bytes per message)",
        skip=[SCHEME, BYTES],
    )
