from __future__ import annotations

from pytest_hpccomm.baselines.verdict import Outcome
from pytest_hpccomm.measure.measurement import Direction
from pytest_hpccomm.report.terminal import summary_table


def _rows(lines: list[str]) -> list[str]:
    return [ln for ln in lines[2:-1] if ln]


def test_empty_session_prints_nothing() -> None:
    assert summary_table([]) == []


def test_columns_units_and_count_line(result) -> None:
    lat = result(samples=(1.049, 1.05, 1.051), baseline=1.0, outcome=Outcome.PASS)
    bw = result(
        benchmark="osu_bw",
        metric="bandwidth",
        unit="MB/s",
        direction=Direction.HIGHER_IS_BETTER,
        samples=(12000.0,) * 3,
        baseline=None,
        outcome=Outcome.NEW,
    )
    lines = summary_table([bw, lat])
    assert lines[0].split() == [
        "stack",
        "benchmark",
        "params",
        "baseline",
        "current",
        "ratio",
        "verdict",
    ]
    assert set(lines[1]) <= {"-", " "}
    lat_row = next(ln for ln in lines if "osu_latency" in ln)
    # OSU style: latency in us with 2 decimals, the row's baseline on the same scale
    assert "size=8B ranks=2" in lat_row and "1.00 us" in lat_row and "1.05 us" in lat_row
    assert "1.050" in lat_row and lat_row.endswith("PASS")
    bw_row = next(ln for ln in lines if "osu_bw" in ln)
    assert "12000.00 MB/s" in bw_row and bw_row.endswith("NEW")
    assert bw_row.split()[4] == "-"  # no baseline
    assert lines[-1] == "hpccomm: 2 results: 1 new, 1 pass"


def test_sizes_sort_numerically_and_groups_are_contiguous(result) -> None:
    sizes = [4194304, 8, 1024, 1, 65536, 0]
    rs = [result(params={"size": s, "ranks": 2}) for s in sizes]
    rs += [result(benchmark="osu_bw", params={"size": s}) for s in (64, 2)]
    rs += [result(stack="grpc", benchmark="unary", params={"size": 16})]
    rs += [result(benchmark="osu_barrier", params={"ranks": 4})]
    lines = summary_table(rs)
    rows = _rows(lines)
    assert [r.split()[0] for r in rows] == ["grpc"] + ["mpi"] * 9
    lat = [r.split()[2] for r in rows if "osu_latency" in r]
    assert lat == ["size=0B", "size=1B", "size=8B", "size=1KiB", "size=64KiB", "size=4MiB"]
    bw = [r.split()[2] for r in rows if "osu_bw" in r]
    assert bw == ["size=2B", "size=64B"]
    # one blank line between stack/benchmark groups (grpc | barrier | bw | latency)
    assert lines[2:-1].count("") == 3


def test_regressions_grep_to_complete_lines(result) -> None:
    rs = [
        result(params={"size": s}, outcome=Outcome.REGRESSION if s == 64 else Outcome.PASS)
        for s in (8, 64, 512)
    ]
    hits = [ln for ln in summary_table(rs) if "REGRESSION" in ln]
    assert len(hits) == 1
    assert hits[0].startswith("mpi") and "osu_latency" in hits[0] and "size=64B" in hits[0]
    assert summary_table(rs)[-1] == "hpccomm: 3 results: 1 regression, 2 pass"


def test_fits_120_columns_and_squeezes_long_params(demo, result) -> None:
    assert max(len(ln) for ln in summary_table(demo)) <= 120
    long = result(params={"size": 8, "payload_scheme": "skew-60-30-10-iovec-buffers" * 3})
    lines = summary_table([long], width=80)
    assert max(len(ln) for ln in lines) <= 80
    assert "~" in lines[2]  # truncation is visible, not silent


def test_several_metrics_of_one_benchmark_are_named(result) -> None:
    rs = [
        result(benchmark="allreduce", metric="busbw", unit="GB/s"),
        result(benchmark="allreduce", metric="algbw", unit="GB/s"),
    ]
    rows = _rows(summary_table(rs))
    assert [r.split()[1] for r in rows] == ["allreduce:algbw", "allreduce:busbw"]


def test_time_units_scale_to_ms_for_long_operations(result) -> None:
    r = result(samples=(250_000.0,) * 3, baseline=240_000.0)
    row = _rows(summary_table([r]))[0]
    assert "250.00 ms" in row and "240.00 ms" in row


def test_a_large_session_prints_counts_then_only_what_changed(result) -> None:
    from pytest_hpccomm.report.terminal import FULL_TABLE_MAX, LISTED

    n = FULL_TABLE_MAX + 60
    outcomes = {3: Outcome.REGRESSION, 7: Outcome.IMPROVEMENT, 9: Outcome.INCONCLUSIVE}
    rs = [
        result(
            params={"size": s, "ranks": 2},
            outcome=outcomes.get(s, Outcome.PASS),
            message=f"{outcomes.get(s, Outcome.PASS).value}: osu_latency size={s}: median {s} us",
        )
        for s in range(n)
    ]
    rs += [
        result(
            stack="grpc", benchmark="unary", params={"size": 8}, baseline=None, outcome=Outcome.NEW
        )
    ]
    lines = summary_table(rs, width=150)
    assert (
        lines[0] == f"hpccomm: {n + 1} results: 1 regression, 1 inconclusive, "
        f"1 improvement, 1 new, {n - 3} pass"
    )
    assert (
        lines[1].strip() == f"grpc 1 new; mpi 1 regression, 1 inconclusive, "
        f"1 improvement, {n - 3} pass"
    )
    changed = [ln for ln in lines if ln.split()[0] in ("REGRESSION", "IMPROVEMENT", "INCONCLUSIVE")]
    # worst first, one complete line each, the message without the engine's prefix
    assert [ln.split()[0] for ln in changed] == ["REGRESSION", "IMPROVEMENT", "INCONCLUSIVE"]
    assert changed[0].startswith("REGRESSION    mpi osu_latency size=3B ranks=2: median 3 us")
    assert any(ln.startswith("new: 1 results have no baseline") for ln in lines)
    assert len(lines) <= 7 and "every result: pytest -v" in lines[-1]
    full = summary_table(rs, width=150, verbose=1)  # pytest -v: the full table
    assert len(full) == 2 + len(rs) + 1 + 1  # header, rule, rows, a group break, counts
    quiet = summary_table(rs, width=150, verbose=-1)
    assert quiet[0] == lines[0] and not any("pytest -v" in ln for ln in quiet)
    total = max(LISTED, FULL_TABLE_MAX) + 5
    many = [result(params={"size": s}, outcome=Outcome.REGRESSION) for s in range(total)]
    cut = summary_table(many, width=150)
    assert sum(ln.startswith("REGRESSION") for ln in cut) == LISTED + 1
    assert f"... {total - LISTED} more" in cut[-2]
    noisy = [
        result(
            params={"size": s},
            outcome=Outcome.INCONCLUSIVE,
            reason="too noisy: CI wider than the tolerance band",
        )
        for s in range(300)
    ]
    grouped = summary_table(noisy, width=150)
    assert [ln for ln in grouped if ln.startswith("INCONCLUSIVE")] == [
        "INCONCLUSIVE  300 x too noisy (e.g. mpi osu_latency size=0B)"
    ]


def test_ci_run_without_baselines_is_a_few_lines() -> None:
    from tests.report.demo import ci_results

    rs = ci_results()
    lines = summary_table(rs, width=150)
    assert len(lines) == 4 and lines[0] == f"hpccomm: {len(rs)} results: {len(rs)} new"
