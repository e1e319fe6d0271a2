"""A module's docstring says what it is and why in a few lines and links the explanation
(docs/explanation/internals.md and the other docs pages hold the rest)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_LINES = 15


def test_module_docstrings_are_a_few_lines() -> None:
    long = []
    for path in sorted((ROOT / "pytest_hpccomm").rglob("*.py")):
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
        if doc and len(doc.splitlines()) > MAX_LINES:
            long.append(f"{path.relative_to(ROOT)}: {len(doc.splitlines())} lines")
    assert not long, "\n".join(long)


def test_every_module_the_internals_page_names_exists_and_links_back() -> None:
    page = (ROOT / "docs" / "explanation" / "internals.md").read_text()
    names = [line[3:].strip() for line in page.splitlines() if line.startswith("## ")]
    assert names
    for name in names:
        path = ROOT / Path(*name.split(".")).with_suffix(".py")
        assert path.is_file(), name
        assert f"docs/explanation/internals.md ({name})" in path.read_text(), name
