"""The verbs implementation (env.py) and the pooled points (perf.merge/records), on known
answers: which Python a spec names and what its absence means, rdma-core's version read from
libibverbs' file name, and where each job's batches end in a pooled point."""

from __future__ import annotations

import importlib.util
import statistics
import sys
from pathlib import Path

import pytest

from pytest_hpccomm.baselines.paired import job_medians
from pytest_hpccomm.stacks.verbs.env import (
    THIS,
    VerbsEnv,
    VerbsEnvError,
    VerbsUnavailable,
    resolve,
)
from pytest_hpccomm.stacks.verbs.perf import BY_KEY, BenchPoint, merge, records

HAS_PYVERBS = importlib.util.find_spec("pyverbs") is not None


def test_rdma_core_version_is_read_from_the_library_name() -> None:
    env = VerbsEnv("/usr/bin/python3", "/usr", "/x/pyverbs", "/lib/libibverbs.so.1.14.44.0")
    assert env.rdma_core == "44"
    assert env.fingerprint()["rdma_core"] == "44"
    assert VerbsEnv("p", "/usr", "/x", "").rdma_core == ""


@pytest.mark.skipif(HAS_PYVERBS, reason="this Python has pyverbs: nothing absent to show")
def test_this_python_without_pyverbs_is_absent_not_broken() -> None:
    with pytest.raises(VerbsUnavailable, match="pyverbs does not import in .*python3-pyverbs"):
        resolve(THIS)


def test_a_named_python_without_pyverbs_is_broken(tmp_path: Path) -> None:
    # a venv over this interpreter with no site-packages of the system's: no pyverbs in it
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(Path(sys.base_prefix) / "bin" / "python3")
    (venv / "pyvenv.cfg").write_text(
        f"home = {Path(sys.base_prefix) / 'bin'}\ninclude-system-site-packages = false\n"
    )
    with pytest.raises(VerbsEnvError, match=f"pyverbs does not import in {venv}/bin/python"):
        resolve(str(venv))


def test_none_opts_out_and_a_missing_path_is_broken(tmp_path: Path) -> None:
    with pytest.raises(VerbsUnavailable, match="opted out"):
        resolve("none")
    with pytest.raises(VerbsEnvError, match="is not a Python executable"):
        resolve(str(tmp_path / "nothing"))


def _point(samples: list[float]) -> BenchPoint:
    return BenchPoint(BY_KEY["ib_write_lat"], 64, 200, 50, samples, {"t_min": 1.0})


def test_pooled_jobs_keep_where_each_job_ends() -> None:
    jobs = [_point([1.0, 2.0, 3.0]), _point([10.0, 11.0, 12.0]), _point([5.0, 6.0, 7.0])]
    pooled = merge(jobs)
    assert pooled.samples == [1.0, 2.0, 3.0, 10.0, 11.0, 12.0, 5.0, 6.0, 7.0]
    assert pooled.job_sizes == [3, 3, 3]
    (m,) = records(pooled)
    assert m.extra["job_sizes"] == [3, 3, 3]
    assert job_medians(m) == [2.0, 11.0, 6.0]  # what the paired verdict pairs by round
    assert m.warmup_discarded == 3 * 50
    assert statistics.median(m.samples) == 6.0
    assert m.params == {"size": 64, "connection": "RC"} and m.unit == "us"


def test_one_job_is_recorded_without_job_marks() -> None:
    (m,) = records(_point([1.0, 2.0, 3.0]))
    assert "job_sizes" not in m.extra and m.warmup_discarded == 50
    (pooled,) = records(merge([_point([1.0, 2.0])]))
    assert "job_sizes" not in pooled.extra
