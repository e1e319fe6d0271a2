"""TensorFlow releases by name (`--hpc-tf-python tensorflow-cpu==VERSION`): what is one and
what is a mistake in one, the pinned venv's key (releases leave it as it was), a version the
package index lacks or an index that does not answer as a usage error before any test runs
(the real index asked, real pytest sessions configured), and the release axis of
`hpccomm matrix tf`."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.version import Version

from pytest_hpccomm.matrix.axis import adjacent_pairs, axis_for, axis_names, ordered
from pytest_hpccomm.package_index import newest_patches
from pytest_hpccomm.stacks.tf import env as tf_env
from pytest_hpccomm.stacks.tf.env import (
    TF_REQ,
    cache_key,
    is_release,
    release_error,
    release_key,
    release_version,
    spec_error,
    written_as_release,
)
from pytest_hpccomm.stacks.tf.releases import every_release

# cache_key() for Python 3.11.2 at /usr/bin/python3.11, as the code made it before releases
# (RECIPE 2, TF_REQ and TF_PINS): the `build` venv a cache holds stays the one it finds
BUILD_KEY = "b0b13c8c0998bf2a"
UNKNOWN = "tensorflow-cpu==2.0.99"  # no such release: tensorflow-cpu 2.0 had 2.0.0 - 2.0.4
SESSION = ("--hpc-history=none", "-p", "no:cacheprovider")


@pytest.mark.parametrize(
    ("spec", "version"),
    [("tensorflow-cpu==2.20.0", "2.20.0"), ("tensorflow-cpu==2.15.0.post1", "2.15.0.post1")],
)
def test_a_release_is_the_cpu_wheel_at_one_version(spec: str, version: str) -> None:
    assert written_as_release(spec) and is_release(spec)
    assert release_version(spec) == version and spec_error(spec) is None


@pytest.mark.parametrize(
    ("spec", "said"),
    [
        ("tensorflow-cpu==", "no version"),
        ("tensorflow-cpu==two", "'two' is not a version"),
        ("tensorflow==2.20.0", "'tensorflow' is not taken"),
        ("tensorflow-gpu==2.12.0", "'tensorflow-gpu' is not taken"),
        ("tensorflow-cpu>=2.20", "one version exactly"),
        ("tensorflow_cpu==2.20.0", "one version exactly"),
        ("tensorflow-cpu[and-cuda]==2.20.0", "no extras"),
    ],
)
def test_a_mistake_in_a_release_is_named(spec: str, said: str) -> None:
    assert written_as_release(spec) and not is_release(spec)
    why = spec_error(spec)
    assert why is not None and why.startswith(f"{spec}: ") and said in why, why
    assert "tensorflow-cpu==VERSION" in why
    assert release_error(spec) == why  # before the index is asked


@pytest.mark.parametrize(
    "spec", ["build", "none", "/usr/bin/python3", "venv", "./tf-2.20/bin/python", "tensorflow"]
)
def test_keywords_and_paths_are_no_releases(spec: str) -> None:
    assert not written_as_release(spec) and spec_error(spec) is None
    assert release_error(spec) is None  # a path is checked as a path


def test_the_pinned_venvs_key_is_what_it_was() -> None:
    assert cache_key(python="3.11.2", base="/usr/bin/python3.11") == BUILD_KEY
    assert cache_key() == cache_key(
        sys.version.split()[0], os.path.realpath(getattr(sys, "_base_executable", sys.executable))
    )
    # a release's venv is another (no pins: pip resolves), named by the release
    assert release_key(TF_REQ) != cache_key()
    key = release_key("tensorflow-cpu==2.20.0", "3.11.2", "/usr/bin/python3.11")
    assert key.startswith("tensorflow-cpu-2.20.0-") and key != release_key("tensorflow-cpu==2.20.0")
    assert key != release_key("tensorflow-cpu==2.19.1", "3.11.2", "/usr/bin/python3.11")


def test_the_default_release_is_the_pinned_venv() -> None:
    """tensorflow-cpu==2.21.0 (TF_REQ) is the `build` venv, said to be a release."""
    if not tf_env.release_built(TF_REQ):
        pytest.skip("the pinned TensorFlow venv is not made here (`hpccomm tf-env` makes it)")
    built, release = tf_env.ensure_env(), tf_env.release_env(TF_REQ)
    assert release.python == built.python and release.version == "2.21.0"
    assert (built.origin, release.origin) == ("built", "release")
    assert release.fingerprint()["tensorflow_origin"] == "release"


def test_a_version_the_index_lacks_is_a_usage_error_naming_the_releases(
    pytester: pytest.Pytester,
) -> None:
    why = release_error(UNKNOWN)
    assert why is not None and "tensorflow-cpu has no release 2.0.99" in why, why
    assert "Python 3." in why and {"2.20.0", "2.21.0"} <= set(
        why.split("it has ", 1)[1].split(", ")
    ), why
    assert release_error("tensorflow-cpu==2.20.0") is None

    pytester.makepyfile("def test_nothing():\n    pass\n")
    alone = pytester.runpytest_subprocess(f"--hpc-tf-python={UNKNOWN}", *SESSION)
    assert alone.ret == pytest.ExitCode.USAGE_ERROR
    alone.stderr.fnmatch_lines(
        [f"*--hpc-tf-python: {UNKNOWN}: tensorflow-cpu has no release 2.0.99 *: it has 2.21.0, *"]
    )
    paired = pytester.runpytest_subprocess(
        f"--hpc-base=tf={UNKNOWN}", f"--hpc-candidate=tf={TF_REQ}", *SESSION
    )
    assert paired.ret == pytest.ExitCode.USAGE_ERROR
    paired.stderr.fnmatch_lines([f"*--hpc-base tf: {UNKNOWN}: tensorflow-cpu has no release*"])
    malformed = pytester.runpytest_subprocess(
        f"--hpc-base=tf={TF_REQ}", "--hpc-candidate=tf=tensorflow==2.20.0", *SESSION
    )
    assert malformed.ret == pytest.ExitCode.USAGE_ERROR
    malformed.stderr.fnmatch_lines(
        ["*--hpc-candidate tf: tensorflow==2.20.0: a release is tensorflow-cpu==VERSION*"]
    )


def test_an_index_that_does_not_answer_is_a_usage_error(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The index at a port nobody listens on: pip still lists what its local sources have,
    which is no reason to call a release unknown; the message says the index did not answer.
    An empty cache: a release made already would need no index."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("PIP_INDEX_URL", f"http://127.0.0.1:{port}/simple")
    monkeypatch.setenv("PIP_RETRIES", "0")
    monkeypatch.setenv(tf_env.CACHE_VAR, str(tmp_path / "cache"))
    pytester.makepyfile("def test_nothing():\n    pass\n")
    res = pytester.runpytest_subprocess("--hpc-tf-python=tensorflow-cpu==2.20.0", *SESSION)
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    res.stderr.fnmatch_lines(
        [
            "*--hpc-tf-python: tensorflow-cpu==2.20.0: the package index did not answer: "
            f"http://127.0.0.1:{port}/simple/tensorflow-cpu/: *Connection refused*"
        ]
    )
    assert not (tmp_path / "cache").exists()  # nothing was made


def test_the_axis_is_one_line_ordered_by_version() -> None:
    assert "tf" in axis_names()
    axis = axis_for("tf")
    assert (axis.stack, axis.option) == ("tf", "--hpc-tf-python")
    given = [
        "tensorflow-cpu==2.21.0",
        "tensorflow-cpu==2.9.3",
        "tensorflow-cpu==2.15.1",
        "build",
        "tensorflow-cpu==2.15.0.post1",
    ]
    assert {axis.line(r) for r in given} == {"tensorflow-cpu"}
    assert ordered(axis, given) == [
        "tensorflow-cpu==2.9.3",
        "tensorflow-cpu==2.15.0.post1",
        "tensorflow-cpu==2.15.1",
        "build",  # the pinned 2.21.0: beside the release it pins
        "tensorflow-cpu==2.21.0",
    ]
    assert adjacent_pairs(axis, ["tensorflow-cpu==2.21.0", "tensorflow-cpu==2.20.0"]) == [
        ("tensorflow-cpu==2.20.0", "tensorflow-cpu==2.21.0")
    ]
    assert axis.describe("tensorflow-cpu==2.20.0") == "TensorFlow 2.20.0"
    assert axis.describe("build") == "TensorFlow 2.21.0, this project's pinned venv"
    assert axis.spec_error("build") is None and axis.spec_error("tensorflow-cpu==2.20.0") is None
    for bad, said in (("none", "opts TensorFlow out"), ("/no/python", "neither a release")):
        why = axis.spec_error(bad)
        assert why is not None and said in why, why
    # the suites it runs: TensorFlow's conformance items, and RecvTensor at three sizes
    assert axis.conformance == ("--pyargs", "hpccomm_suites.tf", "-m", "conformance")
    assert "test_tf_recv_tensor" in axis.perf and "--hpc-sizes=64,64K,1M" in axis.perf


def test_every_release_is_the_newest_patch_of_each_minor() -> None:
    versions = ["2.21.0", "2.20.0", "2.19.1", "2.19.0", "2.15.1", "2.15.0.post1", "2.22.0rc1"]
    assert newest_patches(versions) == ["2.15.1", "2.19.1", "2.20.0", "2.21.0"]
    every = every_release()  # the real index
    assert every[-2:] == ["tensorflow-cpu==2.20.0", "tensorflow-cpu==2.21.0"], every
    got = [Version(r.split("==")[1]) for r in every]
    assert got == sorted(got) and len({(v.major, v.minor) for v in got}) == len(got), every
    assert "tensorflow-cpu==2.19.1" in every and "tensorflow-cpu==2.19.0" not in every


def test_hpccomm_matrix_tf_refuses_what_it_cannot_test(tmp_path: Path) -> None:
    def matrix(*args: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "pytest_hpccomm", "matrix", "tf", *args]
        return subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=tmp_path)

    res = matrix(UNKNOWN, "tensorflow-cpu==", "none")
    assert res.returncode == 4, res.stderr
    assert "tensorflow-cpu has no release 2.0.99" in res.stderr and "2.20.0" in res.stderr
    assert "tensorflow-cpu==: no version" in res.stderr and "opts TensorFlow out" in res.stderr
    assert not (tmp_path / "matrix").exists()
    helped = matrix("--help")
    assert helped.returncode == 0, helped.stderr
    stacks = next(ln for ln in helped.stdout.splitlines() if "releases to compare" in ln)
    assert "tf" in stacks.split("(")[1], stacks
