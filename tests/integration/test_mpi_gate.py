"""The merge gate on a real benchmark: the MPI latency sweep (Open MPI, TCP over loopback).

Run 1 writes the baseline, run 2 passes against it, run 3 with the canary
(--hpc-inject-slowdown 1.5: the peers stretch every timed batch by 1.5x) fails with a readable
message and exit status 1.

A clean re-run must not fail the gate at the tolerance this test gates with, 10 %: every point
PASS, or INCONCLUSIVE with an interval that holds 1 (no change), given a few tries. PASS alone
was asked until 2026-11-24, when on a 2-core Intel guest the 8 B jobs of one session spread so
far that 30 pairs over 5 minutes were all "too noisy" (6 vs 3 jobs: 98 % CI 0.767-1.154, ratio
0.912, quiet cores): the honest verdict there, and one the gate lets through (exit 0).
The default 5 % is a statistical claim (false alarms and power, measured by benchmarks/canary.py
and tabled in the README), not something one pair of runs can assert. Nor can 10 % be asserted
of every pair: a stored baseline comes from another session, and this machine's host drifts
between sessions by more than that while the contention guard sees quiet cores. Measured on
2026-11-23, twelve consecutive quiet sessions (8 B, 3-6 pooled jobs each): medians 6.6-9.5 us,
and a clean pair at 8.37 vs 10.8 us (ratio 1.29, 98 % CI 1.18-1.44 over 3 vs 3 jobs: every job
of a session shares its mode, so no within-session interval covers it). The product's answer to
such a machine is a paired A/B run (--hpc-base/--hpc-candidate: both sides interleaved in one
session) or a tolerance above the drift the history store shows; this test retries the pair
(at least 3 tries over 5 minutes) and fails when no clean re-run is called PASS, and a 1.5x
canary must be caught. When another process shares the cores, the contention guard
(cluster/cpu_share.py) re-runs the disturbed job, and if the cores never came free, turns the
verdict INCONCLUSIVE with the measured reason; the test then retakes the baseline. A noisy
machine is a retry and finally a failure, never a skip.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_hpccomm.cluster.mpi import CACHE_VAR, mpi_cache, mpirun_path
from tests.integration._tries import tries

MPI_CACHE = mpi_cache()  # read before pytester moves HOME
# Tries at a quiet pair of runs: at least 3, and on for 5 minutes, so a neighbour that holds
# the cores for a couple of minutes (a build, another test run) is waited out, not skipped.
ATTEMPTS, PATIENCE = 3, 300.0
SUITE = Path(__file__).resolve().parents[2] / "suites" / "mpi" / "test_perf_osu.py"

pytestmark = pytest.mark.skipif(mpirun_path("openmpi") is None,
                                reason="MPI environment 'openmpi' not created (ci/bootstrap.sh "
                                       "makes it: python -m pytest_hpccomm.cluster.mpi create)")


def test_gate_passes_rerun_and_catches_injected_slowdown(pytester: pytest.Pytester,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CACHE_VAR, str(MPI_CACHE))
    pytester.copy_example(str(SUITE))
    args = ["--hpc-mpi=openmpi", "--hpc-launcher=local", "--hpc-sizes=8,1K", "-k",
            "osu_latency", "--hpc-baselines=bl", "--hpc-system=gate", "--hpc-history=none",
            "--hpc-tolerance=0.1",
            "-p", "no:cacheprovider", "--import-mode=importlib", "-rs"]
    steady_pair(pytester, args)
    stored = json.loads((pytester.path / "bl/gate/ethernet/mpi.json").read_text())
    assert len(stored["entries"]) == 2
    assert all(e["fingerprint"].get("mpi_library", "").startswith("Open MPI")
               for e in stored["entries"].values())

    for _attempt in tries(ATTEMPTS, PATIENCE):
        canary = pytester.runpytest_subprocess(*args, "--hpc-inject-slowdown=1.5",
                                               "--hpc-results=canary.json", timeout=300)
        if set(verdicts(canary).values()) == {"REGRESSION"}:
            break
        # the canary must never PASS: only the guard (shared cores, measured) or an interval too
        # wide to clear the band while the median is worse than it may decline, and then the
        # canary is run again
        judged = reasons(pytester.path / "canary.json")
        ratios = {k: v["ratio"] for k, v in verdict_docs(pytester.path / "canary.json").items()}
        declined = {k: v == "regression" or "shared" in v
                    or ("too noisy" in v or "CI reaches inside" in v) and ratios[k] > 1.1
                    for k, v in judged.items()}
        assert all(declined.values()), \
            f"the 1.5x canary was not caught: {judged} {ratios}\n{canary.stdout.str()}"
        if any(v.startswith("baseline measured on shared cores") for v in judged.values()):
            steady_pair(pytester, args)  # a reference from a loaded machine: take a new one
    else:
        pytest.fail(f"no quiet canary run in {PATIENCE:g} s: {verdicts(canary)}")
    assert canary.ret == 1
    canary.stdout.fnmatch_lines(["*regression: osu_latency * median * us vs baseline * us "
                                 "(ratio 1.*, 98% CI *, p=*, tolerance 10%)*"])


def steady_pair(pytester: pytest.Pytester, args: list[str]) -> None:
    """A fresh baseline taken on quiet cores and a clean re-run that the gate lets through:
    every point PASS, or INCONCLUSIVE with an interval holding 1 (see the docstring)."""
    seen: list[object] = []
    baseline = pytester.path / "bl/gate/ethernet/mpi.json"
    for _attempt in tries(ATTEMPTS, PATIENCE):
        baseline.unlink(missing_ok=True)  # a new reference, not a verdict against the last one
        first = pytester.runpytest_subprocess(*args, "--hpc-update-baselines=all", timeout=300)
        first.assert_outcomes(passed=2)
        stored = json.loads(baseline.read_text())
        shared = [e["summary"]["cores_shared"] for e in stored["entries"].values()
                  if "cores_shared" in e["summary"]]
        if shared:  # the guard saw a neighbour while the baseline was taken
            seen.append(shared[0])
            continue
        second = pytester.runpytest_subprocess(*args, "--hpc-results=rerun.json", timeout=300)
        steady = verdicts(second)
        # a crash is a failure; only a verdict (REGRESSION fails the run) may ask for a retry
        assert second.ret in (0, 1) and len(steady) == 2, second.stdout.str()
        docs = verdict_docs(pytester.path / "rerun.json")
        if all(v["outcome"] == "pass" or v["outcome"] == "inconclusive"
               and v["ci_low"] is not None and v["ci_low"] <= 1.0 <= v["ci_high"]
               for v in docs.values()):
            assert second.ret == 0, second.stdout.str()
            return
        # an interval that excludes 1 asks for another pair, a false alarm too: the host's
        # drift between sessions (see the docstring)
        seen.append(reasons(pytester.path / "rerun.json"))
    pytest.fail(f"no clean re-run let through in {len(seen)} tries: {seen}")


def verdict_docs(results_json: Path) -> dict[str, dict[str, Any]]:
    """size -> the verdict as --hpc-results wrote it."""
    doc = json.loads(results_json.read_text())
    return {str(r["measurement"]["params"]["size"]): r["verdict"] for r in doc["results"]}


def reasons(results_json: Path, outcome_only: bool = False) -> dict[str, str]:
    """size -> the outcome from --hpc-results, or the reason where there is one (INCONCLUSIVE)."""
    doc = json.loads(results_json.read_text())
    return {str(r["measurement"]["params"]["size"]):
            r["verdict"]["reason"] if r["verdict"]["outcome"] == "inconclusive" and not outcome_only
            else r["verdict"]["outcome"] for r in doc["results"]}


def verdicts(result: pytest.RunResult) -> dict[str, str]:
    """size -> verdict, from the terminal table."""
    out = {}
    for line in result.stdout.lines:
        if line.startswith("mpi ") and "osu_latency" in line:
            out[line.split()[2]] = line.split()[-1]
    return out
