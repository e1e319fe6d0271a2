"""Plots of one benchmark family (stack + benchmark + metric) as PNG bytes.

Uses matplotlib's object API (Figure, never pyplot): no global state, no GUI backend, safe to
call from a pytest hook. A family with a numeric "size" parameter is a sweep (value vs message
size on a log2 axis, plus a ratio-to-baseline panel, where a 10 % regression is visible even when
the value axis spans six decades); any other family is a horizontal bar chart.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass
from typing import Any, Sequence

from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullFormatter, NullLocator

from pytest_hpccomm.baselines.verdict import Outcome
from pytest_hpccomm.measure.measurement import Direction
from pytest_hpccomm.baselines.result import RunResult
from pytest_hpccomm.report.common import SIZE_PARAM, fmt_params, metric_of, summary_stats
from pytest_hpccomm.report.units import (fmt_size, is_time_unit, pretty_unit, time_display_unit,
                                         to_seconds)

OUTCOME_COLOURS = {
    Outcome.REGRESSION: "#d62728", Outcome.IMPROVEMENT: "#2ca02c",
    Outcome.INCONCLUSIVE: "#ff7f0e", Outcome.NEW: "#7f7f7f", Outcome.PASS: "#1f77b4",
}
# Series colours avoid red/green/orange: those mean a verdict here.
SERIES_COLOURS = ("#1f77b4", "#9467bd", "#8c564b", "#17becf", "#e377c2", "#bcbd22", "#555555")
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
    top = max((r.verdict.current_median for r in members
               if math.isfinite(r.verdict.current_median)), default=0.0)
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
        pts.append(_Point(r, x_of(r), med * factor, float(p5) * factor, float(p95) * factor,
                          None if base is None else base * factor))
    return pts


def _series(members: Sequence[RunResult]) -> dict[str, list[RunResult]]:
    """One line per combination of the non-size parameters (e.g. ranks=2, ranks=4)."""
    out: dict[str, list[RunResult]] = {}
    for r in members:
        out.setdefault(fmt_params(r.measurement.params, skip=[SIZE_PARAM]), []).append(r)
    return out


def _png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    return buf.getvalue()


def _outcome_handles(outcomes: set[Outcome]) -> list[Any]:
    handles: list[Any] = []
    for o in (Outcome.REGRESSION, Outcome.IMPROVEMENT, Outcome.INCONCLUSIVE, Outcome.NEW):
        if o in outcomes:
            face = "white" if o is Outcome.NEW else OUTCOME_COLOURS[o]
            handles.append(Line2D([], [], ls="none", marker="o", ms=9, mfc=face,
                                  mec=OUTCOME_COLOURS[o], mew=2, label=o.value))
    return handles


def _mark(ax: Any, p: _Point, y: float, colour: str) -> None:
    o = p.result.verdict.outcome
    if o is Outcome.PASS:
        ax.plot([p.x], [y], ls="none", marker="o", ms=5, color=colour, zorder=4)
    else:
        face = "white" if o is Outcome.NEW else OUTCOME_COLOURS[o]
        ax.plot([p.x], [y], ls="none", marker="o", ms=9, mfc=face, mec=OUTCOME_COLOURS[o],
                mew=2, zorder=5)


def _size_axis(ax: Any, xs: Sequence[float]) -> None:
    ax.set_xscale("log", base=2)
    ticks = sorted(set(xs))
    # 23 labels (1 B .. 4 MiB) collide at this width: label every other power, tick them all.
    step = 1 if len(ticks) <= 12 else 2
    ax.xaxis.set_major_locator(FixedLocator(ticks[::step]))
    ax.xaxis.set_minor_locator(FixedLocator(ticks))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xticklabels([fmt_size(0 if t == ZERO_SIZE_X else t) for t in ticks[::step]])
    lo, hi = min(ticks), max(ticks)
    ax.set_xlim(lo / 1.5, hi * 1.5)


def sweep_png(members: Sequence[RunResult], title: str) -> bytes:
    """Value vs message size: this run's median with its p5–p95 bar, the baseline median with
    its tolerance band, verdict colours; below it, current/baseline with the ratio's CI."""
    m0 = members[0].measurement
    unit_label, factor = _scale(members)
    series = _series(members)
    has_base = any(r.verdict.baseline_median is not None for r in members)
    fig = Figure(figsize=(10, 6.4 if has_base else 4.8), layout="constrained")
    if has_base:
        ax, rax = fig.subplots(2, 1, sharex=True, height_ratios=[2.4, 1])
    else:
        ax, rax = fig.subplots(1, 1), None

    def x_of(r: RunResult) -> float:
        size = float(r.measurement.params[SIZE_PARAM])
        return size if size > 0 else ZERO_SIZE_X

    all_x: list[float] = []
    values: list[float] = []
    outcomes: set[Outcome] = set()
    handles: list[Any] = []
    for i, (label, rs) in enumerate(series.items()):
        colour = SERIES_COLOURS[i % len(SERIES_COLOURS)]
        pts = _points(rs, factor, x_of)
        if not pts:
            continue
        xs = [p.x for p in pts]
        all_x += xs
        meds = [p.median for p in pts]
        values += meds + [p.p5 for p in pts] + [p.p95 for p in pts]
        yerr = [[max(p.median - p.p5, 0) for p in pts], [max(p.p95 - p.median, 0) for p in pts]]
        ax.errorbar(xs, meds, yerr=yerr, color=colour, lw=1.6, capsize=2.5, elinewidth=1,
                    zorder=3)
        name = f"this run{' ' + label if label else ''} (median, p5–p95)"
        handles.append(Line2D([], [], color=colour, marker="o", ms=5, label=name))
        based = [p for p in pts if p.base is not None]
        if based:
            bx = [p.x for p in based]
            bm = [p.base or 0.0 for p in based]
            tol = [p.result.verdict.tolerance for p in based]
            values += bm
            ax.plot(bx, bm, color=colour, ls="--", lw=1.2, alpha=0.8, zorder=2)
            ax.fill_between(bx, [b * (1 - t) for b, t in zip(bm, tol)],
                            [b * (1 + t) for b, t in zip(bm, tol)],
                            color=colour, alpha=0.15, lw=0, zorder=1)
            handles.append(Line2D([], [], color=colour, ls="--", lw=6, alpha=0.3,
                                  label=f"baseline{' ' + label if label else ''} "
                                        "(median ± tolerance)"))
        for p in pts:
            outcomes.add(p.result.verdict.outcome)
            _mark(ax, p, p.median, colour)
            if rax is not None and p.result.verdict.ratio is not None:
                _ratio_point(rax, p)
    positive = [v for v in values if v > 0]
    if positive and max(positive) / min(positive) > 20:
        _log_value_axis(ax, max(positive) / min(positive))
    ax.set_ylabel(f"{metric_of(m0)} ({unit_label})")
    ax.set_title(title, loc="left", fontsize=12, fontweight="bold")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(handles=handles + _outcome_handles(outcomes), fontsize=9, framealpha=0.9,
              loc="best")
    if all_x:
        _size_axis(rax if rax is not None else ax, all_x)
    bottom = rax if rax is not None else ax
    bottom.set_xlabel("message size")
    if rax is not None:
        _ratio_axis(rax, members, m0.direction)
    out = _png(fig)
    return out


def _plain(y: float, _pos: int | None = None) -> str:
    """Tick text as a user reads a value ("0.5", "200", "12000"), not as "10^2"."""
    return f"{y:,.10g}" if y >= 1 else f"{y:.3g}"


def _log_value_axis(ax: Any, span: float) -> None:
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
        rax.errorbar([p.x], [ratio], yerr=[[max(ratio - v.ci_low, 0)], [max(v.ci_high - ratio, 0)]],
                     color=colour, capsize=2, elinewidth=1, ls="none", zorder=3)
    rax.plot([p.x], [ratio], ls="none", marker="o", ms=4 if v.outcome is Outcome.PASS else 6,
             color=colour, zorder=4)


def _ratio_axis(rax: Any, members: Sequence[RunResult], direction: Direction) -> None:
    tols = [r.verdict.tolerance for r in members]
    tol = max(tols) if tols else 0.0
    rax.axhline(1.0, color="black", lw=0.8)
    rax.axhspan(1 - tol, 1 + tol, color="#999999", alpha=0.18, lw=0,
                label=f"tolerance ±{tol:.0%}")
    worse = "higher is worse" if direction is Direction.LOWER_IS_BETTER else "lower is worse"
    rax.set_ylabel(f"current / baseline\n({worse})", fontsize=9)
    rax.grid(True, which="major", alpha=0.3)
    rax.legend(fontsize=8, loc="upper left", framealpha=0.9)
    lo, hi = rax.get_ylim()
    pad = max(tol * 1.5, 0.02)
    rax.set_ylim(min(lo, 1 - pad), max(hi, 1 + pad))


def bar_png(members: Sequence[RunResult], title: str) -> bytes:
    """Families without a size: one horizontal bar per parameter set (median, p5–p95), the
    baseline as a black tick with its tolerance band, bars coloured by verdict."""
    m0 = members[0].measurement
    unit_label, factor = _scale(members)
    pts = _points(members, factor, lambda r: 0.0)
    n = max(len(pts), 1)
    fig = Figure(figsize=(10, 1.3 + 0.45 * n), layout="constrained")
    ax = fig.subplots()
    labels = [fmt_params(p.result.measurement.params) or m0.benchmark for p in pts]
    ys = list(range(len(pts)))[::-1]  # first result on top
    for y, p in zip(ys, pts):
        o = p.result.verdict.outcome
        colour = OUTCOME_COLOURS[o]
        ax.barh(y, p.median, height=0.6, color=colour, alpha=0.35 if o is Outcome.NEW else 0.8,
                hatch="//" if o is Outcome.NEW else None, edgecolor=colour)
        ax.errorbar([p.median], [y], xerr=[[max(p.median - p.p5, 0)], [max(p.p95 - p.median, 0)]],
                    color="black", capsize=3, elinewidth=1, ls="none")
        if p.base is not None:
            t = p.result.verdict.tolerance
            ax.fill_betweenx([y - 0.4, y + 0.4], p.base * (1 - t), p.base * (1 + t),
                             color="black", alpha=0.12, lw=0)
            ax.plot([p.base, p.base], [y - 0.4, y + 0.4], color="black", lw=2)
    ax.set_yticks(ys, labels)
    ax.yaxis.set_minor_locator(NullLocator())
    ax.set_xlabel(f"{metric_of(m0)} ({unit_label})")
    ax.set_title(title, loc="left", fontsize=12, fontweight="bold")
    ax.grid(True, axis="x", alpha=0.3)
    ax.set_ylim(-0.7, len(pts) - 0.3)
    present = [o for o in OUTCOME_COLOURS if any(p.result.verdict.outcome is o for p in pts)]
    handles: list[Any] = [
        Patch(facecolor=OUTCOME_COLOURS[o], edgecolor=OUTCOME_COLOURS[o],
              alpha=0.35 if o is Outcome.NEW else 0.8, hatch="//" if o is Outcome.NEW else None,
              label=o.value) for o in present]
    handles.append(Line2D([], [], color="black", marker="|", ls="none", ms=12, mew=1,
                          label="p5–p95"))
    if any(p.base is not None for p in pts):
        handles.append(Line2D([], [], color="black", lw=2, label="baseline (± tolerance)"))
    # Outside the axes: inside, it hides the ends of the longest bars and their p95 whiskers.
    ax.legend(handles=handles, fontsize=9, loc="upper left", bbox_to_anchor=(1.01, 1.0),
              frameon=False)
    return _png(fig)


def family_png(members: Sequence[RunResult], title: str) -> bytes:
    return sweep_png(members, title) if is_sweep(members) else bar_png(members, title)
