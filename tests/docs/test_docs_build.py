"""The documentation site builds under `mkdocs build --strict` (broken links, pages missing
from the nav and bad config fail it), README.md stays a page for users (<= 200 lines), and the
options reference equals what docs/gen_reference.py renders from pytest_hpccomm.config."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MKDOCS = Path(sys.executable).parent / "mkdocs"
README_MAX_LINES = 200  # the bound for a README a stranger reads


def _gen_reference():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(
        "gen_reference", ROOT / "docs" / "gen_reference.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_mkdocs_build_is_strict_clean(tmp_path: Path) -> None:
    if not MKDOCS.exists():
        pytest.skip(
            f"mkdocs is not installed in this venv ({MKDOCS}): "
            f"{Path(sys.executable).parent / 'pip'} install mkdocs mkdocs-material"
        )
    proc = subprocess.run(
        [str(MKDOCS), "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "site" / "reference" / "options" / "index.html").is_file()


def test_readme_is_at_most_200_lines() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines"


@pytest.mark.parametrize(
    "page",
    [
        "options.md",
        "markers-and-fixtures.md",
        "record-fields.md",
        "cli.md",
        "retries.md",
        "coverage.md",
    ],
)
def test_generated_page_matches_the_code(page: str) -> None:
    gen = _gen_reference()
    committed = (ROOT / "docs" / "reference" / page).read_text()
    assert committed == gen.PAGES[page](), (
        f"docs/reference/{page} differs: run docs/gen_reference.py"
    )


def test_field_comments_come_from_fields_not_from_a_methods_parameters() -> None:
    """A method whose parameter is named like a field does not take that field's comment
    (Verdict.of has a `ratio` parameter)."""
    from pytest_hpccomm.baselines.verdict import Verdict

    comments = _gen_reference().field_comments(Verdict)
    assert comments["ratio"] == "current median / baseline median (raw, not direction-adjusted)"
    assert "ci_low" in comments and comments["ci_low"] == "confidence interval of that ratio"


def test_every_option_of_the_code_is_on_the_page() -> None:
    """The core options and every stack plugin's (a stack's option left off its page fails)."""
    from pytest_hpccomm.config import OPTIONS

    gen = _gen_reference()
    page = (ROOT / "docs" / "reference" / "options.md").read_text()
    flags = [spec.flag for spec in OPTIONS]
    for stack in gen.STACK_PLUGINS:
        flags += [max(names, key=len) for names, _ in gen.stack_options(stack).options]
    missing = [flag for flag in flags if f"`{flag}`" not in page]
    assert not missing
    assert "`--hpc-mpi`" in page and "`--hpc-grpc-prefix`" in page  # the recorder saw the stacks


def test_every_fixture_and_hook_is_on_the_page() -> None:
    """Fixtures found by reading the plugins' decorators, hooks from hookspecs: the page lists
    each (a fixture the AST walk missed would be a hole in the reference)."""
    from pytest_hpccomm import hookspecs

    gen = _gen_reference()
    names = [name for name, *_ in gen.fixtures()]
    assert {"hpc_session", "hpc_record", "grpc_lab", "mpi_osu"} <= set(names), names
    page = (ROOT / "docs" / "reference" / "markers-and-fixtures.md").read_text()
    hooks = [n for n in dir(hookspecs) if n.startswith("pytest_hpccomm_")]
    assert hooks and all(f"`{h}`" in page for h in hooks)
    assert all(f"`{n}`" in page for n in names)
