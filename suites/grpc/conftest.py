"""gRPC suites: load the stack's plugin when nothing else did (its pytest11 entry point not
installed yet, no `-p pytest_hpccomm.stacks.grpc.plugin`), so `pytest suites/grpc` and a plain
`pytest` of the repo both work. With suites/grpc on the command line this conftest is an
initial one and loads the plugin in time for its options; found later during collection, it
loads it at configure time and the options take their ini values or defaults."""

from __future__ import annotations

import pytest

PLUGIN = "pytest_hpccomm.stacks.grpc.plugin"


def _load(pm: pytest.PytestPluginManager) -> None:
    if not (pm.has_plugin(PLUGIN) or pm.has_plugin("hpccomm_grpc")):
        pm.import_plugin(PLUGIN)


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    _load(pluginmanager)  # the plugin's own pytest_addoption is historic: it runs on register


def pytest_configure(config: pytest.Config) -> None:
    _load(config.pluginmanager)
