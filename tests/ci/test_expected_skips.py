"""The test command's skip check (tests/expected_skips.py): a skip it does not expect fails
the run and is listed with its reason; the expected ones pass; off, nothing changes."""

from __future__ import annotations

import pytest

from tests.expected_skips import ENV

SKIPPING = """
import pytest

def test_other_fabric():
    pytest.skip("needs fabric ib; this session runs on ethernet (eth0 (Ethernet))")

def test_namespace():
    pytest.skip("cannot create a network namespace: Operation not permitted")
"""


def test_an_unexpected_skip_fails_the_run(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makeconftest(
        "from tests import expected_skips\n\n"
        "def pytest_configure(config):\n"
        "    expected_skips.register(config)\n"
    )
    pytester.makepyfile(test_skipping=SKIPPING)
    monkeypatch.setenv(ENV, "1")
    checked = pytester.runpytest("-p", "no:cacheprovider")
    checked.assert_outcomes(skipped=2)
    assert checked.ret == pytest.ExitCode.TESTS_FAILED
    checked.stdout.fnmatch_lines(
        [
            "*expected skips: 1, unexpected: 1*",
            "UNEXPECTED SKIP test_skipping.py::test_namespace: cannot create a network namespace: "
            "Operation not permitted",
        ]
    )
    alone = pytester.runpytest("-p", "no:cacheprovider", "-k", "other_fabric")
    assert alone.ret == pytest.ExitCode.OK
    monkeypatch.setenv(ENV, "0")
    off = pytester.runpytest("-p", "no:cacheprovider")
    assert off.ret == pytest.ExitCode.OK
    assert "UNEXPECTED SKIP" not in off.stdout.str()


def test_items_are_grouped_by_directory_for_the_time_summary() -> None:
    from tests.group_times import group_of

    assert group_of("tests/integration/test_mpi_gate.py::test_x") == "tests/integration"
    assert group_of("tests/stacks/grpc/test_grpc_rdma_guest.py::t[a]") == "tests/stacks/grpc"
    assert group_of("hpccomm_suites/mpi/test_perf_osu.py::test_osu[8]") == "hpccomm_suites/mpi"
    assert group_of("test_top.py::t") == "test_top.py"
