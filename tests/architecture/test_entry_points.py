"""Modules run with `python -m` (the peers, the native build, the MPI environments...): their
`if __name__ == "__main__":` block is the module's last statement. Run as a script, a module
executes top to bottom, so anything defined below the block does not exist yet when main()
runs, while every import of the module (and so every other test) still sees it."""

from __future__ import annotations

import ast

import pytest

from tests.architecture.imports import modules


def _is_main_guard(node: ast.stmt) -> bool:
    return isinstance(node, ast.If) and ast.unparse(node.test) in (
        "__name__ == '__main__'",
        "'__main__' == __name__",
    )


SCRIPTS = {
    name: path
    for name, path in modules().items()
    if any(_is_main_guard(n) for n in ast.parse(path.read_text()).body)
}


def test_there_are_scripts_to_check() -> None:
    assert "pytest_hpccomm.stacks.grpc.build" in SCRIPTS


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_main_guard_is_last(name: str) -> None:
    body = ast.parse(SCRIPTS[name].read_text()).body
    guard = next(i for i, n in enumerate(body) if _is_main_guard(n))
    after = [f"line {n.lineno}: {ast.unparse(n).splitlines()[0]}" for n in body[guard + 1 :]]
    assert not after, f"{name}: defined after its __main__ block: {after}"
