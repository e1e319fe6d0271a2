"""History store (SQLite), change points via Otava, and the `history` CLI."""

from __future__ import annotations

import io
import sqlite3
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest

from pytest_hpccomm.__main__ import main
from pytest_hpccomm.baselines.history import (
    HistoryStore,
    change_points,
    default_history_path,
)
from pytest_hpccomm.baselines.result import RunResult
from pytest_hpccomm.baselines.verdict import Outcome
from pytest_hpccomm.measure.measurement import param_key
from tests.builders import make_result

T0 = datetime(2024, 6, 1, 2, 0, tzinfo=timezone.utc)
FP = {"device": "mlx5_0", "stacks": {"mpi": {"version": "5.0.3"}}}


def result(
    median: float, *, benchmark: str = "osu_latency", size: int = 8, system: str = "sysA"
) -> RunResult:
    return make_result(
        benchmark=benchmark,
        params={"size": size},
        samples=(median * 0.99, median, median * 1.01),
        outcome=Outcome.NEW,
        baseline=None,
        nodeid=f"hpccomm_suites/mpi/test_perf.py::test_{benchmark}[{size}]",
        system=system,
        fabric="ib",
        fingerprint=FP,
    )


def step_medians(n_before: int = 15, n_after: int = 15, seed: int = 0) -> list[float]:
    rng = np.random.default_rng(seed)
    return list(np.r_[rng.normal(3.0, 0.03, n_before), rng.normal(3.6, 0.03, n_after)])


def record_series(store: HistoryStore, medians: list[float]) -> None:
    for i, med in enumerate(medians):
        store.append(
            [result(med), result(900.0 + i, benchmark="osu_bw", size=1 << 20)],
            run_id=f"run{i:03d}",
            timestamp=T0 + timedelta(days=i),
            commit=f"{i:040x}",
        )


def test_default_location_honours_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert default_history_path() == tmp_path / "pytest-hpccomm" / "history.sqlite"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert default_history_path() == Path.home() / ".cache" / "pytest-hpccomm" / "history.sqlite"


def test_append_and_series_in_time_order(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path / "h" / "history.sqlite")
    # Appended out of order: the series comes back by timestamp.
    assert store.append([result(3.2)], "r2", T0 + timedelta(hours=2)) == 1
    store.append([result(3.0)], "r0", T0.timestamp())
    store.append([result(3.1)], "r1", T0 + timedelta(hours=1), commit="abc")
    pts = store.series("sysA", "ib", "mpi", "osu_latency", param_key({"size": 8}))
    assert [(p.run_id, p.median, p.unit) for p in pts] == [
        ("r0", 3.0, "us"),
        ("r1", 3.1, "us"),
        ("r2", 3.2, "us"),
    ]
    assert pts[0].timestamp == T0
    assert store.commits(["r1", "r0"]) == {"r1": "abc", "r0": None}
    assert store.series("sysA", "ib", "mpi", "osu_latency", param_key({"size": 16})) == []


def test_reappending_a_run_replaces_it(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path / "history.sqlite")
    store.append([result(3.0)], "r0", T0)
    store.append([result(3.3)], "r0", T0)
    pts = store.series("sysA", "ib", "mpi", "osu_latency", param_key({"size": 8}))
    assert [p.median for p in pts] == [3.3]


def test_keys_lists_and_filters(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path / "history.sqlite")
    record_series(store, [3.0, 3.1])
    store.append([result(5.0, system="sysB")], "other", T0)
    keys = store.keys()
    assert [(k.system, k.benchmark, k.runs) for k in keys] == [
        ("sysA", "osu_bw", 2),
        ("sysA", "osu_latency", 2),
        ("sysB", "osu_latency", 1),
    ]
    assert [k.system for k in store.keys(benchmark="osu_latency")] == ["sysA", "sysB"]
    assert store.keys(params_key=param_key({"size": 1 << 20}))[0].benchmark == "osu_bw"


def test_timestamp_must_be_aware(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        HistoryStore(tmp_path / "h.sqlite").append([result(3.0)], "r", datetime(2024, 1, 1))


def test_reading_missing_db_raises(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no history database"):
        HistoryStore(tmp_path / "none.sqlite").series("a", "b", "c", "d", "{}")
    assert not (tmp_path / "none.sqlite").exists()


def test_other_schema_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    HistoryStore(path).append([result(3.0)], "r", T0)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(RuntimeError, match="schema '99'"):
        HistoryStore(path).keys()


def test_step_change_is_flagged_at_the_right_index(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path / "history.sqlite")
    record_series(store, step_medians())
    pts = store.series("sysA", "ib", "mpi", "osu_latency", param_key({"size": 8}))
    cps = change_points([p.median for p in pts])
    assert [cp.index for cp in cps] == [15]
    assert cps[0].rel_change == pytest.approx(0.2, abs=0.02)
    assert cps[0].p_value < 1e-3


def test_flat_noisy_series_has_no_change_point() -> None:
    values = list(np.random.default_rng(1).normal(3.0, 0.05, 40))
    assert change_points(values) == []
    assert change_points([1.0, 2.0]) == []


def run_cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_cli_lists_benchmarks(tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite"
    record_series(HistoryStore(db), [3.0, 3.1, 3.2])
    code, out, _ = run_cli("history", "--db", str(db))
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == [
        "SYSTEM",
        "FABRIC",
        "STACK",
        "BENCHMARK",
        "PARAMS",
        "RUNS",
        "LAST",
        "RUN",
        "(UTC)",
    ]
    assert lines[2].split()[:6] == ["sysA", "ib", "mpi", "osu_bw", "size=1048576", "3"]
    assert lines[3].split()[:6] == ["sysA", "ib", "mpi", "osu_latency", "size=8", "3"]
    assert "2024-06-03 02:00" in lines[3]


def test_cli_series_flags_change_point(tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite"
    record_series(HistoryStore(db), step_medians())
    code, out, err = run_cli(
        "history", "--db", str(db), "--benchmark", "osu_latency", "--params", '{"size": 8}'
    )
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "sysA/ib/mpi osu_latency size=8 (us, 30 runs)"
    rows = {line.split()[0]: line for line in lines[3:33]}
    assert "<-- change +2" in rows["15"]
    assert sum("<-- change" in line for line in lines) == 1
    assert "run015" in rows["15"] and "2024-06-16 02:00:00" in rows["15"]
    assert lines[-1] == "1 change point(s) of the raw medians"


def test_cli_filters_and_errors(tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite"
    record_series(HistoryStore(db), [3.0, 3.1])
    code, out, _ = run_cli("history", "--db", str(db), "--benchmark", "nope")
    assert code == 0 and out.startswith("no matching series")
    code, _, err = run_cli("history", "--db", str(tmp_path / "missing.sqlite"))
    assert code == 1 and "no history database" in err
    code, _, _ = run_cli("history", "--db", str(db), "--params", "{size")
    assert code == 2
    code, _, _ = run_cli("history", "--db", str(db), "--params", "[1]")
    assert code == 2
    assert run_cli()[0] == 2  # a subcommand is required


def test_module_entry_point_runs(tmp_path: Path) -> None:
    import subprocess
    import sys

    db = tmp_path / "history.sqlite"
    record_series(HistoryStore(db), [3.0])
    proc = subprocess.run(
        [sys.executable, "-m", "pytest_hpccomm", "history", "--db", str(db)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "osu_latency" in proc.stdout


RECORDED = Path(__file__).parent / "data" / "recorded_osu_latency_medians.json"


@pytest.mark.parametrize("size", ["8", "1024", "65536"])
def test_recorded_series_step_is_flagged_and_flat_is_not(size: str, tmp_path: Path) -> None:
    """Run medians recorded from real MPI runs on this machine (see the file's "about"): the
    10 % canary slowdown from run 15 on is flagged there, through the store and the detector,
    and the 30 no-change runs (per-run noise ~3.5 %, with 5.8 us outliers at 4.9 us) are not."""
    import json

    series = json.loads(RECORDED.read_text())["series"][size]
    store = HistoryStore(tmp_path / "history.sqlite")
    record_series(store, series["step"])
    pts = store.series("sysA", "ib", "mpi", "osu_latency", param_key({"size": 8}))
    cps = change_points([p.median for p in pts])
    assert [cp.index for cp in cps] == [15]
    assert cps[0].rel_change == pytest.approx(0.10, abs=0.03)
    assert change_points(series["flat"]) == []


def test_a_multiplicative_step_in_raw_medians_is_found_on_their_logs() -> None:
    """Timings spread in proportion to their level: after a 4x step the nights spread ~4x as
    wide. On the raw medians Otava finds no change in these series (a 4x canary's nightly
    osu_latency ratios, times 20 us); on their logs the step is a shift of one spread."""
    for ratios in (
        [0.919, 1.135, 1.081, 3.66, 3.988, 5.639],
        [0.981, 1.135, 1.123, 3.608, 3.88, 5.36],
    ):
        medians = [20.0 * r for r in ratios]
        assert change_points(medians) == []  # the raw scale's miss, which log_scale mends
        found = change_points(medians, log_scale=True)
        assert [cp.index for cp in found] == [3], found
        assert 3.5 < found[0].after / found[0].before < 5.0 and found[0].p_value < 0.001
        # a magnitude floor above the step drops it; below it keeps it
        assert change_points(medians, log_scale=True, min_magnitude=4.0) == []
        assert len(change_points(medians, log_scale=True, min_magnitude=2.0)) == 1
    with pytest.raises(ValueError, match="positive"):
        change_points([1.0, 0.0, 2.0], log_scale=True)
