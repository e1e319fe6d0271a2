"""One self-contained HTML page: plots per family, every result in a table, the fingerprint.

Self-contained (inline CSS, plots as base64 PNG, no script, no external fetch) so the file can be
attached to a CI run, mailed or opened from an air-gapped cluster login node.
"""

from __future__ import annotations

import base64
import json
import os
from html import escape
from pathlib import Path
from typing import Any, Mapping, Sequence

from pytest_hpccomm.baselines.result import RunResult
from pytest_hpccomm.baselines.verdict import Outcome
from pytest_hpccomm.files import atomic_write
from pytest_hpccomm.report import cross_stack as xs
from pytest_hpccomm.report.common import (
    families,
    fmt_params,
    inconclusive_groups,
    iso_time,
    jsonable,
    outcome_counts,
    point_name,
    session_fingerprint,
    short_message,
    sorted_results,
    summary_stats,
)
from pytest_hpccomm.report.cross_plot import cross_stack_png
from pytest_hpccomm.report.plots import OUTCOME_COLOURS, family_png
from pytest_hpccomm.report.scheme_plot import is_scheme_family, scheme_png
from pytest_hpccomm.report.units import fmt_range, fmt_ratio, fmt_value

# what changed, listed under the counts (the table below has every result)
ATTENTION = (Outcome.REGRESSION, Outcome.IMPROVEMENT)  # inconclusive: counted per reason
LISTED = 100
_TINTS = {
    Outcome.REGRESSION: "#fde0df",
    Outcome.IMPROVEMENT: "#dff3df",
    Outcome.INCONCLUSIVE: "#ffedd6",
    Outcome.NEW: "#ececec",
    Outcome.PASS: "#ffffff",
}

# The page rules the run report and the trends page (trends.py) share; each adds its own.
PAGE_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1b1b1b;
 margin:0;background:#f6f7f9}
main{max-width:1240px;margin:0 auto;padding:20px 28px 40px}
h1{font-size:24px;margin:0 0 4px}
h2{font-size:18px;margin:28px 0 10px;border-bottom:1px solid #d8dbe0;padding-bottom:4px}
figure img{display:block;max-width:100%;height:auto;margin:0 auto}
table{border-collapse:collapse;width:100%;background:#fff;font-size:12.5px}
th,td{border:1px solid #d8dbe0;padding:3px 7px;text-align:left;vertical-align:top}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
"""

_CSS = (
    PAGE_CSS
    + """
.meta{color:#555;margin:0 0 12px}
.meta b{color:#1b1b1b;font-weight:600}
.badges span{display:inline-block;border-radius:12px;padding:2px 12px;margin:0 6px 6px 0;
 color:#fff;font-weight:600}
ul.attn{padding-left:20px} ul.attn li{margin:3px 0}
figure{background:#fff;border:1px solid #d8dbe0;border-radius:6px;margin:0 0 16px;padding:8px}
.scroll{overflow-x:auto}
th{background:#eef0f3;position:sticky;top:0}
td.msg{color:#444;font-size:12px}
td.nw{white-space:nowrap} .sub{color:#777;font-size:11.5px}
td.v{font-weight:600;white-space:nowrap}
details{background:#fff;border:1px solid #d8dbe0;border-radius:6px;padding:6px 10px}
pre{font-size:12px;overflow-x:auto}
.empty{padding:16px;background:#fff;border:1px solid #d8dbe0;border-radius:6px}
table.xs tr.first td{border-top:2px solid #9aa0a8}
ul.notes{color:#555;font-size:12px}
"""
)


def _e(x: Any) -> str:
    return escape(str(x), quote=True)


def _header(results: Sequence[RunResult], session: Mapping[str, Any]) -> list[str]:
    out = ["<h1>pytest-hpccomm performance report</h1>"]
    gate = session.get("gate") or {}
    if gate.get("line"):  # the gate's power, on the first screen
        off = gate.get("armed") == 0
        out.append(
            f'<p class="gate" style="font-weight:bold;padding:6px;border-left:6px solid '
            f'{"#c0392b" if off else "#27ae60"}">'
            f"{_e(gate['line'].removeprefix('hpccomm '))}</p>"
        )
        out += [f'<p class="sub">{_e(h)}</p>' for h in gate.get("hints") or []]
    facts = [(k, session.get(k)) for k in ("system", "fabric", "profile")]
    facts += [(k, iso_time(session.get(k))) for k in ("started", "finished")]
    shown = " &nbsp;·&nbsp; ".join(f"{_e(k)} <b>{_e(v)}</b>" for k, v in facts if v)
    if shown:
        out.append(f'<p class="meta">{shown}</p>')
    counts = outcome_counts(results)
    badges = "".join(
        f'<span style="background:{OUTCOME_COLOURS[o]}">{n} {_e(o.value)}</span>'
        for o, n in counts.items()
        if n
    )
    out.append(f'<div class="badges">{badges}</div>')
    attn = [r for r in sorted_results(results) if r.verdict.outcome in ATTENTION]
    attn.sort(key=lambda r: ATTENTION.index(r.verdict.outcome))
    if attn:
        items = "".join(
            f'<li><b style="color:{OUTCOME_COLOURS[r.verdict.outcome]}">'
            f"{_e(r.verdict.outcome.value)}</b> {_e(r.measurement.stack)}/"
            f"{_e(r.measurement.benchmark)} {_e(fmt_params(r.measurement.params))}: "
            f"{_e(short_message(r))}</li>"
            for r in attn[:LISTED]
        )
        more = (
            f"<li>… {len(attn) - LISTED:,} more in the table below</li>"
            if len(attn) > LISTED
            else ""
        )
        out.append(f'<ul class="attn">{items}{more}</ul>')
    groups = inconclusive_groups(results)
    if groups:
        colour = OUTCOME_COLOURS[Outcome.INCONCLUSIVE]
        rows = "".join(
            f'<li><b style="color:{colour}">{len(members):,} inconclusive</b>: {_e(why)} '
            f'<span class="sub">(e.g. {_e(point_name(members[0].measurement, "/"))}; every one '
            f"in the table below)</span></li>"
            for why, members in groups[:12]
        )
        rest = (
            f"<li>… {len(groups) - 12} more reasons in the table below</li>"
            if len(groups) > 12
            else ""
        )
        out.append(f'<ul class="attn">{rows}{rest}</ul>')
    return out


def _cross_stack(results: Sequence[RunResult]) -> list[str]:
    """The same message sizes through each stack (cross_stack.py): one figure, one table."""
    cs = xs.cross_stack(results)
    if cs is None:
        return []
    png = base64.b64encode(cross_stack_png(cs)).decode("ascii")
    out = [
        "<h2>Cross-stack: the same message sizes through each stack</h2>",
        f'<figure><img alt="cross-stack latency and bandwidth: {len(cs.labels())} paths" '
        f'src="data:image/png;base64,{png}"></figure>',
        '<div class="scroll"><table class="xs">',
        "<tr>" + "".join(f"<th>{_e(h)}</th>" for h in xs.HEADER) + "</tr>",
    ]
    for size in cs.sizes:
        for i, row in enumerate(cs.rows[size]):
            cells = xs.cells(row, i == 0)
            tds = [
                f'<td class="{"num" if j in (0, 2, 4) else "nw"}"'
                + (f' title="{_e(row.link_source)}"' if j == 6 and row.link_source else "")
                + f">{_e(c)}</td>"
                for j, c in enumerate(cells)
            ]
            top = ' class="first"' if i == 0 else ""
            out.append(f"<tr{top}>" + "".join(tds) + "</tr>")
    out.append("</table></div>")
    out.append('<ul class="notes">' + "".join(f"<li>{_e(n)}</li>" for n in xs.notes(cs)) + "</ul>")
    return out


def figure_count(results: Sequence[RunResult]) -> int:
    """How many figures render_html draws: one per family, and the cross-stack one if any
    (what a look at the page must find, report/screenshot.py)."""
    return len(families(results)) + (xs.cross_stack(results) is not None)


def _plots(results: Sequence[RunResult]) -> list[str]:
    out = ["<h2>Plots</h2>"]
    for (stack, bench, metric), members in families(results).items():
        title = f"{stack} · {bench}" + (f" · {metric}" if metric != bench else "")
        fig = scheme_png if is_scheme_family(members) else family_png
        png = base64.b64encode(fig(members, title)).decode("ascii")
        alt = f"{title}: {len(members)} results"
        out.append(f'<figure><img alt="{_e(alt)}" src="data:image/png;base64,{png}"></figure>')
    return out


def _f(x: float | int | None) -> float | None:
    return None if x is None else float(x)


def _table(results: Sequence[RunResult]) -> list[str]:
    cols = (
        "benchmark",
        "params",
        "n",
        "baseline",
        "current",
        "p5–p95",
        "ratio",
        "ratio CI",
        "p",
        "verdict",
        "message",
    )
    out = [
        "<h2>All results</h2>",
        '<div class="scroll"><table>',
        "<tr>" + "".join(f"<th>{_e(c)}</th>" for c in cols) + "</tr>",
    ]
    for r in sorted_results(results):
        m, v = r.measurement, r.verdict
        s = summary_stats(m.samples)
        ref = (
            v.current_median
            if v.baseline_median is None
            else max(v.current_median, v.baseline_median)
        )

        def val(x: Any) -> str:  # used in this iteration only
            return fmt_value(
                None if x is None else float(x),
                m.unit,  # noqa: B023
                ref=ref,  # noqa: B023
                ascii_only=False,
            )

        spread = fmt_range(_f(s["p5"]), _f(s["p95"]), m.unit, ref=ref, ascii_only=False)
        ci = (
            "-"
            if v.ci_low is None or v.ci_high is None
            else f"{fmt_ratio(v.ci_low)} – {fmt_ratio(v.ci_high)}"
        )
        p = "-" if v.p_value is None else f"{v.p_value:.2g}"
        metric = f'<br><span class="sub">{_e(m.metric)}</span>' if m.metric else ""
        cells = [
            f'<td class="nw">{_e(m.stack)}/{_e(m.benchmark)}{metric}</td>',
            f'<td class="nw">{_e(fmt_params(m.params))}</td>',
            f'<td class="num">{s["n"]}</td>',
            f'<td class="num">{_e(val(v.baseline_median))}</td>',
            f'<td class="num">{_e(val(v.current_median))}</td>',
            f'<td class="num">{_e(spread)}</td>',
            f'<td class="num">{_e(fmt_ratio(v.ratio))}</td>',
            f'<td class="num">{_e(ci)}</td>',
            f'<td class="num">{_e(p)}</td>',
            f'<td class="v" style="color:{OUTCOME_COLOURS[v.outcome]}">{_e(v.outcome.value)}</td>',
            f'<td class="msg">{_e(short_message(r))}</td>',
        ]
        out.append(
            f'<tr style="background:{_TINTS[v.outcome]}" title="{_e(r.nodeid)}">'
            + "".join(cells)
            + "</tr>"
        )
    out.append("</table></div>")
    return out


def _fp_gist(fp: Any) -> str:
    """A few scalar fields, so the folded fingerprint still says which machine this was."""
    if not isinstance(fp, Mapping):
        return ""
    items = [f"{k} {v}" for k, v in fp.items() if isinstance(v, (str, int, float))][:4]
    return (": " + " · ".join(items)) if items else ""


def render_html(results: Sequence[RunResult], session: Mapping[str, Any]) -> str:
    """The page as text (write_html_report writes it)."""
    title = "pytest-hpccomm report" + (f" — {session['system']}" if session.get("system") else "")
    body = _header(results, session)
    if results:
        body += _cross_stack(results) + _plots(results) + _table(results)
    else:
        body.append('<p class="empty">No performance results in this session.</p>')
    fp = session_fingerprint(results, session)
    if fp:
        text = json.dumps(jsonable(fp), indent=2, sort_keys=True)
        body += [
            "<h2>Environment</h2>",
            f"<details><summary>Fingerprint{_e(_fp_gist(fp))}</summary>"
            f"<pre>{_e(text)}</pre></details>",
        ]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta name="viewport" content="width=device-width"><title>{_e(title)}</title>'
        f"<style>{_CSS}</style></head><body><main>\n"
        + "\n".join(body)
        + "\n</main></body></html>\n"
    )


def write_html_report(
    path: str | os.PathLike[str], results: Sequence[RunResult], session: Mapping[str, Any]
) -> Path:
    """Write the self-contained HTML report atomically."""
    return atomic_write(path, render_html(results, session))
