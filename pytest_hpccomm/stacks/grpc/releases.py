"""gRPC's release axis for `hpccomm matrix grpc`: grpcio releases from the package index
(`grpcio==1.60.1`), each the Python the Python peers run (`--hpc-grpc-python`, its venv made
on first use); one line, ordered by version.

Every release is the newest patch of each minor with a wheel for this Python: a patch release
of grpcio fixes a build or a CVE, the minors are where its core and its Python layer change.
The conformance run covers the Python peers only (the native peer does not use grpcio), and
the A/B pair times their latency and bandwidth (raw payloads, the three uniform schemes: small,
medium and large buffers), servers and clients each in its release.
"""

from __future__ import annotations

from packaging.version import InvalidVersion, Version

from pytest_hpccomm import package_index
from pytest_hpccomm.matrix.axis import ReleaseAxis
from pytest_hpccomm.stacks.grpc.python_env import RELEASE, released_versions, spec_error

PYTHON_PEERS = "python,python-aio"


def newest_patches(versions: list[str] | tuple[str, ...]) -> list[str]:
    """The newest final release of each minor as a release name, oldest minor first."""
    return [f"grpcio=={v}" for v in package_index.newest_patches(versions)]


def every_release() -> list[str]:
    return newest_patches(released_versions())


def order(spec: str) -> tuple[object, ...]:
    m = RELEASE.match(spec)
    try:
        return (Version(m.group(1)) if m else Version("0"), spec)
    except InvalidVersion:
        return (Version("0"), spec)


def describe(spec: str) -> str:
    m = RELEASE.match(spec)
    if m:
        return f"grpcio {m.group(1)}, the package index's wheel"
    return "this interpreter's grpcio" if not spec else f"the grpcio of {spec}"


def release_error(spec: str) -> str | None:
    if not RELEASE.match(spec):
        return f"{spec}: a grpcio release is grpcio==VERSION"
    return spec_error(spec, spec)


AXIS = ReleaseAxis(
    stack="grpc",
    option="--hpc-grpc-python",
    conformance=(
        "--pyargs",
        "hpccomm_suites.grpc",
        "-m",
        "conformance",
        f"--hpc-grpc-peers={PYTHON_PEERS}",
    ),
    perf=(
        "--pyargs",
        "hpccomm_suites.grpc.test_perf_tf_grpc_bench",
        "-k",
        "tf_grpc_p2p and uniform",
        f"--hpc-grpc-peers={PYTHON_PEERS}",
        "--hpc-grpc-modes=raw",
    ),
    spec_error=release_error,
    all_releases=every_release,
    line=lambda spec: "grpcio",
    order=order,
    describe=describe,
)
