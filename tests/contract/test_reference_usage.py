"""The nightly against a reference (--hpc-reference STACK=IMPL): the candidate is what the run
tests for the stack (each stack answers pytest_hpccomm_under_test) or --hpc-candidate; what
cannot make a pair, and a ratio gate without a reference or a history, are usage errors (exit
4) naming the options, before any test runs."""

from __future__ import annotations

import json

import pytest

from pytest_hpccomm.cluster.mpi import CACHE_VAR, mpi_cache

MPI_CACHE = mpi_cache()  # read before pytester moves HOME: the MPI environments' cache
# stack -> (its reference, the run's own option naming the candidate, the candidate it names)
UNDER_TEST = {
    "mpi": ("openmpi", "--hpc-mpi=openmpi", "openmpi"),
    "grpc": ("system", None, "system"),
    "horovod": ("build", "--hpc-horovod-python=build", "build"),
    "tf": ("build", None, "build"),
    "verbs": ("this", "--hpc-verbs-python=this", "this"),
}
COMMON = ["-p", "no:cacheprovider", "--co", "-q"]


@pytest.mark.parametrize("stack", sorted(UNDER_TEST))
def test_the_candidate_is_what_the_run_tests(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, stack: str
) -> None:
    """The session's pairs, as the results JSON of a run with no item states them."""
    monkeypatch.setenv(CACHE_VAR, str(MPI_CACHE))
    ref, own, candidate = UNDER_TEST[stack]
    pytester.makepyfile("def test_nothing():\n    pass\n")
    res = pytester.runpytest_inprocess(
        f"--hpc-reference={stack}={ref}",
        *([own] if own else []),
        "--hpc-history=none",
        "--hpc-results=r.json",
        "-p",
        "no:cacheprovider",
    )
    res.assert_outcomes(passed=1)
    session = json.loads((pytester.path / "r.json").read_text())["session"]
    assert session["paired"] == {stack: {"base": ref, "candidate": candidate}}
    assert session["reference"] == {stack: ref}


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (
            ["--hpc-reference=mpi=openmpi", "--hpc-mpi=openmpi,mpich"],
            "--hpc-reference mpi=openmpi: which mpi is under test is not one implementation "
            "here; name it with --hpc-candidate mpi=IMPL",
        ),
        (
            ["--hpc-reference=mpi=openmpi", "--hpc-base=mpi=openmpi4", "--hpc-candidate=mpi=x"],
            "--hpc-reference and --hpc-base both name stack 'mpi'",
        ),
        (
            ["--hpc-ratio-gate=3"],
            "--hpc-ratio-gate judges the ratio series of a nightly against a reference",
        ),
        (
            [
                "--hpc-reference=mpi=openmpi",
                "--hpc-mpi=openmpi",
                "--hpc-ratio-gate=3",
                "--hpc-history=none",
            ],
            "--hpc-ratio-gate reads the history: --hpc-history is 'none'",
        ),
        (["--hpc-reference=mpi"], "--hpc-reference: expected STACK=IMPL"),
        (
            ["--hpc-reference=mpi=openmpi", "--hpc-mpi=openmpi", "--hpc-candidate=mpi=mpich"],
            "--hpc-mpi cannot be combined with a paired A/B run of mpi",
        ),
    ],
)
def test_what_cannot_make_a_nightly_pair_is_a_usage_error(
    pytester: pytest.Pytester, args: list[str], says: str
) -> None:
    pytester.makepyfile("def test_nothing():\n    pass\n")
    res = pytester.runpytest_inprocess(*args, *COMMON)
    assert res.ret == pytest.ExitCode.USAGE_ERROR, res.stdout.str()
    assert says in res.stderr.str() + res.stdout.str()
