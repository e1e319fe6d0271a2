"""pytest plugin of the MPI stack (pytest11: hpccomm_mpi): its option and fixtures.

Tests ask for `mpi_name` (parametrized over --hpc-mpi), `mpi_runtime` and `mpi_sweeps`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from pytest_hpccomm.placement import LOOPBACK, NETNS
from pytest_hpccomm.stacks.mpi.conformance import (ConformanceError, ConformancePeer,
                                                   register_settings)
from pytest_hpccomm.stacks.mpi.conformance_peer import PLANTS
from pytest_hpccomm.stacks.mpi.driver import Sweep, SweepFailed, SweepSettings, run_sweep
from pytest_hpccomm.stacks.mpi.runtime import MpiRuntime, MpiUnavailable, resolve

DEFAULT_MPIS = "openmpi,mpich"


def pytest_addoption(parser: pytest.Parser) -> None:
    help_ = ("MPIs to test, comma-separated: environment names (openmpi, openmpi4, mpich; made "
             "by `python -m pytest_hpccomm.cluster.mpi create NAME`) or paths to a system "
             f"mpirun (default {DEFAULT_MPIS})")
    parser.getgroup("hpccomm").addoption("--hpc-mpi", default=None, dest="hpc_mpi", help=help_)
    parser.addini("hpc_mpi", help_, default=DEFAULT_MPIS)
    parser.getgroup("hpccomm").addoption(
        "--hpc-mpi-plant", choices=PLANTS, default=None, dest="hpc_mpi_plant",
        help="TEST ONLY: plant a known bug in the MPI conformance peer (validates the suite: "
             "the conformance tests must fail)")


def mpi_names(config: pytest.Config) -> list[str]:
    value = config.getoption("hpc_mpi") or config.getini("hpc_mpi") or DEFAULT_MPIS
    names = [n.strip() for n in str(value).split(",") if n.strip()]
    if not names:
        raise pytest.UsageError("--hpc-mpi: empty list")
    return names


JOB_TIMEOUT = {"quick": 1200.0, "full": 7200.0}  # hard cap of a session's conformance job


@pytest.hookimpl(trylast=True)  # after the core plugin's, which builds the HpcConfig
def pytest_configure(config: pytest.Config) -> None:
    mpi_names(config)  # a bad value is a usage error before any test runs
    if not config.pluginmanager.has_plugin("hpccomm"):
        return  # `-p no:hpccomm`: the core plugin and its session are off
    from pytest_hpccomm.plugin import hpc_session_of

    register_settings(hpc_session_of(config).cfg.profile)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "mpi_name" in metafunc.fixturenames:
        metafunc.parametrize("mpi_name", mpi_names(metafunc.config), scope="session")


class MpiSweeps:
    """Session cache: one job per (MPI, placement, benchmark); failures are cached too, so
    every size item of a failed sweep reports the same error without relaunching."""

    def __init__(self, profile: str, sizes: Sequence[int], slowdown: float) -> None:
        self.settings = SweepSettings.for_profile(profile)
        self.sizes = list(sizes)
        self.slowdown = slowdown
        self._done: dict[tuple[str, str, str], Sweep | SweepFailed] = {}

    def get(self, runtime: MpiRuntime, placement: str, benchmark: str,
            cluster: Any = None) -> Sweep:
        key = (runtime.name, placement, benchmark)
        if key not in self._done:
            try:
                self._done[key] = run_sweep(runtime, placement, benchmark, self.sizes,
                                            self.settings, self.slowdown, cluster)
            except SweepFailed as exc:
                self._done[key] = exc
        got = self._done[key]
        if isinstance(got, SweepFailed):
            raise got
        return got


_RUNTIMES: dict[str, MpiRuntime | MpiUnavailable] = {}


@pytest.fixture(scope="session")
def mpi_runtime(mpi_name: str) -> MpiRuntime:
    if mpi_name not in _RUNTIMES:
        try:
            _RUNTIMES[mpi_name] = resolve(mpi_name)
        except MpiUnavailable as exc:
            _RUNTIMES[mpi_name] = exc
    got = _RUNTIMES[mpi_name]
    if isinstance(got, MpiUnavailable):
        pytest.skip(str(got))
    return got


@pytest.fixture(scope="session")
def mpi_sweeps(hpc_session: Any) -> MpiSweeps:
    cfg = hpc_session.cfg
    return MpiSweeps(cfg.profile, cfg.message_sizes, cfg.inject_slowdown)


@pytest.fixture(scope="session")
def mpi_conformance_plant(pytestconfig: pytest.Config) -> str | None:
    """The planted bug to pass to the peer (None: none). Overridable by a fixture."""
    plant: str | None = pytestconfig.getoption("hpc_mpi_plant", None)
    return plant


@pytest.fixture(scope="session")
def mpi_conformance_peer(mpi_runtime: MpiRuntime, hpc_placement: str,
                         mpi_conformance_plant: str | None, hpc_session: Any,
                         request: pytest.FixtureRequest) -> Iterator[ConformancePeer]:
    """The session's conformance peer for (mpi_name, hpc_placement); reaped at session end,
    also when a test or the start fails."""
    if hpc_placement not in (LOOPBACK, NETNS):
        pytest.skip(f"conformance peer runs on {LOOPBACK} or {NETNS}; placement "
                    f"{hpc_placement!r} needs a TCP control channel (not implemented)")
    cluster = request.getfixturevalue("hpc_virtual_cluster") if hpc_placement == NETNS else None
    profile = hpc_session.cfg.profile
    peer = ConformancePeer(mpi_runtime, hpc_placement, cluster, plant=mpi_conformance_plant,
                           job_timeout=JOB_TIMEOUT.get(profile, JOB_TIMEOUT["quick"]))
    try:
        try:
            _ = peer.info  # starts it
        except ConformanceError as exc:
            pytest.fail(str(exc), pytrace=False)
        yield peer
    finally:
        peer.close()
