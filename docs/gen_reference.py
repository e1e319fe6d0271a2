"""Writes the generated reference pages from the code, so they are the code's own lists, never
copies that drift:

- reference/options.md: the core options (pytest_hpccomm.config.OPTIONS) and each stack
  plugin's own options and ini keys (what its pytest_addoption registers);
- reference/markers-and-fixtures.md: the markers (pytest_hpccomm.skips.MARKERS), every fixture
  of the plugins (their decorators and docstrings) and the hooks (pytest_hpccomm.hookspecs);
- reference/record-fields.md: the fields of a record, a verdict and a baseline entry (the
  dataclasses and their field comments), as the results JSON and the baseline files hold them;
- reference/cli.md: the `hpccomm` command's help;
- reference/retries.md: the named retry causes (pytest_hpccomm.retries.CAUSES);
- reference/coverage.md: which cells of each standard the suites exercise, read from the
  tests' `covers` markers (pytest_hpccomm.coverage, each stack's coverage.TAXONOMY).

    .venv/bin/python docs/gen_reference.py           # rewrite the pages
    .venv/bin/python docs/gen_reference.py --check   # exit 1 when a committed page differs
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import io
import re
import sys
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any, Callable

REFERENCE = Path(__file__).resolve().parent / "reference"
PACKAGE = Path(__file__).resolve().parent.parent / "pytest_hpccomm"
STACK_PLUGINS = ("mpi", "grpc", "tf", "horovod", "verbs")  # pyproject's pytest11 entry points

GENERATED = (
    "Generated from the code by `docs/gen_reference.py`: do not edit by hand "
    "(`tests/docs/test_docs_build.py` fails when this page and the code differ).\n"
)

RETRIES_HEADER = (
    """# Retries

"""
    + GENERATED
    + """
The suite retries only for a named transient cause that the code detects by its signature,
bounded, and counted: each session's count per cause is in the terminal summary
(`hpccomm retries: ...`, then one `retried: cause: test: reason` line per retry, the
reason naming what the code saw, e.g. the processes that shared the cores), the markdown
summary, the results JSON (`session.retries`) and
JUnit's global properties (`hpccomm_retries`, `hpccomm_retries_<cause>`). Nothing else is
tried again: a hang, a wrong answer, a false alarm or a missed canary fails the first time.

| cause | JUnit property | how it is detected, why it is transient, its bound |
|---|---|---|
"""
)

OPTIONS_HEADER = (
    """# Options

"""
    + GENERATED
    + """
Every option is also an ini key (`hpc_fabric = ib` in `pytest.ini`: the name without the
leading dashes, dashes as underscores, unless the table names another); the command line wins.
A bad value is a one-line usage error (exit status 4).

## Core options

| option | help | default |
|---|---|---|
"""
)

MARKERS_HEADER = (
    """# Markers, fixtures and hooks

"""
    + GENERATED
    + """
## Markers

Registered by the core plugin and, in the last rows, by the stack plugins (`--strict-markers`
clean). A test that needs an absent fabric, device or stack is **skipped with one precise
reason** naming what was found instead, e.g. `no InfiniBand device: found rxe0 (RoCE), eth0
(Ethernet)`; it never errors. A misspelt `stack(...)` or `fabric(...)` marker is a usage
error, so a typo cannot skip forever.

| marker | meaning |
|---|---|
"""
)

FIXTURES_HEADER = """
## Fixtures

The stacks' fixtures do the plumbing (select, launch, validate, judge), so a test names only
its point. Every fixture the plugins define:

| fixture | scope | plugin module | what it gives |
|---|---|---|---|
"""

HOOKS_HEADER = """
## Hooks

Declared in `pytest_hpccomm/hookspecs.py`; a plugin or a `conftest.py` implements them. See
[Contributing](../contributing.md) for how a stack or a fabric uses them.

"""

FIELDS_HEADER = (
    """# Record fields

"""
    + GENERATED
    + """
The results JSON (`--hpc-results`, see [Results JSON](results-json.md)) holds, per record, its
`measurement`, `summary`, `verdict` and (where it differs from the session's) `fingerprint`;
the baseline files (see [Baseline files](baseline-files.md)) hold one entry per point. Their
fields, from the dataclasses that write them:
"""
)

CLI_HEADER = (
    """# Command line

"""
    + GENERATED
    + """
`hpccomm` (also `python -m pytest_hpccomm`) reads what the suites wrote. Its help:

"""
)


def _cell(text: str) -> str:
    # argparse escapes % as %%; a table cell must not contain a bare |
    return " ".join(text.replace("%%", "%").replace("|", "\\|").split())


def _default(spec: object) -> str:
    default = spec.default
    kind = spec.kind
    if default is None:
        return "none" if kind == "update" else "—"
    return f"`{_cell(str(default))}`"


# -- options ---------------------------------------------------------------------------------


class _Recorder:
    """Stands in for pytest's Parser while a stack plugin's pytest_addoption runs: it keeps what
    the plugin registers (its options and ini keys) and nothing else."""

    def __init__(self) -> None:
        self.options: list[tuple[tuple[str, ...], dict[str, Any]]] = []
        self.inis: dict[str, tuple[str, Any]] = {}

    def getgroup(self, name: str, description: str = "", after: str | None = None) -> _Recorder:
        return self

    def addoption(self, *names: str, **attrs: Any) -> None:
        self.options.append((names, attrs))

    def addini(
        self, name: str, help: str, type: Any = None, default: Any = None, **kw: Any
    ) -> None:
        self.inis[name] = (help, default)


def stack_options(stack: str) -> _Recorder:
    plugin = importlib.import_module(f"pytest_hpccomm.stacks.{stack}.plugin")
    rec = _Recorder()
    plugin.pytest_addoption(rec)
    return rec


def render_options() -> str:
    from pytest_hpccomm.config import OPTIONS

    rows = []
    for spec in OPTIONS:
        name = f"`{spec.flag}`"
        if spec.choices:
            name += " {" + ",".join(spec.choices) + "}"
        rows.append(f"| {name} | {_cell(spec.help)} | {_default(spec)} |\n")
    out = OPTIONS_HEADER + "".join(rows)
    for stack in STACK_PLUGINS:
        rec = stack_options(stack)
        out += (
            f"\n## {stack} options\n\nRegistered by `pytest_hpccomm.stacks.{stack}.plugin`"
            " (see its page under Stacks).\n\n| option | ini key | help | default |\n"
            "|---|---|---|---|\n"
        )
        seen: set[str] = set()
        for names, attrs in rec.options:
            flag = max(names, key=len)
            dest = attrs.get("dest") or flag.lstrip("-").replace("-", "_")
            ini = rec.inis.get(dest)
            seen.add(dest)
            choices = attrs.get("choices")
            name = f"`{flag}`" + (" {" + ",".join(map(str, choices)) + "}" if choices else "")
            default = (
                ini[1] if ini is not None and attrs.get("default") is None else attrs.get("default")
            )
            shown = "—" if default is None else f"`{_cell(str(default))}`"
            rows_ini = f"`{dest}`" if ini is not None else "—"
            out += f"| {name} | {rows_ini} | {_cell(str(attrs.get('help', '')))} | {shown} |\n"
        for key, (text, default) in rec.inis.items():
            if key not in seen:  # an ini key without an option of its own
                shown = "—" if default is None else f"`{_cell(str(default))}`"
                out += f"| — | `{key}` | {_cell(text)} | {shown} |\n"
    return out


# -- markers, fixtures, hooks -----------------------------------------------------------------


def _plugin_modules() -> list[Path]:
    """The modules pytest loads as plugins (and the fixture modules they pull in)."""
    found = [PACKAGE / "plugin.py"]
    for stack in STACK_PLUGINS:
        found += sorted(
            p
            for p in (PACKAGE / "stacks" / stack).glob("*.py")
            if "pytest.fixture" in p.read_text(encoding="utf-8")
        )
    return found


def _fixture_scope(deco: ast.expr) -> str | None:
    """'function', 'session', ... for a pytest.fixture decorator; None for another one."""
    call = deco if isinstance(deco, ast.Call) else None
    target = call.func if call is not None else deco
    if not (isinstance(target, ast.Attribute) and target.attr == "fixture"):
        return None
    for kw in call.keywords if call is not None else []:
        if kw.arg == "scope" and isinstance(kw.value, ast.Constant):
            return str(kw.value.value)
    return "function"


def _first_sentence(doc: str | None) -> str:
    """The docstring's first paragraph, on one line."""
    if not doc:
        return ""
    return " ".join(inspect.cleandoc(doc).split("\n\n")[0].split())


def fixtures() -> list[tuple[str, str, str, str]]:
    """(name, scope, module, first sentence of its docstring) of every plugin fixture."""
    rows = []
    for path in _plugin_modules():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        for node in tree.body:
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            scopes = [s for s in map(_fixture_scope, node.decorator_list) if s is not None]
            if scopes and not node.name.startswith("_"):  # private ones are no user's
                rows.append(
                    (node.name, scopes[0], module, _first_sentence(ast.get_docstring(node)))
                )
    return sorted(rows)


# the markers the stack plugins register (pytest_configure), as (module, constant)
STACK_MARKERS = (
    ("pytest_hpccomm.stacks.grpc.skips", "RUNTIME_MARK_LINE"),
    ("pytest_hpccomm.stacks.verbs.marks", "NOT_ON_LINE"),
    ("pytest_hpccomm.stacks.verbs.marks", "NEEDS_LINE"),
)


def render_markers() -> str:
    from pytest_hpccomm import hookspecs
    from pytest_hpccomm.skips import MARKERS

    out = MARKERS_HEADER
    stack_lines = [str(getattr(importlib.import_module(m), c)) for m, c in STACK_MARKERS]
    for line in (*MARKERS, *stack_lines):
        name, _, meaning = line.partition(": ")
        out += f"| `{name}` | {_cell(meaning)} |\n"
    out += FIXTURES_HEADER
    for name, scope, module, what in fixtures():
        out += f"| `{name}` | {scope} | `{module}` | {_cell(what) or '—'} |\n"
    out += HOOKS_HEADER
    for name, fn in inspect.getmembers(hookspecs, inspect.isfunction):
        if not name.startswith("pytest_hpccomm_"):
            continue
        sig = str(inspect.signature(fn)).replace("'", "")
        doc = inspect.cleandoc(fn.__doc__ or "")
        out += f"### `{name}`\n\n    {name}{sig}\n\n{doc}\n\n"
    return out.rstrip("\n") + "\n"


# -- record fields ----------------------------------------------------------------------------


def field_comments(cls: type) -> dict[str, str]:
    """Each dataclass field's comment in the source: on its line, or the lines just above it."""
    lines = inspect.getsource(cls).splitlines()
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    found: dict[str, str] = {}
    above: list[str] = []
    head = next(line for line in lines if line.lstrip().startswith("class "))
    body = len(head) - len(head.lstrip()) + 4  # the class body's indent: fields, not params
    for line in lines:
        text = line.strip()
        if len(line) - len(line.lstrip()) != body:
            above = []
            continue
        if text.startswith("#"):
            above.append(text.lstrip("# "))
            continue
        match = re.match(r"(\w+)\s*:", text)
        if match and match.group(1) in names:
            same = text.split("  # ", 1)[1] if "  # " in text else ""
            found[match.group(1)] = " ".join([*above, same]).strip()
        above = []
    return found


def _type_text(t: Any) -> str:
    return (t if isinstance(t, str) else getattr(t, "__name__", str(t))).replace("|", "or")


def render_fields() -> str:
    from pytest_hpccomm.baselines.result import RunResult
    from pytest_hpccomm.baselines.store import BaselineEntry
    from pytest_hpccomm.baselines.verdict import Outcome, Verdict
    from pytest_hpccomm.measure.measurement import Direction, Measurement

    out = FIELDS_HEADER
    where = {
        Measurement: "a record's `measurement`",
        Verdict: "a record's `verdict`",
        BaselineEntry: "a baseline file's entry",
        RunResult: "one record (in memory)",
    }
    for cls, what in where.items():
        doc = _first_sentence(
            cls.__doc__ if cls.__doc__ and not cls.__doc__.startswith(cls.__name__ + "(") else ""
        )
        out += (
            f"\n## {cls.__name__}: {what}\n\n{doc}\n\n| field | type | meaning |\n|---|---|---|\n"
        )
        comments = field_comments(cls)
        for f in dataclasses.fields(cls):  # type: ignore[arg-type]
            out += (
                f"| `{f.name}` | `{_cell(_type_text(f.type))}` | "
                f"{_cell(comments.get(f.name, '')) or '—'} |\n"
            )
    out += "\n## Enumerations\n\n"
    out += "- `outcome`: " + ", ".join(f"`{o.value}`" for o in Outcome) + "\n"
    out += "- `direction`: " + ", ".join(f"`{d.value}`" for d in Direction) + "\n"
    return out


# -- CLI --------------------------------------------------------------------------------------


def _help_of(parser: Any) -> str:
    buf = io.StringIO()
    with redirect_stdout(buf):
        parser.print_help()
    return buf.getvalue()


def render_cli() -> str:
    from pytest_hpccomm.__main__ import TOOLS, build_parser

    parser = build_parser()
    parser.prog = "hpccomm"
    out = CLI_HEADER + "\n".join("    " + line for line in _help_of(parser).splitlines()) + "\n"
    subs = [a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction"]
    for action in subs:
        for name, sub in getattr(action, "choices", {}).items():
            if name in TOOLS:  # a tool's own parser, where the tool has one to show
                import importlib

                own = getattr(importlib.import_module(TOOLS[name][0]), "build_parser", None)
                sub = own() if own is not None else sub
            sub.prog = f"hpccomm {name}"
            out += f"\n## hpccomm {name}\n\n"
            out += "\n".join("    " + line for line in _help_of(sub).splitlines()) + "\n"
    return out


def render_retries() -> str:
    from pytest_hpccomm.retries import CAUSES, property_name

    return RETRIES_HEADER + "".join(
        f"| {cause} | `{property_name(cause)}` | {_cell(why)} |\n" for cause, why in CAUSES.items()
    )


COVERAGE_HEADER = """# Coverage of the standards

Generated from the tests by `docs/gen_reference.py`: do not edit by hand. Each conformance test
declares the cells it exercises (`@pytest.mark.covers("mpi", "allreduce:in_place", ...)`); each
stack's `coverage.py` describes its standard once: the families, the argument classes, which
classes a family admits by the standard (not applicable otherwise, with the rule) and what is
left out of scope (with why). A cell that is none of these is a **gap**: listed, not hidden.

"""


def render_coverage() -> str:
    from pytest_hpccomm.coverage import declared, markdown
    from pytest_hpccomm.stacks.grpc.coverage import TAXONOMY as GRPC
    from pytest_hpccomm.stacks.horovod.coverage import TAXONOMY as HOROVOD
    from pytest_hpccomm.stacks.mpi.coverage import TAXONOMY as MPI
    from pytest_hpccomm.stacks.tf.coverage import TAXONOMY as TF
    from pytest_hpccomm.stacks.verbs.coverage import TAXONOMY as VERBS

    pages = [
        markdown(tax, list(declared(tax.stack, tax.modules)))
        for tax in (MPI, GRPC, HOROVOD, TF, VERBS)
    ]
    return COVERAGE_HEADER + "\n".join(pages)


PAGES: dict[str, Callable[[], str]] = {
    "options.md": render_options,
    "markers-and-fixtures.md": render_markers,
    "record-fields.md": render_fields,
    "cli.md": render_cli,
    "retries.md": render_retries,
    "coverage.md": render_coverage,
}


def main(argv: list[str]) -> int:
    pages = {REFERENCE / name: render() for name, render in PAGES.items()}
    if "--check" in argv:
        stale = [p for p, text in pages.items() if not p.is_file() or p.read_text() != text]
        for page in stale:
            print(f"{page} differs from the code: run {Path(__file__).name}", file=sys.stderr)
        return 1 if stale else 0
    for page, text in pages.items():
        page.write_text(text)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    raise SystemExit(main(sys.argv[1:]))
