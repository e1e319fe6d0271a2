"""The paired A/B gate on the gRPC stack: the native peer (the system's gRPC) against itself,
TCP over loopback, TF-gRPC-Bench's p2p latency.

Base and candidate each start fresh native servers for every client run; the runs go in
rounds (which side first drawn, balanced) and every point is judged candidate vs base. Run
to run, a fresh server's latency spreads by ~20 % here (benchmarks/canary.py --ab --stack
grpc), so the end-to-end check uses a 2x canary on 6 rounds (a 1.5x one on 4 rounds was
caught in one session of two): it fails every point naming both sides; the clean A vs A
session calls no point a regression or an improvement. Each session runs once
(tests/integration/_paired.py). A paired run writes no history.

The 10 MB scheme is not among the points: a session of it takes a minute here. Its A vs A
false alarms (2 of 15 sessions) came from the rounds' old fixed order and went with the drawn
one (0 of 16; docs/explanation/paired-ab.md).
"""

from __future__ import annotations

import sqlite3

import pytest

from hpccomm_suites import DIR as SUITES_DIR
from tests.integration._paired import canary_caught, clean_judged_no_change, on_own_cores
from tests.native_grpc import native_peer_or_skip

SUITE = SUITES_DIR / "grpc" / "test_perf_tf_grpc_bench.py"
ARGS = [
    "--hpc-base=grpc=system",
    "--hpc-candidate=grpc=system",
    "--hpc-ab-rounds=6",
    "--hpc-launcher=local",
    "--hpc-grpc-modes=raw",
    "-k",
    "tf_grpc_p2p_latency and (uniform-small or uniform-medium)",
    "--hpc-history=h.sqlite",
    "--hpc-results=r.json",
    "-p",
    "no:cacheprovider",
    "--import-mode=importlib",
    "-rs",
]

pytest.importorskip("grpc", reason="stack 'grpc' not available: missing grpc")


def test_paired_grpc_run_catches_the_candidates_canary(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    native_peer_or_skip(monkeypatch)
    pytester.copy_example(str(SUITE))

    canary = on_own_cores(
        lambda: pytester.runpytest_subprocess(*ARGS, "--hpc-inject-slowdown=2", timeout=600),
        pytester.path / "r.json",
    )
    canary_caught(
        canary,
        pytester.path / "r.json",
        2,
        "*regression: tf_grpc_p2p_latency * system (candidate) median * us vs "
        "system (base) * us (6 job pairs, paired ratio *, 98% CI *, p=*, "
        "tolerance 5%)*",
    )

    clean = pytester.runpytest_subprocess(*ARGS, timeout=600)
    clean_judged_no_change(clean, pytester.path / "r.json", 2)
    clean.stdout.fnmatch_lines(["*history: not recorded (paired A/B run with --hpc-candidate)*"])
    history = pytester.path / "h.sqlite"
    if history.exists():  # a store may be created empty; it must hold no run
        with sqlite3.connect(history) as db:
            assert db.execute("select count(*) from runs").fetchone()[0] == 0
