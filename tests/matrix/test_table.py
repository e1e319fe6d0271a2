"""The release x property table and the A/B table on known answers: the counts in each cell,
which rows differ between releases, where a failure's shrunk example, a known defect and a
skip reason are written, and what a release that did not run shows."""

from __future__ import annotations

import json
from pathlib import Path

from pytest_hpccomm.matrix import ab, table
from pytest_hpccomm.matrix.junit import Case

EXAMPLE = "Falsifying example: test_p(\n    n=37,\n)"


def matrix() -> table.ReleaseMatrix:
    old = (
        Case("m::test_p", "loopback", "fail", "AssertionError: too large\n" + EXAMPLE),
        Case("m::test_p", "netns", "pass"),
        Case("m::test_q", "", "known", "MPICH 4.0.3 defect: a symptom"),
        Case("m::test_r", "", "skip", "needs fabric ib"),
    )
    new = (
        Case("m::test_p", "loopback", "pass"),
        Case("m::test_p", "netns", "pass"),
        Case("m::test_q", "", "pass"),
        Case("m::test_r", "", "skip", "needs fabric ib"),
    )
    return table.ReleaseMatrix(
        [
            table.Column("mpich==4.0.3", old),
            table.Column("mpich==4.1.3", new),
            table.Column("mpich==9.9", (), "conformance of mpich==9.9 exit 4 after 1.0s: no"),
        ]
    )


def test_cells_count_each_outcome_and_rows_that_differ_are_marked() -> None:
    m = matrix()
    assert m.properties() == ["m::test_p", "m::test_q", "m::test_r"]
    assert table.cell_text(m.cell("m::test_p", "mpich==4.0.3")) == "1 pass, 1 fail"
    assert table.cell_text(m.cell("m::test_p", "mpich==4.1.3")) == "2 pass"
    assert table.cell_text(m.cell("m::test_q", "mpich==4.0.3")) == "1 known defect"
    assert table.cell_text(m.cell("m::test_p", "mpich==9.9")) == "-"
    assert m.differs("m::test_p") and m.differs("m::test_q")
    assert not m.differs("m::test_r")  # the release that did not run is not a difference
    assert m.failures() == 1


def test_markdown_shows_the_failure_with_its_shrunk_example_and_each_reason() -> None:
    md = table.markdown(matrix(), "hpccomm matrix mpi ...")
    rows = {ln.split(" | ")[0]: ln for ln in md.splitlines() if ln.startswith("| `m::")}
    assert rows["| `m::test_p` (differs)"].endswith("| **1 pass, 1 fail** | 2 pass | did not run |")
    assert rows["| `m::test_r`"].endswith("| 1 skip | 1 skip | did not run |")
    fails = md[md.index("### `mpich==4.0.3`: Failures") :]
    assert "1 x `test_p[loopback]`: AssertionError: too large" in fails
    assert "n=37," in fails.split("###")[1]
    assert "1 x `test_q[]`: MPICH 4.0.3 defect: a symptom" in md
    assert "### `mpich==9.9`: did not run" in md and "exit 4" in md


def test_html_colours_each_cell_by_its_worst_outcome() -> None:
    page = table.html_page(matrix(), "hpccomm matrix mpi ...", "mpi release matrix")
    row = page[page.index("<code>m::test_p</code>") :].split("</tr>")[0]
    assert '<td class="fail">1 pass, 1 fail</td>' in row
    assert '<td class="pass">2 pass</td>' in row
    assert "n=37," in page and "needs fabric ib" in page


def test_the_ab_rows_come_from_the_paired_verdicts(tmp_path: Path) -> None:
    verdict = {
        "outcome": "regression",
        "current_median": 6.0,
        "baseline_median": 5.0,
        "ratio": 1.2,
        "ci_low": 1.1,
        "ci_high": 1.3,
        "n_current": 20,
    }
    rec = {
        "measurement": {
            "benchmark": "osu_latency",
            "unit": "us",
            "direction": "lower",
            "params": {"mpi": "mpich==4.1.3", "size": 8, "placement": "loopback"},
        },
        "verdict": verdict,
    }
    unjudged = {"measurement": rec["measurement"], "verdict": None}
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"results": [rec, unjudged]}))
    (row,) = ab.read_pair(path, "mpich==4.0.3", "mpich==4.1.3", "mpi")
    assert (row.point, row.ratio, row.ci_low, row.ci_high, row.pairs) == (
        "placement=loopback size=8",
        1.2,
        1.1,
        1.3,
        20,
    )
    md = ab.markdown([ab.AbPair("mpich==4.0.3", "mpich==4.1.3", (row,))], "pytest ...")
    assert (
        "| mpich==4.0.3 → mpich==4.1.3 | osu_latency | placement=loopback size=8 | 5 us | 6 us "
        "| 1.200 (1.100–1.300) | **regression** | 20 |"
    ) in md
