"""The defects catalogue's replays that place MPI ranks in network namespaces of their own
(docs/examples/defects/mpich_ofi_tcp_ep_enable.py): the script fails on the affected release
with the catalogue's symptom when the interface FI_TCP_IFACE names is not RUNNING, and the same
launch starts once it is, so the entry's cause cannot outlive what it claims."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from pytest_hpccomm.proc.jobs import run_job
from pytest_hpccomm.stacks.mpi.env import MpiUnavailable, resolve

DEFECTS = Path(__file__).resolve().parents[2] / "docs" / "examples" / "defects"
SCRIPT = "mpich_ofi_tcp_ep_enable.py"
SCRIPTS = (SCRIPT,)  # every namespace replay script this module runs
SYMPTOM = "OFI call ep_enable failed (default nic=tcp: Bad file descriptor)"

pytestmark = pytest.mark.needs_root


def replay(spec: str, mode: str) -> tuple[int, str]:
    try:
        mpiexec = resolve(spec).mpirun
    except MpiUnavailable as exc:
        pytest.skip(f"{exc} (ci/bootstrap.sh makes it)")
    argv = [sys.executable, str(DEFECTS / SCRIPT), str(mpiexec), "--mode", mode, "--trials", "3"]
    res = run_job(argv, dict(os.environ), timeout=240, label=f"{SCRIPT} {mode} on {spec}")
    assert not res.timed_out, res.describe()
    return res.returncode, res.stdout + res.stderr


# MPICH 5.0.2's wheel (libfabric 2.5.1): the release the suite saw it on
@pytest.mark.parametrize("spec", ["mpich"])
def test_ep_enable_fails_without_a_running_interface_and_not_with_one(spec: str) -> None:
    code, out = replay(spec, "iface")
    assert code == 1 and "3/3 launches" in out and SYMPTOM in out, (
        f"{SCRIPT} iface on {spec}: exit {code}\n{out}"
    )
    code, out = replay(spec, "control")
    assert code == 0 and "0/3 launches" in out, f"{SCRIPT} control on {spec}: exit {code}\n{out}"
