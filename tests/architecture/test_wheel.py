"""The wheel holds what an installed pytest-hpccomm needs: every package of the checkout, the
native gRPC peer's sources and protos (its build reads them from the installed package) and the
Horovod build's patch."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "pytest_hpccomm"


def listed_packages() -> set[str]:
    return set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
               ["packages"])


def test_every_package_directory_is_listed() -> None:
    on_disk = {".".join(p.parent.relative_to(ROOT).parts) for p in PACKAGE.rglob("__init__.py")}
    missing = on_disk - listed_packages()
    assert not missing, f"add to pyproject.toml [tool.setuptools] packages: {sorted(missing)}"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    out = tmp_path_factory.mktemp("wheel")
    # built from a copy, so the checkout gets no build/ or egg-info of the build's
    src = tmp_path_factory.mktemp("src") / "pytest-hpccomm"
    shutil.copytree(ROOT, src, symlinks=True, ignore=shutil.ignore_patterns(
        ".git", ".venv", ".mypy_cache", ".ruff_cache", "__pycache__", "results", "build",
        "*.egg-info", "fixtures", "site"))
    # with build isolation: the build backend pyproject.toml names, as a user's pip gets it
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps",
                           "--disable-pip-version-check", "-q", "-w", str(out), str(src)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (path,) = out.glob("pytest_hpccomm-*.whl")
    return zipfile.ZipFile(path)


def test_the_wheel_holds_the_native_sources_and_the_patch(
        wheel: zipfile.ZipFile) -> None:
    names = set(wheel.namelist())
    native = PACKAGE / "stacks" / "grpc" / "native"
    want = {f"pytest_hpccomm/stacks/grpc/native/{p.name}" for p in native.iterdir()
            if p.suffix in (".cc", ".h", ".c", ".proto")}
    want.add("pytest_hpccomm/stacks/horovod/cxx17.patch")
    assert "pytest_hpccomm/stacks/grpc/native/tensor.proto" in want
    missing = sorted(want - names)
    assert not missing, missing
    assert not [n for n in names if n.startswith(("tests/", "fixtures/", "suites/"))]
