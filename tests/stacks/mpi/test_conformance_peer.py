"""The conformance peer and its driver: replay of one case without pytest, a hung case ends
in PeerLost (not a hang of the session) naming where each rank waited, and the peer restarts,
everything is reaped, and the peer program imports nothing of pytest or the orchestrator."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from pytest_hpccomm.cluster.mpi import mpirun_path
from pytest_hpccomm.cluster.peer_env import PROJECT_ROOT
from pytest_hpccomm.cluster.placement import LOOPBACK
from pytest_hpccomm.proc import proctree
from pytest_hpccomm.proc.jobs import TAG_VAR, run_job
from pytest_hpccomm.stacks.mpi.conformance import (
    PEER_MODULE,
    ConformancePeer,
    PeerLost,
    build_launch,
)
from pytest_hpccomm.stacks.mpi.env import MpiRuntime, resolve
from pytest_hpccomm.stacks.mpi.wire import CASE_MARK, PLANT_THRESHOLD, PLANT_VAR

pytestmark = pytest.mark.skipif(
    mpirun_path("openmpi") is None,
    reason="MPI environment 'openmpi' not created (ci/bootstrap.sh "
    "makes it: python -m pytest_hpccomm mpi create)",
)

REDUCE = {
    "kind": "reduce",
    "op": "SUM",
    "dtype": "int8",
    "variant": "allreduce",
    "root": 0,
    "count": PLANT_THRESHOLD + 1,
    "inputs": [[0] * (PLANT_THRESHOLD + 1)] * 3,
}


@pytest.fixture(scope="module")
def openmpi() -> MpiRuntime:
    return resolve("openmpi")


@pytest.mark.parametrize("plant,last", [(None, 0), ("corrupt-reduce", 1)])
def test_case_mode_replays_one_case(openmpi: MpiRuntime, plant: str | None, last: int) -> None:
    launch, _ = build_launch(
        openmpi,
        LOOPBACK,
        [str(openmpi.python), "-m", PEER_MODULE, "--case", json.dumps(REDUCE)],
        {PLANT_VAR: plant} if plant else {},
    )
    res = run_job(launch.argv, launch.env, timeout=60, scratch=launch.scratch)
    assert res.ok, res.describe()
    doc = json.loads(res.stdout.split(CASE_MARK, 1)[1])
    assert doc["case"] == REDUCE
    assert [r["result"][-1] for r in doc["ranks"]] == [last] * 3


def test_hung_case_is_peer_lost_then_restarts_and_all_is_reaped(openmpi: MpiRuntime) -> None:
    # a blocking receive that nothing matches (a self-message the peer never sends)
    hang = {
        "kind": "p2p",
        "dtype": "uint8",
        "count": 1,
        "send": "send",
        "recv": "recv",
        "src": 1,
        "dst": 1,
        "tag": 0,
        "slack": 0,
        "seed": 0,
    }
    with ConformancePeer(openmpi, LOOPBACK, case_timeout=3.0) as peer:
        assert peer.ranks == 3 and peer.info.plant is None
        job = peer._job
        assert job is not None
        lost = r"(?s)peer lost during case .*no reply within 3s.*replay without pytest"
        with pytest.raises(PeerLost, match=lost) as hung:
            peer.run(hang)
        assert not proctree.with_env(TAG_VAR, job.tag), "the hung job was not reaped"
        # where each rank was when it was ended: rank 1 in its receive, rank 0 in the gather
        # of the reports, rank 2 there too or past it (its small Gatherv may complete eagerly)
        # in the next broadcast (proc/stacks.py; native threads where gdb is installed)
        text = str(hung.value)
        assert "where the ranks were (rank 0, rank 1, rank 2):" in text, text
        frames = dict(re.findall(r"rank (\d): (\S+) \(", text))
        assert frames.get("0") == "gather_json" and frames.get("1") == "case_p2p", text
        assert frames.get("2") in ("gather_json", "bcast_json"), text
        if shutil.which("gdb"):
            assert re.search(r"rank 1 native: ", text), text
        path = Path(re.findall(r"all stacks: (\S+)", text)[-1])
        assert "in case_p2p" in path.read_text()
        path.unlink()
        ok = peer.run({"kind": "split", "colors": [0, 0, 1], "keys": [0, 0, 0]})
        assert [r["size"] for r in ok] == [2, 2, 1] and peer.starts == 2
        job = peer._job
        assert job is not None
    assert not proctree.with_env(TAG_VAR, job.tag), "the peer outlived close()"


def test_peer_imports_neither_pytest_nor_orchestrator(openmpi: MpiRuntime) -> None:
    """Beyond what its package's __init__ modules import, the peer adds only itself, its case
    list, its package (peer/), the stack's schema (wire) and case data (payload); the control
    channel comes later, at run."""
    code = (
        "import sys; import pytest_hpccomm.stacks.mpi; before = set(sys.modules); "
        f"import {PEER_MODULE}; "
        "print(sorted(m for m in set(sys.modules) - before if m.split('.')[0] in "
        "('pytest', '_pytest', 'hypothesis', 'pytest_hpccomm', 'mpi4py')))"
    )
    env = {"PYTHONPATH": str(PROJECT_ROOT), "PATH": "/usr/bin:/bin"}
    out = subprocess.run(
        [str(openmpi.python), "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert json.loads(out.replace("'", '"')) == sorted(
        [
            PEER_MODULE,
            "pytest_hpccomm.stacks.mpi.peer",
            "pytest_hpccomm.stacks.mpi.peer.conformance_alltoallw",
            "pytest_hpccomm.stacks.mpi.peer.conformance_cases",
            "pytest_hpccomm.stacks.mpi.peer.conformance_ring",
            "pytest_hpccomm.stacks.mpi.peer.conformance_rma_sync",
            "pytest_hpccomm.stacks.mpi.peer.conformance_topology",
            "pytest_hpccomm.stacks.mpi.peer.payload",
            "pytest_hpccomm.stacks.mpi.wire",
        ]
    )
