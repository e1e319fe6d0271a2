from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

# The plugins load scipy.stats on first use; a pytester in-process session drops the modules
# first imported inside it, and scipy's C extensions cannot be imported twice in a process
# ("cannot load module more than once"): load it here, before any in-process session
import scipy.stats  # noqa: F401

from pytest_hpccomm import retries
from pytest_hpccomm.cluster.virtual import VirtualCluster
from tests import expected_skips, group_times
from tests.guests import GUEST_MARKER, BootTimes, GuestBoots, SessionResult
from tests.slurm_hosts import slurm_virtual_hosts
from tests.sshd_hosts import ssh_virtual_hosts
from tests.virtual_slurm import VirtualSlurm

pytest_plugins = ["pytester"]


@pytest.fixture
def retry_ledger(monkeypatch: pytest.MonkeyPatch) -> list[retries.Retry]:
    """A retry ledger of the test's own: the retries a test provokes on purpose (a busy
    neighbour, stand-in readings) are its evidence, not the session's; the session's
    `hpccomm retries` then counts only those nothing asked for."""
    ledger: list[retries.Retry] = []
    monkeypatch.setattr(retries, "_ledger", ledger)
    return ledger


EXTENDED = (
    "extended: a test of the project beyond the test command's CI budget (minutes of emulated "
    "guests or of repeated timed runs; CONTRIBUTING.md lists what the default run then leaves "
    "unchecked); ci/test.sh deselects it, `bash ci/test.sh -m extended` runs these alone"
)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", EXTENDED)
    config.addinivalue_line("markers", GUEST_MARKER)
    expected_skips.register(config)  # HPCCOMM_EXPECTED_SKIPS=1 (ci/test.sh): others fail
    group_times.register(config)  # where the test command's time goes, per directory
    config.pluginmanager.register(BootTimes(), "hpccomm-guest-boots")


@pytest.fixture(scope="module")
def ssh_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[VirtualCluster, Path]]:
    """Two virtual-cluster hosts, each with its own sshd (tests/sshd_hosts.py): (cluster, the
    --hpc-rsh-agent that reaches them); one per test module, torn down after it."""
    with ssh_virtual_hosts(tmp_path_factory.mktemp("ssh")) as got:
        yield got


@pytest.fixture(scope="module")
def slurm_hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VirtualSlurm]:
    """A real SLURM on two virtual-cluster hosts (tests/slurm_hosts.py), one per test module;
    skips naming what is missing (root, SLURM, libpmix-dev, the Open MPI environment)."""
    with slurm_virtual_hosts(tmp_path_factory.mktemp("slurm")) as slurm:
        yield slurm


@pytest.fixture(scope="session")
def guest_boots(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> GuestBoots:
    """The run's shared guest boots (tests/guests.py), one per fabric."""
    boots = GuestBoots(items=request.session.items, root=tmp_path_factory.mktemp("guests"))
    times = request.config.pluginmanager.get_plugin("hpccomm-guest-boots")
    if isinstance(times, BootTimes):  # the terminal summary lists the boots
        times.boots = boots
    return boots


@pytest.fixture
def guest_session(guest_boots: GuestBoots, request: pytest.FixtureRequest) -> SessionResult:
    """The guest session the item declares with `@pytest.mark.guest(fabric, name)`."""
    return guest_boots.result(request.node)
