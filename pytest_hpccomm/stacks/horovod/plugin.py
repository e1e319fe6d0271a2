"""pytest plugin of the Horovod stack (pytest11: hpccomm_horovod): options, probe,
parametrization (controllers, sizes, models) and the Horovod under test, resolved once.

The fixtures the suites ask for are fixtures.py (loaded as this plugin's pytest_plugins).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from typing import Any

import pytest

from pytest_hpccomm.cluster.mpi import mpi_prefix
from pytest_hpccomm.session import hpc_session_of
from pytest_hpccomm.stack_probes import StackProbe
from pytest_hpccomm.stacks.contract import (
    Implementations,
    PythonEnvStack,
    named_in_pair,
)
from pytest_hpccomm.stacks.horovod.conformance import register_settings
from pytest_hpccomm.stacks.horovod.driver import controller_list
from pytest_hpccomm.stacks.horovod.env import (
    MPI_ENV,
    HorovodEnv,
    ensure_built,
    user_env,
)
from pytest_hpccomm.stacks.horovod.perf import KNOB_SIZES, bench_sizes
from pytest_hpccomm.stacks.horovod.wire import CONTROLLERS, PLANTS

pytest_plugins = ["pytest_hpccomm.stacks.horovod.fixtures"]  # the fixtures the suites ask for

BUILD, NONE = "build", "none"
STACK = "horovod"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("hpccomm")
    help_py = (
        "the Horovod to test: `build` (default: built once from the PyPI sdist into the "
        "cache, hpccomm build-horovod), a Python or venv that has "
        "Horovod (a cluster's), or `none` (skip the Horovod items)"
    )
    group.addoption("--hpc-horovod-python", default=None, dest="hpc_horovod_python", help=help_py)
    parser.addini("hpc_horovod_python", help_py, default=BUILD)
    help_c = f"Horovod controllers to test, comma-separated (default {','.join(CONTROLLERS)})"
    group.addoption(
        "--hpc-horovod-controllers", default=None, dest="hpc_horovod_controllers", help=help_c
    )
    parser.addini("hpc_horovod_controllers", help_c, default=",".join(CONTROLLERS))
    group.addoption(
        "--hpc-horovod-plant",
        choices=PLANTS,
        default=None,
        dest="hpc_horovod_plant",
        help="TEST ONLY: plant a known bug in the Horovod peer (validates the "
        "suite: the conformance tests must fail)",
    )


def horovod_python(config: pytest.Config) -> str:
    return str(
        config.getoption("hpc_horovod_python") or config.getini("hpc_horovod_python") or BUILD
    )


def controllers(config: pytest.Config) -> list[str]:
    value = (
        config.getoption("hpc_horovod_controllers")
        or config.getini("hpc_horovod_controllers")
        or ",".join(CONTROLLERS)
    )
    try:
        return controller_list(str(value))
    except ValueError as exc:
        raise pytest.UsageError(f"--hpc-horovod-controllers: {exc}") from None


HOROVOD = PythonEnvStack(STACK, "--hpc-horovod-python", "Horovod", (BUILD, NONE), horovod_python)
pytest_hpccomm_foreseen_skip = HOROVOD.foreseen_skip
pytest_hpccomm_paired_stacks = HOROVOD.paired_stacks
pytest_hpccomm_under_test = HOROVOD.under_test


ONLY_MARK = "horovod_controllers"
ONLY_MARK_LINE = (
    f"{ONLY_MARK}(*names): the Horovod controllers a test applies to (upstream runs it on "
    "those alone); the others get no item"
)


@pytest.hookimpl(trylast=True)  # after the core plugin's, which builds the HpcConfig
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", ONLY_MARK_LINE)
    controllers(config)  # a bad value is a usage error before any test runs
    if config.pluginmanager.has_plugin("hpccomm"):
        register_settings(hpc_session_of(config).cfg.profile)
    HOROVOD.check(config)


@dataclass(frozen=True)
class HorovodProbe:
    """Cheap: what the build needs is on PATH, or the user named a Python (checked later)."""

    python: str
    name: str = STACK
    named: bool = False  # a side of a paired run: what is missing fails its items instead

    def unavailable_reason(self) -> str | None:
        if self.named:
            return None
        if self.python == NONE:
            return "Horovod opted out (--hpc-horovod-python=none)"
        if self.python != BUILD:
            return None
        missing = [tool for tool in ("g++", "patch") if shutil.which(tool) is None]
        if not (mpi_prefix(MPI_ENV) / "bin" / "mpicc").is_file():
            missing.append(f"the {MPI_ENV} venv (hpccomm mpi create {MPI_ENV})")
        if missing:
            return f"Horovod cannot be built here: missing {', '.join(missing)}"
        return None

    def versions(self) -> dict[str, str]:
        return {}  # the resolved Horovod's facts travel in each result (HorovodEnv.fingerprint)


@pytest.hookimpl(optionalhook=True)
def pytest_hpccomm_stack_probes(config: pytest.Config) -> list[StackProbe]:
    return [HorovodProbe(horovod_python(config), named=named_in_pair(config, STACK))]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "horovod_controller" in metafunc.fixturenames:
        metafunc.parametrize("horovod_controller", _controllers_of(metafunc), scope="session")
    if not metafunc.config.pluginmanager.has_plugin("hpccomm"):
        return
    from pytest_hpccomm.measure.sizes import format_size

    selected = bench_sizes(hpc_session_of(metafunc.config).cfg.message_sizes)
    knob_sizes = [s for s in selected if s in KNOB_SIZES]  # those the session selected
    for name, sizes in (("horovod_size", selected), ("horovod_knob_size", knob_sizes)):
        if name in metafunc.fixturenames:
            metafunc.parametrize(name, sizes, ids=[format_size(s) for s in sizes])
    if "horovod_model" in metafunc.fixturenames:
        # ResNet-50 takes minutes per job on 2 cores: the full profile's
        full = hpc_session_of(metafunc.config).cfg.profile == "full"
        metafunc.parametrize(
            "horovod_model",
            ["small_cnn"] + ([pytest.param("resnet50", marks=pytest.mark.slow)] if full else []),
        )


def _controllers_of(metafunc: pytest.Metafunc) -> list[Any]:
    """The chosen controllers a test applies to (ONLY_MARK); none of them: one item that
    skips saying which it needs and which were chosen."""
    chosen = controllers(metafunc.config)
    only = metafunc.definition.get_closest_marker(ONLY_MARK)
    if only is None:
        return list(chosen)
    kept = [c for c in chosen if c in only.args]
    if kept:
        return kept
    why = (
        f"applies to the {' and '.join(only.args)} controller only; "
        f"--hpc-horovod-controllers chose {','.join(chosen)}"
    )
    return [pytest.param(only.args[0], marks=pytest.mark.skip(reason=why))]


def _resolve(python: str) -> HorovodEnv:
    return ensure_built() if python == BUILD else user_env(python)


IMPLS = Implementations(_resolve)  # errors.Unavailable: skip; errors.Broken: fail


def resolve_env(python: str, named_by: str | None = None) -> HorovodEnv:
    """The Horovod of `python`, resolved once per process (contract.Implementations)."""
    return IMPLS(python, named_by)
