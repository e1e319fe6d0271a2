"""The stored-baseline gate on the gRPC stack: the native peer (the system's gRPC), TCP over
loopback, TF-gRPC-Bench p2p latency of small payloads.

A baseline run writes the baseline and one history run; a 1.5x canary run (the peers stretch
every timed batch) must fail every point as a regression and add nothing to the history
store, so a canary can never become part of the series change-point detection reads.

The canary must never PASS. Two things may keep a point from being called a regression, and
both are the gate declining to judge, not a miss: the contention guard (shared cores,
measured), and a CI too wide for the 5 % band while the median is worse than the band. The
native peer's small-message latency varies between jobs by 20-25 % on this machine (per-round
sd of the log ratio 0.18-0.26, README), and once in a cold CI run (2026-11-23) a 1.5x canary
came out 1.41x with a CI reaching inside the band after six jobs. Then the pair is taken
again (at least 3 tries over 5 minutes), and finally the test fails. So is a reference the
guard marked as taken on shared cores: once (2026-11-24, 0.27 core stolen by the hypervisor) it
measured 501 us against ~260 us quiet, and the 1.5x canary came out at ratio 0.79.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from tests.integration._tries import tries

from tests.native_grpc import native_peer_or_skip

SUITE = Path(__file__).resolve().parents[2] / "suites" / "grpc" / "test_perf_tf_grpc_bench.py"
ARGS = ["--hpc-grpc-peers=native", "--hpc-grpc-modes=raw", "--hpc-launcher=local", "-k",
        "tf_grpc_p2p_latency and uniform-small", "--hpc-baselines=bl", "--hpc-system=gate",
        "--hpc-history=h.sqlite", "--hpc-results=r.json", "-p", "no:cacheprovider",
        "--import-mode=importlib"]
ATTEMPTS, PATIENCE = 3, 300.0
TOLERANCE = 0.05  # the default the gate judges with

pytest.importorskip("grpc", reason="stack 'grpc' not available: missing grpc")


def history_runs(path: Path) -> int:
    with sqlite3.connect(path) as db:
        return int(db.execute("select count(*) from runs").fetchone()[0])


def test_grpc_canary_fails_and_writes_no_history(pytester: pytest.Pytester,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    native_peer_or_skip(monkeypatch)
    pytester.copy_example(str(SUITE))
    history = pytester.path / "h.sqlite"
    judged: dict[str, str] = {}
    for _attempt in tries(ATTEMPTS, PATIENCE):
        shutil.rmtree(pytester.path / "bl", ignore_errors=True)  # a fresh reference
        first = pytester.runpytest_subprocess(*ARGS, "--hpc-update-baselines=all", timeout=300)
        first.assert_outcomes(passed=1)
        runs = history_runs(history)
        assert runs >= 1  # the baseline run is part of the history
        stored = json.loads((pytester.path / "bl/gate/ethernet/grpc.json").read_text())
        shared = [e["summary"]["cores_shared"] for e in stored["entries"].values()
                  if "cores_shared" in e["summary"]]
        if shared:  # the guard saw a neighbour while the reference was taken: take it again
            judged = {"baseline": f"measured on shared cores: {shared[0]}"}
            continue
        canary = pytester.runpytest_subprocess(*ARGS, "--hpc-inject-slowdown=1.5", timeout=300)
        assert history_runs(history) == runs, "a canary run was appended to the history"
        canary.stdout.fnmatch_lines(["*history: not recorded (canary run with "
                                     "--hpc-inject-slowdown)*"])
        doc = json.loads((pytester.path / "r.json").read_text())
        judged = {r["key"]: r["verdict"]["outcome"] if r["verdict"]["outcome"] != "inconclusive"
                  else r["verdict"]["reason"] for r in doc["results"]}
        ratios = {r["key"]: r["verdict"]["ratio"] for r in doc["results"]}
        if set(judged.values()) == {"regression"}:
            assert canary.ret == 1
            canary.stdout.fnmatch_lines(["*regression: tf_grpc_p2p_latency * median * us vs "
                                         "baseline * us (ratio 1.*, 98% CI *, p=*, "
                                         "tolerance 5%)*"])
            return
        declined = {k: v == "regression" or "shared" in v
                    or ("too noisy" in v or "CI reaches inside" in v)
                    and ratios[k] > 1 + TOLERANCE for k, v in judged.items()}
        assert all(declined.values()), \
            f"the 1.5x canary was not caught: {judged} {ratios}\n{canary.stdout.str()}"
    pytest.fail(f"no baseline/canary pair judged REGRESSION in {PATIENCE:g} s: {judged}")
