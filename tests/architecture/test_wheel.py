"""The wheel holds what an installed pytest-hpccomm needs: every package of the checkout, the
suites, the native gRPC peer's sources and protos (its build reads them from the installed
package) and the Horovod build's patch; installed into a fresh venv outside the checkout, it runs
the MPI conformance suite, builds the native gRPC peer and writes the CI templates from an
empty directory."""

from __future__ import annotations

import os
import re
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
    return set(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )


def test_every_package_directory_is_listed() -> None:
    on_disk = {
        ".".join(p.parent.relative_to(ROOT).parts)
        for tree in (PACKAGE, ROOT / "hpccomm_suites")
        for p in tree.rglob("__init__.py")
    }
    missing = on_disk - listed_packages()
    assert not missing, f"add to pyproject.toml [tool.setuptools] packages: {sorted(missing)}"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    out = tmp_path_factory.mktemp("wheel")
    return zipfile.ZipFile(_pip_wheel(_source(tmp_path_factory), out))


def _source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the checkout to build from, so the checkout gets no build/ or egg-info."""
    src = tmp_path_factory.mktemp("src") / "pytest-hpccomm"
    shutil.copytree(
        ROOT,
        src,
        symlinks=True,
        ignore=shutil.ignore_patterns(
            ".git",
            ".venv",
            ".mypy_cache",
            ".ruff_cache",
            "__pycache__",
            "results",
            "build",
            "*.egg-info",
            "fixtures",
            "site",
        ),
    )
    return src


def _pip_wheel(src: Path, out: Path) -> Path:
    """pip's wheel of a source tree or sdist, with build isolation: the build backend
    pyproject.toml names, as a user's pip gets it."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--disable-pip-version-check",
            "-q",
            "-w",
            str(out),
            str(src),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (path,) = out.glob("pytest_hpccomm-*.whl")
    return path


def test_a_wheel_built_from_the_sdist_holds_what_the_wheel_holds(
    wheel: zipfile.ZipFile, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The sdist carries everything the wheel is made of (a distribution that rebuilds from
    the sdist, as conda-forge and distributions do, must not lose the native sources)."""
    src = _source(tmp_path_factory)
    out = tmp_path_factory.mktemp("sdist")
    proc = subprocess.run(
        [sys.executable, "-m", "build", "--sdist", "--outdir", str(out), str(src)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (sdist,) = out.glob("pytest_hpccomm-*.tar.gz")
    again = zipfile.ZipFile(_pip_wheel(sdist, tmp_path_factory.mktemp("rewheel")))
    files = {n for n in wheel.namelist() if ".dist-info/" not in n}
    assert files == {n for n in again.namelist() if ".dist-info/" not in n}


def test_the_wheel_holds_the_native_sources_and_the_patch(wheel: zipfile.ZipFile) -> None:
    names = set(wheel.namelist())
    native = PACKAGE / "stacks" / "grpc" / "native"
    want = {
        f"pytest_hpccomm/stacks/grpc/native/{p.name}"
        for p in native.iterdir()
        if p.suffix in (".cc", ".h", ".c", ".proto")
    }
    want.add("pytest_hpccomm/stacks/horovod/cxx17.patch")
    assert "pytest_hpccomm/stacks/grpc/native/tensor.proto" in want
    missing = sorted(want - names)
    assert not missing, missing
    assert not [n for n in names if n.startswith(("tests/", "fixtures/", "suites/"))]


def test_the_wheel_holds_every_suite_module(wheel: zipfile.ZipFile) -> None:
    want = {p.relative_to(ROOT).as_posix() for p in (ROOT / "hpccomm_suites").rglob("*.py")}
    assert "hpccomm_suites/mpi/test_conformance_p2p.py" in want
    missing = sorted(want - set(wheel.namelist()))
    assert not missing, missing


def _installed(wheel: zipfile.ZipFile, where: Path) -> Path:
    """A fresh venv at `where` with the wheel installed; its dependencies pinned to this venv's
    versions (what the tests ran with; pip's cache has them)."""
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True, timeout=300)
    pins = where / "constraints.txt"
    frozen = subprocess.run(
        [sys.executable, "-m", "pip", "freeze", "--exclude-editable"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    pins.write_text(
        "".join(
            line + "\n"
            for line in frozen.splitlines()
            if "==" in line and not line.startswith("pytest-hpccomm")
        )
    )
    proc = subprocess.run(
        [
            str(where / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            "-c",
            str(pins),
            str(wheel.filename),
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return where / "bin"


@pytest.fixture(scope="module")
def installed(
    wheel: zipfile.ZipFile,
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, Path, dict[str, str]]:
    """(the fresh venv's bin, an empty working directory, the environment to run in: nothing
    of the checkout on any path)."""
    bin_ = _installed(wheel, tmp_path_factory.mktemp("venv") / "v")
    empty = tmp_path_factory.mktemp("empty")
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTEST_ADDOPTS", "PYTEST_PLUGINS")
    }
    env["PATH"] = f"{bin_}{os.pathsep}{env.get('PATH', '')}"
    return bin_, empty, env


def test_the_installed_wheel_imports_from_the_venv_not_the_checkout(
    installed: tuple[Path, Path, dict[str, str]],
) -> None:
    bin_, empty, env = installed
    proc = subprocess.run(
        [str(bin_ / "python"), "-c", "import hpccomm_suites as s; print(s.__file__)"],
        cwd=empty,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    where = Path(proc.stdout.strip()).resolve()
    assert where.is_relative_to(bin_.parent.resolve()) and not where.is_relative_to(ROOT), where


def test_the_installed_wheel_writes_the_templates(
    installed: tuple[Path, Path, dict[str, str]], tmp_path: Path
) -> None:
    """`hpccomm templates NAME --out DIR` writes the checkout's templates, byte for byte, from
    the installed package; an existing file is kept."""
    from pytest_hpccomm.ci_templates import TEMPLATES

    bin_, empty, env = installed
    for name, (files, _) in TEMPLATES.items():
        proc = subprocess.run(
            [str(bin_ / "hpccomm"), "templates", name, "--out", str(tmp_path / name)],
            cwd=empty,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        for f in files:
            shipped = (PACKAGE / "templates" / f).read_text()
            assert (tmp_path / name / Path(f).name).read_text() == shipped, f
    again = subprocess.run(
        [str(bin_ / "hpccomm"), "templates", "slurm", "--out", str(tmp_path / "slurm")],
        cwd=empty,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert again.returncode == 1 and "exists (--force to overwrite it)" in again.stderr, again


def test_the_installed_wheel_builds_the_native_grpc_peer(
    installed: tuple[Path, Path, dict[str, str]], tmp_path: Path
) -> None:
    """`hpccomm build-grpc` from the installed package's sources, into a cache of its own (a
    cached build would prove nothing)."""
    bin_, empty, env = installed
    proc = subprocess.run(
        [str(bin_ / "hpccomm"), "build-grpc"],
        cwd=empty,
        env={**env, "HPCCOMM_GRPC_CACHE": str(tmp_path / "grpc")},
        capture_output=True,
        text=True,
        timeout=1200,
    )
    if proc.returncode == 0 and proc.stdout.startswith("skipped:"):
        pytest.skip(f"hpccomm build-grpc: {proc.stdout.strip()}")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "built in" in proc.stdout, proc.stdout
    assert list((tmp_path / "grpc").rglob("hpcc_grpc_peer")), proc.stdout


def test_the_installed_wheel_runs_the_mpi_conformance_suite(
    installed: tuple[Path, Path, dict[str, str]],
) -> None:
    """`pytest --pyargs hpccomm_suites.mpi -m conformance` from an empty directory: the
    suite's modules are the venv's, its MPI the cached Open MPI environment."""
    bin_, empty, env = installed
    proc = subprocess.run(
        [
            str(bin_ / "python"),
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "--pyargs",
            "hpccomm_suites.mpi",
            "-m",
            "conformance",
            "--hpc-fabric=ethernet",
            "--hpc-mpi=openmpi",
            "--hpc-history=none",
            "-rfEs",
        ],
        cwd=empty,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    tail = proc.stdout[-4000:] + proc.stderr[-2000:]
    assert proc.returncode == 0, tail
    assert f"rootdir: {ROOT}" not in proc.stdout, tail
    # every item the checkout's suite selects ran from the venv (passed, skipped naming why, or
    # an xfail naming a known defect of the MPI it observed)
    checkout = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--co",
            "-q",
            "-p",
            "no:cacheprovider",
            str(ROOT / "hpccomm_suites" / "mpi"),
            "-m",
            "conformance",
            "--hpc-fabric=ethernet",
            "--hpc-mpi=openmpi",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    selected = re.search(r"^(\d+)/\d+ tests collected", checkout.stdout, re.M)
    assert selected, checkout.stdout[-2000:]
    ran = {k: int(n) for n, k in re.findall(r"(\d+) (passed|skipped|xfailed)", proc.stdout)}
    assert ran.get("passed", 0) > 0 and sum(ran.values()) == int(selected.group(1)), tail
