"""The native peer's build: precise skip reasons, the cache key, cache hits, build failures."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from pytest_hpccomm.stacks.grpc import build, wire
from pytest_hpccomm.stacks.grpc.build import (
    NativeBuildError,
    NativeUnavailable,
    Toolchain,
    cache_key,
    ensure_built,
    find_toolchain,
)

FAKE = Toolchain(
    cxx="/usr/bin/c++",
    protoc="/usr/bin/protoc",
    plugin="/usr/bin/grpc_cpp_plugin",
    cflags=("-DX",),
    libs=("-lgrpc++",),
    prefix=None,
    versions=("c++ 12", "3.21"),
)


@pytest.fixture
def sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private copy of native/ that a test may edit."""
    d = tmp_path / "native"
    shutil.copytree(build.NATIVE_DIR, d)
    monkeypatch.setattr(build, "NATIVE_DIR", d)
    return d


def test_no_compiler_is_a_skip_reason(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("CXX", raising=False)
    with pytest.raises(NativeUnavailable, match=r"no C\+\+ compiler on PATH \(apt-get install"):
        find_toolchain()


def test_missing_prefix_is_a_skip_reason(tmp_path: Path) -> None:
    if shutil.which("c++") is None and shutil.which("g++") is None:
        pytest.skip("no C++ compiler here")
    with pytest.raises(NativeUnavailable, match="--hpc-grpc-prefix .*nope is not a directory"):
        find_toolchain(tmp_path / "nope")


def test_prefix_without_grpc_is_a_skip_reason(tmp_path: Path) -> None:
    """A prefix with no grpc++.pc and no headers names what it looked for."""
    if shutil.which("c++") is None and shutil.which("g++") is None:
        pytest.skip("no C++ compiler here")
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    for tool in ("protoc", "grpc_cpp_plugin"):
        (bin_ / tool).write_text("#!/bin/sh\necho libprotoc 0\n")
        (bin_ / tool).chmod(0o755)
    with pytest.raises(NativeUnavailable, match=f"{tmp_path}/include/grpcpp/grpcpp.h not found"):
        find_toolchain(tmp_path)


def test_cache_key_follows_sources_recipe_and_toolchain(
    sources: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = cache_key(FAKE)
    assert cache_key(FAKE) == key  # stable
    assert cache_key(dataclasses.replace(FAKE, prefix="/opt/ar-grpc")) != key
    assert cache_key(dataclasses.replace(FAKE, libs=("-lgrpc++", "-lfoo"))) != key
    monkeypatch.setattr(build, "RECIPE", build.RECIPE + 1)
    assert cache_key(FAKE) != key
    monkeypatch.setattr(build, "RECIPE", build.RECIPE - 1)
    (sources / "peer.cc").write_text((sources / "peer.cc").read_text() + "\n// edited\n")
    assert cache_key(FAKE) != key
    edited = cache_key(FAKE)
    (sources / "startup.cc").write_text((sources / "startup.cc").read_text() + "\n// edited\n")
    assert cache_key(FAKE) != edited


def test_cache_key_follows_the_generated_constants(monkeypatch: pytest.MonkeyPatch) -> None:
    """wire.h is generated from wire.py: changing a shared constant rebuilds the peer."""
    key = cache_key(FAKE)
    monkeypatch.setattr(wire, "READY", "HPCCOMM-GRPC-READY2")
    assert cache_key(FAKE) != key


def test_only_a_finished_build_counts(tmp_path: Path) -> None:
    d = tmp_path / "k"
    d.mkdir()
    for b in (*build.BINARIES, build.RSOCKET_COMPAT):
        (d / b).write_text("")
    assert build._cached(d, "k") is None  # binaries but no build.json: an interrupted build
    (d / "build.json").write_text(json.dumps({"key": "other"}))
    assert build._cached(d, "k") is None
    (d / "build.json").write_text(json.dumps({"key": "k", "grpc_version": "1.2.3"}))
    got = build._cached(d, "k")
    assert got is not None and got.cached and got.grpc_version == "1.2.3"


def test_second_build_comes_from_the_cache() -> None:
    try:
        first = ensure_built()
    except NativeUnavailable as e:
        pytest.skip(str(e))
    second = ensure_built()
    assert second.cached and second.directory == first.directory and second.seconds == 0
    assert second.peer.is_file() and second.hello.is_file()
    meta = json.loads((second.directory / "build.json").read_text())
    assert meta["key"] == second.key and second.directory.name == second.key
    assert (second.directory / build.GENERATED).read_text() == build.constants_header()
    repo = Path(__file__).resolve().parents[3]
    assert repo not in second.directory.parents  # the cache lives outside the repository


def test_compile_error_fails_and_leaves_no_cache_entry(sources: Path, tmp_path: Path) -> None:
    try:
        find_toolchain()
    except NativeUnavailable as e:
        pytest.skip(str(e))
    (sources / "peer.cc").write_text("#error planted compile error\n")
    cache = tmp_path / "cache"
    with pytest.raises(
        NativeBuildError, match="(?s)compiling peer.cc failed.*planted compile error"
    ):
        ensure_built(cache=cache, timeout=300)
    assert [p.name for p in cache.iterdir() if not p.name.endswith(".lock")] == []
