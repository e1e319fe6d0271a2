"""Making a stack's venv in its cache (TensorFlow's, a grpcio release's): `python -m venv` with
this interpreter's base Python, then `pip install`, each step within the build's deadline."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from pytest_hpccomm.proc.jobs import run_job


def base_python() -> str:
    """The real path of the Python this interpreter (or its venv) was made from."""
    return os.path.realpath(getattr(sys, "_base_executable", sys.executable))


def make_venv(
    venv: Path,
    deadline: float,
    install: Sequence[str],
    what: str,
    error: type[Exception],
    label: str = "venv",
) -> None:
    """venv made with base_python(), then `pip install ...install`; `error(what: step failed
    (how): pip's last lines)` when a step fails or passes the deadline."""
    steps = [
        [base_python(), "-m", "venv", str(venv)],
        [
            str(venv / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            *install,
        ],
    ]
    for argv in steps:
        left = max(1.0, deadline - time.monotonic())
        res = run_job(argv, dict(os.environ), timeout=left, label=label)
        if not res.ok:
            how = "timed out" if res.timed_out else f"exit {res.returncode}"
            tail = "\n".join((res.stdout + res.stderr).strip().splitlines()[-12:])
            raise error(f"{what}: {' '.join(argv[:4])} failed ({how}):\n{tail}")
