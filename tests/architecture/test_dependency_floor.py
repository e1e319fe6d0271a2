"""The numpy and scipy floors in pyproject.toml are real: the verdict engine runs on exactly
those versions. (scipy 1.11-1.14 lacked stats.bootstrap(rng=): every verdict raised TypeError
while pyproject promised >= 1.11.)

The floor environment is a venv with exactly the floor wheels, cached under
~/.cache/pytest-hpccomm/floor/<numpy>-<scipy>/ (built aside, then renamed into place, so a
killed build never counts as one). PyPI being unreachable fails the test: CI's dependencies
are part of what it checks.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tomllib
from pathlib import Path

from pytest_hpccomm.cache import cache_dir
from pytest_hpccomm.cluster.jobs import run_job

ROOT = Path(__file__).resolve().parents[2]

# what the verdict engine calls in scipy/numpy: a stored-baseline verdict (block bootstrap,
# Mann-Whitney), a paired A/B verdict (t interval), a summary (bootstrap CI of the median)
PROBE = """
import numpy as np, scipy
from pytest_hpccomm.baselines.paired import judge_paired
from pytest_hpccomm.baselines.store import entry_from_measurement
from pytest_hpccomm.baselines.verdict import Outcome, judge
from pytest_hpccomm.measure.measurement import Direction, Measurement
from pytest_hpccomm.measure.stats import summarize
rng = np.random.default_rng(1)
def m(samples, jobs=None):
    return Measurement("mpi", "osu_latency", {"size": 8}, tuple(samples), "us",
                       Direction.LOWER_IS_BETTER, extra={"job_medians": jobs} if jobs else {})
base = m(rng.lognormal(np.log(3.0), 0.01, 40))
slow = m(rng.lognormal(np.log(4.5), 0.01, 40))
assert judge(slow, entry_from_measurement(base, {}, "t")).outcome is Outcome.REGRESSION
assert judge(base, entry_from_measurement(base, {}, "t")).outcome is Outcome.PASS
cand = m([1.0] * 6, [1.5, 1.52, 1.49, 1.51, 1.5, 1.48])
assert judge_paired(cand, m([1.0] * 6, [1.0, 1.01, 0.99, 1.0, 1.02, 0.98]), 0.05).outcome \\
    is Outcome.REGRESSION
assert summarize(base.samples).median_ci_low is not None
print("FLOOR-OK", np.__version__, scipy.__version__)
"""


def floors() -> dict[str, str]:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    out = {}
    for dep in deps:
        m = re.fullmatch(r"(numpy|scipy)>=([0-9.]+)", dep.split(";")[0].strip())
        if m:
            out[m.group(1)] = m.group(2)
    assert set(out) == {"numpy", "scipy"}, f"no >= floor for numpy/scipy in {deps}"
    return out


def floor_python(versions: dict[str, str]) -> Path:
    final = cache_dir("floor") / f"numpy{versions['numpy']}-scipy{versions['scipy']}"
    python = final / "bin" / "python"
    if python.exists():
        return python
    tmp = final.with_name(f".{final.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        made = run_job([sys.executable, "-m", "venv", str(tmp)], timeout=120)
        assert made.ok, made.describe()
        got = run_job([str(tmp / "bin" / "python"), "-m", "pip", "install", "--quiet",
                       "--only-binary=:all:", *(f"{k}=={v}" for k, v in versions.items())],
                      timeout=600)
        assert got.ok, f"installing the floor versions: {got.describe()}"
        # the venv is relocated by the rename: its scripts' shebangs break, python does not
        shutil.rmtree(final, ignore_errors=True)
        os.rename(tmp, final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return python


def test_verdicts_run_on_the_floor_versions() -> None:
    versions = floors()
    python = floor_python(versions)
    res = run_job([str(python), "-c", PROBE], {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
                  timeout=300)
    assert res.ok, f"the verdict engine fails on numpy {versions['numpy']}, scipy " \
                   f"{versions['scipy']}: {res.describe()}\n{res.stderr[-2000:]}"
    assert f"FLOOR-OK {versions['numpy']}" in res.stdout
    assert res.stdout.split()[-1].startswith(versions["scipy"])
