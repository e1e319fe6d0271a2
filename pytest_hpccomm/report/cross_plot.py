"""The cross-stack figure: latency and bandwidth against message size, side by side, one line
per path (cross_stack.py says which benchmark of each stack that is). Every size a path
measured is drawn, also those no other stack shares (the table leaves those out)."""

from __future__ import annotations

from typing import Any, Callable

from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from pytest_hpccomm.report.cross_stack import CrossStack, Row
from pytest_hpccomm.report.plots import (
    MARKERS,
    SERIES_COLOURS,
    legend_below,
    legend_rows,
    log_value_axis,
    png_bytes,
    size_axis,
)


def _panel(
    ax: Any,
    lines: dict[str, list[Row]],
    style: dict[str, tuple[str, str, str]],
    value: Callable[[Row], float | None],
    ylabel: str,
) -> None:
    xs: list[float] = []
    ys: list[float] = []
    for label, rows in lines.items():
        pts = sorted((r.size, v) for r in rows if (v := value(r)) is not None)
        if not pts:
            continue
        colour, marker, ls = style[label]
        ax.plot(
            [p[0] for p in pts],
            [p[1] for p in pts],
            color=colour,
            marker=marker,
            ms=4,
            ls=ls,
            lw=1.5,
        )
        xs += [p[0] for p in pts]
        ys += [p[1] for p in pts]
    if xs:
        size_axis(ax, xs, max_labels=7)  # half the page's width
        log_value_axis(ax, max(ys) / min(ys) if min(ys) > 0 else 1e9)
    ax.set_ylabel(ylabel)
    ax.set_xlabel("message size")
    ax.grid(True, which="major", alpha=0.3)


def cross_stack_png(cs: CrossStack) -> bytes:
    lines: dict[str, list[Row]] = {}
    for r in sorted(cs.every, key=lambda r: (r.path.collective, r.label)):
        lines.setdefault(r.label, []).append(r)
    # a colour per stack, a marker and dash per variant of it: "which stack" reads first
    names = list(dict.fromkeys(rows[0].path.name for rows in lines.values()))
    seen: dict[str, int] = {}
    style: dict[str, tuple[str, str, str]] = {}
    for label, rows in lines.items():
        name = rows[0].path.name
        i = seen[name] = seen.get(name, -1) + 1
        dash = "--" if rows[0].path.collective else ("-", ":", "-.")[i // len(MARKERS) % 3]
        style[label] = (
            SERIES_COLOURS[names.index(name) % len(SERIES_COLOURS)],
            MARKERS[i % len(MARKERS)],
            dash,
        )
    handles = [
        Line2D(
            [],
            [],
            color=c,
            marker=m,
            ls=ls,
            ms=5,
            label=label + (" (collective)" if lines[label][0].path.collective else ""),
        )
        for label, (c, m, ls) in style.items()
    ]
    longest = max((len(str(h.get_label())) for h in handles), default=0)
    fig = Figure(
        figsize=(12, 4.6 + 0.22 * legend_rows(len(handles), longest)), layout="constrained"
    )
    lat, bw = fig.subplots(1, 2)
    _panel(
        lat,
        lines,
        style,
        lambda r: None if r.latency is None else r.latency * 1e6,
        "latency (µs, lower is better)",
    )
    _panel(
        bw,
        lines,
        style,
        lambda r: None if r.bandwidth is None else r.bandwidth / 1e6,
        "bandwidth (MB/s, higher is better)",
    )
    lat.set_title(
        "Cross-stack: the same message sizes through each stack",
        loc="left",
        fontsize=12,
        fontweight="bold",
    )
    legend_below(fig, handles)
    return png_bytes(fig)
