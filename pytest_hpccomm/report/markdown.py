"""Markdown summary for $GITHUB_STEP_SUMMARY or a PR comment (GitHub-flavoured markdown).

Order follows what a reviewer needs: the counts, then each regression's one-line message, then a
table per stack, then the environment fingerprint folded away in <details>.
"""

from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

from pytest_hpccomm.baselines.verdict import Outcome
from pytest_hpccomm.baselines.result import RunResult
from pytest_hpccomm.report.common import (OUTCOME_ORDER, fmt_params, iso_time, jsonable,
                                          metric_of, outcome_counts, session_fingerprint,
                                          short_message, sorted_results)
from pytest_hpccomm.baselines.result import FUNCTIONAL
from pytest_hpccomm.report.beside import Pair, pairs
from pytest_hpccomm.report.units import fmt_ratio, fmt_value

ICONS = {
    Outcome.REGRESSION: "❌", Outcome.INCONCLUSIVE: "⚠️", Outcome.IMPROVEMENT: "🚀",
    Outcome.NEW: "🆕", Outcome.PASS: "✅",
}


def _cell(text: str) -> str:
    # A pipe would end the cell; a newline would end the table.
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _value(x: float | None, unit: str, ref: float | None) -> str:
    return fmt_value(x, unit, ref=ref, ascii_only=False)


def _headline(results: Sequence[RunResult], session: Mapping[str, Any]) -> list[str]:
    counts = outcome_counts(results)
    worst = next((o for o in OUTCOME_ORDER if counts[o]), Outcome.PASS)
    parts = [f"{ICONS[o]} {n} {o.value}" for o, n in counts.items() if n]
    where = " · ".join(f"{k} `{session[k]}`" for k in ("system", "fabric", "profile")
                       if session.get(k))
    lines = [f"## pytest-hpccomm: " + (" · ".join(parts) or f"{ICONS[worst]} no results")]
    if where:
        lines.append(where)
    when = [f"{k} {iso_time(session[k])}" for k in ("started", "finished") if session.get(k)]
    if when:
        lines.append("<sub>" + ", ".join(when) + "</sub>")
    return lines


def _attention(results: Sequence[RunResult]) -> list[str]:
    """Regressions (then inconclusive results) one line each, with the verdict's own message."""
    lines: list[str] = []
    for outcome, title in ((Outcome.REGRESSION, "Regressions"),
                           (Outcome.INCONCLUSIVE, "Inconclusive (too noisy to judge)")):
        hits = [r for r in sorted_results(results) if r.verdict.outcome is outcome]
        if not hits:
            continue
        lines += ["", f"### {title}", ""]
        for r in hits:
            m = r.measurement
            where = " ".join(x for x in (f"{m.stack}/{m.benchmark}", fmt_params(m.params)) if x)
            lines.append(f"- {ICONS[outcome]} **{_cell(where)}**: {_cell(short_message(r))}")
    return lines


def _stack_table(stack: str, results: Sequence[RunResult]) -> list[str]:
    lines = ["", f"### {stack}", "",
             "| benchmark | params | baseline | current | ratio | verdict |",
             "|---|---|--:|--:|--:|---|"]
    for r in results:
        m, v = r.measurement, r.verdict
        ref = v.current_median if v.baseline_median is None else max(
            v.current_median, v.baseline_median)
        bench = m.benchmark if metric_of(m) == m.benchmark else f"{m.benchmark} ({metric_of(m)})"
        verdict = f"{ICONS[v.outcome]} {v.outcome.value}"
        lines.append("| " + " | ".join(_cell(c) for c in (
            bench, fmt_params(m.params), _value(v.baseline_median, m.unit, ref),
            _value(v.current_median, m.unit, ref), fmt_ratio(v.ratio), verdict)) + " |")
    return lines


def _side_by_side(found: Sequence[Pair]) -> list[str]:
    """One stack's point beside another's at the same payload (report/beside.py)."""
    if not found:
        return []
    lines = ["", "### Side by side", "",
             "| pair | params | this | beside | ratio |", "|---|---|--:|--:|--:|"]
    for p in found:
        m, o = p.this.measurement, p.other.measurement
        a, b = p.this.verdict.current_median, p.other.verdict.current_median
        # timings without verdicts (an emulated device) say so beside their ratio
        only = " — function only" if FUNCTIONAL in m.extra or FUNCTIONAL in o.extra else ""
        lines.append("| " + " | ".join(_cell(c) for c in (
            f"{p.label} ({metric_of(m)}){only}", fmt_params(m.params),
            _value(a, m.unit, max(a, b)),
            _value(b, o.unit, max(a, b)), f"{p.ratio:.2f}x")) + " |")
    return lines


def markdown_summary(results: Sequence[RunResult], session: Mapping[str, Any]) -> str:
    """GitHub-flavoured markdown; valid (headline only) for an empty session too."""
    lines = _headline(results, session)
    lines += _attention(results)
    by_stack: dict[str, list[RunResult]] = {}
    for r in sorted_results(results):
        by_stack.setdefault(r.measurement.stack, []).append(r)
    for stack, members in by_stack.items():
        lines += _stack_table(stack, members)
    lines += _side_by_side(pairs(sorted_results(results)))
    fp = session_fingerprint(results, session)
    if fp:
        text = json.dumps(jsonable(fp), indent=2, sort_keys=True)
        lines += ["", "<details><summary>Environment fingerprint</summary>", "",
                  "```json", text, "```", "", "</details>"]
    return "\n".join(lines) + "\n"
