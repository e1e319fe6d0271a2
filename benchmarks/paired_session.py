"""One real paired A/B pytest session, read back from its results JSON: what the benchmark
scripts that measure the paired gate (canary_ab.py, paired_stacks.py) run per session.

    results, seconds = run(suite, ["-k", "..."], "grpc", "system", "system", rounds=20,
                           factor=1.05, timeout=3600)
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def run(
    suite: Path,
    select: Sequence[str],
    stack: str,
    base: str,
    candidate: str,
    *,
    rounds: int,
    factor: float,
    timeout: float,
) -> tuple[list[dict[str, Any]], float]:
    """The session's results (the results JSON's `results`) and its wall seconds; a session
    that wrote no results ends the script with pytest's last output."""
    with tempfile.TemporaryDirectory(prefix="paired-") as tmp:
        out = Path(tmp) / "r.json"
        argv = [
            sys.executable,
            "-m",
            "pytest",
            str(suite),
            *select,
            f"--hpc-base={stack}={base}",
            f"--hpc-candidate={stack}={candidate}",
            f"--hpc-ab-rounds={rounds}",
            f"--hpc-inject-slowdown={factor}",
            "--hpc-launcher=local",
            "--hpc-history=none",
            f"--hpc-results={out}",
            f"--rootdir={tmp}",
            "-p",
            "no:cacheprovider",
            "-q",
        ]
        t0 = time.monotonic()
        res = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=tmp)
        seconds = time.monotonic() - t0
        if not out.exists():
            raise SystemExit(
                f"{stack} x{factor}: no results (exit {res.returncode}):\n{res.stdout[-3000:]}"
            )
        return list(json.loads(out.read_text())["results"]), seconds
