"""The release x property table (pure): one row per property, one column per release, each
cell the counts of its cases by outcome; below it every failure (with the shrunk example),
every known defect and every skip reason, per release. Markdown and a standalone HTML page."""

from __future__ import annotations

import html
from collections import Counter
from dataclasses import dataclass, field
from typing import Sequence

from pytest_hpccomm.matrix.junit import Case, Outcome

ORDER: tuple[Outcome, ...] = ("fail", "known", "skip", "pass")
WORD = {"fail": "fail", "known": "known defect", "skip": "skip", "pass": "pass"}


@dataclass(frozen=True)
class Column:
    release: str
    cases: tuple[Case, ...]
    did_not_run: str = ""  # why the release has no result (its environment, a crashed session)


@dataclass
class ReleaseMatrix:
    columns: list[Column] = field(default_factory=list)

    def properties(self) -> list[str]:
        return sorted({c.prop for col in self.columns for c in col.cases})

    def cell(self, prop: str, release: str) -> Counter[str]:
        col = next(c for c in self.columns if c.release == release)
        return Counter(c.outcome for c in col.cases if c.prop == prop)

    def differs(self, prop: str) -> bool:
        """Whether the releases that ran disagree on a property's outcomes."""
        cells = {tuple(sorted(self.cell(prop, c.release).items())) for c in self.ran()}
        return len(cells) > 1

    def ran(self) -> list[Column]:
        return [c for c in self.columns if not c.did_not_run]

    def failures(self) -> int:
        return sum(c.outcome == "fail" for col in self.columns for c in col.cases)


def cell_text(counts: Counter[str]) -> str:
    """ "24 pass", "22 pass, 2 fail", "-" (no case of the property ran in that release)."""
    parts = [f"{counts[o]} {WORD[o]}" for o in reversed(ORDER) if counts[o]]
    return ", ".join(parts) or "-"


def _by_reason(cases: Sequence[Case], outcome: Outcome) -> list[tuple[str, list[Case]]]:
    groups: dict[str, list[Case]] = {}
    for c in cases:
        if c.outcome == outcome:
            groups.setdefault(c.detail, []).append(c)
    return sorted(groups.items(), key=lambda kv: (kv[1][0].prop, kv[0]))


def markdown(m: ReleaseMatrix, command: str, head: str = "") -> str:
    rel = [c.release for c in m.columns]
    out = [head] if head else []
    out += [f"Command: `{command}`", ""]
    out.append("| property | " + " | ".join(f"`{r}`" for r in rel) + " |")
    out.append("|---|" + "---|" * len(rel))
    for prop in m.properties():
        mark = " (differs)" if m.differs(prop) else ""
        cells = [
            "did not run" if c.did_not_run else _md_cell(m.cell(prop, c.release)) for c in m.columns
        ]
        out.append(f"| `{prop}`{mark} | " + " | ".join(cells) + " |")
    for col in m.columns:
        if col.did_not_run:
            out += ["", f"### `{col.release}`: did not run", "", col.did_not_run]
            continue
        for outcome, title in (
            ("fail", "Failures"),
            ("known", "Known defects (xfail)"),
            ("skip", "Skips"),
        ):
            groups = _by_reason(col.cases, outcome)  # type: ignore[arg-type]
            if not groups:
                continue
            out += ["", f"### `{col.release}`: {title}", ""]
            for reason, cases in groups:
                more = f" and {len(cases) - 6} more" if len(cases) > 6 else ""
                names = ", ".join(f"`{n}`" for n in _names(cases))
                text = reason.replace("\n", " ") if outcome != "fail" else reason.splitlines()[0]
                out.append(f"- {len(cases)} x {names}{more}: {text}")
                if outcome == "fail" and "\n" in reason:
                    out += ["", "  ```", *("  " + ln for ln in reason.splitlines()[1:]), "  ```"]
    return "\n".join(out) + "\n"


def _names(cases: Sequence[Case], most: int = 6) -> list[str]:
    return [f"{c.prop.split('::')[-1]}[{c.case}]" for c in cases[:most]]


def _md_cell(counts: Counter[str]) -> str:
    text = cell_text(counts)
    return f"**{text}**" if counts["fail"] else text


_CSS = """body{font-family:sans-serif;margin:1.5em}table{border-collapse:collapse}
td,th{border:1px solid #bbb;padding:3px 8px;font-size:90%}td.fail{background:#f4b6b6}
td.known{background:#f7dfa8}td.skip{background:#e4e4e4}td.pass{background:#c8ecc8}
td.none{background:#fff}pre{background:#f6f6f6;padding:6px}"""


def html_page(m: ReleaseMatrix, command: str, title: str) -> str:
    e = html.escape
    rows = []
    for prop in m.properties():
        tds = []
        for col in m.columns:
            if col.did_not_run:
                tds.append('<td class="fail">did not run</td>')
                continue
            counts = m.cell(prop, col.release)
            worst = next((o for o in ORDER if counts[o]), "none")
            tds.append(f'<td class="{worst}">{e(cell_text(counts))}</td>')
        mark = " <small>(differs)</small>" if m.differs(prop) else ""
        rows.append(f"<tr><td><code>{e(prop)}</code>{mark}</td>{''.join(tds)}</tr>")
    head = "".join(f"<th>{e(c.release)}</th>" for c in m.columns)
    details = []
    for col in m.columns:
        if col.did_not_run:
            details.append(f"<h3>{e(col.release)}: did not run</h3><p>{e(col.did_not_run)}</p>")
            continue
        for outcome, name in (("fail", "failures"), ("known", "known defects"), ("skip", "skips")):
            groups = _by_reason(col.cases, outcome)  # type: ignore[arg-type]
            if not groups:
                continue
            items = "".join(
                f"<li>{len(cases)} x <code>{e(', '.join(_names(cases)))}</code>"
                f"<pre>{e(reason)}</pre></li>"
                for reason, cases in groups
            )
            details.append(f"<h3>{e(col.release)}: {name}</h3><ul>{items}</ul>")
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{e(title)}</title>"
        f"<style>{_CSS}</style></head><body><h1>{e(title)}</h1>"
        f"<p>Command: <code>{e(command)}</code></p>"
        f"<table><tr><th>property</th>{head}</tr>{''.join(rows)}</table>{''.join(details)}"
        "</body></html>\n"
    )
