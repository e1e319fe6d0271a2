"""The retry ledger (retries.py): only named transient causes retry, and a session's retries
are counted where a CI user looks (terminal, JUnit global properties, results JSON, markdown)."""

from __future__ import annotations

import json

import pytest

from pytest_hpccomm import retries


@pytest.fixture(autouse=True)
def own_ledger(monkeypatch: pytest.MonkeyPatch) -> None:
    """This module's retries are stand-ins: counted in a ledger of their own, not in the
    session's that runs these tests."""
    monkeypatch.setattr(retries, "_ledger", [])


RETRYING = """
from pytest_hpccomm import retries
from pytest_hpccomm.measure.measurement import Direction, Measurement

def test_job_ran_again(hpc_record):
    retries.count(retries.CONTENTION, 2, reason="busiest: 4242 some peer (0.93)")
    retries.count(retries.HOST_MOVED)
    hpc_record(Measurement(stack="mpi", benchmark="fake_latency", params={"size": 8},
                           samples=tuple(10.0 + 0.01 * i for i in range(20)), unit="us",
                           direction=Direction.LOWER_IS_BETTER, metric="latency"))
"""


def test_a_retry_for_an_unnamed_cause_is_refused() -> None:
    with pytest.raises(ValueError, match="retry for an unnamed cause 'flaky'"):
        retries.count("flaky")


def test_the_summary_line_counts_per_cause() -> None:
    assert retries.summary_line({}) == "retries: none"
    assert (
        retries.summary_line({"cores shared": 2, "host speed moved between sessions": 1})
        == "retries: 3 (cores shared 2, host speed moved between sessions 1)"
    )
    assert (
        retries.property_name("host speed moved between sessions")
        == "hpccomm_retries_host_speed_moved_between_sessions"
    )


def test_the_detail_lines_are_bounded() -> None:
    retries.count(retries.CONTENTION, 3, reason="x\n  y")
    got = retries.since(0)
    assert [r.reason for r in got] == ["x y"] * 3
    assert retries.detail_lines(got, most=2)[-1] == "... and 1 more"
    assert retries.counts(retries.mark()) == {}


def test_a_sessions_retries_reach_every_output(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_retrying=RETRYING)
    result = pytester.runpytest(
        "--hpc-system=box",
        "--hpc-baselines=bl",
        "--hpc-history=none",
        "--hpc-fabric=ethernet",
        "--junitxml=r/junit.xml",
        "--hpc-results=r/out.json",
        "--hpc-markdown=r/summary.md",
    )
    result.assert_outcomes(passed=1)
    line = "retries: 3 (cores shared 2, host speed moved between sessions 1)"
    # each retry says where it happened and what the code saw, in the order they happened
    result.stdout.fnmatch_lines(
        [
            f"hpccomm {line}",
            "  retried: cores shared: test_retrying.py::test_job_ran_again: busiest: 4242 some"
            " peer (0.93)",
            "  retried: cores shared: test_retrying.py::test_job_ran_again: busiest: 4242 some"
            " peer (0.93)",
            "  retried: host speed moved between sessions: test_retrying.py::test_job_ran_again: ?",
        ]
    )
    junit = (pytester.path / "r/junit.xml").read_text()
    assert '<property name="hpccomm_retries" value="3"' in junit
    assert '<property name="hpccomm_retries_cores_shared" value="2"' in junit
    assert '<property name="hpccomm_retries_host_speed_moved_between_sessions" value="1"' in junit
    session = json.loads((pytester.path / "r/out.json").read_text())["session"]
    assert session["retries"] == {"host speed moved between sessions": 1, "cores shared": 2}
    assert line in (pytester.path / "r/summary.md").read_text()
    # the next session starts from none
    again = pytester.runpytest(
        "--hpc-system=box",
        "--hpc-baselines=bl",
        "--hpc-history=none",
        "--hpc-fabric=ethernet",
        "--junitxml=r/junit2.xml",
        "-k",
        "nothing",
    )
    assert (
        '<property name="hpccomm_retries" value="0"' in (pytester.path / "r/junit2.xml").read_text()
    )
    assert again.ret == pytest.ExitCode.NO_TESTS_COLLECTED
