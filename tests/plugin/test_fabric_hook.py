"""A fabric kind added by a plugin through `pytest_hpccomm_fabric_probes` is as selectable as a
built-in one: --hpc-fabric and the `fabric` marker accept it, its selection describes the
session, and a kind nobody registered is still a one-line usage error. Subprocess runs: the
fabric registry is process-wide and must not keep the test's kind."""

from __future__ import annotations

import pytest

from tests.plugin.test_options import usage_error_line

SHM_PLUGIN = '''
from pytest_hpccomm.fabrics import FabricSelection, FabricUnavailable


class ShmProbe:
    """Shared memory between local processes: always present, never preferred by auto."""
    kind = "shm"
    auto_rank = 99

    def select(self, inv, device, netdev):
        if netdev not in (None, "shm0"):
            return FabricUnavailable("shm", f"no shared-memory segment {netdev!r}")
        return FabricSelection("shm", None, None, None, None, "shm0", None, None, None, None,
                               None, None, "shm0 (shared memory)")


def pytest_hpccomm_fabric_probes(config):
    return [ShmProbe()]
'''

TESTS = """
import pytest


@pytest.mark.fabric("shm")
def test_on_shm(hpc_fabric):
    assert hpc_fabric.kind == "shm" and hpc_fabric.netdev == "shm0"


@pytest.mark.fabric("ethernet")
def test_on_ethernet():
    pass
"""


@pytest.fixture
def with_shm(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest(SHM_PLUGIN)
    pytester.makepyfile(test_shm=TESTS)
    return pytester


def test_a_hook_added_kind_is_selected(with_shm: pytest.Pytester) -> None:
    result = with_shm.runpytest_subprocess("--hpc-fabric=shm", "-rs")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(
        [
            "*fabric=shm -> shm: shm0 (shared memory)*",
            "*needs fabric ethernet; this session runs on shm*",
        ]
    )


def test_a_hook_added_kind_reports_why_it_is_absent(with_shm: pytest.Pytester) -> None:
    result = with_shm.runpytest_subprocess("--hpc-fabric=shm", "--hpc-netdev=eth9", "-rs")
    result.assert_outcomes(skipped=2)
    result.stdout.fnmatch_lines(["*no shared-memory segment 'eth9'*"])


def test_unregistered_kind_stays_a_usage_error(with_shm: pytest.Pytester) -> None:
    line = usage_error_line(with_shm.runpytest_subprocess("--hpc-fabric=nvlink"))
    assert "--hpc-fabric: invalid value 'nvlink'" in line and "shm" in line


def test_marker_naming_an_unregistered_kind_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(TESTS)  # no plugin: "shm" is nobody's kind
    line = usage_error_line(pytester.runpytest_subprocess("--hpc-fabric=ethernet"))
    assert "@pytest.mark.fabric('shm',)" in line
