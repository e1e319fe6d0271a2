"""TensorFlow's release axis for `hpccomm matrix tf`: the package index's tensorflow-cpu wheels
(`tensorflow-cpu==2.20.0`), each made into its venv on first use (pip resolving its
dependencies; what it resolved is kept in the venv's marker), and what `--hpc-tf-python` takes
besides: `build` (the pinned venv of TF_REQ) and a Python or venv that has TensorFlow. One
line, ordered by TensorFlow's version.

`--all` takes the newest patch of each minor release with a wheel for this Python (2.12.1,
2.13.1, ..., 2.20.0, 2.21.0 for Python 3.11): a pair of adjacent releases is then one minor
upgrade, the step a cluster's TensorFlow module takes, and patches (security and crash fixes,
2.15.0.post1 a re-packaging) would double the pairs without another runtime to compare. A
patch is named to compare it (`hpccomm matrix tf tensorflow-cpu==2.19.0
tensorflow-cpu==2.19.1`).
"""

from __future__ import annotations

import sys

from packaging.version import InvalidVersion, Version

from pytest_hpccomm.cache import python_in
from pytest_hpccomm.matrix.axis import ReleaseAxis
from pytest_hpccomm.package_index import ask_index, newest_patches
from pytest_hpccomm.stacks.tf.env import (
    PACKAGE,
    RELEASE_FORM,
    TF_REQ,
    TfEnv,
    release_error,
    release_version,
    written_as_release,
)
from pytest_hpccomm.stacks.tf.plugin import BUILD, IMPLS, NONE


def every_release() -> list[str]:
    """The newest patch of each minor with a wheel for this Python on the index, oldest first;
    [] when the index does not answer (said on stderr: the other sources' listing is no
    picture of the releases)."""
    listing = ask_index(PACKAGE, sys.executable, only_binary=True)
    if listing.problem:
        print(f"{PACKAGE}: the package index did not answer: {listing.problem}", file=sys.stderr)
        return []
    return [f"{PACKAGE}=={v}" for v in newest_patches(listing.versions)]


def line(spec: str) -> str:
    return PACKAGE  # one line: every TensorFlow is compared with its neighbours


def _found(spec: str) -> TfEnv | None:
    """The TensorFlow a Python or venv has (its probe, once per process; None: none)."""
    got = IMPLS.peek(spec)
    return got if isinstance(got, TfEnv) else None


def _version(spec: str) -> str | None:
    """The TensorFlow version a name stands for, without making anything: a release's, the
    pinned venv's; a Python's by its probe."""
    if spec == BUILD:
        return release_version(TF_REQ)
    if written_as_release(spec):
        return release_version(spec)
    if python_in(spec) is None:
        return None
    env = _found(spec)
    return env.version if env else None


def order(spec: str) -> tuple[object, ...]:
    """A release by its version; `build` by TF_REQ's; a Python by what its TensorFlow reports."""
    try:
        return (Version(_version(spec) or "0"), spec)
    except InvalidVersion:
        return (Version("0"), spec)


def describe(spec: str) -> str:
    """ "TensorFlow 2.20.0" (a release); the pinned venv or a Python said so."""
    version = _version(spec)
    if written_as_release(spec) and version:
        return f"TensorFlow {version}"
    if spec == BUILD:
        return f"TensorFlow {version}, this project's pinned venv"
    return f"TensorFlow {version} at {spec}" if version else "no TensorFlow found"


def spec_problem(spec: str) -> str | None:
    """Why the matrix cannot test `spec` (a usage error): a malformed release or one the index
    lacks (naming those it has), `none`, or a path that is no Python."""
    if spec == NONE:
        return f"`{NONE}` opts TensorFlow out: the matrix needs a TensorFlow to test"
    if spec == BUILD:
        return None
    if written_as_release(spec):
        return release_error(spec)
    if python_in(spec) is None:
        return (
            f"{spec!r} is neither a release ({RELEASE_FORM}), `{BUILD}` nor a Python or venv "
            "with TensorFlow"
        )
    return None


AXIS = ReleaseAxis(
    stack="tf",
    option="--hpc-tf-python",
    conformance=("--pyargs", "hpccomm_suites.tf", "-m", "conformance"),
    perf=(
        "--pyargs",
        "hpccomm_suites.tf.test_perf_tf",
        "-k",
        "test_tf_recv_tensor",
        "--hpc-launcher=local",
        "--hpc-sizes=64,64K,1M",
    ),
    spec_error=spec_problem,
    all_releases=every_release,
    line=line,
    order=order,
    describe=describe,
)
