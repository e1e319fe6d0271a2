"""Run the CI templates' own steps, as GitHub Actions and GitLab CI would, on this machine.

A template must not drift from the CLI: the tests take every `run:` (GitHub) and `script:`
(GitLab) from the templates (pytest_hpccomm/templates/github, gitlab) and execute it with
bash, with the variables the template defines (GitHub `${{ }}` expressions evaluated from a
`vars` mapping the test gives, the github context and earlier steps' outputs; GitLab variables
expanded, `expand: false` kept raw). What a hosted service does itself is emulated, and said
so: actions/checkout clones a local repository; actions/upload-artifact and the JUnit report
action only have their inputs checked (the files must exist). Steps run in order; after a
failure only `if: always()` steps run, after a cancel `always()` and `cancelled()` ones, as on
GitHub; GitLab's after_script always runs.

`execute(argv, env, cwd)` is how a step runs: plain bash here, or inside a virtual-cluster host
where SLURM's clients reach a real SLURM (tests/ci/test_templates.py).
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Execute = Callable[[list[str], dict[str, str], Path], tuple[int, str]]  # -> (rc, output)


def load_yaml(path: Path) -> Any:
    """The document at `path` as YAML 1.2 reads it (GitHub's `on:` stays a string key):
    ruamel.yaml, which check-jsonschema brings; PyYAML (YAML 1.1) with `on` put back."""
    try:
        from ruamel.yaml import YAML
    except ImportError:
        import yaml  # type: ignore[import-untyped]

        doc = yaml.safe_load(path.read_text())
        if isinstance(doc, dict) and True in doc:
            doc["on"] = doc.pop(True)
        return doc
    return YAML(typ="safe", pure=True).load(path.read_text())


def yaml_missing() -> str | None:
    """Why load_yaml cannot work here (no YAML parser installed), or None."""
    for module in ("ruamel.yaml", "yaml"):
        try:
            __import__(module)
            return None
        except ImportError:
            pass
    return "no YAML parser: pip install check-jsonschema (the test extra; it brings ruamel.yaml)"


def run_bash(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[int, str]:
    """The plain executor: argv here, stdout and stderr together."""
    r = subprocess.run(
        argv,
        env=env,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=900,
    )
    return r.returncode, r.stdout


BASH = ["bash", "--noprofile", "--norc", "-eo", "pipefail"]  # GitHub's `shell: bash`


@dataclass
class StepRun:
    name: str
    rc: int | None  # None: an emulated action
    output: str = ""


@dataclass
class JobRun:
    steps: list[StepRun] = field(default_factory=list)
    checked: dict[str, list[Path]] = field(default_factory=dict)  # action -> files it took

    @property
    def ok(self) -> bool:
        return all(s.rc in (0, None) for s in self.steps)

    def describe(self) -> str:
        return "\n".join(f"--- {s.name}: exit {s.rc}\n{s.output[-3000:]}" for s in self.steps)


# -- GitHub Actions ----------------------------------------------------------------------------

_EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


def evaluate(expr: str, contexts: Mapping[str, Any]) -> str:
    """The subset of GitHub's expressions the template uses: `a || b || 'literal'` over
    context paths (vars.X, github.workspace, steps.ID.outputs.X, env.X). An unknown context
    path is an error: a template reaching for something this emulation lacks must say so."""
    for term in (t.strip() for t in expr.split("||")):
        if term.startswith("'") and term.endswith("'"):
            value: Any = term[1:-1].replace("''", "'")
        else:
            if not re.fullmatch(r"[A-Za-z_][\w-]*(\.[\w-]+)+", term):
                raise ValueError(f"expression not emulated: {expr!r}")
            head, *rest = term.split(".")
            if head not in contexts:
                raise ValueError(f"context {head!r} not emulated in {expr!r}")
            value = contexts[head]
            for key in rest:
                value = value.get(key, "") if isinstance(value, Mapping) else ""
        if value:
            return str(value)
    return ""


def substitute(text: str, contexts: Mapping[str, Any]) -> str:
    return _EXPR.sub(lambda m: evaluate(m.group(1), contexts), str(text))


def run_github_job(
    workflow: Path,
    job: str,
    *,
    workspace: Path,
    vars: Mapping[str, str],
    base_env: Mapping[str, str],
    execute: Execute = run_bash,
    event: Mapping[str, Any] | None = None,
    repo: Path | None = None,
    cancel_at: int | None = None,
) -> JobRun:
    """Run `job` of `workflow` in `workspace`. `repo` is the local repository that
    actions/checkout clones (its `ref` input, or HEAD). `cancel_at`: the run is cancelled
    while that step runs (it runs to its end here); after it, only `always()` and
    `cancelled()` steps run, as on GitHub."""
    doc = load_yaml(workflow)
    spec = doc["jobs"][job]
    runner_temp = workspace / ".runner"
    runner_temp.mkdir(parents=True, exist_ok=True)
    github = {
        "workspace": str(workspace),
        "run_id": "4242",
        "run_attempt": "1",
        "event_name": "test",
        "event": dict(event or {}),
    }
    steps: dict[str, Any] = {}
    ctx: dict[str, Any] = {"github": github, "vars": dict(vars), "steps": steps, "env": {}}
    env: dict[str, str] = {}
    for layer in (doc.get("env") or {}, spec.get("env") or {}):
        for key, value in layer.items():
            ctx["env"] = env
            env[key] = substitute(value, ctx)
    summary = runner_temp / "step_summary.md"
    summary.touch()
    run = JobRun()
    failed = False
    for i, step in enumerate(spec["steps"]):
        name = step.get("name") or step.get("uses") or f"step {i}"
        cond = str(step.get("if", "success()"))
        cancelled = cancel_at is not None and i > cancel_at
        if "cancelled()" in cond and not cancelled:
            run.steps.append(StepRun(name, None, "skipped: the run was not cancelled"))
            continue
        if (failed or cancelled) and "always()" not in cond and "cancelled()" not in cond:
            run.steps.append(StepRun(name, None, "skipped after a failure or a cancel"))
            continue
        ctx["env"] = env
        step_env = {**env, **{k: substitute(v, ctx) for k, v in (step.get("env") or {}).items()}}
        ctx["env"] = step_env
        if "uses" in step:
            with_ = {k: substitute(v, ctx) for k, v in (step.get("with") or {}).items()}
            run.steps.append(_action(step["uses"], with_, workspace, repo, run))
            continue
        output = runner_temp / f"output-{i}"
        output.write_text("")
        script = runner_temp / f"step-{i}.sh"
        script.write_text(step["run"])
        cwd = workspace / step.get("working-directory", ".")
        full_env = {
            **base_env,
            **step_env,
            "GITHUB_WORKSPACE": str(workspace),
            "GITHUB_STEP_SUMMARY": str(summary),
            "GITHUB_OUTPUT": str(output),
            "RUNNER_TEMP": str(runner_temp),
            "CI": "true",
            "GITHUB_ACTIONS": "true",
        }
        rc, out = execute([*BASH, str(script)], full_env, cwd)
        run.steps.append(StepRun(name, rc, out))
        if "id" in step:
            steps[step["id"]] = {
                "outputs": dict(
                    line.split("=", 1) for line in output.read_text().splitlines() if "=" in line
                )
            }
        failed = failed or rc != 0
    run.checked["summary"] = [summary]
    return run


def _action(
    uses: str, with_: Mapping[str, str], workspace: Path, repo: Path | None, run: JobRun
) -> StepRun:
    action = uses.split("@")[0]
    if action == "actions/checkout":
        assert repo is not None, "actions/checkout needs a local repository to clone"
        dest = workspace / with_.get("path", ".")
        subprocess.run(["git", "clone", "-q", str(repo), str(dest)], check=True, timeout=60)
        subprocess.run(
            ["git", "-C", str(dest), "checkout", "-q", with_.get("ref") or "HEAD"],
            check=True,
            timeout=60,
        )
        return StepRun(f"{uses} (emulated: git clone)", None)
    if action == "actions/upload-artifact":
        paths = [Path(p) for p in with_["path"].split("\n") if p.strip()]
        run.checked[action] = [f for p in paths for f in sorted(p.rglob("*")) if f.is_file()]
        return StepRun(f"{uses} (emulated: {len(run.checked[action])} files)", None)
    if action == "mikepenz/action-junit-report":
        run.checked[action] = [Path(with_["report_paths"])]
        return StepRun(f"{uses} (emulated: inputs checked)", None)
    raise AssertionError(f"action {uses} is not emulated: add it to tests/ci/ci_steps.py")


# -- GitLab CI ---------------------------------------------------------------------------------


def _expand(value: str, variables: Mapping[str, str]) -> str:
    """GitLab's expansion of $VAR / ${VAR} in a variable's value ($$ is a literal $)."""

    def one(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group(1) or m.group(2)
        return variables.get(name, m.group(0))

    return re.sub(r"\$\$|\$\{(\w+)\}|\$(\w+)", one, value)


def gitlab_job(doc: Mapping[str, Any], name: str) -> dict[str, Any]:
    """The job with its `extends` merged in (hashes deep-merged, the job's keys win)."""
    spec = dict(doc[name])
    parents = spec.pop("extends", [])
    for parent in [parents] if isinstance(parents, str) else parents:
        merged = gitlab_job(doc, parent)
        for key, value in spec.items():
            if isinstance(value, dict) and isinstance(merged.get(key), dict):
                merged[key] = {**merged[key], **value}
            else:
                merged[key] = value
        spec = merged
    return spec


def run_gitlab_job(
    pipeline: Path,
    job: str,
    *,
    project_dir: Path,
    predefined: Mapping[str, str],
    base_env: Mapping[str, str],
    overrides: Mapping[str, str] | None = None,
    execute: Execute = run_bash,
) -> JobRun:
    """Run `job` of `pipeline` in `project_dir` (a clone already there): `script` as one
    bash -eo pipefail script, then `after_script` whatever the outcome. `overrides` are a
    project's CI/CD variables: they win over the file's."""
    doc = load_yaml(pipeline)
    spec = gitlab_job(doc, job)
    variables: dict[str, str] = {
        "CI_PROJECT_DIR": str(project_dir),
        "CI": "true",
        "GITLAB_CI": "true",
        **predefined,
    }
    for layer in (doc.get("variables") or {}, spec.get("variables") or {}):
        for key, value in layer.items():
            if isinstance(value, dict):
                raw = str(value.get("value", ""))
                variables[key] = raw if value.get("expand") is False else _expand(raw, variables)
            else:
                variables[key] = _expand(str(value), variables)
    variables.update(overrides or {})
    run = JobRun()
    failed = False
    for part in ("before_script", "script", "after_script"):
        lines = spec.get(part)
        if not lines or (failed and part != "after_script"):
            continue
        script = project_dir / f".gitlab-{part}.sh"
        script.write_text("\n".join(str(line) for line in lines) + "\n")
        rc, out = execute([*BASH, str(script)], {**base_env, **variables}, project_dir)
        script.unlink()
        run.steps.append(StepRun(part, rc, out))
        failed = failed or rc != 0
    artifacts = spec.get("artifacts") or {}
    run.checked["artifacts.paths"] = [project_dir / p for p in artifacts.get("paths", [])]
    junit = (artifacts.get("reports") or {}).get("junit")
    run.checked["artifacts.reports.junit"] = [
        project_dir / p for p in ([junit] if isinstance(junit, str) else junit or [])
    ]
    return run


def base_environment(**extra: str) -> dict[str, str]:
    """A runner's own environment: PATH, HOME, locale; nothing of this test process's HPCCOMM_
    settings, so a template that forgets to set one is caught."""
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "USER", "LOGNAME")
    return {**{k: os.environ[k] for k in keep if k in os.environ}, **extra}
