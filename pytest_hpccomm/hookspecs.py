"""Extension points. A new fabric, stack or report registers through these; nothing else edits."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pluggy
import pytest

if TYPE_CHECKING:
    from pytest_hpccomm.baselines.result import RunResult
    from pytest_hpccomm.fabrics import FabricProbe
    from pytest_hpccomm.measure.host_speed import HostSpeed
    from pytest_hpccomm.stack_probes import StackProbe

hookspec = pluggy.HookspecMarker("pytest")


@hookspec
def pytest_hpccomm_fabric_probes(config: pytest.Config) -> list[FabricProbe]:
    """Return extra fabric probes (kinds beyond the built-in six)."""
    raise NotImplementedError


@hookspec
def pytest_hpccomm_stack_probes(config: pytest.Config) -> list[StackProbe]:
    """Return extra stacks under test (beyond mpi, grpc, tf, horovod, verbs)."""
    raise NotImplementedError


@hookspec
def pytest_hpccomm_paired_stacks(config: pytest.Config) -> list[str]:
    """Stacks whose implementation a paired A/B run can swap (--hpc-base/--hpc-candidate)."""
    raise NotImplementedError


@hookspec(firstresult=True)
def pytest_hpccomm_under_test(config: pytest.Config, stack: str) -> str | None:
    """The implementation this run tests for `stack`, as --hpc-candidate would name it: the
    candidate side of a nightly against a reference (--hpc-reference STACK=IMPL) when the
    candidate is not named. None: not yours, or the run names several (a usage error asks
    for --hpc-candidate). E.g.::

        @pytest.hookimpl(optionalhook=True)
        def pytest_hpccomm_under_test(config, stack):
            if stack != "toy":
                return None
            return config.getoption("hpc_toy_python") or "build"
    """
    raise NotImplementedError


@hookspec(firstresult=True)
def pytest_hpccomm_foreseen_skip(item: pytest.Item) -> str | None:
    """Why `item` would skip once its fixtures start, when collection already tells (a point
    the benchmark does not define, a placement the session's fabric cannot take); None: it
    would not, or only running it tells. `hpccomm doctor` asks, so its forecast names the
    skips a run would show. Answer with the reason the fixture skips with, e.g.::

        @pytest.hookimpl(optionalhook=True)
        def pytest_hpccomm_foreseen_skip(item):
            params = stack_params(item, "toy")  # stacks.contract: None for another stack's
            if params is not None and params.get("hpc_size") == 0:
                return ZERO_BYTES  # the same constant the fixture skips with
            return None
    """
    raise NotImplementedError


@hookspec(firstresult=True)
def pytest_hpccomm_host_probe(config: pytest.Config) -> HostSpeed | None:
    """This host's reference probe (measure/host_speed.py), taken once per session when a
    stored verdict or a baseline update needs it; None: the built-in probe."""
    raise NotImplementedError


@hookspec
def pytest_hpccomm_fingerprint(config: pytest.Config) -> dict[str, Any]:
    """Contribute fields to the environment fingerprint attached to every result."""
    raise NotImplementedError


@hookspec
def pytest_hpccomm_report(
    config: pytest.Config, results: list[RunResult], session_info: dict[str, Any]
) -> None:
    """Called once at session end with every judged result: write an extra report."""
