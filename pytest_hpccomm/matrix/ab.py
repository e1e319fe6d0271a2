"""The paired A/B table between adjacent releases (pure): one row per measured point of each
pair, read from the paired run's results JSON (candidate = the newer release, base = the older):
both medians, the paired ratio with its interval, the verdict and the rounds it rests on; and
the pair's items that failed (a point that could not be judged: a side's job failed, or its
result was wrong), read from the run's JUnit XML."""

from __future__ import annotations

import html
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class AbRow:
    base: str
    candidate: str
    benchmark: str
    point: str  # the point's other parameters: "size=8 placement=loopback"
    unit: str
    direction: str  # "lower" or "higher" is better
    base_median: float
    candidate_median: float
    ratio: float  # candidate / base (the verdict's paired ratio)
    ci_low: float
    ci_high: float
    outcome: str  # the paired verdict: pass, regression, improvement, inconclusive
    pairs: int  # job pairs (rounds) the verdict rests on


@dataclass(frozen=True)
class AbPair:
    base: str
    candidate: str
    rows: tuple[AbRow, ...]
    did_not_run: str = ""
    failures: tuple[str, ...] = ()  # "item: its message" of each item of the run that failed
    known: tuple[str, ...] = ()  # "item: the defect" of each item a known defect ended (xfail)


def read_pair(path: Path, base: str, candidate: str, stack: str) -> tuple[AbRow, ...]:
    """The judged records of a paired run's results JSON (`--hpc-results`)."""
    doc: dict[str, Any] = json.loads(path.read_text())
    rows = []
    for rec in doc.get("results", []):
        m, v = rec["measurement"], rec.get("verdict") or {}
        if "ratio" not in v or v.get("ratio") is None:
            continue
        params = {k: x for k, x in m["params"].items() if k != stack}
        rows.append(
            AbRow(
                base=base,
                candidate=candidate,
                benchmark=m["benchmark"],
                point=" ".join(f"{k}={x}" for k, x in sorted(params.items())),
                unit=m["unit"],
                direction=m["direction"],
                base_median=float(v["baseline_median"]),
                candidate_median=float(v["current_median"]),
                ratio=float(v["ratio"]),
                ci_low=float(v["ci_low"]),
                ci_high=float(v["ci_high"]),
                outcome=str(v["outcome"]),
                pairs=int(v.get("n_current") or 0),  # paired: one job of each side a round
            )
        )
    return tuple(sorted(rows, key=lambda r: (r.benchmark, _size(r.point), r.point)))


def _size(point: str) -> int:
    for part in point.split():
        if part.startswith("size="):
            try:
                return int(part[5:])
            except ValueError:
                return 0
    return 0


def _g(x: float) -> str:
    return f"{x:.4g}"


HEADER = (
    "base → candidate",
    "benchmark",
    "point",
    "base median",
    "candidate median",
    "ratio (98 % CI)",
    "verdict",
    "pairs",
)


def cells(r: AbRow) -> list[str]:
    return [
        f"{r.base} → {r.candidate}",
        r.benchmark,
        r.point,
        f"{_g(r.base_median)} {r.unit}",
        f"{_g(r.candidate_median)} {r.unit}",
        f"{r.ratio:.3f} ({r.ci_low:.3f}–{r.ci_high:.3f})",
        r.outcome,
        str(r.pairs),
    ]


def markdown(pairs: list[AbPair], command: str) -> str:
    out = [
        f"Command (each pair): `{command}`",
        "",
        "| " + " | ".join(HEADER) + " |",
        "|" + "---|" * len(HEADER),
    ]
    for p in pairs:
        if p.did_not_run:
            out.append(f"| {p.base} → {p.candidate} | did not run: {p.did_not_run} |" + " |" * 6)
        for r in p.rows:
            c = cells(r)
            if r.outcome in ("regression", "improvement"):
                c[6] = f"**{c[6]}**"
            out.append("| " + " | ".join(c) + " |")
        for f in p.failures:
            out.append(f"| {p.base} → {p.candidate} | **failed**: {_cell(f)} |" + " |" * 6)
        for k in p.known:
            out.append(
                f"| {p.base} → {p.candidate} | not judged, known defect: {_cell(k)} |" + " |" * 6
            )
    out += [
        "",
        "The ratio is candidate over base of the paired medians (a time: above 1 is "
        "slower; a rate: below 1 is slower); the verdict is the paired rule's at the run's "
        "tolerance (docs: explanation/paired-ab). A failed item has no verdict: its point "
        "could not be judged (its message names the side); neither has an item a known "
        "defect ended.",
    ]
    return "\n".join(out) + "\n"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def html_table(pairs: list[AbPair]) -> str:
    e = html.escape
    rows = []
    for p in pairs:
        if p.did_not_run:
            rows.append(
                f"<tr><td>{e(p.base)} → {e(p.candidate)}</td>"
                f"<td colspan='7'>did not run: {e(p.did_not_run)}</td></tr>"
            )
        for r in p.rows:
            cls = {"regression": "fail", "improvement": "pass"}.get(r.outcome, "none")
            tds = "".join(f"<td>{e(c)}</td>" for c in cells(r)[:6])
            rows.append(f"<tr>{tds}<td class='{cls}'>{e(r.outcome)}</td><td>{r.pairs}</td></tr>")
        for f in p.failures:
            rows.append(
                f"<tr><td>{e(p.base)} → {e(p.candidate)}</td>"
                f"<td colspan='7' class='fail'>failed: {e(f)}</td></tr>"
            )
        for k in p.known:
            rows.append(
                f"<tr><td>{e(p.base)} → {e(p.candidate)}</td>"
                f"<td colspan='7' class='none'>not judged, known defect: {e(k)}</td></tr>"
            )
    head = "".join(f"<th>{e(h)}</th>" for h in HEADER)
    return f"<h2>Paired A/B between adjacent releases</h2><table><tr>{head}</tr>{''.join(rows)}</table>"
