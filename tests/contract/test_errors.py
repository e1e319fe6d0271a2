"""The shared Unavailable/Broken bases (pytest_hpccomm/errors.py): every orchestrator-side
"absent" or "broken" exception derives from them, and the build commands' exit codes follow."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from pytest_hpccomm.errors import Broken, Unavailable, build_main

PACKAGE = Path(__file__).resolve().parents[2] / "pytest_hpccomm"
KINDS = {
    "Unavailable": "Unavailable",
    "Broken": "Broken",
    "BuildError": "Broken",
    "EnvError": "Broken",
}


def _exception_classes(root: Path = PACKAGE) -> list[tuple[str, str, list[str]]]:
    """(file, class, base names) of the package's exception classes named by KINDS, outside
    the peer programs (they run on hosts and report over their own channel)."""
    out = []
    for path in sorted(root.rglob("*.py")):
        if "peer" in path.relative_to(root).parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and node.bases:
                bases = [b.id for b in node.bases if isinstance(b, ast.Name)]
                if any(node.name.endswith(k) for k in KINDS) and node.name not in KINDS:
                    out.append((str(path.relative_to(root)), node.name, bases))
    return out


def _without_base(found: list[tuple[str, str, list[str]]]) -> list[str]:
    return [
        f"{path}: {name}({', '.join(bases)})"
        for path, name, bases in found
        if not any(base == KINDS[k] for k in KINDS if name.endswith(k) for base in bases)
    ]


def test_every_absent_or_broken_exception_has_the_shared_base() -> None:
    found = _exception_classes()
    assert ("stacks/mpi/env.py", "MpiBroken", ["Broken"]) in found
    assert len(found) >= 10, found  # the stacks' own: MpiUnavailable, HorovodBuildError, ...
    wrong = _without_base(found)
    assert not wrong, "derive from pytest_hpccomm.errors: " + "; ".join(wrong)


def test_the_check_sees_a_class_without_the_base(tmp_path: Path) -> None:
    (tmp_path / "mod.py").write_text("class ToyUnavailable(Exception):\n    pass\n")
    assert _without_base(_exception_classes(tmp_path)) == ["mod.py: ToyUnavailable(Exception)"]


def test_build_commands_exit_by_kind(capsys: pytest.CaptureFixture[str]) -> None:
    def raises(exc: Exception) -> str:
        raise exc

    assert build_main(lambda: "built: here") == 0
    assert capsys.readouterr().out == "built: here\n"
    assert build_main(lambda: raises(Unavailable("no g++"))) == 0
    assert capsys.readouterr().out == "skipped: no g++\n"
    assert build_main(lambda: raises(Broken("make failed"))) == 1
    assert capsys.readouterr().err == "make failed\n"
    with pytest.raises(ValueError):
        build_main(lambda: raises(ValueError("ours")))
