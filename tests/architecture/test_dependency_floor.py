"""The numpy and scipy floors in pyproject.toml are real: the stats and verdict unit tests pass
on exactly those versions. (scipy 1.11-1.14 lacked stats.bootstrap(rng=): every verdict raised
TypeError while pyproject promised >= 1.11.)

The floor environment is a venv with exactly the floor wheels (plus pytest and hypothesis to
run the tests), cached under ~/.cache/pytest-hpccomm/floor/numpy<v>-scipy<v>/: built aside,
then renamed into place, so a killed build never counts as one. PyPI being unreachable fails
the test: CI's dependencies are part of what it checks.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tomllib
from pathlib import Path

from pytest_hpccomm.cache import cache_dir
from pytest_hpccomm.proc.jobs import run_job

ROOT = Path(__file__).resolve().parents[2]
# the pure numerical tests: summaries (bootstrap CI of the median), stored-baseline verdicts
# (block bootstrap, Mann-Whitney), paired verdicts (Student t), metric and size helpers
UNIT_TESTS = (
    "tests/measure",
    "tests/baselines/test_baselines_verdict.py",
    "tests/baselines/test_baselines_paired.py",
)
TOOLS = ("pytest", "hypothesis")  # what runs them; any version
# a measurement of the host, not of numpy or scipy: it runs in the main environment, and a
# second reading here only doubled the chance that a noisy host fails the floor's check
HOST_MEASUREMENTS = (
    "tests/measure/test_measure_host_speed.py::test_the_probes_own_noise_fits_its_band",
)


def floors() -> dict[str, str]:
    """{"numpy": v, "scipy": v} from the `>=` floors of pyproject's dependencies."""
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    out = {}
    for dep in deps:
        m = re.fullmatch(r"(numpy|scipy)>=([0-9.]+)", dep.split(";")[0].strip())
        if m:
            out[m.group(1)] = m.group(2)
    assert set(out) == {"numpy", "scipy"}, f"no >= floor for numpy/scipy in {deps}"
    return out


def floor_python(versions: dict[str, str]) -> Path:
    """The python of a venv with exactly `versions` (made once, then cached)."""
    wanted = [*(f"{k}=={v}" for k, v in sorted(versions.items())), *TOOLS]
    final = cache_dir("floor") / "-".join(f"{k}{v}" for k, v in sorted(versions.items()))
    stamp = final / "requirements.txt"  # written last: a venv without it is incomplete
    if stamp.is_file() and stamp.read_text().split() == wanted:
        return final / "bin" / "python"
    tmp = final.with_name(f".{final.name}.tmp-{os.getpid()}")
    old = final.with_name(f".{final.name}.old-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        made = run_job([sys.executable, "-m", "venv", str(tmp)], timeout=120)
        assert made.ok, made.describe()
        got = run_job(
            [
                str(tmp / "bin" / "python"),
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "--only-binary=:all:",
                *wanted,
            ],
            timeout=600,
        )
        assert got.ok, f"installing {' '.join(wanted)}: {got.describe()}\n{got.stderr[-2000:]}"
        (tmp / "requirements.txt").write_text("\n".join(wanted) + "\n")
        # the rename breaks the venv's script shebangs, not `python -m`
        if final.exists():
            os.rename(final, old)  # an older recipe's venv
        os.rename(tmp, final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(old, ignore_errors=True)
    return final / "bin" / "python"


def run_unit_tests(python: Path, timeout: float = 300) -> tuple[bool, str]:
    """(passed, output) of UNIT_TESTS under `python`, with this checkout on its path (the
    rootdir's pyproject) and nothing of this interpreter's environment."""
    res = run_job(
        [
            str(python),
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            *UNIT_TESTS,
            *(f"--deselect={t}" for t in HOST_MEASUREMENTS),
        ],
        {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/tmp")},
        timeout=timeout,
        cwd=ROOT,
    )
    return res.ok, f"{res.describe()}\n{res.stdout[-3000:]}\n{res.stderr[-1000:]}"


def installed(python: Path) -> dict[str, str]:
    res = run_job(
        [str(python), "-c", "import numpy, scipy; print(numpy.__version__, scipy.__version__)"],
        {"PATH": "/usr/bin:/bin"},
        timeout=60,
    )
    assert res.ok, res.describe()
    numpy, scipy = res.stdout.split()
    return {"numpy": numpy, "scipy": scipy}


def test_unit_tests_pass_on_the_floor_versions() -> None:
    versions = floors()
    python = floor_python(versions)
    got = installed(python)
    for name, floor in versions.items():  # "1.15" is 1.15.0
        assert got[name].split(".")[:3] == (floor.split(".") + ["0", "0"])[:3], (name, got)
    ok, output = run_unit_tests(python)
    assert ok, (
        f"the stats/verdict tests fail on numpy {got['numpy']}, scipy {got['scipy']} "
        f"(pyproject's floors):\n{output}"
    )
    assert re.search(r"\b\d{2,} passed\b", output), output  # they ran, not collected nothing
