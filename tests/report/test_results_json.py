from __future__ import annotations

import datetime as dt
import json
import math
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_hpccomm.baselines.verdict import Outcome
from pytest_hpccomm.measure.measurement import Direction
from pytest_hpccomm.report import results_json
from pytest_hpccomm.report.results_json import (
    benchmark_storage_path,
    load_results,
    write_pytest_benchmark_json,
    write_results,
)

SUMMARY_KEYS = {
    "n",
    "median",
    "mean",
    "min",
    "max",
    "p5",
    "p25",
    "p75",
    "p95",
    "p99",
    "stddev",
    "iqr",
    "cv",
}
VERDICT_KEYS = {
    "outcome",
    "current_median",
    "baseline_median",
    "ratio",
    "ci_low",
    "ci_high",
    "p_value",
    "tolerance",
    "message",
}
BIN = Path(sys.executable).parent


def _strict_load(path: Path) -> dict:
    def no_constants(name: str) -> None:
        raise ValueError(f"non-standard JSON constant {name}")

    return json.loads(path.read_text(encoding="utf-8"), parse_constant=no_constants)


def test_schema_session_and_records(tmp_path, result) -> None:
    rs = [
        result(
            params={"size": 1024},
            samples=(2.0, 2.2, 2.1, 1.9),
            outcome=Outcome.REGRESSION,
            message="+10% worse",
        ),
        result(params={"size": 8}, baseline=None, outcome=Outcome.NEW),
    ]
    started = dt.datetime(2025, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)
    session = {
        "system": "testsys",
        "fabric": "ethernet",
        "profile": "quick",
        "started": started,
        "finished": started.timestamp() + 60,
        "fingerprint": {"host": "h0"},
        "hosts": ["h0", "h1"],
    }
    path = write_results(tmp_path / "out" / "results.json", rs, session)
    doc = _strict_load(path)
    assert doc["schema"] == "pytest-hpccomm/results" and doc["schema_version"] == 1
    s = doc["session"]
    assert (s["system"], s["fabric"], s["profile"]) == ("testsys", "ethernet", "quick")
    assert s["started"] == "2025-01-02T03:04:05+00:00"
    assert s["finished"] == "2025-01-02T03:05:05+00:00"
    assert s["fingerprint"] == {"host": "h0"} and s["hosts"] == ["h0", "h1"]
    assert doc["counts"] == {
        "regression": 1,
        "inconclusive": 0,
        "improvement": 0,
        "new": 1,
        "pass": 0,
    }
    # sweep order: size 8 before 1024
    assert [r["measurement"]["params"]["size"] for r in doc["results"]] == [8, 1024]
    rec = doc["results"][1]
    assert rec["measurement"]["samples"] == [2.0, 2.2, 2.1, 1.9]
    assert set(rec["summary"]) == SUMMARY_KEYS
    assert rec["summary"]["n"] == 4 and rec["summary"]["median"] == pytest.approx(2.05)
    assert rec["summary"]["min"] == 1.9 and rec["summary"]["max"] == 2.2
    assert rec["summary"]["cv"] == pytest.approx(rec["summary"]["stddev"] / rec["summary"]["mean"])
    assert VERDICT_KEYS <= set(rec["verdict"])  # plus whatever the engine adds (asdict)
    assert rec["verdict"]["outcome"] == "regression" and rec["verdict"]["message"] == "+10% worse"
    # the fingerprint differs from the session's, so each record carries its own
    assert rec["fingerprint"]["host"] == "h0" and "kernel" in rec["fingerprint"]


def test_fingerprint_written_once_when_shared(tmp_path, result) -> None:
    rs = [result(params={"size": s}) for s in (1, 2, 4)]
    doc = _strict_load(write_results(tmp_path / "r.json", rs, {"system": "testsys"}))
    assert doc["session"]["fingerprint"] == dict(rs[0].fingerprint)
    assert all("fingerprint" not in rec for rec in doc["results"])


def test_round_trip(tmp_path, demo, session) -> None:
    path = write_results(tmp_path / "r.json", demo, session)
    back, info = load_results(path)
    assert info["system"] == session["system"]
    key = lambda r: (r.measurement.stack, r.measurement.key)  # noqa: E731
    assert sorted(back, key=key) == sorted(demo, key=key)


def test_non_finite_values_are_null_not_nan(tmp_path, result) -> None:
    r = result(samples=(1.0, math.inf, 2.0, math.nan), baseline=None, outcome=Outcome.NEW)
    doc = _strict_load(write_results(tmp_path / "r.json", [r], {}))
    rec = doc["results"][0]
    assert rec["measurement"]["samples"] == [1.0, None, 2.0, None]
    assert rec["summary"]["n"] == 2  # statistics over the finite samples only


def test_empty_session(tmp_path) -> None:
    doc = _strict_load(write_results(tmp_path / "r.json", [], {"system": "s"}))
    assert doc["results"] == [] and set(doc["counts"].values()) == {0}


def test_write_is_atomic(tmp_path, result, monkeypatch) -> None:
    path = tmp_path / "results.json"
    path.write_text("previous run\n")

    def broken_replace(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        write_results(path, [result()], {})
    assert path.read_text() == "previous run\n"  # the old file is intact
    assert [p.name for p in tmp_path.iterdir()] == ["results.json"]  # no temp file left
    monkeypatch.undo()
    old = os.umask(0o022)
    try:
        write_results(path, [result()], {})
    finally:
        os.umask(old)
    assert [p.name for p in tmp_path.iterdir()] == ["results.json"]
    assert stat.S_IMODE(path.stat().st_mode) == 0o644  # not mkstemp's 0600
    assert _strict_load(path)["results"][0]["nodeid"].endswith("test_osu_latency")


# --- pytest-benchmark format ----------------------------------------------------------------


def _bench_doc(tmp_path: Path, rs, **kw) -> tuple[dict, list[str]]:
    path = tmp_path / "bench.json"
    skipped = write_pytest_benchmark_json(
        path,
        rs,
        {"node": "h0", "system": "Linux"},
        {"id": "abc", "dirty": False, "project": "p"},
        **kw,
    )
    return _strict_load(path), skipped


def test_pytest_benchmark_shape_matches_its_own_export(tmp_path, result) -> None:
    from pytest_benchmark.stats import Stats

    doc, skipped = _bench_doc(tmp_path, [result(samples=(1.0, 2.0, 3.0))])
    assert skipped == []
    assert set(doc) == {"machine_info", "commit_info", "benchmarks", "datetime", "version"}
    assert doc["machine_info"] == {"node": "h0", "system": "Linux"}
    (b,) = doc["benchmarks"]
    assert set(b) == {
        "group",
        "name",
        "fullname",
        "params",
        "param",
        "extra_info",
        "options",
        "stats",
    }
    assert set(b["stats"]) == set(Stats.fields) | {"data", "iterations"}
    assert b["fullname"] == "hpccomm_suites/mpi/test_perf.py::test_osu_latency"
    assert b["name"] == "test_osu_latency"
    assert b["stats"]["data"] == pytest.approx([1e-6, 2e-6, 3e-6])  # us -> s
    assert b["stats"]["median"] == pytest.approx(2e-6)
    assert b["stats"]["ops"] == pytest.approx(1 / 2e-6)
    assert b["extra_info"]["unit"] == "us" and b["extra_info"]["stored_as"] == "seconds"


def test_rates_stored_as_reciprocal_and_other_units_skipped(tmp_path, result) -> None:
    bw = result(
        benchmark="osu_bw",
        metric="bandwidth",
        unit="MB/s",
        samples=(1000.0, 2000.0),
        direction=Direction.HIGHER_IS_BETTER,
    )
    odd = result(benchmark="efficiency", unit="%", samples=(90.0,), nodeid="t.py::test_eff")
    doc, skipped = _bench_doc(tmp_path, [bw, odd])
    assert skipped == ["t.py::test_eff"]
    (b,) = doc["benchmarks"]
    assert b["stats"]["data"] == pytest.approx([1e-3, 5e-4])  # seconds per MB
    assert b["extra_info"]["stored_as"] == "reciprocal: seconds per MB"
    assert b["extra_info"]["direction"] == "higher"
    assert "[MB/s as s/MB]" in b["group"]


def test_sweep_under_one_nodeid_gets_distinct_fullnames(tmp_path, result) -> None:
    rs = [result(params={"size": s, "ranks": 2}, nodeid="t.py::test_sweep") for s in (8, 1024)]
    doc, _ = _bench_doc(tmp_path, rs)
    names = [b["fullname"] for b in doc["benchmarks"]]
    assert names == ["t.py::test_sweep[ranks=2-size=8]", "t.py::test_sweep[ranks=2-size=1024]"]
    assert doc["benchmarks"][0]["param"] == "ranks=2-size=8"


def _cli_env() -> dict[str, str]:
    # pytest-benchmark's CLI builds a pytest Config, which would import every installed pytest11
    # plugin; isolate the format check from whatever state those plugins are in.
    return {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}


def test_pytest_benchmark_compare_reads_our_file(tmp_path, demo) -> None:
    path = tmp_path / "bench.json"
    assert write_pytest_benchmark_json(path, demo, None, None) == []
    proc = subprocess.run(
        [str(BIN / "pytest-benchmark"), "compare", str(path)],
        cwd=tmp_path,
        env=_cli_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for name in (
        "test_osu_latency[ranks=2-size=8]",
        "test_osu_bw[ranks=2-size=4194304]",
        "test_osu_barrier[ranks=4]",
        "test_allreduce[ranks=4-size=1024]",
    ):
        assert name in out
    assert "benchmark 'mpi/osu_latency/latency': 23 tests" in out
    assert "Traceback" not in out + proc.stderr


def test_py_test_benchmark_list_finds_runs_in_storage(tmp_path, demo) -> None:
    storage = tmp_path / ".benchmarks"
    first = benchmark_storage_path(storage, "hpccomm", machine_id="Linux-CPython-3.11-64bit")
    write_pytest_benchmark_json(first, demo, None, None)
    second = benchmark_storage_path(storage, "hpccomm", machine_id="Linux-CPython-3.11-64bit")
    assert (first.name, second.name) == ("0001_hpccomm.json", "0002_hpccomm.json")
    write_pytest_benchmark_json(second, demo[:5], None, None)
    proc = subprocess.run(
        [str(BIN / "py.test-benchmark"), "--storage", f"file://{storage}", "list"],
        cwd=tmp_path,
        env=_cli_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [str(first), str(second)]


def test_default_machine_and_commit_info_come_from_pytest_benchmark(
    tmp_path, result, monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)  # not a git checkout: commit info says so
    doc, _ = results_json.benchmark_document([result()], None, None)
    assert {"node", "machine", "python_version", "cpu"} <= set(doc["machine_info"])
    assert "id" in doc["commit_info"]


def test_sweep_under_a_parametrized_nodeid_keeps_pytest_id_first(tmp_path, result) -> None:
    rs = [result(params={"size": s}, nodeid="t.py::test_sweep[ib]") for s in (8, 16)]
    doc, _ = _bench_doc(tmp_path, rs)
    assert [b["name"] for b in doc["benchmarks"]] == [
        "test_sweep[ib-size=8]",
        "test_sweep[ib-size=16]",
    ]
    assert doc["benchmarks"][0]["param"] == "ib-size=8"
