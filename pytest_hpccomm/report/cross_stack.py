"""Cross-stack: the same message sizes through every stack that ran, latency and bandwidth side
by side, each with its ratio to the fastest point-to-point path at that size.

Which benchmark of each stack feeds the table (a "path"), and why that one:

More: docs/explanation/internals.md (pytest_hpccomm.report.cross_stack).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

from pytest_hpccomm.baselines.result import FUNCTIONAL, RunResult
from pytest_hpccomm.measure.measurement import Measurement, Param
from pytest_hpccomm.report.common import label_key, metric_of
from pytest_hpccomm.report.units import (
    bytes_per_second,
    fmt_seconds,
    fmt_size,
    is_byte_rate,
    is_time_unit,
    link_fraction,
    to_seconds,
)

LATENCY, BANDWIDTH = "latency", "bandwidth"
LINK_RATE, LINK_SOURCE = "link_rate_gbps", "link_rate_source"
LINK_UNKNOWN = "link rate unknown"


def _uniform_single(params: Mapping[str, Param]) -> bool:
    return params.get("buffers") == 1 and str(params.get("scheme", "")).startswith("uniform-")


@dataclass(frozen=True)
class Path:
    """One stack's benchmarks that feed the table (see the module's docstring)."""

    name: str  # what the table calls it
    stack: str
    benchmarks: Mapping[str, tuple[str, str]]  # LATENCY / BANDWIDTH -> (benchmark, metric)
    definition: str  # one line for the table's notes
    where: Mapping[str, Param] = field(default_factory=dict)  # params a point must have
    size_param: str = "size"
    accept: Callable[[Mapping[str, Param]], bool] | None = None
    hidden: tuple[str, ...] = ()  # params that do not name a variant (fixed by the selection)
    half_latency: bool = False
    collective: bool = False


PATHS: tuple[Path, ...] = (
    Path(
        "verbs",
        "verbs",
        {LATENCY: ("ib_send_lat", "latency"), BANDWIDTH: ("ib_send_bw", "bandwidth")},
        "perftest ib_send_lat / ib_send_bw, RC (half round trip; MB = 2^20 B)",
        where={"connection": "RC"},
        hidden=("connection",),
    ),
    Path(
        "MPI",
        "mpi",
        {LATENCY: ("osu_latency", "latency"), BANDWIDTH: ("osu_bw", "bandwidth")},
        "OSU osu_latency (half round trip) / osu_bw, 2 ranks",
        where={"ranks": 2},
        hidden=("ranks",),
    ),
    Path(
        "gRPC",
        "grpc",
        {
            LATENCY: ("tf_grpc_p2p_latency", "latency"),
            BANDWIDTH: ("tf_grpc_p2p_bandwidth", "bandwidth"),
        },
        "TF-gRPC-Bench p2p, one uniform buffer (latency: half the echo RPC)",
        size_param="bytes",
        accept=_uniform_single,
        hidden=("buffers", "scheme"),
        half_latency=True,
    ),
    Path(
        "TF",
        "tf",
        {LATENCY: ("tf_recv_tensor", "latency"), BANDWIDTH: ("tf_recv_tensor", "bandwidth")},
        "tf_recv_tensor, per RecvTensor read (not halved)",
    ),
    Path(
        "Horovod allreduce",
        "horovod",
        {LATENCY: ("hvd_allreduce", "latency"), BANDWIDTH: ("hvd_allreduce", "busbw")},
        "hvd_allreduce latency / busbw, 2 ranks: a collective, never the fastest",
        where={"ranks": 2},
        hidden=("ranks",),
        collective=True,
    ),
)


@dataclass
class Row:
    """One path variant at one size."""

    path: Path
    variant: str  # the params that tell its variants apart ("openmpi loopback")
    size: int
    shared: str = ""  # the params all its variants share ("loopback ranks=2"), said once
    latency: float | None = None  # seconds
    bandwidth: float | None = None  # B/s
    link_gbps: float | None = None
    link_source: str = ""
    functional: bool = False  # timed on an emulated device: reported, never judged
    latency_ratio: float | None = None  # this / the fastest path's (>= 1)
    bandwidth_ratio: float | None = None  # the fastest path's / this (>= 1)

    @property
    def label(self) -> str:
        return f"{self.path.name} {self.variant}".strip()


@dataclass
class CrossStack:
    sizes: list[int]
    rows: dict[int, list[Row]]  # per size, fastest first
    left_out: dict[str, list[int]]  # path name -> sizes only that stack measured
    every: list[Row] = field(default_factory=list)  # left-out sizes too: the plot shows them

    def labels(self) -> list[str]:
        """Every path variant, in the order of their first row."""
        seen: dict[str, None] = {}
        for s in self.sizes:
            for r in self.rows[s]:
                seen.setdefault(r.label)
        return list(seen)

    def __len__(self) -> int:
        return sum(len(v) for v in self.rows.values())


def _variant_params(path: Path, params: Mapping[str, Param]) -> tuple[tuple[str, Param], ...]:
    skip = {path.size_param, "size", "metric", *path.where, *path.hidden}
    return tuple(
        sorted(
            ((k, v) for k, v in params.items() if k not in skip), key=lambda kv: label_key(kv[0])
        )
    )


def _label(items: Sequence[tuple[str, Param]], keep: set[str], *, named: bool = False) -> str:
    return " ".join(
        str(v) if isinstance(v, str) and not named else f"{k}={v}" for k, v in items if k in keep
    )


def _match(path: Path, m: Measurement) -> tuple[str, int] | None:
    """(kind, size) when `m` is one of the path's points."""
    if m.stack != path.stack:
        return None
    kind = next(
        (
            k
            for k, (b, metric) in path.benchmarks.items()
            if m.benchmark == b and metric_of(m) == metric
        ),
        None,
    )
    if kind is None or any(m.params.get(k) != v for k, v in path.where.items()):
        return None
    if path.accept is not None and not path.accept(m.params):
        return None
    size = m.params.get(path.size_param)
    if not isinstance(size, int) or isinstance(size, bool) or size <= 0:
        return None
    return kind, size


def _value(path: Path, kind: str, r: RunResult) -> float | None:
    v, unit = r.verdict.current_median, r.measurement.unit
    if not math.isfinite(v) or v <= 0:
        return None
    if kind == LATENCY:
        if not is_time_unit(unit):
            return None
        return to_seconds(v, unit) * (0.5 if path.half_latency else 1.0)
    if not is_byte_rate(unit):
        return None
    return bytes_per_second(v, unit)


def _link(row: Row, m: Measurement) -> None:
    rate = m.extra.get(LINK_RATE)
    if isinstance(rate, (int, float)) and not isinstance(rate, bool) and rate > 0:
        row.link_gbps = float(rate)
        row.link_source = str(m.extra.get(LINK_SOURCE, ""))


def _rank(rows: list[Row]) -> None:
    """Ratios to the fastest point-to-point row; rows sorted fastest first."""
    p2p = [r for r in rows if not r.path.collective]
    lat = min((r.latency for r in p2p if r.latency is not None), default=None)
    bw = max((r.bandwidth for r in p2p if r.bandwidth is not None), default=None)
    for r in rows:
        if lat is not None and r.latency is not None:
            r.latency_ratio = r.latency / lat
        if bw is not None and r.bandwidth is not None:
            r.bandwidth_ratio = bw / r.bandwidth
    inf = math.inf
    rows.sort(
        key=lambda r: (r.path.collective, r.latency_ratio or inf, r.bandwidth_ratio or inf, r.label)
    )


def cross_stack(results: Sequence[RunResult], paths: Sequence[Path] = PATHS) -> CrossStack | None:
    """The table's rows, or None when no size was measured by two stacks."""
    found: dict[tuple[str, tuple[tuple[str, Param], ...], int], Row] = {}
    for r in results:
        m = r.measurement
        for path in paths:
            hit = _match(path, m)
            if hit is None:
                continue
            kind, size = hit
            value = _value(path, kind, r)
            if value is None:
                continue
            key = (path.name, _variant_params(path, m.params), size)
            row = found.setdefault(key, Row(path, "", size))
            if kind == LATENCY and row.latency is None:
                row.latency = value
            elif kind == BANDWIDTH and row.bandwidth is None:
                row.bandwidth = value
                _link(row, m)
            row.functional |= FUNCTIONAL in m.extra
            break
    _name_variants(found)
    by_size: dict[int, list[Row]] = {}
    for row in found.values():
        by_size.setdefault(row.size, []).append(row)
    sizes = sorted(s for s, rows in by_size.items() if len({r.path.name for r in rows}) >= 2)
    if not sizes:
        return None
    left: dict[str, set[int]] = {}
    for s in set(by_size) - set(sizes):
        for row in by_size[s]:
            left.setdefault(row.path.name, set()).add(s)
    for s in sizes:
        _rank(by_size[s])
    return CrossStack(
        sizes,
        {s: by_size[s] for s in sizes},
        {k: sorted(v) for k, v in left.items()},
        list(found.values()),
    )


def _name_variants(found: Mapping[tuple[str, tuple[tuple[str, Param], ...], int], Row]) -> None:
    """A variant is named by the params that differ between the path's variants only; those
    every variant shares go to the path's `shared` text (said once, in the notes)."""
    by_path: dict[str, set[tuple[tuple[str, Param], ...]]] = {}
    for name, items, _ in found:
        by_path.setdefault(name, set()).add(items)
    for (name, items, _), row in found.items():
        variants = by_path[name]
        keys = {k for v in variants for k, _ in v}
        differ = {k for k in keys if len({dict(v).get(k) for v in variants}) > 1}
        row.variant = _label(items, differ)
        row.shared = _label(items, keys - differ, named=True)


# -- cells both the markdown and the HTML table show ------------------------------------------

HEADER = ("size", "path", "latency", "vs fastest", "bandwidth", "vs fastest", "of the link")


def ratio_text(ratio: float | None, collective: bool = False) -> str:
    if ratio is None:
        return "-"
    if ratio <= 1.0 and not collective:
        return "fastest"
    return f"{_times(ratio)} slower" if ratio >= 1.0 else f"{_times(1 / ratio)} faster"


def _times(x: float) -> str:
    """Three digits at most: "1.15x", "11.8x", "968x"."""
    return f"{x:.2f}x" if x < 10 else f"{x:.1f}x" if x < 100 else f"{x:.0f}x"


def link_text(row: Row) -> str:
    if row.bandwidth is None:
        return "-"
    if row.link_gbps is None:
        return LINK_UNKNOWN
    share = link_fraction(row.bandwidth, row.link_gbps)
    return f"{'<1%' if share < 0.005 else f'{share:.0%}'} of {row.link_gbps:g} Gbit/s"


def bandwidth_text(bps: float | None) -> str:
    """MB/s (10^6 B/s) for every path, as OSU prints it; tiny rates keep 2 digits."""
    if bps is None:
        return "-"
    mb = bps / 1e6
    return f"{mb:.2f} MB/s" if mb >= 0.1 else f"{mb:.2g} MB/s"


def path_text(row: Row) -> str:
    notes = [
        n
        for n, on in (("collective", row.path.collective), ("function only", row.functional))
        if on
    ]
    return row.label + (f" ({', '.join(notes)})" if notes else "")


def cells(row: Row, first_of_size: bool, *, ascii_only: bool = False) -> tuple[str, ...]:
    return (
        fmt_size(row.size) if first_of_size else "",
        path_text(row),
        fmt_seconds(row.latency, ascii_only=ascii_only),
        ratio_text(row.latency_ratio, row.path.collective),
        bandwidth_text(row.bandwidth),
        ratio_text(row.bandwidth_ratio, row.path.collective),
        link_text(row),
    )


def notes(cs: CrossStack, paths: Sequence[Path] = PATHS) -> list[str]:
    """What each path is, only for those in the table, then what was left out and why."""
    shared = {r.path.name: r.shared for rows in cs.rows.values() for r in rows}
    out = [
        f"{p.name}: {p.definition}" + (f"; {shared[p.name]}" if shared[p.name] else "")
        for p in paths
        if p.name in shared
    ]
    sources = sorted(
        {
            r.link_source
            for rows in cs.rows.values()
            for r in rows
            if r.link_gbps is not None and r.link_source
        }
    )
    if sources:
        out.append("link rate from " + ", ".join(sources))
    for name, sizes in cs.left_out.items():
        out.append(
            f"left out, no other stack at that size: {name} at "
            + ", ".join(fmt_size(s) for s in sizes)
        )
    return out
