"""--hpc-grpc-build: a native peer built elsewhere is taken only when it was built from this
checkout's sources and has every binary (build.prebuilt)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_hpccomm.stacks.grpc import build


def fake_build(d: Path, sources: str, binaries: tuple[str, ...]) -> Path:
    d.mkdir()
    (d / "build.json").write_text(
        json.dumps({"key": "k1", "sources": sources, "grpc_version": "1.51.1"})
    )
    for name in binaries:
        (d / name).write_bytes(b"")
    return d


ALL = (*build.BINARIES, build.RSOCKET_COMPAT)


def test_a_build_of_these_sources_is_taken(tmp_path: Path) -> None:
    got = build.prebuilt(fake_build(tmp_path / "b", build.source_digest(), ALL))
    assert got.cached and got.key == "k1" and got.grpc_version == "1.51.1"
    assert got.rsocket_compat == tmp_path / "b" / build.RSOCKET_COMPAT


def test_a_build_of_other_sources_is_refused(tmp_path: Path) -> None:
    with pytest.raises(build.NativeBuildError, match="other sources than this checkout's"):
        build.prebuilt(fake_build(tmp_path / "b", "0" * 64, ALL))


def test_a_build_missing_a_binary_is_refused(tmp_path: Path) -> None:
    with pytest.raises(build.NativeBuildError, match=f"lacks {build.RSOCKET_COMPAT}"):
        build.prebuilt(fake_build(tmp_path / "b", build.source_digest(), tuple(build.BINARIES)))


def test_no_build_json_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(build.NativeBuildError, match="no readable build.json"):
        build.prebuilt(tmp_path)
