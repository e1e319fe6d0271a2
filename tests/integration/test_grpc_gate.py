"""The stored-baseline gate on the gRPC stack: the native peer (the system's gRPC), TCP over
loopback, TF-gRPC-Bench p2p latency of small payloads.

A baseline run writes the baseline and one history run; a 1.5x canary run (the peers stretch
every timed batch) adds nothing to the history store, so a canary can never become part of the
series change-point detection reads; a clean re-run after it, judged against the baseline,
calls no point a regression or an improvement. The canary's own unstretched work shows whether
the host moved too far for its known answer (then the three run once more, counted:
tests/integration/_paired.py), and its run says it was a known answer.

The canary is judged as tests/integration/_paired.py says: every point a regression, or
inconclusive with its reason (the native peer's small-message latency varies between jobs by
20-25 % on these machines, so an interval can stay too wide for the 5 % band), its median ratio
beyond the band, never PASS. Each run is made once.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from hpccomm_suites import DIR as SUITES_DIR
from tests.integration._paired import (
    bracketed,
    canary_caught,
    clean_judged_no_change,
    on_own_cores,
)
from tests.native_grpc import native_peer_or_skip

SUITE = SUITES_DIR / "grpc" / "test_perf_tf_grpc_bench.py"
ARGS = [
    "--hpc-grpc-peers=native",
    "--hpc-grpc-modes=raw",
    "--hpc-launcher=local",
    "-k",
    "tf_grpc_p2p_latency and uniform-small",
    "--hpc-baselines=bl",
    "--hpc-system=gate",
    "--hpc-history=h.sqlite",
    "--hpc-results=r.json",
    "-p",
    "no:cacheprovider",
    "--import-mode=importlib",
]

pytest.importorskip("grpc", reason="stack 'grpc' not available: missing grpc")


def history_runs(path: Path) -> int:
    with sqlite3.connect(path) as db:
        return int(db.execute("select count(*) from runs").fetchone()[0])


def test_grpc_canary_fails_and_writes_no_history(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    native_peer_or_skip(monkeypatch)
    pytester.copy_example(str(SUITE))
    history = pytester.path / "h.sqlite"

    def sessions() -> tuple[pytest.RunResult, pytest.RunResult]:
        shutil.rmtree(pytester.path / "bl", ignore_errors=True)
        history.unlink(missing_ok=True)
        first = pytester.runpytest_subprocess(*ARGS, "--hpc-update-baselines=all", timeout=300)
        first.assert_outcomes(passed=1)
        assert history_runs(history) == 1  # the baseline run is part of the history
        canary = pytester.runpytest_subprocess(
            *ARGS, "--hpc-inject-slowdown=1.5", "--hpc-results=canary.json", timeout=300
        )
        assert history_runs(history) == 1, "a canary run was appended to the history"
        rerun = pytester.runpytest_subprocess(*ARGS, timeout=300)
        assert history_runs(history) == 2
        return canary, rerun

    canary, rerun = bracketed(
        lambda: on_own_cores(sessions, pytester.path / "canary.json"),
        pytester.path / "canary.json",
        1.5,
    )
    clean_judged_no_change(rerun, pytester.path / "r.json", 1)
    canary.stdout.fnmatch_lines(["*history: not recorded (canary run with --hpc-inject-slowdown)*"])
    canary_caught(
        canary,
        pytester.path / "canary.json",
        1,
        "*regression: tf_grpc_p2p_latency * median * us vs baseline * us "
        "(ratio 1.*, 98% CI *, p=*, tolerance 5%)*",
    )
    # the run itself says its canary was a known answer at every point (baselines/canary.py)
    canary.stdout.fnmatch_lines(["hpccomm canary 1.5x: a known answer at 1 of 1 points *"])
