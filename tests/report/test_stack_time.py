"""Time per stack (report/stack_time.py) and its way through a real pytest session: the plugin
sums setup, call and teardown per stack marker, MPI per implementation, and prints, writes to
the results JSON and folds into the markdown what each stack cost."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pytest_hpccomm.report.markdown import markdown_summary
from pytest_hpccomm.report.stack_time import OTHER, StackTimes, stack_of


def test_stack_of_names_the_mpi_implementation_and_falls_back_to_other() -> None:
    mpi, tf = pytest.mark.stack("mpi").mark, pytest.mark.stack("tf").mark
    assert stack_of([mpi], {"mpi_name": "mpich", "hpc_size": 8}) == "mpi (mpich)"
    assert stack_of([mpi], {}) == "mpi"
    assert stack_of([tf], {"mpi_name": "openmpi"}) == "tf"  # only MPI splits by implementation
    assert stack_of([pytest.mark.slow.mark], {}) == OTHER


def test_times_sum_phases_per_item_and_rank_stacks_by_cost() -> None:
    times = StackTimes()
    times.add("tf", "t::a", 1.0, skipped=False)
    times.add("tf", "t::a", 2.5)  # call after setup: one item
    times.add("mpi (openmpi)", "m::x", 70.0)
    times.add("mpi (openmpi)", "m::y", 0.2, skipped=True)
    assert times.stacks() == ["mpi (openmpi)", "tf"]
    doc = times.as_dict()
    assert doc["tf"] == {
        "seconds": 3.5,
        "items": 1,
        "skipped": 0,
        "slowest": [{"item": "t::a", "seconds": 3.5}],
    }
    assert doc["mpi (openmpi)"]["skipped"] == 1
    assert doc["mpi (openmpi)"]["slowest"][0] == {"item": "m::x", "seconds": 70.0}
    lines = times.lines(wall=80.0)
    assert lines[0].split()[:4] == ["mpi", "(openmpi)", "1:10", "95.3"]
    assert "(1 skipped)" in lines[0] and "slowest: m::x" in lines[1]
    assert lines[-1].startswith("items 1:14, session wall 1:20")


def test_no_time_no_lines() -> None:
    assert StackTimes().lines(wall=3.0) == []


def test_markdown_folds_the_time_per_stack() -> None:
    session: dict[str, Any] = {
        "system": "s",
        "fabric": "ethernet",
        "stack_seconds": {
            "grpc": {
                "seconds": 61.4,
                "items": 3,
                "skipped": 0,
                "slowest": [{"item": "g::p|q", "seconds": 40}],
            }
        },
    }
    text = markdown_summary([], session)
    assert "<summary>Time per stack (setup + call + teardown)</summary>" in text
    assert "| grpc | 61 s | 3 | g::p\\|q (40 s) |" in text


def test_a_session_reports_time_per_stack(pytester: pytest.Pytester) -> None:
    """A real inner session: two stacks' items (one sleeps in a fixture's setup) are timed,
    printed after the run and written to the results JSON."""
    pytester.makepyfile(
        test_two_stacks="""
        import time, pytest

        @pytest.fixture
        def slow_setup():
            time.sleep(0.3)

        @pytest.mark.stack("mpi")
        def test_mpi(mpi_name, slow_setup):
            pass

        @pytest.mark.stack("grpc")
        def test_grpc():
            time.sleep(0.1)

        def test_plain():
            pass
    """
    )
    results = pytester.path / "r.json"
    res = pytester.runpytest(
        "--hpc-fabric=ethernet",
        "--hpc-history=none",
        "-rs",
        # the default --hpc-mpi (openmpi,mpich): may skip where absent
        f"--hpc-results={results}",
        "--hpc-baselines=bl",
    )
    assert res.ret == 0  # the MPI items may skip here (no MPI): they are timed all the same
    out = res.stdout.str()
    assert "hpccomm time per stack (setup + call + teardown)" in out
    rows = {
        ln.split("  ")[0].strip(): ln
        for ln in out.splitlines()
        if ln.startswith(("mpi (", "grpc ", "other "))
    }
    assert set(rows) == {"mpi (openmpi)", "mpi (mpich)", "grpc", "other"}, out
    assert (
        "0.3 s" in rows["mpi (openmpi)"]
        or "0.4 s" in rows["mpi (openmpi)"]
        or "skipped" in rows["mpi (openmpi)"]
    ), out


def test_results_json_carries_the_time_per_stack(pytester: pytest.Pytester) -> None:
    """With a recorded result, the results JSON's session holds stack_seconds."""
    pytester.makepyfile(
        test_one="""
        import time, pytest
        from pytest_hpccomm.measure.measurement import Direction, Measurement

        def test_grpc(hpc_record):
            time.sleep(0.2)
            hpc_record(Measurement(stack="grpc", benchmark="b", params={"size": 1},
                                   samples=tuple(1.0 + i / 100 for i in range(20)), unit="us",
                                   direction=Direction.LOWER_IS_BETTER, metric="latency"))
    """
    )
    results = pytester.path / "r.json"
    res = pytester.runpytest(
        "--hpc-fabric=ethernet",
        "--hpc-history=none",
        f"--hpc-results={results}",
        "--hpc-baselines=bl",
    )
    res.assert_outcomes(passed=1)
    doc = json.loads(results.read_text())
    grpc = doc["session"]["stack_seconds"][OTHER]  # no stack marker: counted as other
    assert grpc["items"] == 1 and grpc["seconds"] >= 0.2
    assert grpc["slowest"][0]["item"].endswith("test_one.py::test_grpc")
