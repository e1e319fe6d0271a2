from __future__ import annotations

from pytest_hpccomm.baselines.verdict import Outcome
from pytest_hpccomm.report.markdown import markdown_summary


def test_headline_regressions_tables_and_fingerprint(demo, session) -> None:
    md = markdown_summary(demo, session)
    lines = md.splitlines()
    assert lines[0].startswith("## pytest-hpccomm: ")
    assert "2 regression" in lines[0] and "10 new" in lines[0] and "49 pass" in lines[0]
    assert lines[0].index("regression") < lines[0].index("pass")  # worst first
    assert "system `demo-ib-2node`" in md and "fabric `ib`" in md and "profile `full`" in md
    regs = [ln for ln in lines if ln.startswith("- ❌")]
    assert len(regs) == 2
    assert any("mpi/osu_latency size=8KiB ranks=2" in ln and "tolerance" in ln for ln in regs)
    assert any("mpi/osu_barrier ranks=4" in ln for ln in regs)
    # regressions come before the per-stack table
    assert md.index("### Regressions") < md.index("### mpi")
    rows = [ln for ln in lines if ln.startswith("| ") and "---" not in ln]
    assert len(rows) == 1 + len(demo)  # header + one row per result
    row = "| osu_latency (latency) | size=8KiB ranks=2 | 1.74 µs | 2.31 µs | 1.325 | ❌ regression |"
    assert row in md
    assert "<details><summary>Environment fingerprint</summary>" in md
    assert '"hca": "mlx5_0 ConnectX-6 HDR 200 Gb/s fw 20.39.1002"' in md
    assert md.rstrip().endswith("</details>")


def test_table_per_stack_and_cells_escaped(result) -> None:
    rs = [result(stack="grpc", benchmark="unary", params={"size": 8, "scheme": "a|b"}),
          result(stack="mpi", outcome=Outcome.INCONCLUSIVE, message="cv 40% | too noisy")]
    md = markdown_summary(rs, {})
    assert md.index("### grpc") < md.index("### mpi")
    assert "scheme=a\\|b" in md
    assert "### Inconclusive" in md and "cv 40% \\| too noisy" in md


def test_empty_session(result) -> None:
    md = markdown_summary([], {"system": "s"})
    assert md.startswith("## pytest-hpccomm: ") and "no results" in md
    assert "|" not in md


def test_engine_wording_is_not_repeated_next_to_the_name(result) -> None:
    r = result(params={"size": 8}, outcome=Outcome.REGRESSION,
               message="regression: osu_latency size=8: median 2 us vs baseline 1 us (ratio 2.000)")
    md = markdown_summary([r], {})
    assert "- ❌ **mpi/osu_latency size=8B**: median 2 us vs baseline 1 us (ratio 2.000)" in md
