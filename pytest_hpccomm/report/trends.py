"""The history's trends page: each series of run medians over runs, change points marked.

    hpccomm history --html trends.html [--system S] [--stack X] [--limit N]

One self-contained HTML page (inline CSS, base64 PNGs, no script), like the run report. Change
points come from Apache Otava (baselines.history.change_points); for each one the page says
which run introduced it and what differs between that run's fingerprint and the one before it
(baselines.store.fingerprint_diff), so "latency went up 20 % on the 14th" comes with "and the
MPI library changed from 5.0.3 to 5.0.6 in that run" when the fingerprint recorded it. A series
with paired runs (a nightly against a reference) also gets its ratio series and the ratio
gate's steps (baselines/ratio_gate.py); each series says which one its gate used.

A history holds thousands of series (every size of every sweep), so the page shows at most
`limit` of them: series with change points first (newest change first), then the most recently
run; the page says how many were left out and how to narrow the selection.
"""

from __future__ import annotations

import base64
import io
import json
import math
import os
from dataclasses import dataclass, field
from datetime import datetime, timezone
from html import escape
from pathlib import Path
from typing import Any, Sequence

from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, MaxNLocator

from pytest_hpccomm.baselines.history import (
    DEFAULT_MIN_SEGMENT,
    ChangePoint,
    HistoryStore,
    RunRecord,
    SeriesKey,
)
from pytest_hpccomm.baselines.history import change_points as find_change_points
from pytest_hpccomm.baselines.ratio_gate import DEFAULT_LAST, SeriesGate, Step, judge_series
from pytest_hpccomm.baselines.store import fingerprint_diff
from pytest_hpccomm.baselines.verdict import band
from pytest_hpccomm.files import atomic_write
from pytest_hpccomm.measure.measurement import Direction
from pytest_hpccomm.report.common import fmt_params
from pytest_hpccomm.report.html import PAGE_CSS
from pytest_hpccomm.report.units import pretty_unit

DEFAULT_LIMIT = 30  # plots on one page: ~300 px each, the page stays a few screens per change
WORSE, BETTER = "#d62728", "#2ca02c"  # the run report's regression / improvement colours
LINE = "#1f77b4"
DPI = 100


@dataclass(frozen=True)
class Change:
    """A change point of one series and the run that introduced it."""

    point: ChangePoint
    run: RunRecord  # first run of the new level
    previous: RunRecord  # the run before it
    diff: list[tuple[str, Any, Any]]  # fingerprint fields that differ (field, before, after)
    worse: bool  # in the benchmark's direction (latency up, bandwidth down)


@dataclass(frozen=True)
class Trend:
    key: SeriesKey
    records: list[RunRecord]
    changes: list[Change]
    ratio: list[RunRecord] = field(default_factory=list)  # the paired runs, oldest first
    gate: SeriesGate | None = None  # the ratio gate of `ratio` (None: no paired run)

    @property
    def gated_by(self) -> str:
        """Which series the gate of this point uses."""
        if not self.ratio:
            return "raw medians (runs against stored baselines; no paired run)"
        ref = (self.ratio[-1].base_fingerprint or {}).get("implementation", "?")
        return f"ratio series (paired against the reference {ref}; host drift cancels)"

    @property
    def unit(self) -> str:
        return self.records[-1].unit if self.records else ""

    @property
    def last_change(self) -> datetime | None:
        return self.changes[-1].run.timestamp if self.changes else None


@dataclass(frozen=True)
class TrendsPage:
    """What was written: the page, the series it shows and how many matched."""

    path: Path
    shown: list[Trend]
    matched: int
    limit: int

    @property
    def change_count(self) -> int:
        return sum(len(t.changes) for t in self.shown)


def series_title(key: SeriesKey) -> str:
    params = fmt_params(json.loads(key.params_key))  # "size=8B ranks=2", as the run report
    head = f"{key.system}/{key.fabric}/{key.stack} {key.benchmark}"
    return f"{head} {params}" if params else head


def _is_worse(record: RunRecord, cp: ChangePoint) -> bool:
    if record.direction == Direction.HIGHER_IS_BETTER.value:
        return cp.after < cp.before
    return cp.after > cp.before


def collect(
    store: HistoryStore,
    keys: Sequence[SeriesKey],
    *,
    max_pvalue: float = 0.001,
    min_magnitude: float = 0.0,
) -> list[Trend]:
    """Each key's records and change points (RuntimeError when Otava is not installed)."""
    trends = []
    for key in keys:
        records = store.records(key.system, key.fabric, key.stack, key.benchmark, key.params_key)
        found = find_change_points(
            [r.median for r in records],
            max_pvalue=max_pvalue,
            min_magnitude=min_magnitude,
            log_scale=all(r.median > 0 for r in records),
        )
        changes = [
            Change(
                cp,
                records[cp.index],
                records[cp.index - 1],
                fingerprint_diff(records[cp.index - 1].fingerprint, records[cp.index].fingerprint),
                _is_worse(records[cp.index], cp),
            )
            for cp in found
            if 0 < cp.index < len(records)
        ]
        ratio = [r for r in records if r.has_ratio]
        gate = None
        if ratio:
            gate = judge_series(ratio, ratio[-1].tolerance or 0.05, max_pvalue=max_pvalue)
        trends.append(Trend(key, records, changes, ratio, gate))
    return trends


def _natural(key: SeriesKey) -> tuple[Any, ...]:
    """Sweep order (size=8B before size=1KiB), not the stored JSON's string order."""
    params = json.loads(key.params_key)
    values = tuple(
        (k, (0, v, "") if isinstance(v, (int, float)) else (1, 0, str(v)))
        for k, v in sorted(params.items())
    )
    return (key.system, key.fabric, key.stack, key.benchmark, values)


def select(trends: Sequence[Trend], limit: int) -> list[Trend]:
    """Series with change points first (newest change first), then the most recently run;
    ties (a whole sweep changed in one run) in sweep order."""
    epoch = datetime.min.replace(tzinfo=timezone.utc)
    ranked = sorted(trends, key=lambda t: _natural(t.key))
    ranked.sort(key=lambda t: (t.last_change or epoch, t.key.last), reverse=True)
    # stable: keeps the time order inside each group; a failing ratio step first of all
    ranked.sort(key=lambda t: not t.changes and not (t.gate and t.gate.steps))
    ranked.sort(key=lambda t: not (t.gate and t.gate.fired))
    return ranked[:limit]


# --- the plot ---------------------------------------------------------------------------------


def _fmt(x: float) -> str:
    """Four significant digits: what a person compares across a change."""
    if x == 0 or not math.isfinite(x):
        return f"{x:g}"
    return f"{x:.{max(0, 3 - math.floor(math.log10(abs(x))))}f}"


def _date_format(times: Sequence[datetime]) -> str:
    """Tick labels short enough for a dozen: the day, with the year over long spans and the
    time when runs share a day (several runs a day: nightly plus merge gates)."""
    if len({t.date() for t in times}) < len(times):
        return "%m-%d %H:%M"
    if times and (times[-1] - times[0]).days > 300:
        return "%Y-%m-%d"
    return "%m-%d"


def _mark(ax: Any, x: float, text: str, colour: str, n: int) -> None:
    """A vertical line at a change, labelled at the top (close changes: labels stagger)."""
    ax.axvline(x, color=colour, lw=1.8, zorder=4)
    ax.annotate(
        text,
        xy=(x, 1.0),
        xycoords=("data", "axes fraction"),
        xytext=(4, -4 - 15 * ((n - 1) % 3)),
        textcoords="offset points",
        ha="left",
        va="top",
        fontsize=9,
        color=colour,
        fontweight="bold",
        bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": "none", "alpha": 0.85},
    )


def _time_axis(ax: Any, recs: Sequence[RunRecord]) -> None:
    """Runs along x, oldest left, ticks labelled with their time."""
    form = _date_format([r.timestamp for r in recs])

    def day(v: float, _pos: int | None = None) -> str:
        i = int(round(v))
        return recs[i].timestamp.strftime(form) if 0 <= i < len(recs) and v == i else ""

    ax.xaxis.set_major_locator(MaxNLocator(nbins=12 if len(form) < 6 else 8, integer=True))
    ax.xaxis.set_major_formatter(FuncFormatter(day))
    ax.set_xlim(-0.7, max(len(recs) - 0.3, 0.7))


def trend_png(trend: Trend) -> bytes:
    """Run medians over runs (oldest left), the mean of each level between change points as a
    dashed line, each change point a vertical line at the run that introduced it, labelled
    with its before → after means (red: worse in the benchmark's direction, green: better)."""
    recs = trend.records
    xs = list(range(len(recs)))
    ys = [r.median for r in recs]
    fig = Figure(figsize=(10, 3.0), layout="constrained")
    ax = fig.subplots()
    ax.plot(xs, ys, color=LINE, lw=1.2, marker="o", ms=3.5, zorder=3, label="run median")
    bounds = [0] + [c.point.index for c in trend.changes] + [len(recs)]
    for lo, hi in zip(bounds, bounds[1:]):
        if hi > lo:
            level = sum(ys[lo:hi]) / (hi - lo)
            ax.plot(
                [lo - 0.4, hi - 0.6], [level, level], color="#555555", ls="--", lw=1.1, zorder=2
            )
    for n, c in enumerate(trend.changes, 1):
        colour = WORSE if c.worse else BETTER
        _mark(
            ax,
            c.point.index - 0.5,
            f"#{n} {_fmt(c.point.before)} → {_fmt(c.point.after)} "
            f"({c.point.rel_change * 100:+.1f} %)",
            colour,
            n,
        )
    _time_axis(ax, recs)
    span = (max(ys) - min(ys)) if ys else 0.0
    if ys:
        pad = span * 0.25 or abs(ys[0]) * 0.05 or 1.0
        ax.set_ylim(min(ys) - pad * 0.4, max(ys) + pad)  # room at the top for the labels
    ax.set_xlabel("runs, oldest → newest (UTC time of the run)")
    ax.set_ylabel(pretty_unit(trend.unit))
    ax.set_title(
        f"{series_title(trend.key)}  ({len(recs)} runs, {len(trend.changes)} change "
        f"point{'s' if len(trend.changes) != 1 else ''})",
        loc="left",
        fontsize=11,
        fontweight="bold",
    )
    ax.grid(True, alpha=0.3)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    return buf.getvalue()


def step_colour(gate: SeriesGate, step: Step) -> str:
    """Red: fails the gate; orange: worse beyond the band, not failing (older, or gone);
    green: better; grey: within the band."""
    if step in gate.fired:
        return WORSE
    if not step.beyond:
        return "#7f7f7f"
    return "#ff7f0e" if step.worse else BETTER


def ratio_png(trend: Trend) -> bytes:
    """The paired ratio of each run with its interval, the tolerance band around 1, each
    level's geometric mean dashed, each ratio step a vertical line labelled with its size."""
    recs, gate = trend.ratio, trend.gate
    xs = list(range(len(recs)))
    ys = [float(r.ratio or 0.0) for r in recs]
    lo = [y - float(r.ci_low if r.ci_low is not None else y) for y, r in zip(ys, recs)]
    hi = [float(r.ci_high if r.ci_high is not None else y) - y for y, r in zip(ys, recs)]
    tol = recs[-1].tolerance or 0.05
    fig = Figure(figsize=(10, 2.6), layout="constrained")
    ax = fig.subplots()
    ax.axhspan(*band(tol), color="#2ca02c", alpha=0.08, zorder=1)
    ax.axhline(1.0, color="#555555", lw=0.8, zorder=1)
    ax.errorbar(xs, ys, yerr=[lo, hi], color=LINE, lw=1.2, marker="o", ms=3.5, capsize=2, zorder=3)
    steps = gate.steps if gate is not None else []
    bounds = [0, *(st.index for st in steps), len(recs)]
    for a, b in zip(bounds, bounds[1:]):
        if b > a:
            level = math.exp(sum(math.log(y) for y in ys[a:b]) / (b - a))
            ax.plot([a - 0.4, b - 0.6], [level, level], color="#555555", ls="--", lw=1.1)
    for n, st in enumerate(steps, 1):
        colour = step_colour(gate, st) if gate is not None else LINE
        state = " FAILS" if gate is not None and st in gate.fired else ""
        state += " (gone)" if st.gone_at is not None else ""
        _mark(ax, st.index - 0.5, f"step {st.step:.3f}{state}", colour, n)
    _time_axis(ax, recs)
    ax.set_xlabel("paired runs, oldest → newest")
    ax.set_ylabel("candidate / reference")
    ax.set_title(
        f"ratio series: {len(recs)} paired runs, band ±{tol * 100:g} %, "
        f"{len(steps)} step{'s' if len(steps) != 1 else ''}",
        loc="left",
        fontsize=10.5,
    )
    ax.grid(True, alpha=0.3)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    return buf.getvalue()


# --- the page ---------------------------------------------------------------------------------

_CSS = (
    PAGE_CSS
    + """
h3{font-size:14.5px;margin:14px 0 6px}
.meta{color:#555;margin:0 0 10px}
figure{background:#fff;border:1px solid #d8dbe0;border-radius:6px;margin:0 0 14px;padding:8px}
th{background:#eef0f3}
td.nw{white-space:nowrap}
.worse{color:#d62728;font-weight:600} .better{color:#2ca02c;font-weight:600}
.note,.empty{padding:8px 12px;background:#fff;border:1px solid #d8dbe0;border-radius:6px}
section.diff{background:#fff;border:1px solid #d8dbe0;border-radius:6px;padding:4px 12px 10px;
 margin:0 0 12px}
section.diff:target{border-color:#d62728;box-shadow:0 0 0 2px #fde0df}
code{font-size:12.5px}
"""
)


def _e(x: Any) -> str:
    return escape(str(x), quote=True)


def _when(ts: datetime) -> str:
    return ts.strftime("%Y-%m-%d %H:%M")


def series_anchor(n: int) -> str:
    return f"s{n}"


def diff_anchor(n: int, change: Change) -> str:
    """Stable per page: the series' place on it and the run the change starts at."""
    return f"diff-s{n}-r{change.point.index}"


def _commit(c: str | None) -> str:
    return f"<code>{_e(c[:12])}</code>" if c else "-"


def _changes_table(shown: Sequence[Trend]) -> list[str]:
    rows = [(n, t, c) for n, t in enumerate(shown, 1) for c in t.changes]
    if not rows:
        return [
            "<h2>Change points</h2>",
            '<p class="empty">No change point in the series shown (Apache Otava, '
            "E-divisive means).</p>",
        ]
    rows.sort(key=lambda r: r[2].run.timestamp, reverse=True)
    head = (
        "series",
        "run #",
        "run",
        "time (UTC)",
        "commit",
        "before → after",
        "change",
        "p",
        "fingerprint diff",
    )
    out = [
        "<h2>Change points</h2>",
        "<table>",
        "<tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr>",
    ]
    for n, t, c in rows:
        cls = "worse" if c.worse else "better"
        what = f"{len(c.diff)} field{'s' if len(c.diff) != 1 else ''}" if c.diff else "unchanged"
        out.append(
            "<tr>"
            f'<td><a href="#{series_anchor(n)}">{_e(series_title(t.key))}</a></td>'
            f'<td class="num">{c.point.index}</td><td class="nw"><code>{_e(c.run.run_id)}'
            f'</code></td><td class="nw">{_when(c.run.timestamp)}</td>'
            f"<td>{_commit(c.run.commit)}</td>"
            f'<td class="num">{_fmt(c.point.before)} → {_fmt(c.point.after)} '
            f"{_e(pretty_unit(t.unit))}</td>"
            f'<td class="num {cls}">{c.point.rel_change * 100:+.1f} %</td>'
            f'<td class="num">{c.point.p_value:.1g}</td>'
            f'<td><a href="#{diff_anchor(n, c)}">{what}</a></td></tr>'
        )
    out.append("</table>")
    return out


def _ratio_steps_table(shown: Sequence[Trend]) -> list[str]:
    rows = [(n, t, st) for n, t in enumerate(shown, 1) if t.gate for st in t.gate.steps]
    if not any(t.ratio for t in shown):
        return []
    if not rows:
        return [
            "<h2>Ratio steps</h2>",
            '<p class="empty">No step in the ratio series shown: candidate against reference, '
            "measured in the same sessions, did not change level.</p>",
        ]
    head = ("series", "paired run #", "run", "time (UTC)", "step (CI)", "gate", "what changed")
    out = [
        "<h2>Ratio steps</h2>",
        "<table>",
        "<tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr>",
    ]
    for n, t, st in rows:
        assert t.gate is not None
        if st in t.gate.fired:
            state, cls = "FAILS", "worse"
        elif st.gone_at is not None:
            state, cls = f"gone again at paired run {st.gone_at}", ""
        elif not st.beyond:
            state, cls = "within the tolerance", ""
        elif not st.worse:
            state, cls = "better", "better"
        else:
            state, cls = "older than the gate's last runs", "worse"
        changed = "<br>".join(_e(c) for c in st.changed) or "no fingerprint difference"
        out.append(
            "<tr>"
            f'<td><a href="#{series_anchor(n)}">{_e(series_title(t.key))}</a></td>'
            f'<td class="num">{st.index}</td><td class="nw"><code>{_e(st.run_id)}</code></td>'
            f'<td class="nw">{_e(st.night)}</td>'
            f'<td class="num">{st.step:.3f} ({st.ci[0]:.3f}–{st.ci[1]:.3f})</td>'
            f'<td class="{cls}">{_e(state)}</td><td>{changed}</td></tr>'
        )
    out.append("</table>")
    return out


def _gate_note(gate: SeriesGate | None) -> str:
    """One line under a ratio plot: what the ratio gate says of the series."""
    if gate is None:
        return ""
    if gate.reason:
        return f"ratio gate: not judged yet ({gate.reason})"
    return (
        f"ratio gate: {len(gate.steps)} step(s), {len(gate.fired)} failing (worse than the "
        f"band, in the last {DEFAULT_LAST} paired runs, not gone again; levels of "
        f"{DEFAULT_MIN_SEGMENT}+ runs)"
    )


def _series(shown: Sequence[Trend]) -> list[str]:
    out = ["<h2>Series</h2>"]
    for n, t in enumerate(shown, 1):
        png = base64.b64encode(trend_png(t)).decode("ascii")
        alt = f"{series_title(t.key)}: {len(t.records)} runs, {len(t.changes)} change points"
        links = "".join(
            f' · <a href="#{diff_anchor(n, c)}">change #{i} at run {c.point.index}</a>'
            for i, c in enumerate(t.changes, 1)
        )
        ratio = ""
        if t.ratio:
            rpng = base64.b64encode(ratio_png(t)).decode("ascii")
            steps = len(t.gate.steps) if t.gate else 0
            ralt = f"{series_title(t.key)}: ratio series, {len(t.ratio)} paired runs, {steps} steps"
            ratio = (
                f'<figure><img alt="{_e(ralt)}" src="data:image/png;base64,{rpng}"></figure>'
                f'<p class="meta">{_e(_gate_note(t.gate))}</p>'
            )
        out.append(
            f'<section id="{series_anchor(n)}"><h3>{_e(series_title(t.key))}</h3>'
            f'<p class="meta">{len(t.records)} runs, last {_when(t.key.last)}{links} · '
            f"the gate uses the {_e(t.gated_by)}</p>"
            f'<figure><img alt="{_e(alt)}" src="data:image/png;base64,{png}"></figure>'
            f"{ratio}</section>"
        )
    return out


def _value(v: Any) -> str:
    return "<i>absent</i>" if v is None else f"<code>{_e(v)}</code>"


def _diffs(shown: Sequence[Trend]) -> list[str]:
    changed = [(n, t, c) for n, t in enumerate(shown, 1) for c in t.changes]
    if not changed:
        return []
    out = ["<h2>Fingerprint diffs of the runs that introduced a change</h2>"]
    for n, t, c in changed:
        head = (
            f"{_e(series_title(t.key))}: run <code>{_e(c.run.run_id)}</code> (#{c.point.index}"
            f", {_when(c.run.timestamp)}) against <code>{_e(c.previous.run_id)}</code> "
            f"(#{c.point.index - 1}, {_when(c.previous.timestamp)})"
        )
        commits = (
            f'<p class="meta">commit {_commit(c.previous.commit)} → {_commit(c.run.commit)}</p>'
        )
        if c.diff:
            rows = "".join(
                f"<tr><td><code>{_e(k)}</code></td><td>{_value(a)}</td><td>{_value(b)}</td></tr>"
                for k, a, b in c.diff
            )
            body = f"<table><tr><th>field</th><th>before</th><th>after</th></tr>{rows}</table>"
        else:
            body = (
                "<p>The recorded fingerprint did not change between these runs: the cause "
                "is outside it (the code under test, the commit, the machine's load).</p>"
            )
        out.append(
            f'<section class="diff" id="{diff_anchor(n, c)}"><h3>{head}</h3>'
            f"{commits}{body}</section>"
        )
    return out


def render_trends(
    shown: Sequence[Trend], *, matched: int, limit: int, source: str, filters: str = ""
) -> str:
    """The page as text. `matched`: series that matched the selection (shown or not)."""
    with_changes = sum(1 for t in shown if t.changes)
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    body = [
        "<h1>pytest-hpccomm trends</h1>",
        f'<p class="meta">history <b>{_e(source)}</b>'
        + (f" · {_e(filters)}" if filters else "")
        + f" · generated {now}</p>",
    ]
    if not shown:
        body.append('<p class="empty">No recorded series matched.</p>')
    else:
        left = matched - len(shown)
        note = (
            f"{matched} series matched; showing {len(shown)}, {with_changes} with change "
            f"points (Apache Otava), those first, newest change first, then the most "
            f"recently run."
        )
        if left > 0:
            note += (
                f" {left} not shown (limit {limit}): narrow with --system, --stack, "
                "--benchmark or --params, or raise --limit."
            )
        body.append(f'<p class="note">{_e(note)}</p>')
        body += _ratio_steps_table(shown) + _changes_table(shown) + _series(shown)
        body += _diffs(shown)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width">'
        "<title>pytest-hpccomm trends</title>"
        f"<style>{_CSS}</style></head><body><main>\n"
        + "\n".join(body)
        + "\n</main></body></html>\n"
    )


def write_trends_page(
    path: str | os.PathLike[str],
    store: HistoryStore,
    keys: Sequence[SeriesKey],
    *,
    limit: int = DEFAULT_LIMIT,
    max_pvalue: float = 0.001,
    min_magnitude: float = 0.0,
    filters: str = "",
) -> TrendsPage:
    """Collect, select and write the page atomically (RuntimeError without Otava, OSError
    when the path cannot be written)."""
    trends = collect(store, keys, max_pvalue=max_pvalue, min_magnitude=min_magnitude)
    shown = select(trends, limit)
    text = render_trends(
        shown, matched=len(trends), limit=limit, source=str(store.path), filters=filters
    )
    return TrendsPage(atomic_write(path, text), shown, len(trends), limit)
