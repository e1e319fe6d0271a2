"""Coverage on purpose: which cells of a standard (function family x argument class) the suites
exercise, declared on each test and read back from the test modules to draw the matrix.

A test names the cells it exercises with the `covers` marker, one "family:class" string each:

    @pytest.mark.covers("mpi", *cells(["allreduce", "reduce"], ["plain", "in_place"]))
    def test_reduce_any_predefined_op(...): ...

A stack describes its standard once (`Taxonomy`: the families, the argument classes, which
classes a family admits and why not, the cells left out of scope and why). `matrix` joins the
two; every cell is covered (by which tests), not applicable (the standard's reason), out of
scope (the project's reason) or a gap, so nothing empty goes unexplained. `problems` lists
markers that name an unknown family or class, or a cell the standard does not admit.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import pytest

COVERED, NOT_APPLICABLE, OUT_OF_SCOPE, GAP = "covered", "n/a", "out of scope", "gap"


def cells(families: Iterable[str], classes: Iterable[str]) -> list[str]:
    """Every "family:class" of the two lists (what one test exercises over both)."""
    wanted = list(classes)
    return [f"{f}:{c}" for f in families for c in wanted]


@dataclass(frozen=True)
class Taxonomy:
    """A standard's function families (rows) and argument classes (columns)."""

    stack: str
    title: str
    families: dict[str, str]  # family -> the standard's calls in it
    classes: dict[str, str]  # argument class -> what it means
    # why `cls` does not apply to `family` by the standard, or None where it does
    not_applicable: Callable[[str, str], str | None]
    out_of_scope: dict[tuple[str, str], str] = field(default_factory=dict)
    modules: tuple[str, ...] = ()  # the test modules that declare cells
    rows: str = "families"  # what the page calls the rows and the columns
    columns: str = "argument classes"


def by_row(reasons: Mapping[str, str]) -> Callable[[str, str], str | None]:
    """A `not_applicable` for a standard whose rows alone decide: the row's reason, for every
    column."""
    return lambda row, column: reasons.get(row)


@dataclass(frozen=True)
class Declared:
    """One test function's `covers` cells."""

    nodeid: str  # module path::function, as pytest names the function
    summary: str  # its docstring's first line
    cells: tuple[tuple[str, str], ...]
    marked: bool = True  # False: no covers(stack, ...) at all (a forgotten declaration)


@dataclass(frozen=True)
class Cell:
    family: str
    cls: str
    state: str  # COVERED, NOT_APPLICABLE, OUT_OF_SCOPE or GAP
    why: str = ""  # the reason (n/a, out of scope)
    tests: tuple[str, ...] = ()  # covering tests' node ids


def _marks(obj: object) -> list[pytest.Mark]:
    raw = getattr(obj, "pytestmark", [])
    return [m for m in (raw if isinstance(raw, list) else [raw]) if isinstance(m, pytest.Mark)]


def declared(stack: str, modules: Sequence[str]) -> Iterator[Declared]:
    """The test functions of `modules` (importable names) with their `covers(stack, ...)`
    cells. `covers(stack)` with no cell says a test checks no cell of the standard (e.g. the
    harness's placement); a function with no marker at all is yielded unmarked."""
    for name in modules:
        mod = importlib.import_module(name)
        path = (mod.__file__ or name).split("hpccomm_suites/", 1)[-1]
        for fn_name, fn in inspect.getmembers(mod, inspect.isfunction):
            if not fn_name.startswith("test_") or fn.__module__ != mod.__name__:
                continue
            found: list[tuple[str, str]] = []
            marked = False
            for mark in _marks(fn):
                if mark.name == "covers" and mark.args and mark.args[0] == stack:
                    marked = True
                    for cell in mark.args[1:]:
                        family, _, cls = str(cell).partition(":")
                        found.append((family, cls))
            doc = inspect.getdoc(fn) or ""
            yield Declared(
                f"hpccomm_suites/{path}::{fn_name}",
                doc.split("\n\n", 1)[0].replace("\n", " "),
                tuple(found),
                marked,
            )


def problems(tax: Taxonomy, tests: Iterable[Declared]) -> list[str]:
    """Markers that name what the taxonomy does not know, or a cell it says cannot exist."""
    out = []
    for t in tests:
        if not t.marked:
            out.append(f"{t.nodeid}: no covers({tax.stack!r}, ...) marker")
        for family, cls in t.cells:
            if family not in tax.families:
                out.append(f"{t.nodeid}: unknown {tax.stack} family {family!r}")
            elif cls not in tax.classes:
                out.append(f"{t.nodeid}: unknown argument class {cls!r}")
            elif (why := tax.not_applicable(family, cls)) is not None:
                out.append(f"{t.nodeid}: {family}:{cls} is not applicable ({why})")
            elif (family, cls) in tax.out_of_scope:
                out.append(f"{t.nodeid}: {family}:{cls} is covered but listed out of scope")
    for family, cls in tax.out_of_scope:
        if family not in tax.families or cls not in tax.classes:
            out.append(f"out of scope: unknown cell {family}:{cls}")
    return out


def matrix(tax: Taxonomy, tests: Iterable[Declared]) -> list[Cell]:
    """Every (family, class) cell with its state, in the taxonomy's order."""
    by_cell: dict[tuple[str, str], list[str]] = {}
    for t in tests:
        for c in t.cells:
            by_cell.setdefault(c, []).append(t.nodeid)
    out = []
    for family in tax.families:
        for cls in tax.classes:
            why = tax.not_applicable(family, cls)
            if why is not None:
                out.append(Cell(family, cls, NOT_APPLICABLE, why))
            elif (family, cls) in by_cell:
                out.append(Cell(family, cls, COVERED, tests=tuple(by_cell[(family, cls)])))
            elif (family, cls) in tax.out_of_scope:
                out.append(Cell(family, cls, OUT_OF_SCOPE, tax.out_of_scope[(family, cls)]))
            else:
                out.append(Cell(family, cls, GAP))
    return out


SYMBOL = {COVERED: "", NOT_APPLICABLE: "·", OUT_OF_SCOPE: "o", GAP: "**gap**"}


def markdown(tax: Taxonomy, tests: Sequence[Declared]) -> str:
    """The matrix as a markdown section: the grid (number of covering tests per cell), the
    legend, the reasons for n/a and out-of-scope cells, the gaps, and which test covers what."""
    grid = matrix(tax, tests)
    numbers = {t.nodeid: i + 1 for i, t in enumerate(tests)}
    lines = [f"## {tax.title}", ""]
    counts = {s: sum(1 for c in grid if c.state == s) for s in SYMBOL}
    lines.append(
        f"{len(tax.families)} {tax.rows} x {len(tax.classes)} {tax.columns}: "
        + ", ".join(f"{counts[s]} {s}" for s in SYMBOL)
        + "."
    )
    lines += ["", f"| {tax.rows} | " + " | ".join(tax.classes) + " |"]
    lines.append("|---|" + "---|" * len(tax.classes))
    for family in tax.families:
        row = []
        for c in (c for c in grid if c.family == family):
            row.append(
                ", ".join(str(numbers[n]) for n in c.tests)
                if c.state == COVERED
                else SYMBOL[c.state]
            )
        lines.append(f"| {family} | " + " | ".join(row) + " |")
    lines += [
        "",
        "A number is a covering test (listed below); · not applicable by the standard; "
        "o out of scope (why below); **gap** applicable, in scope, not exercised yet.",
        "",
        f"### {tax.rows.capitalize()}",
        "",
    ]
    lines += [f"- **{f}**: {calls}" for f, calls in tax.families.items()]
    lines += ["", f"### {tax.columns.capitalize()}", ""]
    lines += [f"- **{c}**: {what}" for c, what in tax.classes.items()]
    reasons: dict[str, list[str]] = {}
    for c in grid:
        if c.state == NOT_APPLICABLE:
            reasons.setdefault(c.why, []).append(f"{c.family}:{c.cls}")
    lines += ["", "### Not applicable", ""]
    lines += [f"- {why} ({len(where)} cells)" for why, where in reasons.items()]
    scoped = [c for c in grid if c.state == OUT_OF_SCOPE]
    if scoped:
        lines += ["", "### Out of scope", ""]
        lines += [f"- {c.family}:{c.cls}: {c.why}" for c in scoped]
    gaps: dict[str, list[str]] = {}
    for c in grid:
        if c.state == GAP:
            gaps.setdefault(c.family, []).append(c.cls)
    lines += ["", "### Gaps", ""]
    lines += [f"- {f}: {', '.join(cs)}" for f, cs in gaps.items()] or ["None."]
    lines += ["", "### Tests", ""]
    for t in tests:
        what = f" — {t.summary}" if t.summary else ""
        note = "" if t.cells else " (covers no cell of the standard)"
        lines.append(f"{numbers[t.nodeid]}. `{t.nodeid}`{note}{what}")
    return "\n".join(lines) + "\n"
