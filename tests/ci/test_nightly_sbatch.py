"""The batch script (nightly.sbatch, written by `hpccomm templates slurm` into a gate
directory), submitted with `sbatch --wait` to a real SLURM as a user does.

SLURM (Debian's munged, slurmctld, one slurmd per host) runs on a two-host virtual cluster
(tests/slurm_hosts.py). The script runs the selection of tests/ci/cikit.py (Open MPI's
osu_latency at 8 B and 1 KiB, one rank on each host, placed by srun): first taking baselines
into a temp dir, after a run without them that fails for an unarmed gate (the script requires one), then a run
against them that passes (exit 0, the four reports there and
parseable, the JUnit file holding the items), then the canary (--hpc-inject-slowdown=3), which
must exit 1 with a regression verdict for every item; each job's exit_status file says what
sbatch returned. Bad input fails with exit status 2 and a
line naming the cause, in seconds: an allocation of one node, an srun that cannot start a
step, and (last: it stops the controller) a SLURM that is down, where sbatch itself fails.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_hpccomm.proc.jobs import JobResult
from tests.ci.cikit import (
    CANARY,
    ITEMS,
    SELECT,
    check_reports,
    gate_dir,
    job_id,
    nightly_env,
    outcomes,
)
from tests.integration._paired import clean_judged_no_change
from tests.virtual_slurm import VirtualSlurm

pytestmark = [pytest.mark.needs_root, pytest.mark.slow]
TIMEOUT = 600.0  # one sbatch --wait; a run here takes well under a minute


def submit(
    slurm: VirtualSlurm,
    workdir: Path,
    baselines: Path,
    *args: str,
    sbatch: tuple[str, ...] = (),
    **env: str,
) -> tuple[JobResult, str, Path]:
    """sbatch --wait the script from `workdir`, a gate directory made as a user makes one
    (`hpccomm templates slurm`): (sbatch's result, the job's output, the results directory
    named by the job id)."""
    gate = gate_dir(workdir)
    r = slurm.run(
        0,
        ["sbatch", "--wait", f"--chdir={workdir}", *sbatch, str(gate / "nightly.sbatch"), *args],
        timeout=TIMEOUT,
        env=nightly_env(baselines, gate, **env),
    )
    assert not r.timed_out, r.describe()
    jid = job_id(r.stdout)
    out = workdir / f"hpccomm-nightly-{jid}.out"
    text = out.read_text(errors="replace") if out.is_file() else f"(no output file {out})"
    # sbatch's status is the job's only while SLURM kept the ended job until sbatch's next
    # poll (VirtualSlurm's MinJobAge); the job's own exit_status must say the same
    assert "no longer found and exit code not found" not in r.stderr, r.describe() + text
    status = workdir / "results" / jid / "exit_status"
    assert status.read_text() == f"{r.returncode}\n", r.describe() + text
    return r, text, workdir / "results" / jid


def test_baselines_then_a_passing_run_then_the_canary_fails(
    slurm_hosts: VirtualSlurm, tmp_path: Path, record_property: Callable[[str, object], None]
) -> None:
    baselines = tmp_path / "baselines"
    stored = baselines / "nightly-test" / "ethernet" / "mpi.json"
    # no baselines yet: the script's default asks for an armed gate, so the night fails and
    # says the gate was off, first in the summary
    off, log, results = submit(slurm_hosts, tmp_path / "unarmed", baselines)
    assert off.returncode == 1, off.describe() + log[-3000:]
    assert "hpccomm gate: FAILED --hpc-require-armed 0.5: only 0 of 2 points" in log, log[-3000:]
    assert (results / "summary.md").read_text().splitlines()[1].startswith("**gate OFF: 0 of 2")
    # three nights of baselines, the fewest a stored verdict claims from (verdict.MIN_SESSIONS)
    t0 = time.monotonic()
    for night in range(3):
        taken, log, _ = submit(
            slurm_hosts, tmp_path / f"take{night}", baselines, "--hpc-update-baselines=all"
        )
        assert taken.returncode == 0, taken.describe() + log[-3000:]
    entries = json.loads(stored.read_text())["entries"]
    assert len(entries) == ITEMS, entries
    t1 = time.monotonic()
    run, log, results = submit(slurm_hosts, tmp_path / "run", baselines)
    judged = outcomes(results / "results.json")
    # a clean re-run is never a regression at 50 %. The night's exit status is the gate's
    # word: 0 when it was armed (the batch script asks --hpc-require-armed 0.5), else 1 with
    # the gate's line first in the summary (three sessions taken back to back can lie far
    # enough apart that t with 2 degrees of freedom spans the band: then the gate is off)
    assert not any(v.startswith("regression") for v in judged.values()), judged
    gate = json.loads((results / "results.json").read_text())["session"]["gate"]
    armed = gate["armed"] >= 0.5 * gate["points"]
    assert run.returncode == (0 if armed else 1), run.describe() + log[-3000:]
    if not armed:
        assert "hpccomm gate: FAILED --hpc-require-armed 0.5" in log, log[-3000:]
    counts = check_reports(results)
    assert counts["failures"] == 0 and counts["errors"] == 0, counts
    t2 = time.monotonic()
    canary, log, results = submit(slurm_hosts, tmp_path / "canary", baselines, CANARY)
    t3 = time.monotonic()
    judged = outcomes(results / "results.json")
    # every point caught, or declined with the gate's reason (never a PASS); either way the
    # night fails: a regression, or a gate that was not armed
    assert all(v.startswith(("regression", "inconclusive")) for v in judged.values()), (
        f"the 3x canary was not caught: {judged}\n{log[-3000:]}"
    )
    assert canary.returncode == 1, canary.describe() + log[-3000:]
    assert "nightly.sbatch: FAILED: pytest exit 1" in log, log[-2000:]
    if any(v.startswith("regression") for v in judged.values()):
        assert "regression: osu_latency mpi=openmpi placement=hosts" in log, log[-3000:]
        assert "regression" in (results / "summary.md").read_text().lower()
    for name, seconds in (("baselines", t1 - t0), ("run", t2 - t1), ("canary", t3 - t2)):
        record_property(f"sbatch_{name}_s", round(seconds, 1))
    print(f"sbatch --wait: baselines {t1 - t0:.1f}s, run {t2 - t1:.1f}s, canary {t3 - t2:.1f}s")


# extended: ~2 min; the reference nightly itself is tests/integration/test_nightly_reference.py
@pytest.mark.extended
def test_reference_mode_records_the_ratio_history_and_names_the_reference(
    slurm_hosts: VirtualSlurm, tmp_path: Path
) -> None:
    """HPCCOMM_REFERENCE set: each night runs in paired rounds against the reference (here the
    same Open MPI, the candidate being the run's --hpc-mpi), with no baselines at all; the
    history gains each night's paired ratios, the log and the summary name the reference, and
    the ratio gate says the series is too short to judge yet. Three nights, the third with a
    candidate-only canary, which the night's paired verdicts catch."""
    history = tmp_path / "history.sqlite"
    env = {
        "HPCCOMM_REFERENCE": "mpi=openmpi",
        "HPCCOMM_HISTORY": str(history),
        "HPCCOMM_ARGS": SELECT.replace("--hpc-history=none ", "") + " --hpc-ab-rounds=3",
        "HPCCOMM_REQUIRE_ARMED": "0",  # 3 rounds arm no gate: not what this test asks
    }
    for night in range(3):
        args = (CANARY,) if night == 2 else ()
        r, log, results = submit(slurm_hosts, tmp_path / f"n{night}", tmp_path / "bl", *args, **env)
        assert "judged against the reference mpi=openmpi (paired rounds; ratio history" in log, log[
            -3000:
        ]
        assert "hpccomm ratio gate: 0 failing step(s) in 0 series judged" in log, log[-3000:]
        summary = (results / "summary.md").read_text()
        assert "candidate `openmpi` against the reference `openmpi`" in summary, summary
        judged = outcomes(results / "results.json")
        assert len(judged) == ITEMS, judged
        if night < 2:  # A against A: no claim that chance does not explain
            ran = pytest.RunResult(r.returncode, log.splitlines(), [], r.elapsed)
            clean_judged_no_change(ran, results / "results.json", ITEMS)
        else:
            assert r.returncode == 1, r.describe() + log[-3000:]
            assert all(v.startswith(("regression", "inconclusive")) for v in judged.values())
    assert not (tmp_path / "bl").exists()  # a paired night reads and writes no baseline
    with sqlite3.connect(history) as db:
        per_run = db.execute(
            "SELECT run_id, COUNT(*), MIN(mode), MAX(mode) FROM results GROUP BY run_id"
        ).fetchall()
    assert len(per_run) == 3 and all(n == ITEMS for _, n, *_ in per_run), per_run
    assert {m for _, _, lo, hi in per_run for m in (lo, hi)} == {"paired"}


def test_an_allocation_of_one_node_fails_naming_it(
    slurm_hosts: VirtualSlurm, tmp_path: Path
) -> None:
    r, log, _ = submit(slurm_hosts, tmp_path, tmp_path / "bl", sbatch=("--nodes=1",))
    assert r.returncode == 2, r.describe() + log
    assert "nightly.sbatch: allocation too small: 1 node(s) (h0), the suites need 2" in log, log
    assert r.elapsed < 30, r.elapsed


def test_an_srun_that_cannot_start_a_step_fails_naming_it(
    slurm_hosts: VirtualSlurm, tmp_path: Path
) -> None:
    """srun's MPI plugin named by the environment does not exist: srun itself refuses, and
    the script says so before any item runs."""
    r, log, _ = submit(slurm_hosts, tmp_path, tmp_path / "bl", SLURM_MPI_TYPE="nosuchmpi")
    assert r.returncode == 2, r.describe() + log
    assert "nightly.sbatch: srun cannot start a step on every node of h[0-1]:" in log, log
    assert "nosuchmpi" in log, log
    assert "nightly.sbatch: job " not in log, log  # no suite started
    assert r.elapsed < 60, r.elapsed


def test_sbatch_against_a_slurm_that_is_down_fails_fast_naming_it(
    slurm_hosts: VirtualSlurm, tmp_path: Path
) -> None:
    """Last in the module: it stops the controller of the module's SLURM."""
    slurm_hosts.daemons["slurmctld"].stop()
    gate = gate_dir(tmp_path)
    r = slurm_hosts.run(
        0,
        ["sbatch", "--wait", f"--chdir={tmp_path}", str(gate / "nightly.sbatch")],
        timeout=TIMEOUT,
        env=nightly_env(tmp_path / "bl", gate),
    )
    assert r.returncode != 0 and not r.timed_out, r.describe()
    assert "Unable to contact slurm controller" in r.stderr, r.stderr
    assert r.elapsed < 30, r.elapsed
    assert not list(tmp_path.glob("hpccomm-nightly-*.out"))
