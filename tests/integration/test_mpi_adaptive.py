"""Adaptive repeats end to end (--hpc-max-repeats): real Open MPI jobs (TCP over loopback)
pooled into a sweep, grown one job at a time while a verdict is undecided.

Against a reference whose jobs are far apart the points stay undecided, so their sweep must
grow to the limit, by jobs of their benchmark alone (a point of another benchmark of the same
jobs, decided, gets none); with the limit equal to --hpc-repeats nothing may be added, and
under the quick profile's scope (--hpc-repeat-for=changes) a too-noisy point whose ratio lies
inside the band gets none either, one beyond it does. The stored baseline keeps where each
job's batches end (job_sizes), and the verdict names the jobs it resampled.
"""

from __future__ import annotations

import json
import warnings

import pytest

from hpccomm_suites import DIR as SUITES_DIR
from pytest_hpccomm.baselines.verdict import within_band
from pytest_hpccomm.cluster.mpi import CACHE_VAR, mpi_cache, mpirun_path

MPI_CACHE = mpi_cache()  # read before pytester moves HOME
SUITE = SUITES_DIR / "mpi" / "test_perf_osu.py"

pytestmark = pytest.mark.skipif(
    mpirun_path("openmpi") is None,
    reason="MPI environment 'openmpi' not created (ci/bootstrap.sh "
    "makes it: python -m pytest_hpccomm mpi create)",
)


def test_undecided_points_get_more_jobs_up_to_the_limit(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CACHE_VAR, str(MPI_CACHE))
    pytester.copy_example(str(SUITE))
    # osu_latency and osu_bw share each job (one MPI job runs every selected benchmark)
    args = [
        "--hpc-mpi=openmpi",
        "--hpc-launcher=local",
        "--hpc-sizes=8,1K,16K",
        "-k",
        "osu_latency or osu_bw",
        "--hpc-baselines=bl",
        "--hpc-system=adaptive",
        "--hpc-history=none",
        "--hpc-repeats=2",
        "--hpc-tolerance=0.5",
        "-p",
        "no:cacheprovider",
        "--import-mode=importlib",
    ]
    first = pytester.runpytest_subprocess(*args, "--hpc-update-baselines=all", timeout=300)
    first.assert_outcomes(passed=6)
    stored = json.loads((pytester.path / "bl/adaptive/ethernet/mpi.json").read_text())
    assert all(
        len(e["job_sizes"]) == 2 and sum(e["job_sizes"]) == len(e["samples"])
        for e in stored["entries"].values()
    ), stored

    # osu_latency's reference: two jobs that landed far either side of the median, so no
    # number of jobs on this side makes its interval narrower than the 50 % band: its points
    # stay undecided and get jobs up to the limit, each a job of osu_latency alone. osu_bw's
    # points against their own run, at 50 %, are decided and get none
    # Every entry as if three sessions at one level had written it (a steady host): what is
    # under test is the jobs' spread, and fewer sessions claim nothing (verdict.MIN_SESSIONS)
    path = pytester.path / "bl/adaptive/ethernet/mpi.json"
    for e in stored["entries"].values():
        level = e["sessions"][-1]["median"]
        e["sessions"] = [
            {"median": level, "timestamp": f"2026-01-0{i + 1}T00:00:00+00:00"} for i in range(3)
        ]
        if e["benchmark"] == "osu_latency":
            k = e["job_sizes"][0]
            e["samples"] = [x * (0.3 if i < k else 1.7) for i, x in enumerate(e["samples"])]
    path.write_text(json.dumps(stored))
    grown = pytester.runpytest_subprocess(
        *args,
        "--hpc-max-repeats=4",
        "--hpc-repeat-for=undecided",
        "--hpc-results=grown.json",
        timeout=300,
    )
    results = json.loads((pytester.path / "grown.json").read_text())["results"]
    assert len(results) == 6, grown.stdout.str()
    for r in results:
        cost, verdict = r["measurement"]["extra"]["adaptive"], r["verdict"]
        if r["measurement"]["benchmark"] == "osu_bw":
            # osu_latency's added jobs are never osu_bw's: its jobs are the 2 shared ones plus
            # any of its own, and the verdict names any it added. Against its own run a minute
            # ago it is usually decided on the shared two, unless the host changed speed
            # between the sessions (this VM's MPI jobs move between speed modes; the host probe
            # reads it): then it grows like any undecided point, and may be decided after
            jobs = len(r["measurement"]["extra"]["job_sizes"])
            assert jobs == 2 + cost["added"], (jobs, cost, verdict["message"])
            if cost["added"]:
                assert f"{cost['added']} of them added for an undecided" in verdict["message"]
            if verdict["outcome"] != "pass" or cost["added"]:
                warnings.warn(
                    "osu_bw was not decided against its own run of this test (the host moved "
                    f"between the sessions): {verdict['message']}",
                    stacklevel=1,
                )
            continue
        assert verdict["outcome"] == "inconclusive", verdict["message"]
        assert verdict["reason"].startswith("too noisy"), verdict["message"]
        assert cost["jobs"] == 4 and cost["added"] == 2 and cost["seconds"] > 0, cost
        assert len(r["measurement"]["extra"]["job_sizes"]) == 4
        assert "over 4 vs 2 jobs" in verdict["message"]
        assert "4 jobs, 2 of them added for an undecided verdict" in verdict["message"]

    # limit equal to --hpc-repeats: nothing may be added, whatever the verdicts
    fixed = pytester.runpytest_subprocess(
        *args,
        "--hpc-max-repeats=2",
        "--hpc-repeat-for=undecided",
        "--hpc-results=fixed.json",
        timeout=300,
    )
    results = json.loads((pytester.path / "fixed.json").read_text())["results"]
    assert len(results) == 6, fixed.stdout.str()
    for r in results:
        assert r["measurement"]["extra"]["adaptive"]["added"] == 0, r["verdict"]
        assert "added for an undecided verdict" not in r["verdict"]["message"]

    # the quick profile's scope (changes): a too-noisy point whose ratio lies inside the band
    # gets no job, one beyond it does. Which of the two a session shows is the host's: MPI
    # jobs on a VM can move between two speed modes from one session to the next (a 16 KiB
    # latency 1.9x the stored level has been seen), so the test asserts the rule for the
    # side the session's ratio fell on, and says so when the in-band case was not reached
    quick = pytester.runpytest_subprocess(
        *args, "--hpc-sizes=16K", "--hpc-max-repeats=4", "--hpc-results=quick.json", timeout=300
    )
    results = json.loads((pytester.path / "quick.json").read_text())["results"]
    assert len(results) == 2, quick.stdout.str()
    (lat,) = [r for r in results if r["measurement"]["benchmark"] == "osu_latency"]
    verdict, added = lat["verdict"], lat["measurement"]["extra"]["adaptive"]["added"]
    if added == 0:
        # not grown: it must not be a potential change, yet a point the 'undecided' scope
        # would grow (too noisy), so the scope made the difference
        assert verdict["outcome"] == "inconclusive", verdict["message"]
        assert verdict["reason"].startswith("too noisy"), verdict["message"]
        assert within_band(verdict["ratio"], 0.5), verdict["message"]
    else:
        assert f"{added} of them added for an undecided verdict" in verdict["message"]
        warnings.warn(
            "the changes scope's in-band case was not reached: this session's osu_latency "
            f"level sat outside the band (grown by {added} jobs): {verdict['message']}",
            stacklevel=1,
        )
