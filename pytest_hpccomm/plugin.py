"""pytest entry point (pytest11: hpccomm). Thin: options, markers, fixtures, summary.

The work lives in config (options), session (discovery and fingerprint), skips (skip
semantics), judge (verdicts against baselines) and report/ (outputs).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from pytest_hpccomm import hookspecs
from pytest_hpccomm.config import HpcConfig, add_options, build_config
from pytest_hpccomm.fabrics import FabricSelection, FabricUnavailable
from pytest_hpccomm.session import HpcSession
from pytest_hpccomm.skips import MARKERS, check_marker_args, skip_reason

SESSION_KEY = pytest.StashKey[HpcSession]()


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    for line in MARKERS:
        config.addinivalue_line("markers", line)
    config.stash[SESSION_KEY] = HpcSession.open(config, build_config(config))


def hpc_session_of(config: pytest.Config) -> HpcSession:
    return config.stash[SESSION_KEY]


def pytest_report_header(config: pytest.Config) -> list[str]:
    hpc = hpc_session_of(config)
    sel = hpc.selection
    where = sel.description if isinstance(sel, FabricSelection) else f"ABSENT: {sel.reason}"
    return [f"hpccomm: fabric={hpc.cfg.fabric} -> {sel.kind}: {where}",
            f"hpccomm: system={hpc.system} profile={hpc.cfg.profile} "
            f"launcher={hpc.cfg.launcher} baselines={hpc.cfg.baselines}"]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    hpc = hpc_session_of(config)
    for item in items:
        marks = list(item.iter_markers())
        check_marker_args(item.nodeid, marks, hpc)
        reason = skip_reason(marks, hpc)
        if reason:
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(scope="session")
def hpc_session(pytestconfig: pytest.Config) -> HpcSession:
    return hpc_session_of(pytestconfig)


@pytest.fixture(scope="session")
def hpc_config(hpc_session: HpcSession) -> HpcConfig:
    return hpc_session.cfg


@pytest.fixture(scope="session")
def hpc_fabric(hpc_session: HpcSession) -> FabricSelection:
    """The fabric this session tests on; skips the test (with what was found) when absent."""
    sel = hpc_session.selection
    if isinstance(sel, FabricUnavailable):
        pytest.skip(sel.reason)
    return sel


@pytest.fixture(scope="session")
def hpc_fingerprint(hpc_session: HpcSession) -> dict[str, Any]:
    return hpc_session.fingerprint
