"""The Horovod suite validates itself: with a planted bug (the peer adds 1 to the last element
of every allreduce result longer than PLANT_THRESHOLD), the allreduce property must fail,
Hypothesis must shrink it to a smallest tensor that trips the bug, and the failure must say
how to reproduce it, with a command that does (run here, with and without the plant).
Without the plant the same run passes."""

from __future__ import annotations

import itertools
import json
import os
import re
import shlex

import numpy as np
import pytest

from hpccomm_suites import DIR as SUITES_DIR
from pytest_hpccomm.cluster.mpi import CACHE_VAR as MPI_CACHE_VAR
from pytest_hpccomm.cluster.mpi import mpi_cache
from pytest_hpccomm.proc.jobs import run_job
from pytest_hpccomm.stacks.horovod.env import CACHE_VAR, cache_root
from pytest_hpccomm.stacks.horovod.wire import PLANT_THRESHOLD, PLANT_VAR, decode

CACHES = {MPI_CACHE_VAR: mpi_cache(), CACHE_VAR: cache_root()}  # before pytester moves HOME
SUITE = SUITES_DIR / "horovod" / "test_conformance_horovod.py"
TEST = "test_conformance_horovod.py::test_allreduce_matches_numpy"


def run_allreduce_property(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, controller: str, *extra: str
) -> pytest.RunResult:
    for var, path in CACHES.items():
        monkeypatch.setenv(var, str(path))
    pytester.copy_example(str(SUITE))
    return pytester.runpytest_subprocess(
        TEST,
        f"--hpc-horovod-controllers={controller}",
        "--hpc-launcher=local",
        "--hpc-history=none",
        "--hpc-fabric=ethernet",
        "-p",
        "no:cacheprovider",
        "--import-mode=importlib",
        *extra,
        timeout=600,
    )


@pytest.mark.parametrize("controller", ["gloo", "mpi"])
def test_planted_allreduce_bug_fails_shrunk_and_reproducible(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, controller: str
) -> None:
    res = run_allreduce_property(
        pytester, monkeypatch, controller, "--hpc-horovod-plant=corrupt-allreduce"
    )
    out = res.stdout.str()
    res.assert_outcomes(failed=1)
    wrong = re.search(
        r"rank 0: 1 of (\d+) elements wrong; element (\d+): got (\S+), "
        r"expected (\S+) \((\w+), (\w+),",
        out,
    )
    assert wrong, out[-4000:]
    count, index, got, want, op, dtype = wrong.groups()
    # shrunk: just over the threshold, the first dtype, zeros everywhere (the op is whichever
    # asks Hypothesis for the fewest choices: sum and average also draw their scales)
    assert PLANT_THRESHOLD < int(count) <= PLANT_THRESHOLD + 4, wrong.group(0)
    assert int(index) == int(count) - 1, wrong.group(0)
    assert dtype == "int32" and op in ("sum", "average", "min", "max", "product"), wrong.group(0)
    assert (got, want) == ("np.int32(1)", "np.int32(0)"), wrong.group(0)
    # what reproduces it: Hypothesis' blob, and a replay without pytest naming the plant
    assert re.search(r"@reproduce_failure\('[\d.]+', b'[^']+'\)", out), out[-3000:]
    assert "replay without pytest (MPI controller):" in out
    assert "HPCCOMM_HOROVOD_PLANT=corrupt-allreduce" in out
    # and the command does reproduce it: the same case replayed without the plant differs from
    # the planted replay in the last element only, on every rank
    planted, clean = (_replay(out, keep_plant) for keep_plant in (True, False))
    for a, b in zip(planted, clean, strict=True):
        diff = np.flatnonzero(a.reshape(-1) != b.reshape(-1))
        assert diff.tolist() == [a.size - 1], (a, b)


def _replay(out: str, keep_plant: bool) -> list[np.ndarray]:
    """Each rank's output of the failure's printed replay command, run as printed (but for
    the plant when not `keep_plant`), under the job reaper."""
    line = next(ln for ln in out.splitlines() if "replay without pytest (MPI controller):" in ln)
    words = shlex.split(line.split("replay without pytest (MPI controller):", 1)[1])
    assignments = list(itertools.takewhile(lambda w: re.match(r"^[A-Z_]+=", w), words))
    env = dict(w.split("=", 1) for w in assignments)
    if not keep_plant:
        del env[PLANT_VAR]
    res = run_job(
        words[len(assignments) :], {**os.environ, **env}, timeout=300.0, label="horovod replay"
    )
    assert res.ok, res.describe()
    reports = sorted(
        (json.loads(ln) for ln in res.stdout.splitlines() if ln.startswith("{")),
        key=lambda r: r["rank"],
    )
    assert reports and all("output" in r["report"] for r in reports), res.stdout[-2000:]
    arrays = []
    for r in reports:
        dtype, shape, data = decode(r["report"]["output"])
        arrays.append(np.frombuffer(data, dtype).reshape(shape))
    return arrays


def test_same_property_passes_without_plant(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    res = run_allreduce_property(pytester, monkeypatch, "gloo")
    res.assert_outcomes(passed=1)
