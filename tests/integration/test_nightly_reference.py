"""The nightly against a reference build, end to end on real MPI jobs: each night measures Open
MPI's latency in paired rounds against the reference (the same build, `--hpc-reference
mpi=openmpi`, the candidate being what `--hpc-mpi` names), the history keeps each night's
paired ratio, and the ratio gate (`--hpc-ratio-gate`) judges the series after every night.

Three clean nights, then three nights whose candidate carries a 4x canary (a change of its code
only): the gate cannot judge before six nights (levels of three), and on the sixth it fails the
night naming the step, the night it started and the canary in the fingerprint difference. Why
4x: the gate's change points pass Otava's merge test at p < 0.001, over two levels of three
nights a t test with 4 degrees of freedom (t > 8.6); 3-round ratios of this latency spread
night to night by up to ~0.15 in log (one A-vs-A night read 1.32), so a 2x step (log 0.69)
reached it in one series of two, a 4x step (log 1.39, t ~ 11 at that spread) in both. What
a drift applied to both sides does to the series is measured in benchmarks/nightly_drift.py.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3

import pytest

from hpccomm_suites import DIR as SUITES_DIR
from pytest_hpccomm.cluster.mpi import CACHE_VAR, mpi_cache, mpirun_path
from tests.integration._paired import clean_judged_no_change

MPI_CACHE = mpi_cache()  # read before pytester moves HOME
SUITE = SUITES_DIR / "mpi" / "test_perf_osu.py"
ARGS = [
    "-k",
    "osu_latency",
    "--hpc-mpi=openmpi",
    "--hpc-reference=mpi=openmpi",
    "--hpc-sizes=8,1K",
    "--hpc-ab-rounds=3",
    "--hpc-launcher=local",
    "--hpc-system=nightly",
    "--hpc-history=h.sqlite",
    "--hpc-ratio-gate=3",
    "--hpc-results=r.json",
    "--hpc-markdown=summary.md",
    "-p",
    "no:cacheprovider",
    "--import-mode=importlib",
]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        mpirun_path("openmpi") is None,
        reason="MPI environment 'openmpi' not created (hpccomm mpi create openmpi)",
    ),
]


def test_the_ratio_gate_fails_the_night_a_candidate_step_completes_a_level(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CACHE_VAR, str(MPI_CACHE))
    pytester.copy_example(str(SUITE))
    for night in range(1, 7):
        canary = ["--hpc-inject-slowdown=4"] if night >= 4 else []
        r = pytester.runpytest_subprocess(*ARGS, *canary, timeout=300)
        out = r.stdout.str()
        r.stdout.fnmatch_lines(
            [
                "*history: run * appended to h.sqlite (paired ratios against the reference "
                "mpi=openmpi)"
            ]
        )
        session = json.loads((pytester.path / "r.json").read_text())["session"]
        assert session["paired"] == {"mpi": {"base": "openmpi", "candidate": "openmpi"}}
        assert "against the reference `openmpi`" in (pytester.path / "summary.md").read_text()
        if night < 6:  # the series is too short to judge: said, never a pass in disguise
            assert "hpccomm ratio gate: 0 failing step(s) in 0 series judged" in out, out
            assert "2 series too short to judge yet" in out, out
        if night <= 3:  # A against A: no claim that chance does not explain
            clean_judged_no_change(r, pytester.path / "r.json", 2)
    # the sixth night: both points' series stepped at night 4 (index 3), the gate says so
    with sqlite3.connect(pytester.path / "h.sqlite") as db:
        series = db.execute(
            "SELECT params_key, group_concat(round(ratio, 3)) FROM (SELECT * FROM results "
            "JOIN runs USING (run_id) ORDER BY runs.timestamp) GROUP BY params_key"
        ).fetchall()
    assert r.ret == 1, out
    assert "hpccomm ratio gate: 2 failing step(s)" in out, f"{out}\nthe nights' ratios: {series}"
    r.stdout.fnmatch_lines(
        [
            "hpccomm ratio gate: 2 failing step(s) in 2 series judged*",
            "  mpi osu_latency * night 4 (*): ratio step *(worse; 98% CI *)*"
            "changed: candidate: canary - -> 4x*",
        ]
    )
    assert "hpccomm ratio gate: 2 failing" in (pytester.path / "summary.md").read_text()
    with sqlite3.connect(pytester.path / "h.sqlite") as db:
        rows = db.execute(
            "SELECT mode, ratio, ci_low, ci_high, base_median, base_fingerprint FROM results"
        ).fetchall()
    assert len(rows) == 12, rows  # 2 points x 6 nights, every one a paired ratio
    for mode, ratio, low, high, base_median, base_fp in rows:
        assert mode == "paired" and low <= ratio <= high and base_median > 0
        assert json.loads(base_fp)["implementation"] == "openmpi"


def test_the_ratio_gate_alone_fails_a_night_whose_verdicts_pass(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The gate's own exit status: three recorded nights at a third of tonight's ratio stand
    before three real A-vs-A nights (their points' keys taken from the first real one; the
    orchestrator's logic is what is tested). The real nights' paired verdicts claim nothing
    at a 50 % band, yet the third, completing a level of three, fails on the ratio step."""
    from datetime import datetime, timedelta, timezone

    from pytest_hpccomm.baselines.history import HistoryStore
    from tests.baselines.test_ratio_gate import paired

    monkeypatch.setenv(CACHE_VAR, str(MPI_CACHE))
    pytester.copy_example(str(SUITE))
    args = [a for a in ARGS if a != "--hpc-ratio-gate=3"] + ["--hpc-tolerance=0.5"]
    store = HistoryStore(pytester.path / "h.sqlite")
    for night in range(3):
        r = pytester.runpytest_subprocess(*args, "--hpc-ratio-gate=3", timeout=300)
        # the third night: its verdicts claim nothing chance does not explain, and exit 1
        clean_judged_no_change(r, pytester.path / "r.json", 2, failed_otherwise=night == 2)
        if night == 0:  # the recorded nights, a week back, each point at ratio 1/3
            keys = store.keys()
            assert len(keys) == 2, keys
            t0 = datetime.now(timezone.utc) - timedelta(days=7)
            for i in range(3):
                rows = []
                for k in keys:
                    res = paired(1 / 3, canary=None)
                    m = dataclasses.replace(
                        res.measurement,
                        benchmark=k.benchmark,
                        params=json.loads(k.params_key),
                    )
                    rows.append(
                        dataclasses.replace(res, measurement=m, system=k.system, fabric=k.fabric)
                    )
                store.append(rows, f"old{i}", t0 + timedelta(days=i))
    r.stdout.fnmatch_lines(["hpccomm ratio gate: 2 failing step(s) in 2 series judged*"])
