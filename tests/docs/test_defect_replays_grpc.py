"""The gRPC entries of the defects catalogue replayed by their standalone scripts
(docs/examples/defects/grpcio_*.py), each in real grpcio releases: the script fails on every
release the catalogue names as affected and passes on what it names as right (no grpcio
release fixes the asyncio defect: the sync server of the same release is the reference, and
the workaround the catalogue gives)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from pytest_hpccomm.proc.jobs import run_job
from pytest_hpccomm.stacks.grpc.python_env import peer_python

DEFECTS = Path(__file__).resolve().parents[2] / "docs" / "examples" / "defects"
SCRIPT = "grpcio_aio_unary_set_compression.py"
SCRIPTS = (SCRIPT,)  # every gRPC replay script this module runs
# the oldest release with a wheel for Python 3.11 and this interpreter's: the matrix saw
# every release between them affected
AFFECTED = ("grpcio==1.49.1", "")


def replay(python: str, server: str) -> tuple[int, str]:
    res = run_job(
        [python, str(DEFECTS / SCRIPT), server],
        dict(os.environ),
        timeout=120,
        label=f"{SCRIPT} {server}",
    )
    assert not res.timed_out, res.describe()
    return res.returncode, res.stdout + res.stderr


@pytest.mark.parametrize("release", AFFECTED, ids=lambda r: r or "this-grpcio")
def test_aio_unary_set_compression(release: str) -> None:
    python, version = peer_python(release) if release else (sys.executable, "")
    code, out = replay(python, "aio")
    assert code == 1 and "aio server" in out and "(uncompressed)" in out, (
        f"{SCRIPT} aio on grpcio {version or 'here'}: exit {code}\n{out}"
    )
    for right in ("sync", "aio-initial-metadata"):
        code, out = replay(python, right)
        assert code == 0 and "(compressed)" in out, f"{SCRIPT} {right}: exit {code}\n{out}"
