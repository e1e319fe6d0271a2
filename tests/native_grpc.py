"""The native gRPC peer for the plugin's own tests that run it through pytester: built (or
taken from the cache) once, else the test skips naming what is missing (no toolchain, no
gRPC C++ development files). A build that fails is NativeBuildError: it propagates, a failure."""

from __future__ import annotations

import pytest

from pytest_hpccomm.stacks.grpc.build import (
    CACHE_VAR,
    NativeBuild,
    NativeBuildError,
    NativeUnavailable,
    cache_root,
    ensure_built,
)

CACHE = cache_root()  # read at import, before pytester moves HOME


def native_peer_or_skip(monkeypatch: pytest.MonkeyPatch) -> None:
    """Point the pytester session at the project's cache and make sure the peer is built."""
    monkeypatch.setenv(CACHE_VAR, str(CACHE))
    native_build_or_skip()


def native_build_or_skip() -> NativeBuild:
    """The built native peer; skips naming what is missing, fails in one line on a failed
    build."""
    try:
        return ensure_built()
    except NativeUnavailable as e:
        pytest.skip(str(e))
    except NativeBuildError as e:
        pytest.fail(str(e), pytrace=False)
