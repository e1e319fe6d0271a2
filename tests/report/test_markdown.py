from __future__ import annotations

import dataclasses

from pytest_hpccomm.baselines.verdict import Outcome
from pytest_hpccomm.report.common import outcome_counts
from pytest_hpccomm.report.markdown import LISTED, MAX_CHARS, markdown_summary, units
from tests.report.demo import ci_results

PR_COMMENT_LIMIT = 65_536  # GitHub refuses a longer comment


def test_headline_changes_series_and_fingerprint(demo, session) -> None:
    md = markdown_summary(demo, session)
    lines = md.splitlines()
    counts = outcome_counts(demo)
    assert lines[0].startswith("## pytest-hpccomm: ")
    for o, n in counts.items():
        assert (f"{n} {o.value}" in lines[0]) == bool(n)
    assert lines[0].index("regression") < lines[0].index("pass")  # worst first
    assert "system `demo-ib-2node`" in md and "fabric `ib`" in md and "profile `full`" in md
    regs = [ln for ln in lines if ln.startswith("- ❌")]
    assert len(regs) == counts[Outcome.REGRESSION]
    assert any("mpi/osu_latency size=8KiB ranks=2" in ln and "tolerance" in ln for ln in regs)
    assert any("mpi/osu_barrier ranks=4" in ln for ln in regs)
    assert len([ln for ln in lines if ln.startswith("- 🚀")]) == counts[Outcome.IMPROVEMENT]
    assert not any(ln.startswith("- ⚠️") for ln in lines)  # inconclusive: counted per reason
    per_reason = [
        ln
        for ln in lines
        if ln.startswith("| ")
        and ln.count("|") == 4
        and ln.split("|")[1].strip().replace(",", "").isdigit()
    ]
    assert (
        sum(int(ln.split("|")[1].strip().replace(",", "")) for ln in per_reason)
        == counts[Outcome.INCONCLUSIVE]
    )
    # what changed comes before the cross-stack table and the per-stack tables
    assert (
        md.index("### Regressions")
        < md.index("### Improvements")
        < md.index("### Cross-stack")
        < md.index("### Every result")
    )
    # one row per series: OSU latency's 23 sizes in one row, its verdicts counted
    row = next(ln for ln in lines if ln.startswith("| osu_latency (latency) | ranks=2 |"))
    assert "23 sizes 1B–4MiB" in row and "❌ 1" in row and "🚀 1" in row and "🆕 2" in row
    grpc = [ln for ln in lines if ln.startswith("| tf_grpc_p2p_latency (latency) |")]
    assert len(grpc) == 4 and all("5 schemes 8B–1MiB" in ln for ln in grpc)
    assert "<details><summary>Environment fingerprint</summary>" in md
    assert '"hca": "mlx5_0 ConnectX-6 HDR 200 Gb/s fw 20.39.1002"' in md
    assert md.rstrip().endswith("</details>")
    assert units(md) <= MAX_CHARS


def test_per_stack_tables_are_folded_and_cells_escaped(result) -> None:
    rs = [
        result(stack="grpc", benchmark="unary", params={"size": 8, "scheme": "a|b"}),
        result(
            stack="mpi",
            outcome=Outcome.INCONCLUSIVE,
            message="cv 40% | too noisy",
            reason="cv 40% | too noisy",
        ),
    ]
    md = markdown_summary(rs, {})
    assert md.index("<b>grpc</b>") < md.index("<b>mpi</b>")
    assert md.count("<details>") == md.count("</details>") == 3  # and the fingerprint
    assert "scheme=a\\|b" in md
    assert "### Inconclusive (1), by reason" in md and "| 1 | cv 40% \\| too noisy |" in md


def test_inconclusive_points_are_counted_per_reason_not_listed(result) -> None:
    """A run of a thousand inconclusive points is a few rows, one per reason, largest first."""
    rs = [
        result(
            params={"size": s},
            outcome=Outcome.INCONCLUSIVE,
            reason="spread between sessions wider than the tolerance band (sd 6.1% over 3 "
            "sessions): more jobs cannot narrow it",
        )
        for s in range(900)
    ]
    rs += [
        result(
            params={"size": s},
            outcome=Outcome.INCONCLUSIVE,
            reason="too noisy: CI wider than the tolerance band",
        )
        for s in range(100)
    ]
    md = markdown_summary(rs, {"gate": {"line": "hpccomm gate OFF: 0 of 1000 points"}})
    lines = md.splitlines()
    assert lines[1] == "**gate OFF: 0 of 1000 points**"  # the gate first
    rows = [ln for ln in lines if ln.startswith("| 900 |") or ln.startswith("| 100 |")]
    assert rows[0].startswith("| 900 | spread between sessions wider than the tolerance band |")
    assert rows[1].startswith("| 100 | too noisy |")
    assert not any(ln.startswith("- ⚠️") for ln in lines)


def test_empty_session(result) -> None:
    md = markdown_summary([], {"system": "s"})
    assert md.startswith("## pytest-hpccomm: ") and "no results" in md
    assert "|" not in md


def test_engine_wording_is_not_repeated_next_to_the_name(result) -> None:
    r = result(
        params={"size": 8},
        outcome=Outcome.REGRESSION,
        message="regression: osu_latency size=8: median 2 us vs baseline 1 us (ratio 2.000)",
    )
    md = markdown_summary([r], {})
    assert "- ❌ **mpi/osu_latency size=8B**: median 2 us vs baseline 1 us (ratio 2.000)" in md


def test_a_ci_run_without_baselines_fits_a_pr_comment(session) -> None:
    rs = ci_results()
    assert len(rs) > 2238 and all(r.verdict.outcome is Outcome.NEW for r in rs)
    md = markdown_summary(rs, session)
    assert units(md) < PR_COMMENT_LIMIT
    assert md.splitlines()[0] == f"## pytest-hpccomm: 🆕 {len(rs):,} new"
    assert f"🆕 {len(rs):,} results have no baseline" in md
    # every stack's series table made it whole: nothing cut
    assert "more rows" not in md
    for stack in ("mpi", "grpc", "tf", "horovod"):
        assert f"<details><summary><b>{stack}</b>" in md


def test_the_cap_holds_whatever_the_session_and_says_what_it_cut(result, session) -> None:
    long = "x" * 400
    regs = [
        result(
            params={"size": s, "pad": long},
            outcome=Outcome.REGRESSION,
            message=f"regression: osu_latency: median 2 us {long}",
        )
        for s in range(1, 501)
    ]
    many = [
        dataclasses.replace(
            r,
            measurement=dataclasses.replace(
                r.measurement, params={**r.measurement.params, "copy": i}
            ),
        )
        for i in range(4)
        for r in ci_results()
    ]
    md = markdown_summary(regs + many, session)
    assert units(md) <= MAX_CHARS < PR_COMMENT_LIMIT
    assert "### Regressions (500)" in md
    assert len([ln for ln in md.splitlines() if ln.startswith("- ❌")]) == LISTED
    assert f"- … {500 - LISTED} more regression in report.html / results.json" in md
    assert "more rows in report.html / results.json" in md  # the cut is stated
    assert md.count("<details>") == md.count("</details>")  # a cut table still closes
    assert "size cap: everything is in" not in md  # the sections kept within it themselves
    named = markdown_summary(regs, {"report": "out/r.html", "results": "out/r.json"})
    assert "`out/r.html` / `out/r.json`" in named


def test_cross_stack_table_with_link_share(demo) -> None:
    md = markdown_summary(demo, {})
    section = md.split("### Cross-stack")[1].split("</details>")[0]
    verbs = [ln for ln in section.splitlines() if ln.startswith("|") and "| verbs |" in ln]
    assert verbs and all("of 200 Gbit/s" in ln for ln in verbs)
    others = [ln for ln in section.splitlines() if ln.startswith("|  | MPI |")]
    assert others and all("link rate unknown" in ln and "%" not in ln for ln in others)
    assert "| 8B | verbs |" in section and "| gRPC native raw |" in section
    assert "Horovod allreduce (collective)" in section
