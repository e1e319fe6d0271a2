"""The package's layers (docs/explanation/architecture.md, "Layers"): every import that runs goes
from a layer to one below it, so no two packages or modules import each other in a loop."""

from __future__ import annotations

import re
from pathlib import Path

from tests.architecture.imports import PACKAGE, imports_of, modules

DOC = Path(__file__).resolve().parents[2] / "docs" / "explanation" / "architecture.md"


def layers() -> dict[str, int]:
    """Each part's layer, 1 at the bottom, as the document lists them."""
    text = DOC.read_text()
    block = text[text.index("<!-- layers: bottom first -->") : text.index("<!-- /layers -->")]
    out: dict[str, int] = {}
    for line in block.splitlines():
        m = re.match(r"(\d+)\. (.+)", line)
        if m:
            for name in re.findall(r"`([^`]+)`", m.group(2)):
                assert name not in out, f"{name} is listed twice"
                out[name] = int(m.group(1))
    return out


def part(module: str) -> str:
    """The top-level part a module belongs to: `pytest_hpccomm.cluster.virtual` -> cluster."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_every_part_of_the_package_has_a_layer() -> None:
    placed = layers()
    found = {part(m) for m in modules()}
    assert found - set(placed) == set(), "not in the document's layers"
    assert set(placed) - found == set(), "listed in the layers, not in the package"


def test_every_import_goes_down() -> None:
    placed = layers()
    mods = modules()
    known = set(mods)
    wrong = []
    for name, path in mods.items():
        for dep in imports_of(name, path, known):
            if not dep.startswith(PACKAGE):
                continue
            a, b = part(name), part(dep)
            if a != b and placed[b] >= placed[a]:
                wrong.append(f"{name} (layer {placed[a]}) imports {dep} (layer {placed[b]})")
    assert wrong == []


def test_the_check_sees_an_upward_import(tmp_path: Path) -> None:
    # the check itself: an import from the process runner up into the session is found
    path = tmp_path / "jobs.py"
    path.write_text("def f():\n    from pytest_hpccomm.session import HpcSession\n")
    got = imports_of("pytest_hpccomm.proc.jobs", path, set(modules()))
    assert "pytest_hpccomm.session" in got
    placed = layers()
    assert placed[part("pytest_hpccomm.session")] > placed[part("pytest_hpccomm.proc.jobs")]
