"""A paired run's failed items are in the A/B table: a point whose side failed (a job that did
not run, a result that was wrong) has no verdict, so without them the table would show the
pair as if the point had not been asked for; an item failed by its verdict (a regression) is
in the table as its rows already. Read from the JUnit XML of a real pytest run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_hpccomm.matrix import ab
from pytest_hpccomm.matrix.cli import pair_failures, pair_files, pair_junit, pair_known

BASE, CAND = "tensorflow-cpu==2.20.0", "tensorflow-cpu==2.21.0"


def judged(tmp_path: Path, verdicts: dict[str, str]) -> Path:
    """The pair's results JSON holding a verdict for each named case of test_tf_recv_tensor."""
    results = pair_files(tmp_path, BASE, CAND)[0]
    results.parent.mkdir(parents=True)
    recs = [
        {
            "nodeid": f"test_perf_tf.py::test_tf_recv_tensor[{case}]",
            "verdict": {"outcome": o, "ratio": 1.2},
        }
        for case, o in verdicts.items()
    ]
    results.write_text(json.dumps({"results": recs}))
    return results


def test_a_failed_item_of_a_pair_is_in_its_table(pytester: pytest.Pytester, tmp_path: Path) -> None:
    pytester.makepyfile(
        test_perf_tf="""
        import pytest

        @pytest.mark.parametrize("size", ["64B", "64KiB", "1MiB"])
        def test_tf_recv_tensor(size):
            if size == "1MiB":
                pytest.fail("base: 1048576 B: tf_recv_tensor: the worker read | other bytes",
                            pytrace=False)
            if size == "64KiB":
                pytest.fail("regression: tf_recv_tensor size=65536", pytrace=False)
        """
    )
    # what the run's results JSON holds: the 64 B and 64 KiB points judged, 1 MiB not
    results = judged(tmp_path, {"64B": "regression", "64KiB": "regression"})
    xml = pair_junit(tmp_path, BASE, CAND)
    assert xml.name == "tensorflow-cpu-2.20.0_vs_tensorflow-cpu-2.21.0.xml"
    assert xml.parent == results.parent
    pytester.runpytest(f"--junitxml={xml}", "-p", "no:hpccomm").assert_outcomes(passed=1, failed=2)

    failures = pair_failures(xml, results, BASE, CAND)
    assert failures == (
        "test_perf_tf::test_tf_recv_tensor[1MiB]: base: 1048576 B: tf_recv_tensor: "
        "the worker read | other bytes",
    )
    assert pair_failures(tmp_path / "none.xml", results, BASE, CAND) == ()
    # without a results JSON (the run ended early) every failed item is one
    assert len(pair_failures(xml, tmp_path / "none.json", BASE, CAND)) == 2

    pair = ab.AbPair(BASE, CAND, (), "", failures)
    md = ab.markdown([pair], "pytest ...")
    row = next(ln for ln in md.splitlines() if "**failed**" in ln)
    assert row.startswith(f"| {BASE} → {CAND} | **failed**: test_perf_tf::")
    assert "read \\| other" in row and row.count(" |") == 8, row  # the table's 8 columns
    assert "class='fail'>failed: test_perf_tf::test_tf_recv_tensor[1MiB]" in ab.html_table([pair])


def test_a_point_a_known_defect_ended_is_in_its_table_as_not_judged(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    """An item that a known defect ended (xfail) has no verdict either: the table says so, with
    the defect, and it is not a failure (the matrix's exit status counts failures only)."""
    pytester.makepyfile(
        test_perf_tf="""
        import pytest

        @pytest.mark.parametrize("size", ["64B", "1MiB"])
        def test_tf_recv_tensor(size):
            if size == "1MiB":
                pytest.xfail("TensorFlow 2.20.0 defect: the first read returned an empty tensor")
        """
    )
    results = judged(tmp_path, {"64B": "pass"})
    xml = pair_junit(tmp_path, BASE, CAND)
    pytester.runpytest(f"--junitxml={xml}", "-p", "no:hpccomm").assert_outcomes(passed=1, xfailed=1)

    known = pair_known(xml, results, BASE, CAND)
    assert known == (
        "test_perf_tf::test_tf_recv_tensor[1MiB]: "
        "TensorFlow 2.20.0 defect: the first read returned an empty tensor",
    )
    assert pair_failures(xml, results, BASE, CAND) == ()
    pair = ab.AbPair(BASE, CAND, (), "", (), known)
    row = next(ln for ln in ab.markdown([pair], "pytest ...").splitlines() if "not judged" in ln)
    assert row.startswith(f"| {BASE} → {CAND} | not judged, known defect: test_perf_tf::")
    assert row.count(" |") == 8, row
    assert "not judged, known defect: test_perf_tf::test_tf_recv_tensor[1MiB]" in ab.html_table(
        [pair]
    )
