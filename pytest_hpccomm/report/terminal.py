"""The table pytest prints in its terminal summary.

Plain ASCII (CI logs mangle box drawing and colour), names repeated on every row so that
`grep regression` on a log gives complete lines, one blank line between stack/benchmark groups.
"""

from __future__ import annotations

from typing import Sequence

from pytest_hpccomm.baselines.result import RunResult
from pytest_hpccomm.report.common import counts_line, families, fmt_params
from pytest_hpccomm.report.units import fmt_ratio, fmt_value

HEADER = ("stack", "benchmark", "params", "baseline", "current", "ratio", "verdict")
_RIGHT = {"baseline", "current", "ratio"}  # numbers align on the right
_SQUEEZABLE = ("params", "benchmark")  # what gets truncated first when the table is too wide
_GAP = "  "


def _rows(results: Sequence[RunResult]) -> list[tuple[str, ...] | None]:
    """Table rows in report order; None marks a break between stack/benchmark groups."""
    rows: list[tuple[str, ...] | None] = []
    fams = families(results)
    multi_metric = {(s, b) for (s, b, m) in fams
                    if sum(1 for k in fams if k[:2] == (s, b)) > 1}
    prev_group: tuple[str, str] | None = None
    for (stack, bench, metric), members in fams.items():
        if prev_group is not None and prev_group != (stack, bench):
            rows.append(None)
        prev_group = (stack, bench)
        # Name the metric only where one benchmark reports several (e.g. algbw and busbw).
        label = f"{bench}:{metric}" if (stack, bench) in multi_metric else bench
        for r in members:
            m, v = r.measurement, r.verdict
            ref = v.current_median if v.baseline_median is None else max(
                v.current_median, v.baseline_median)
            rows.append((
                stack, label, fmt_params(m.params),
                fmt_value(v.baseline_median, m.unit, ref=ref),
                fmt_value(v.current_median, m.unit, ref=ref),
                fmt_ratio(v.ratio), v.outcome.value.upper(),
            ))
    return rows


def _truncate(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(width - 1, 0)] + "~"


def summary_table(results: Sequence[RunResult], width: int = 120) -> list[str]:
    """Lines for pytest's terminal summary; [] when the session measured nothing."""
    if not results:
        return []
    rows = _rows(results)
    widths = {h: len(h) for h in HEADER}
    for row in rows:
        if row is not None:
            for h, cell in zip(HEADER, row):
                widths[h] = max(widths[h], len(cell))
    # Too wide: squeeze params, then benchmark, never below a readable minimum.
    excess = sum(widths.values()) + len(_GAP) * (len(HEADER) - 1) - width
    for name in _SQUEEZABLE:
        if excess <= 0:
            break
        cut = min(excess, max(widths[name] - 12, 0))
        widths[name] -= cut
        excess -= cut

    def line(cells: Sequence[str]) -> str:
        out = []
        for h, cell in zip(HEADER, cells):
            cell = _truncate(cell, widths[h])
            out.append(cell.rjust(widths[h]) if h in _RIGHT else cell.ljust(widths[h]))
        return _GAP.join(out).rstrip()

    lines = [line(HEADER), line(["-" * widths[h] for h in HEADER])]
    lines += ["" if row is None else line(row) for row in rows]
    lines.append(f"hpccomm: {len(results)} results: {counts_line(results)}")
    return lines
