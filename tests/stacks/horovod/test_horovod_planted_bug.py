"""The Horovod suite validates itself: with a planted bug (the peer adds 1 to the last element
of every allreduce result longer than PLANT_THRESHOLD), the allreduce property must fail,
Hypothesis must shrink it to a smallest tensor that trips the bug, and the failure must say
how to reproduce it. Without the plant the same run passes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pytest_hpccomm.cluster.mpi import CACHE_VAR as MPI_CACHE_VAR
from pytest_hpccomm.cluster.mpi import mpi_cache
from pytest_hpccomm.stacks.horovod.build import CACHE_VAR, cache_root
from pytest_hpccomm.stacks.horovod.wire import PLANT_THRESHOLD

CACHES = {MPI_CACHE_VAR: mpi_cache(), CACHE_VAR: cache_root()}  # before pytester moves HOME
SUITE = Path(__file__).resolve().parents[3] / "suites" / "horovod" / "test_conformance_horovod.py"
TEST = "test_conformance_horovod.py::test_allreduce_matches_numpy"


def run_allreduce_property(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
                           controller: str, *extra: str) -> pytest.RunResult:
    for var, path in CACHES.items():
        monkeypatch.setenv(var, str(path))
    pytester.copy_example(str(SUITE))
    return pytester.runpytest_subprocess(
        TEST, f"--hpc-horovod-controllers={controller}", "--hpc-launcher=local",
        "--hpc-history=none", "--hpc-fabric=ethernet", "-p", "no:cacheprovider",
        "--import-mode=importlib", *extra, timeout=600)


@pytest.mark.parametrize("controller", ["gloo", "mpi"])
def test_planted_allreduce_bug_fails_shrunk_and_reproducible(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, controller: str) -> None:
    res = run_allreduce_property(pytester, monkeypatch, controller,
                                 "--hpc-horovod-plant=corrupt-allreduce")
    out = res.stdout.str()
    res.assert_outcomes(failed=1)
    wrong = re.search(r"rank 0: 1 of (\d+) elements wrong; element (\d+): got (\S+), "
                      r"expected (\S+) \((\w+), (\w+),", out)
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


def test_same_property_passes_without_plant(pytester: pytest.Pytester,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    res = run_allreduce_property(pytester, monkeypatch, "gloo")
    res.assert_outcomes(passed=1)
