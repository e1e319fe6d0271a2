"""A gRPC the user names (--hpc-grpc-prefix, --hpc-grpc-build, either side of a paired run)
that is not there is a one-line usage error (exit 4) naming the option and the path; one that
is there but cannot be built here fails the native items naming the option. Only the default
(the system's gRPC, named by nobody) may skip when the toolchain is absent."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpccomm_suites import DIR as SUITES_DIR
from tests.builders import usage_error_line

SUITE = SUITES_DIR / "grpc" / "test_perf_tf_grpc_bench.py"
USES_NATIVE = "def test_native(grpc_lab):\n    grpc_lab.native()\n"
ARGS = (
    "--hpc-history=none",
    "--hpc-baselines=bl",
    "-p",
    "no:cacheprovider",
    "--import-mode=importlib",
)


def test_a_prefix_that_is_not_a_directory(pytester: pytest.Pytester) -> None:
    pytester.copy_example(str(SUITE))
    line = usage_error_line(pytester.runpytest_subprocess("--hpc-grpc-prefix=/typo", *ARGS))
    assert "--hpc-grpc-prefix /typo: not a directory" in line


def test_a_prefix_without_grpc(pytester: pytest.Pytester, tmp_path: Path) -> None:
    (tmp_path / "include").mkdir()
    (tmp_path / "lib" / "pkgconfig").mkdir(parents=True)
    pytester.copy_example(str(SUITE))
    line = usage_error_line(pytester.runpytest_subprocess(f"--hpc-grpc-prefix={tmp_path}", *ARGS))
    assert f"--hpc-grpc-prefix {tmp_path}: no gRPC installation there" in line


def test_a_build_that_is_not_a_directory(pytester: pytest.Pytester) -> None:
    pytester.copy_example(str(SUITE))
    line = usage_error_line(pytester.runpytest_subprocess("--hpc-grpc-build=/typo", *ARGS))
    assert "--hpc-grpc-build /typo: not a directory" in line


def test_a_build_without_a_peer_fails(pytester: pytest.Pytester, tmp_path: Path) -> None:
    pytester.makepyfile(USES_NATIVE)
    result = pytester.runpytest_subprocess(f"--hpc-grpc-build={tmp_path}", *ARGS)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"*--hpc-grpc-build {tmp_path}: no readable build.json*"])


@pytest.mark.parametrize("side", ["candidate", "base"])
def test_a_paired_prefix_that_is_absent(pytester: pytest.Pytester, side: str) -> None:
    sides = {"base": "system", "candidate": "system", side: "/typo"}
    pytester.copy_example(str(SUITE))
    line = usage_error_line(
        pytester.runpytest_subprocess(
            f"--hpc-base=grpc={sides['base']}", f"--hpc-candidate=grpc={sides['candidate']}", *ARGS
        )
    )
    assert f"--hpc-{side} grpc=/typo: not a directory" in line


def no_compiler(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A PATH with no C++ compiler: the native peer cannot be built (NativeUnavailable)."""
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.delenv("CXX", raising=False)


def test_no_toolchain_skips_only_when_nobody_named_a_grpc(
    pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    prefix = tmp_path / "g"
    (prefix / "include" / "grpcpp").mkdir(parents=True)
    (prefix / "include" / "grpcpp" / "grpcpp.h").write_text("")
    no_compiler(monkeypatch, tmp_path)
    pytester.makepyfile(USES_NATIVE)
    default = pytester.runpytest_subprocess("-rs", *ARGS)
    default.assert_outcomes(skipped=1)  # the system's gRPC, asked for by nobody
    named = pytester.runpytest_subprocess(f"--hpc-grpc-prefix={prefix}", *ARGS)
    named.assert_outcomes(failed=1)
    named.stdout.fnmatch_lines(
        [f"*--hpc-grpc-prefix {prefix}: native gRPC peer: no C++ compiler on PATH*"]
    )


def test_no_toolchain_fails_a_paired_run(
    pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    no_compiler(monkeypatch, tmp_path)
    pytester.makepyfile(USES_NATIVE)
    result = pytester.runpytest_subprocess(
        "--hpc-base=grpc=system", "--hpc-candidate=grpc=system", *ARGS
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*--hpc-candidate grpc=system: native gRPC peer: no C++ compiler on PATH*"]
    )
