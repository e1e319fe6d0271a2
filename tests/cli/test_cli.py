"""One command for users: `hpccomm SUBCOMMAND` lists every tool and hands each its arguments
untouched, so the tool's own parser answers (its help, its usage errors, its exit status)."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_hpccomm.__main__ import TOOLS, main

ROOT = Path(__file__).resolve().parents[2]


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def test_the_help_lists_every_tool() -> None:
    code, out, _ = run("--help")
    assert code == 0
    for name in ("history", *TOOLS):
        assert name in out, name


@pytest.mark.parametrize("name", sorted(TOOLS))
def test_each_tool_is_a_module_with_a_main(name: str) -> None:
    import importlib

    module = importlib.import_module(TOOLS[name][0])
    assert callable(getattr(module, "main", None)), TOOLS[name][0]


@pytest.mark.parametrize("name", ["mpi", "snapshot", "screenshot"])
def test_a_tools_own_help_is_reached(name: str) -> None:
    """`--help` after the subcommand is the tool's, under its hpccomm name."""
    code, out, _ = run(name, "--help")
    assert code == 0
    assert f"hpccomm {name}" in out


@pytest.mark.parametrize(
    ("argv", "usage"),
    [
        (("probe", "extra"), "usage: hpccomm probe"),
        (("tf-env", "extra"), "usage: hpccomm tf-env"),
        (("build-horovod", "extra"), "usage: hpccomm build-horovod"),
        (("build-grpc", "a", "b"), "usage: hpccomm build-grpc [PREFIX]"),
    ],
)
def test_a_tools_usage_error_is_its_exit_status(argv: tuple[str, ...], usage: str) -> None:
    code, _, err = run(*argv)
    assert code == 2 and usage in err


def test_an_unknown_subcommand_is_a_usage_error() -> None:
    code, _, err = run("no-such-tool")
    assert code == 2 and "invalid choice" in err


def test_the_installed_console_script_is_this_main() -> None:
    """`python -m pytest_hpccomm` and the `hpccomm` entry point are one command."""
    proc = subprocess.run(
        [sys.executable, "-m", "pytest_hpccomm", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert "usage: hpccomm" in proc.stdout
    text = (ROOT / "pyproject.toml").read_text()
    assert 'hpccomm = "pytest_hpccomm.__main__:main"' in text
