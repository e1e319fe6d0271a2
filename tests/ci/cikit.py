"""What the tests of the batch script and the CI templates share (pytest_hpccomm/templates/,
written by `hpccomm templates`): the small selection they submit, a gate directory made as a
user makes one, the environment that points a job at it, and readers of the reports."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from tests.slurm_hosts import job_env

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = ROOT / "pytest_hpccomm" / "templates"
SCRIPT = TEMPLATES / "nightly.sbatch"  # the shipped template (what the linters read)
VENV = Path(sys.prefix)  # the venv running these tests (it has pytest-hpccomm installed)
SUITE = "hpccomm_suites.mpi.test_perf_osu"  # a module of the installed suites (--pyargs)
# Open MPI's latency at two sizes, one rank on each of h0 and h1, started by srun. The virtual
# hosts share this machine's two cores (--hpc-bind=none), and its latency drifts between
# sessions by up to 30 % (tests/integration/test_mpi_gate.py): a 50 % tolerance keeps a clean
# re-run a pass, and a 3x canary is still far beyond it.
SELECT = (
    "-k osu_latency --hpc-mpi=openmpi --hpc-sizes=8,1K --hpc-bind=none "
    "--hpc-history=none --hpc-tolerance=0.5"
)
ITEMS = 2
CANARY = "--hpc-inject-slowdown=3"
REPORTS = ("results.json", "report.html", "summary.md", "junit.xml")


def gate_dir(where: Path) -> Path:
    """A gate directory as a user makes one: `hpccomm templates slurm --out DIR` writes
    nightly.sbatch there (the shipped template, unchanged)."""
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest_hpccomm",
            "templates",
            "slurm",
            "--out",
            str(where),
            "--force",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert (where / "nightly.sbatch").read_text() == SCRIPT.read_text()
    return where


def nightly_env(baselines: Path, gate: Path, **extra: str) -> dict[str, str]:
    """sbatch's environment for nightly.sbatch on the virtual SLURM: the gate directory, this
    venv, the selection above, baselines in `baselines`."""
    defaults = {
        "HPCCOMM_DIR": str(gate),
        "HPCCOMM_VENV": str(VENV),
        "HPCCOMM_SUITES": SUITE,
        "HPCCOMM_SYSTEM": "nightly-test",
        "HPCCOMM_FABRIC": "ethernet",
        "HPCCOMM_BASELINES": str(baselines),
        "HPCCOMM_ARGS": SELECT,
    }
    return job_env(**{**defaults, **extra})  # `extra` may replace a default


def job_id(sbatch_stdout: str) -> str:
    m = re.search(r"Submitted batch job (\d+)", sbatch_stdout)
    assert m, f"sbatch printed no job id: {sbatch_stdout!r}"
    return m.group(1)


def outcomes(results_json: Path) -> dict[str, str]:
    """'<mpi> size=<n>' -> verdict outcome, with the reason where there is one."""
    doc = json.loads(results_json.read_text())
    out = {}
    for r in doc["results"]:
        p, v = r["measurement"]["params"], r["verdict"]
        out[f"{p['mpi']} size={p['size']}"] = v["outcome"] + (
            f" ({v['reason']})" if v.get("reason") and v["outcome"] != "pass" else ""
        )
    return out


def junit_counts(path: Path) -> dict[str, int]:
    """tests / failures / errors / skipped over every testsuite of a JUnit file, and the
    testcases whose name says osu_latency."""
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    counts = {
        k: sum(int(s.get(k, 0)) for s in suites) for k in ("tests", "failures", "errors", "skipped")
    }
    counts["osu_latency"] = sum(
        1 for c in root.iter("testcase") if "osu_latency" in c.get("name", "")
    )
    return counts


def check_reports(results: Path, items: int = ITEMS) -> dict[str, int]:
    """All four reports are there and parse; the JUnit file holds the items. Returns its
    counts."""
    missing = [name for name in REPORTS if not (results / name).is_file()]
    assert not missing, f"missing in {results}: {missing} (has {sorted(os.listdir(results))})"
    doc = json.loads((results / "results.json").read_text())
    assert len(doc["results"]) == items, doc["results"]
    html = (results / "report.html").read_text()
    assert html.lstrip().lower().startswith(("<!doctype html", "<html")), html[:200]
    assert "osu_latency" in (results / "summary.md").read_text()
    counts = junit_counts(results / "junit.xml")
    assert counts["osu_latency"] == items and counts["tests"] >= items, counts
    return counts
