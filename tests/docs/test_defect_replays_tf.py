"""The TensorFlow entries of the defects catalogue replayed by their standalone scripts
(docs/examples/defects/tf_*.py) in the pinned TensorFlow venv: the script fails there as the
catalogue says, and passes with the workaround the catalogue gives (no TensorFlow release is
known to fix it: the workaround is the reference, as for the gRPC replay)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pytest_hpccomm.proc.jobs import run_job
from pytest_hpccomm.stacks.tf.env import TfEnvError, ensure_env

DEFECTS = Path(__file__).resolve().parents[2] / "docs" / "examples" / "defects"
FIRST_READ = "tf_remote_variable_first_read_empty.py"
SCRIPTS = (FIRST_READ,)  # every TensorFlow replay script this module runs
TRIES = "20"


def replay(script: str, *args: str) -> tuple[int, str]:
    try:
        python = ensure_env().python
    except TfEnvError as exc:
        pytest.fail(f"the TensorFlow venv: {exc}", pytrace=False)
    argv = [str(python), str(DEFECTS / script), *args]
    res = run_job(argv, dict(os.environ), timeout=300, label=f"{script} {' '.join(args)}")
    assert not res.timed_out, res.describe()
    return res.returncode, res.stdout + res.stderr


def test_a_remote_variables_first_read_is_empty_unless_the_assign_is_awaited() -> None:
    code, out = replay(FIRST_READ, TRIES)
    assert code == 1 and f"of {TRIES} first reads wrong" in out and "read uint8[0]" in out, (
        f"{FIRST_READ}: exit {code}, expected empty first reads\n{out}"
    )
    code, out = replay(FIRST_READ, TRIES, "--wait")
    assert code == 0 and f"0 of {TRIES} first reads wrong" in out, (
        f"{FIRST_READ} --wait: exit {code}, expected every first read right\n{out}"
    )
