"""What pytest prints in its terminal summary, shaped like pytest's own short summary.

A session of thousands of results (ci/run-suites.sh: 2,238) printed a 2,268-row table nobody
reads. So by default: the counts first (overall, then per stack), then only what changed, one
line each (regressions, improvements; at most LISTED per outcome), the inconclusive ones counted
per reason, then where the rest is. The full table (every result) comes with -v, or by itself
when the session is small enough to read (FULL_TABLE_MAX results).

Plain ASCII (CI logs mangle box drawing and colour), names repeated on every line so that
`grep -i regression` on a log gives complete lines, one blank line between stack/benchmark
groups of the full table.
"""

from __future__ import annotations

from typing import Sequence, TextIO

from pytest_hpccomm.baselines.result import RunResult
from pytest_hpccomm.baselines.verdict import Outcome
from pytest_hpccomm.report.common import (
    counts_line,
    families,
    fmt_params,
    inconclusive_groups,
    outcome_counts,
    point_name,
    short_message,
    sorted_results,
)
from pytest_hpccomm.report.units import fmt_ratio, fmt_value

FULL_TABLE_MAX = 40  # up to this many results the full table is shorter than a screen
LISTED = 25  # changed results printed per outcome; the rest are counted
CHANGES = (Outcome.REGRESSION, Outcome.IMPROVEMENT)  # one line each; inconclusive: per reason

HEADER = ("stack", "benchmark", "params", "baseline", "current", "ratio", "verdict")
_RIGHT = {"baseline", "current", "ratio"}  # numbers align on the right
_SQUEEZABLE = ("params", "benchmark")  # what gets truncated first when the table is too wide
_GAP = "  "


def _rows(results: Sequence[RunResult]) -> list[tuple[str, ...] | None]:
    """Table rows in report order; None marks a break between stack/benchmark groups."""
    rows: list[tuple[str, ...] | None] = []
    fams = families(results)
    multi_metric = {(s, b) for (s, b, m) in fams if sum(1 for k in fams if k[:2] == (s, b)) > 1}
    prev_group: tuple[str, str] | None = None
    for (stack, bench, metric), members in fams.items():
        if prev_group is not None and prev_group != (stack, bench):
            rows.append(None)
        prev_group = (stack, bench)
        # Name the metric only where one benchmark reports several (e.g. algbw and busbw).
        label = f"{bench}:{metric}" if (stack, bench) in multi_metric else bench
        for r in members:
            m, v = r.measurement, r.verdict
            ref = (
                v.current_median
                if v.baseline_median is None
                else max(v.current_median, v.baseline_median)
            )
            rows.append(
                (
                    stack,
                    label,
                    fmt_params(m.params),
                    fmt_value(v.baseline_median, m.unit, ref=ref),
                    fmt_value(v.current_median, m.unit, ref=ref),
                    fmt_ratio(v.ratio),
                    v.outcome.value.upper(),
                )
            )
    return rows


def _truncate(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(width - 1, 0)] + "~"


def summary_table(results: Sequence[RunResult], width: int = 120, verbose: int = 0) -> list[str]:
    """Lines for pytest's terminal summary; [] when the session measured nothing. verbose > 0
    (pytest -v) prints the full table, 0 the full table of a small session and the changes of
    a large one, < 0 (-q) the changes alone."""
    if not results:
        return []
    if verbose < 0 or (verbose == 0 and len(results) > FULL_TABLE_MAX):
        return changes(results, width, full_hint=verbose == 0)
    return full_table(results, width)


def changes(results: Sequence[RunResult], width: int = 120, *, full_hint: bool = True) -> list[str]:
    """Counts first, then each regression, improvement and inconclusive result in one line."""
    lines = [f"hpccomm: {len(results)} results: {counts_line(results)}"]
    by_stack: dict[str, list[RunResult]] = {}
    for r in sorted_results(results):
        by_stack.setdefault(r.measurement.stack, []).append(r)
    if len(by_stack) > 1:
        lines.append("  " + "; ".join(f"{s} {counts_line(rs)}" for s, rs in by_stack.items()))
    label = len(Outcome.INCONCLUSIVE.value)
    for outcome in CHANGES:
        hits = [r for r in sorted_results(results) if r.verdict.outcome is outcome]
        for r in hits[:LISTED]:
            where = point_name(r.measurement)
            lines.append(f"{outcome.value.upper():<{label}}  {where}: {short_message(r)}")
        if len(hits) > LISTED:
            lines.append(
                f"{outcome.value.upper():<{label}}  ... {len(hits) - LISTED} more "
                "(pytest -v, or the results JSON / HTML report)"
            )
    for why, members in inconclusive_groups(results):
        example = point_name(members[0].measurement)
        lines.append(
            f"{Outcome.INCONCLUSIVE.value.upper():<{label}}  {len(members)} x {why} "
            f"(e.g. {example})"
        )
    new = outcome_counts(results)[Outcome.NEW]
    if new:
        lines.append(
            f"new: {new} results have no baseline on this system yet "
            "(--hpc-update-baselines records them)"
        )
    if full_hint:
        lines.append("every result: pytest -v, or --hpc-results / --hpc-report")
    return [_truncate(ln, width) for ln in lines]


def full_table(results: Sequence[RunResult], width: int = 120) -> list[str]:
    """Every result, one row each, and the counts."""
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


def text_table(rows: Sequence[Sequence[str]], out: TextIO) -> None:
    """Left-aligned text columns, the first row the header, underlined (the CLI's tables)."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for n, row in enumerate(rows):
        out.write("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() + "\n")
        if n == 0:
            out.write("  ".join("-" * w for w in widths) + "\n")
