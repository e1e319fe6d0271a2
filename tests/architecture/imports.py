"""The package's import graph, read with the standard library's ast (no module is imported)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = "pytest_hpccomm"
ROOT = Path(__file__).resolve().parents[2] / PACKAGE


def modules() -> dict[str, Path]:
    out = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def imports_of(name: str, path: Path, known: set[str], typing: bool = False) -> set[str]:
    """Every module this one imports at run time (any depth in the file: function-level imports
    count, they run too; `if TYPE_CHECKING:` ones only with `typing`), resolved to modules of the
    package or to top-level third-party names."""
    is_pkg = path.name == "__init__.py"
    here = name if is_pkg else name.rpartition(".")[0]
    found: set[str] = set()
    tree = ast.parse(path.read_text(), str(path))
    typing_only = {
        id(n)
        for guard in ast.walk(tree)
        if not typing
        and isinstance(guard, ast.If)
        and ast.unparse(guard.test).endswith("TYPE_CHECKING")
        for stmt in guard.body
        for n in ast.walk(stmt)
    }
    for node in ast.walk(tree):
        if id(node) in typing_only:  # `if TYPE_CHECKING:` imports never run
            continue
        if isinstance(node, ast.Import):
            found.update(_resolve(a.name, known) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = here.split(".")[: len(here.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            for a in node.names:  # `from pkg import mod` imports pkg.mod when it is a module
                full = f"{base}.{a.name}"
                found.add(full if full in known else _resolve(base, known))
    found.discard(name)
    return found


def _resolve(dotted: str, known: set[str]) -> str:
    """The package module itself, or the top-level name of anything else (pytest, numpy)."""
    if dotted.split(".")[0] != PACKAGE:
        return dotted.split(".")[0]
    while dotted not in known and "." in dotted:
        dotted = dotted.rpartition(".")[0]
    return dotted


def graph(typing: bool = False) -> dict[str, set[str]]:
    """Module -> the modules it imports (`typing`: with `if TYPE_CHECKING:` imports)."""
    mods = modules()
    known = set(mods)
    return {name: imports_of(name, path, known, typing) for name, path in mods.items()}


def closure(start: str, g: dict[str, set[str]]) -> set[str]:
    """start and everything it imports, transitively (package modules are followed; a
    package module implies its parent packages' __init__, which Python runs first)."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        seen.add(m)
        if m in g:
            parents = [".".join(m.split(".")[:i]) for i in range(1, m.count(".") + 1)]
            todo.extend(g[m] | set(parents))
    return seen


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in g.get(v, ()):
            if w not in g:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return out
