"""Plots of one benchmark family (stack + benchmark + metric) as PNG bytes.

Uses matplotlib's object API (Figure, never pyplot): no global state, no GUI backend, safe to
call from a pytest hook. A family with a numeric "size" parameter is a sweep (value vs message
size on a log2 axis, plus a ratio-to-baseline panel, where a 10 % regression is visible even when
the value axis spans six decades); any other family is a horizontal bar chart (payload schemes
have their own line plot: scheme_plot.py). Lines and bars are named by the parameters that
differ between them; the ones they share are said once, top right. Legends sit below the axes
(constrained layout makes room), so no label is cut and no axis collapses.
"""

from __future__ import annotations

import io
import math
import textwrap
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullFormatter, NullLocator

from pytest_hpccomm.baselines.result import RunResult
from pytest_hpccomm.baselines.verdict import Outcome
from pytest_hpccomm.measure.measurement import Direction
from pytest_hpccomm.report.common import SIZE_PARAM, fmt_params, label_key, metric_of, summary_stats
from pytest_hpccomm.report.units import (
    fmt_size,
    is_time_unit,
    pretty_unit,
    time_display_unit,
    to_seconds,
)

OUTCOME_COLOURS = {
    Outcome.REGRESSION: "#d62728",
    Outcome.IMPROVEMENT: "#2ca02c",
    Outcome.INCONCLUSIVE: "#ff7f0e",
    Outcome.NEW: "#7f7f7f",
    Outcome.PASS: "#1f77b4",
}
# Series colours avoid red/green/orange: those mean a verdict here.
SERIES_COLOURS = ("#1f77b4", "#9467bd", "#8c564b", "#17becf", "#e377c2", "#bcbd22", "#555555")
MARKERS = ("o", "s", "^", "D", "v")  # past 7 series the colours repeat: the marker differs
DPI = 100
ZERO_SIZE_X = 0.5  # log axes have no 0: a 0-byte point sits half a step left of 1 B, labelled 0B


@dataclass
class _Point:
    result: RunResult
    x: float
    median: float
    p5: float
    p95: float
    base: float | None


def is_sweep(members: Sequence[RunResult]) -> bool:
    def numeric(r: RunResult) -> bool:
        v = r.measurement.params.get(SIZE_PARAM)
        return isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0

    return bool(members) and all(numeric(r) for r in members)


def _scale(members: Sequence[RunResult]) -> tuple[str, float]:
    """(axis unit label, factor from the measured unit to it); time goes to µs/ms/s by size."""
    unit = members[0].measurement.unit
    if not is_time_unit(unit):
        return pretty_unit(unit), 1.0
    top = max(
        (r.verdict.current_median for r in members if math.isfinite(r.verdict.current_median)),
        default=0.0,
    )
    label, per = time_display_unit(to_seconds(top, unit))
    return pretty_unit(label), to_seconds(1.0, unit) / per


def _points(members: Sequence[RunResult], factor: float, x_of: Any) -> list[_Point]:
    pts = []
    for r in members:
        s = summary_stats(r.measurement.samples)
        med = r.verdict.current_median
        if not math.isfinite(med):
            continue
        p5 = s["p5"] if s["p5"] is not None else med
        p95 = s["p95"] if s["p95"] is not None else med
        base = r.verdict.baseline_median
        pts.append(
            _Point(
                r,
                x_of(r),
                med * factor,
                float(p5) * factor,
                float(p95) * factor,
                None if base is None else base * factor,
            )
        )
    return pts


def png_bytes(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    return buf.getvalue()


def _outcome_handles(outcomes: set[Outcome]) -> list[Any]:
    handles: list[Any] = []
    for o in (Outcome.REGRESSION, Outcome.IMPROVEMENT, Outcome.INCONCLUSIVE, Outcome.NEW):
        if o in outcomes:
            face = "white" if o is Outcome.NEW else OUTCOME_COLOURS[o]
            handles.append(
                Line2D(
                    [],
                    [],
                    ls="none",
                    marker="o",
                    ms=9,
                    mfc=face,
                    mec=OUTCOME_COLOURS[o],
                    mew=2,
                    label=o.value,
                )
            )
    return handles


def _mark(ax: Any, p: _Point, y: float, colour: str) -> None:
    o = p.result.verdict.outcome
    if o is Outcome.PASS:
        ax.plot([p.x], [y], ls="none", marker="o", ms=5, color=colour, zorder=4)
    else:
        face = "white" if o is Outcome.NEW else OUTCOME_COLOURS[o]
        ax.plot(
            [p.x],
            [y],
            ls="none",
            marker="o",
            ms=9,
            mfc=face,
            mec=OUTCOME_COLOURS[o],
            mew=2,
            zorder=5,
        )


def size_axis(ax: Any, xs: Sequence[float], max_labels: int = 12) -> None:
    ax.set_xscale("log", base=2)
    ticks = sorted(set(xs))
    # 23 labels (1 B .. 4 MiB) collide at this width: label every other power, tick them all.
    step = -(-len(ticks) // max_labels)
    ax.xaxis.set_major_locator(FixedLocator(ticks[::step]))
    ax.xaxis.set_minor_locator(FixedLocator(ticks))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xticklabels([fmt_size(0 if t == ZERO_SIZE_X else t) for t in ticks[::step]])
    lo, hi = min(ticks), max(ticks)
    ax.set_xlim(lo / 1.5, hi * 1.5)


def varying(members: Sequence[RunResult], skip: Sequence[str]) -> tuple[list[str], str]:
    """(params whose values differ between members, the shared ones as text): series and bars
    are named by the first, the figure's subtitle says the second once."""
    keys = sorted(
        {k for r in members for k in r.measurement.params if k not in skip}, key=label_key
    )
    differ = [k for k in keys if len({repr(r.measurement.params.get(k)) for r in members}) > 1]
    p0 = members[0].measurement.params if members else {}
    shared = {k: p0[k] for k in keys if k not in differ and k in p0}
    return differ, fmt_params(shared)


def _series(members: Sequence[RunResult], skip: Sequence[str]) -> dict[str, list[RunResult]]:
    """One line per combination of the parameters that vary, besides the x axis's."""
    differ, _ = varying(members, skip)
    out: dict[str, list[RunResult]] = {}
    for r in members:
        p = r.measurement.params
        out.setdefault(
            " ".join(
                str(p.get(k, "-")) if isinstance(p.get(k), str) else f"{k}={p.get(k, '-')}"
                for k in differ
            ),
            [],
        ).append(r)
    return out


def _titles(fig: Figure, ax: Any, title: str, shared: str) -> None:
    if not shared:
        ax.set_title(title, loc="left", fontsize=12, fontweight="bold")
        return
    # what every point has in common, once, under the title instead of in every label
    fig.suptitle(title, x=0.01, ha="left", fontsize=12, fontweight="bold")
    ax.set_title("\n".join(textwrap.wrap(shared, 120)), loc="left", fontsize=9, color="#555555")


def _ncols(n: int, longest: int) -> int:
    return max(1, min(n, 110 // max(longest + 6, 1), 4))


def legend_below(fig: Figure, handles: list[Any]) -> None:
    """Below the axes, never over the data nor cut: constrained layout makes room for it."""
    if not handles:
        return
    longest = max(len(str(h.get_label())) for h in handles)
    fig.legend(
        handles=handles,
        loc="outside lower center",
        ncols=_ncols(len(handles), longest),
        fontsize=9,
        frameon=False,
    )


def legend_rows(n: int, longest: int) -> int:
    return -(-n // _ncols(n, longest))


XAxis = Callable[[Any, Sequence[float]], None]


def line_png(
    members: Sequence[RunResult],
    title: str,
    *,
    x_of: Callable[[RunResult], float],
    set_x: XAxis,
    xlabel: str,
    skip: Sequence[str],
) -> bytes:
    """Value against x: one line per series, this run's median with its p5–p95 bar, the
    baseline median with its tolerance band, verdict colours; below it, current/baseline with
    the ratio's CI. The legend sits below the axes."""
    m0 = members[0].measurement
    unit_label, factor = _scale(members)
    series = _series(members, skip)
    _, shared = varying(members, skip)
    has_base = any(r.verdict.baseline_median is not None for r in members)
    many = len(series) > 1
    longest = max((len(k) for k in series), default=0) + 28
    n_handles = len(series) + (1 if has_base else 0) + len(Outcome)
    height = (6.4 if has_base else 4.8) + 0.22 * legend_rows(n_handles, longest)
    fig = Figure(figsize=(10, height), layout="constrained")
    if has_base:
        ax, rax = fig.subplots(2, 1, sharex=True, height_ratios=[2.4, 1])
    else:
        ax, rax = fig.subplots(1, 1), None
    all_x: list[float] = []
    values: list[float] = []
    outcomes: set[Outcome] = set()
    handles: list[Any] = []
    for i, (label, rs) in enumerate(series.items()):
        colour = SERIES_COLOURS[i % len(SERIES_COLOURS)]
        marker = MARKERS[(i // len(SERIES_COLOURS)) % len(MARKERS)]
        pts = sorted(_points(rs, factor, x_of), key=lambda p: p.x)
        if not pts:
            continue
        xs = [p.x for p in pts]
        all_x += xs
        meds = [p.median for p in pts]
        values += meds + [p.p5 for p in pts] + [p.p95 for p in pts]
        yerr = [[max(p.median - p.p5, 0) for p in pts], [max(p.p95 - p.median, 0) for p in pts]]
        ax.errorbar(
            xs,
            meds,
            yerr=yerr,
            color=colour,
            lw=1.6,
            capsize=2.5,
            elinewidth=1,
            marker=marker,
            ms=4,
            zorder=3,
        )
        name = label if many else f"this run{' ' + label if label else ''} (median, p5–p95)"
        handles.append(Line2D([], [], color=colour, marker=marker, ms=5, label=name))
        based = [p for p in pts if p.base is not None]
        if based:
            bx = [p.x for p in based]
            bm = [p.base or 0.0 for p in based]
            tol = [p.result.verdict.tolerance for p in based]
            values += bm
            ax.plot(bx, bm, color=colour, ls="--", lw=1.2, alpha=0.8, zorder=2)
            ax.fill_between(
                bx,
                [b * (1 - t) for b, t in zip(bm, tol)],
                [b * (1 + t) for b, t in zip(bm, tol)],
                color=colour,
                alpha=0.15,
                lw=0,
                zorder=1,
            )
        for p in pts:
            outcomes.add(p.result.verdict.outcome)
            _mark(ax, p, p.median, colour)
            if rax is not None and p.result.verdict.ratio is not None:
                _ratio_point(rax, p)
    if has_base:  # one entry for every series' baseline: its colour says whose
        handles.append(
            Line2D(
                [],
                [],
                color="#777777",
                ls="--",
                lw=6,
                alpha=0.3,
                label="baseline (median ± tolerance)",
            )
        )
    positive = [v for v in values if v > 0]
    if positive and max(positive) / min(positive) > 20:
        log_value_axis(ax, max(positive) / min(positive))
    ax.set_ylabel(f"{metric_of(m0)} ({unit_label})")
    _titles(fig, ax, title, shared)
    ax.grid(True, which="major", alpha=0.3)
    if all_x:
        set_x(rax if rax is not None else ax, all_x)
    bottom = rax if rax is not None else ax
    bottom.set_xlabel(xlabel)
    if rax is not None:
        _ratio_axis(rax, members, m0.direction)
    legend_below(fig, handles + _outcome_handles(outcomes))
    return png_bytes(fig)


def _size_x(r: RunResult) -> float:
    size = float(r.measurement.params[SIZE_PARAM])
    return size if size > 0 else ZERO_SIZE_X


def sweep_png(members: Sequence[RunResult], title: str) -> bytes:
    """Value vs message size on a log2 axis (OSU's plots), one line per other parameter set."""
    return line_png(
        members, title, x_of=_size_x, set_x=size_axis, xlabel="message size", skip=[SIZE_PARAM]
    )


def _plain(y: float, _pos: int | None = None) -> str:
    """Tick text as a user reads a value ("0.5", "200", "12000"), not as "10^2"."""
    return f"{y:,.10g}" if y >= 1 else f"{y:.3g}"


def log_value_axis(ax: Any, span: float) -> None:
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(FuncFormatter(_plain))
    if span < 1e3:
        # Within ~3 decades the powers of ten alone leave the axis nearly unlabelled.
        ax.yaxis.set_minor_locator(LogLocator(base=10, subs=(2.0, 5.0)))
        ax.yaxis.set_minor_formatter(FuncFormatter(_plain))
    else:
        ax.yaxis.set_minor_formatter(NullFormatter())


def _ratio_point(rax: Any, p: _Point) -> None:
    v = p.result.verdict
    ratio = v.ratio or 0.0
    colour = OUTCOME_COLOURS[v.outcome] if v.outcome is not Outcome.PASS else "#444444"
    if v.ci_low is not None and v.ci_high is not None:
        rax.errorbar(
            [p.x],
            [ratio],
            yerr=[[max(ratio - v.ci_low, 0)], [max(v.ci_high - ratio, 0)]],
            color=colour,
            capsize=2,
            elinewidth=1,
            ls="none",
            zorder=3,
        )
    rax.plot(
        [p.x],
        [ratio],
        ls="none",
        marker="o",
        ms=4 if v.outcome is Outcome.PASS else 6,
        color=colour,
        zorder=4,
    )


def _ratio_axis(rax: Any, members: Sequence[RunResult], direction: Direction) -> None:
    tols = [r.verdict.tolerance for r in members]
    tol = max(tols) if tols else 0.0
    rax.axhline(1.0, color="black", lw=0.8)
    rax.axhspan(1 - tol, 1 + tol, color="#999999", alpha=0.18, lw=0, label=f"tolerance ±{tol:.0%}")
    worse = "higher is worse" if direction is Direction.LOWER_IS_BETTER else "lower is worse"
    rax.set_ylabel(f"current / baseline\n({worse})", fontsize=9)
    rax.grid(True, which="major", alpha=0.3)
    rax.legend(fontsize=8, loc="upper left", framealpha=0.9)
    lo, hi = rax.get_ylim()
    pad = max(tol * 1.5, 0.02)
    rax.set_ylim(min(lo, 1 - pad), max(hi, 1 + pad))


def bar_png(members: Sequence[RunResult], title: str) -> bytes:
    """Families without a size: one horizontal bar per parameter set (median, p5–p95), the
    baseline as a black tick with its tolerance band, bars coloured by verdict. Bars are named
    by the parameters that differ between them, wrapped; the shared ones are said once."""
    m0 = members[0].measurement
    unit_label, factor = _scale(members)
    pts = _points(members, factor, lambda r: 0.0)
    differ, shared = varying(members, [])
    n = max(len(pts), 1)
    labels = [
        "\n".join(
            textwrap.wrap(
                fmt_params({k: v for k, v in p.result.measurement.params.items() if k in differ}),
                38,
            )
        )
        or m0.benchmark
        for p in pts
    ]
    lines = sum(max(label.count("\n") + 1, 1) for label in labels)
    fig = Figure(figsize=(10, 2.2 + 0.3 * max(lines, n) + 0.15 * n), layout="constrained")
    ax = fig.subplots()
    ys = list(range(len(pts)))[::-1]  # first result on top
    for y, p in zip(ys, pts):
        o = p.result.verdict.outcome
        colour = OUTCOME_COLOURS[o]
        ax.barh(
            y,
            p.median,
            height=0.6,
            color=colour,
            alpha=0.35 if o is Outcome.NEW else 0.8,
            hatch="//" if o is Outcome.NEW else None,
            edgecolor=colour,
        )
        ax.errorbar(
            [p.median],
            [y],
            xerr=[[max(p.median - p.p5, 0)], [max(p.p95 - p.median, 0)]],
            color="black",
            capsize=3,
            elinewidth=1,
            ls="none",
        )
        if p.base is not None:
            t = p.result.verdict.tolerance
            ax.fill_betweenx(
                [y - 0.4, y + 0.4],
                p.base * (1 - t),
                p.base * (1 + t),
                color="black",
                alpha=0.12,
                lw=0,
            )
            ax.plot([p.base, p.base], [y - 0.4, y + 0.4], color="black", lw=2)
    ax.set_yticks(ys, labels, fontsize=9)
    ax.yaxis.set_minor_locator(NullLocator())
    ax.set_xlabel(f"{metric_of(m0)} ({unit_label})")
    _titles(fig, ax, title, shared)
    ax.grid(True, axis="x", alpha=0.3)
    ax.set_ylim(-0.7, len(pts) - 0.3)
    present = [o for o in OUTCOME_COLOURS if any(p.result.verdict.outcome is o for p in pts)]
    handles: list[Any] = [
        Patch(
            facecolor=OUTCOME_COLOURS[o],
            edgecolor=OUTCOME_COLOURS[o],
            alpha=0.35 if o is Outcome.NEW else 0.8,
            hatch="//" if o is Outcome.NEW else None,
            label=o.value,
        )
        for o in present
    ]
    handles.append(
        Line2D([], [], color="black", marker="|", ls="none", ms=12, mew=1, label="p5–p95")
    )
    if any(p.base is not None for p in pts):
        handles.append(Line2D([], [], color="black", lw=2, label="baseline (± tolerance)"))
    legend_below(fig, handles)
    return png_bytes(fig)


def family_png(members: Sequence[RunResult], title: str) -> bytes:
    return sweep_png(members, title) if is_sweep(members) else bar_png(members, title)
