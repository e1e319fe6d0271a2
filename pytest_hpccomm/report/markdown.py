"""Markdown summary for $GITHUB_STEP_SUMMARY or a PR comment (GitHub-flavoured markdown).

It must fit a PR comment (GitHub refuses more than 65,536 characters) however many results the
session has: 2,238 items without baselines once made 270 KB. So, in the order a reviewer needs:
the gate status, the counts (overall and per stack), what changed one line each (regressions,
improvements), the inconclusive ones counted per reason, the cross-stack table, the
side-by-side pairs, then every result in a compact
table per stack folded in <details> (a row per series: one benchmark's sweep over sizes or
payload schemes), and the environment fingerprint folded too. Whatever
would pass MAX_CHARS is cut where it is and says how many rows are left and where they are
(the HTML report and the results JSON carry every one).
"""

from __future__ import annotations

import json
from typing import Any, Callable, Mapping, Sequence

from pytest_hpccomm import retries
from pytest_hpccomm.baselines.result import FUNCTIONAL, RunResult
from pytest_hpccomm.baselines.verdict import Outcome
from pytest_hpccomm.report import cross_stack as xs
from pytest_hpccomm.report.beside import Pair, pairs
from pytest_hpccomm.report.common import (
    OUTCOME_ORDER,
    fmt_params,
    inconclusive_groups,
    iso_time,
    jsonable,
    metric_of,
    outcome_counts,
    point_name,
    session_fingerprint,
    short_message,
    sorted_results,
)
from pytest_hpccomm.report.series import points_text, series, verdict_counts
from pytest_hpccomm.report.units import fmt_ratio, fmt_value

ICONS = {
    Outcome.REGRESSION: "❌",
    Outcome.INCONCLUSIVE: "⚠️",
    Outcome.IMPROVEMENT: "🚀",
    Outcome.NEW: "🆕",
    Outcome.PASS: "✅",
}
# Below GitHub's 65,536 for a comment, counted as GitHub counts (UTF-16 code units: an emoji
# is two), leaving room for a heading a CI step may put around it.
MAX_CHARS = 60_000
LISTED = 40  # changed results listed one line each, per outcome; the rest are counted
MESSAGE_CHARS = 300  # a verdict message longer than this is cut in the list
FINGERPRINT_CHARS = 4_000
# The most a section may take of MAX_CHARS, so the per-stack tables after them keep room.
SHARE = {"changes": 20_000, "cross-stack": 18_000, "side by side": 8_000}
CHANGES = ((Outcome.REGRESSION, "Regressions"), (Outcome.IMPROVEMENT, "Improvements"))


def units(text: str) -> int:
    """Length as GitHub counts it (UTF-16 code units)."""
    return len(text.encode("utf-16-le")) // 2


class Budget:
    """What is left of MAX_CHARS; every line costs its length plus its newline."""

    def __init__(self, limit: int) -> None:
        self.left = limit

    @staticmethod
    def cost(lines: Sequence[str]) -> int:
        return sum(units(ln) + 1 for ln in lines)

    def fits(self, lines: Sequence[str], keep: int = 0) -> bool:
        return self.cost(lines) + keep <= self.left

    def take(self, lines: Sequence[str]) -> list[str]:
        self.left -= self.cost(lines)
        return list(lines)

    def maybe(self, lines: Sequence[str]) -> list[str]:
        """`lines` if they fit, else nothing."""
        return self.take(lines) if self.fits(lines) else []


def _cell(text: str) -> str:
    # A pipe would end the cell; a newline would end the table.
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _cut(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _value(x: float | None, unit: str, ref: float | None) -> str:
    return fmt_value(x, unit, ref=ref, ascii_only=False)


def _where(session: Mapping[str, Any]) -> str:
    """Where the rows this summary leaves out are (the session names the files when it can)."""
    names = [str(session[k]) for k in ("report", "results") if session.get(k)]
    return " / ".join(f"`{n}`" for n in names) if names else "report.html / results.json"


def _table(
    budget: Budget, head: list[str], rows: list[str], tail: list[str], where: str
) -> list[str]:
    """head + as many rows as fit + a line counting the rest + tail."""
    more = f"\n_… {len(rows):,} more rows in {where}_"  # the longest "more" line it may need
    reserve = budget.cost([more, *tail])
    if not budget.fits(head, reserve):
        return (
            budget.take([f"_{len(rows):,} rows in {where} (this summary's size cap)_"])
            if budget.fits([more])
            else []
        )
    out = budget.take(head)
    shown = 0
    for row in rows:
        if not budget.fits([row], reserve):
            break
        out += budget.take([row])
        shown += 1
    if shown < len(rows):
        out += budget.take(["", f"_… {len(rows) - shown:,} more rows in {where}_"])
    return out + budget.take(tail)


def _headline(results: Sequence[RunResult], session: Mapping[str, Any]) -> list[str]:
    counts = outcome_counts(results)
    parts = [f"{ICONS[o]} {n:,} {o.value}" for o, n in counts.items() if n]
    lines = ["## pytest-hpccomm: " + (" · ".join(parts) or "no results")]
    gate = session.get("gate") or {}
    if gate.get("line"):  # the gate's power, before anything else
        lines.append(f"**{gate['line'].removeprefix('hpccomm ')}**")
        lines += [f"<sub>{h}</sub>" for h in gate.get("hints") or []]
    where = " · ".join(
        f"{k} `{session[k]}`" for k in ("system", "fabric", "profile") if session.get(k)
    )
    if where:
        lines.append(where)
    lines += _paired_line(session)
    if session.get("retries"):  # named transient causes only (retries.py): how many, why
        lines.append("<sub>" + retries.summary_line(session["retries"]) + "</sub>")
    when = [f"{k} {iso_time(session[k])}" for k in ("started", "finished") if session.get(k)]
    if when:
        lines.append("<sub>" + ", ".join(when) + "</sub>")
    return lines


def _paired_line(session: Mapping[str, Any]) -> list[str]:
    """What a paired run judged against: a nightly's reference build, or an A/B's base."""
    paired = session.get("paired") or {}
    if not paired:
        return []
    reference = session.get("reference") or {}
    parts = [
        f"{stack}: candidate `{sides['candidate']}` against "
        + ("the reference" if stack in reference else "base")
        + f" `{sides['base']}`"
        for stack, sides in sorted(paired.items())
    ]
    rounds = session.get("ab_rounds")
    return [
        "judged in paired rounds"
        + (f" ({rounds} per point)" if rounds else "")
        + ": "
        + "; ".join(parts)
    ]


def _by_stack(results: Sequence[RunResult]) -> dict[str, list[RunResult]]:
    out: dict[str, list[RunResult]] = {}
    for r in sorted_results(results):
        out.setdefault(r.measurement.stack, []).append(r)
    return out


def _stack_counts(stacks: Mapping[str, Sequence[RunResult]]) -> list[str]:
    """Outcomes per stack, one small table: where the changes are at a glance."""
    if len(stacks) < 2:
        return []
    shown = [
        o
        for o in OUTCOME_ORDER
        if any(r.verdict.outcome is o for rs in stacks.values() for r in rs)
    ]
    lines = [
        "",
        "| stack | results | " + " | ".join(f"{ICONS[o]} {o.value}" for o in shown) + " |",
        "|---|--:|" + "--:|" * len(shown),
    ]
    for stack, rs in stacks.items():
        c = outcome_counts(rs)
        lines.append(
            f"| {_cell(stack)} | {len(rs):,} | "
            + " | ".join(f"{c[o]:,}" if c[o] else "" for o in shown)
            + " |"
        )
    return lines


def _changes(results: Sequence[RunResult], budget: Budget, where: str) -> list[str]:
    """Regressions and improvements one line each with the verdict's message (at most LISTED
    per outcome), then the inconclusive ones counted per reason, one example each."""
    lines: list[str] = []
    ordered = sorted_results(results)
    for outcome, title in CHANGES:
        hits = [r for r in ordered if r.verdict.outcome is outcome]
        if not hits:
            continue
        head = ["", f"### {title} ({len(hits):,})", ""]
        items = []
        for r in hits[:LISTED]:
            name = point_name(r.measurement, "/")
            items.append(
                f"- {ICONS[outcome]} **{_cell(_cut(name, 160))}**: "
                f"{_cell(_cut(short_message(r), MESSAGE_CHARS))}"
            )
        unlisted = len(hits) - len(items)
        tail = [f"- … {unlisted:,} more {outcome.value} in {where}"] if unlisted else []
        lines += _table(budget, head, items, tail, where)
    groups = inconclusive_groups(results)
    if groups:
        total = sum(len(g) for _, g in groups)
        head = [
            "",
            f"### Inconclusive ({total:,}), by reason",
            "",
            "| points | reason | e.g. |",
            "|--:|---|---|",
        ]
        rows = []
        for why, members in groups:
            example = point_name(members[0].measurement, "/")
            rows.append(
                f"| {len(members):,} | {_cell(_cut(why, 160))} | {_cell(_cut(example, 120))} |"
            )
        lines += _table(budget, head, rows, [], where)
    new = outcome_counts(results)[Outcome.NEW]
    if new:
        lines += budget.maybe(
            [
                "",
                f"{ICONS[Outcome.NEW]} {new:,} results have no baseline on "
                "this system yet; `--hpc-update-baselines` records them.",
            ]
        )
    return lines


def _cross_stack(results: Sequence[RunResult], budget: Budget, where: str) -> list[str]:
    cs = xs.cross_stack(results)
    if cs is None:
        return []
    head = [
        "",
        "### Cross-stack: the same message sizes through each stack",
        "",
        f"<details><summary>{len(cs.sizes)} sizes, {len(cs.labels())} paths: latency "
        "and bandwidth side by side, each against the fastest path at that size"
        "</summary>",
        "",
        "| " + " | ".join(xs.HEADER) + " |",
        "|--:|---|--:|---|--:|---|---|",
    ]
    rows = []
    for size in cs.sizes:
        for i, row in enumerate(cs.rows[size]):
            rows.append("| " + " | ".join(_cell(c) for c in xs.cells(row, i == 0)) + " |")
    tail = ["", *(f"- {_cell(n)}" for n in xs.notes(cs)), "", "</details>"]
    return _table(budget, head, rows, tail, where)


def _side_by_side(found: Sequence[Pair], budget: Budget, where: str) -> list[str]:
    """One stack's point beside another's at the same payload (report/beside.py)."""
    if not found:
        return []
    head = [
        "",
        "### Side by side",
        "",
        "| pair | params | this | beside | ratio |",
        "|---|---|--:|--:|--:|",
    ]
    rows = []
    for p in found:
        m, o = p.this.measurement, p.other.measurement
        a, b = p.this.verdict.current_median, p.other.verdict.current_median
        # timings without verdicts (an emulated device) say so beside their ratio
        only = " — function only" if FUNCTIONAL in m.extra or FUNCTIONAL in o.extra else ""
        rows.append(
            "| "
            + " | ".join(
                _cell(c)
                for c in (
                    f"{p.label} ({metric_of(m)}){only}",
                    fmt_params(m.params),
                    _value(a, m.unit, max(a, b)),
                    _value(b, o.unit, max(a, b)),
                    f"{p.ratio:.2f}x",
                )
            )
            + " |"
        )
    return _table(budget, head, rows, [], where)


def _stack_rows(results: Sequence[RunResult]) -> tuple[list[str], list[str]]:
    """(header lines, one row per series: its points, its medians from the first point to the
    last, the range of its ratios to baseline where it has any, its verdicts)."""
    based = any(r.verdict.baseline_median is not None for r in results)
    head = [
        "| benchmark | params | points | median, first → last | "
        + ("ratio to baseline | " if based else "")
        + "verdicts |",
        "|---|---|---|--:|" + ("--:|" if based else "") + "---|",
    ]
    rows = []
    for (_, bench, metric, params), members in series(results).items():
        m0, m1 = members[0].measurement, members[-1].measurement
        a, b = members[0].verdict.current_median, members[-1].verdict.current_median
        value = (
            _value(a, m0.unit, None)
            if len(members) == 1
            else f"{_value(a, m0.unit, None)} → {_value(b, m1.unit, None)}"
        )
        ratios = [r.verdict.ratio for r in members if r.verdict.ratio is not None]
        ratio = (
            "-"
            if not ratios
            else fmt_ratio(ratios[0])
            if len(ratios) == 1
            else f"{fmt_ratio(min(ratios))}–{fmt_ratio(max(ratios))}"
        )
        name = bench if metric == bench else f"{bench} ({metric})"
        rows.append(
            "| "
            + " | ".join(
                _cell(c)
                for c in (
                    name,
                    params,
                    points_text(members),
                    value,
                    *((ratio,) if based else ()),
                    verdict_counts(members, ICONS),
                )
            )
            + " |"
        )
    return head, rows


def _closers(stacks: Mapping[str, Sequence[RunResult]], where: str) -> dict[str, str]:
    """The line a stack gets when its table does not fit: how many results, and where."""
    return {s: f"- **{_cell(s)}**: {len(rs):,} results, in {where}" for s, rs in stacks.items()}


def _stacks(stacks: Mapping[str, Sequence[RunResult]], budget: Budget, where: str) -> list[str]:
    lines = budget.maybe(["", "### Every result, per stack"])
    # each stack's closing line is kept back, so a cut table still ends its <details>
    close = _closers(stacks, where)
    owed = Budget.cost(list(close.values()))
    for stack, rs in stacks.items():
        owed -= Budget.cost([close[stack]])
        counts = ", ".join(
            f"{ICONS[o]} {n:,} {o.value}" for o, n in outcome_counts(rs).items() if n
        )
        head, rows = _stack_rows(rs)
        summary = f"<details><summary><b>{_cell(stack)}</b>: {counts}</summary>"
        room = Budget(budget.left - owed)
        if not room.fits([summary, "", *head, "", "</details>"], 300):
            lines += budget.take([close[stack]])
            continue
        got = _table(room, ["", summary, "", *head], rows, ["", "</details>"], where)
        budget.left = room.left + owed
        lines += got
    return lines


def _within(budget: Budget, limit: int, lines: Callable[[Budget], list[str]]) -> list[str]:
    """A section that may use `limit` of the budget at most, so the ones after it get room."""
    part = Budget(min(budget.left, limit))
    out = lines(part)
    budget.left -= min(budget.left, limit) - part.left
    return out


def _fingerprint(results: Sequence[RunResult], session: Mapping[str, Any]) -> list[str]:
    fp = session_fingerprint(results, session)
    if not fp:
        return []
    text = json.dumps(jsonable(fp), indent=2, sort_keys=True)
    if len(text) > FINGERPRINT_CHARS:
        text = text[:FINGERPRINT_CHARS] + f"\n… ({len(text):,} characters in all: {_where({})})"
    return [
        "",
        "<details><summary>Environment fingerprint</summary>",
        "",
        "```json",
        text,
        "```",
        "",
        "</details>",
    ]


def _suite_cost(session: Mapping[str, Any]) -> list[str]:
    """Time per stack (report/stack_time.py): what the suite itself cost, folded."""
    times = session.get("stack_seconds") or {}
    if not times:
        return []
    rows = [
        f"| {_cell(stack)} | {t['seconds']:.0f} s | {t['items']} | "
        + (
            f"{_cell(_cut(t['slowest'][0]['item'], 90))} ({t['slowest'][0]['seconds']:.0f} s)"
            if t["slowest"]
            else ""
        )
        + " |"
        for stack, t in times.items()
    ]
    return [
        "",
        "<details><summary>Time per stack (setup + call + teardown)</summary>",
        "",
        "| stack | time | items | slowest item |",
        "|---|---|---|---|",
        *rows[:20],
        "",
        "</details>",
    ]


def markdown_summary(results: Sequence[RunResult], session: Mapping[str, Any]) -> str:
    """GitHub-flavoured markdown of at most MAX_CHARS; valid (headline only) for an empty
    session too."""
    where = _where(session)
    stacks = _by_stack(results)
    head = _headline(results, session) + _stack_counts(stacks)
    foot = _suite_cost(session) + _fingerprint(results, session)
    budget = Budget(MAX_CHARS - Budget.cost(foot))
    lines = budget.take(head)
    # the per-stack part's heading and closing lines are kept back from the sections before it
    owed = Budget.cost(["", "### Every result, per stack", *_closers(stacks, where).values()])
    budget.left -= owed
    lines += _within(budget, SHARE["changes"], lambda b: _changes(results, b, where))
    lines += _within(budget, SHARE["cross-stack"], lambda b: _cross_stack(results, b, where))
    lines += _within(
        budget,
        SHARE["side by side"],
        lambda b: _side_by_side(pairs(sorted_results(results)), b, where),
    )
    budget.left += owed
    if results:
        lines += _stacks(stacks, budget, where)
    return _capped("\n".join(lines + foot) + "\n", where)


def _capped(text: str, where: str) -> str:
    """The last guard of the cap (the sections above stay within it): cut at a line."""
    if units(text) <= MAX_CHARS:
        return text
    note = f"\n\n_… cut at this summary's size cap: everything is in {where}_\n"
    keep = MAX_CHARS - units(note)
    out, used = [], 0
    for ln in text.splitlines():
        used += units(ln) + 1
        if used > keep:
            break
        out.append(ln)
    return "\n".join(out) + note
