"""pytest plugin of the TensorFlow stack (pytest11: hpccomm_tf): options, probe,
parametrization (sizes, packings, knobs) and the TensorFlow under test, resolved once.

The fixtures the suites ask for are fixtures.py (loaded as this plugin's pytest_plugins).
More: docs/explanation/internals.md (pytest_hpccomm.stacks.tf.fixtures).
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from pytest_hpccomm.session import hpc_session_of
from pytest_hpccomm.stack_probes import StackProbe
from pytest_hpccomm.stacks.contract import (
    Implementations,
    PythonEnvStack,
    Releases,
    named_in_pair,
)
from pytest_hpccomm.stacks.tf import allreduce, ps
from pytest_hpccomm.stacks.tf.env import (
    RELEASE_FORM,
    TfEnv,
    ensure_env,
    is_release,
    release_env,
    release_error,
    user_env,
    written_as_release,
)
from pytest_hpccomm.stacks.tf.perf import bench_sizes
from pytest_hpccomm.stacks.tf.wire import KNOBS

pytest_plugins = ["pytest_hpccomm.stacks.tf.fixtures"]  # the fixtures the suites ask for

BUILD, NONE = "build", "none"
STACK = "tf"
# what a fabric that is not TCP gets told (the items' fabric mark)
TCP_ONLY = "TensorFlow's gRPC runs over TCP: use --hpc-fabric=ipoib"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("hpccomm")
    help_py = (
        "the TensorFlow to test: `build` (default: a venv with tensorflow-cpu made once "
        "in the cache, hpccomm tf-env), a release `tensorflow-cpu==VERSION` of the package "
        "index (its venv made once in the cache on first use), a Python or venv that "
        "has TensorFlow (a cluster's), or `none` (skip the TensorFlow items)"
    )
    group.addoption("--hpc-tf-python", default=None, dest="hpc_tf_python", help=help_py)
    parser.addini("hpc_tf_python", help_py, default=BUILD)


def tf_python(config: pytest.Config) -> str:
    return str(config.getoption("hpc_tf_python") or config.getini("hpc_tf_python") or BUILD)


RELEASES = Releases(RELEASE_FORM, written_as_release, release_error)
TF = PythonEnvStack(STACK, "--hpc-tf-python", "TensorFlow", (BUILD, NONE), tf_python, RELEASES)
pytest_hpccomm_foreseen_skip = TF.foreseen_skip
pytest_hpccomm_paired_stacks = TF.paired_stacks
pytest_hpccomm_under_test = TF.under_test


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    TF.check(config)


@dataclass(frozen=True)
class TfProbe:
    """Cheap: the user opted out or not (the venv is made, or the user's checked, on use)."""

    python: str
    name: str = STACK
    named: bool = False  # a side of a paired run

    def unavailable_reason(self) -> str | None:
        if self.python == NONE and not self.named:
            return "TensorFlow opted out (--hpc-tf-python=none)"
        return None

    def versions(self) -> dict[str, str]:
        return {}  # the resolved TensorFlow's facts travel in each result (TfEnv.fingerprint)


@pytest.hookimpl(optionalhook=True)
def pytest_hpccomm_stack_probes(config: pytest.Config) -> list[StackProbe]:
    return [TfProbe(tf_python(config), named=named_in_pair(config, STACK))]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if not metafunc.config.pluginmanager.has_plugin("hpccomm"):
        return
    from pytest_hpccomm.measure.sizes import format_size

    for name, select in (
        ("tf_size", bench_sizes),
        ("tf_allreduce_size", allreduce.bench_sizes),
        ("tf_ps_size", ps.bench_sizes),
    ):
        if name in metafunc.fixturenames:
            sizes = select(hpc_session_of(metafunc.config).cfg.message_sizes)
            metafunc.parametrize(name, sizes, ids=[format_size(s) for s in sizes])
    if "tf_packing" in metafunc.fixturenames:
        metafunc.parametrize("tf_packing", list(allreduce.PACKINGS))
        metafunc.parametrize(
            "tf_pack_size", allreduce.PACK_SIZES, ids=[format_size(s) for s in allreduce.PACK_SIZES]
        )
    if "tf_knob" in metafunc.fixturenames:
        metafunc.parametrize("tf_knob", [k for k in KNOBS if k != "default"])
        metafunc.parametrize(
            "tf_knob_size", allreduce.KNOB_SIZES, ids=[format_size(s) for s in allreduce.KNOB_SIZES]
        )


def _resolve(python: str) -> TfEnv:
    if python == BUILD:
        return ensure_env()
    return release_env(python) if is_release(python) else user_env(python)


IMPLS = Implementations(_resolve, unavailable=())  # a venv made on demand: never absent


def resolve_env(python: str, named_by: str | None = None) -> TfEnv:
    """The TensorFlow of `python`, resolved once per process (contract.Implementations)."""
    return IMPLS(python, named_by)
