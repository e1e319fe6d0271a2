"""A stack added from tests/ through the contract alone (tests/contract/toy_stack.py) gets the
whole gate: adaptive repeats against a stored baseline, paired A/B rounds with the canary on
the candidate only, an absent or broken side named as a failure, JUnit properties and report
rows. Orchestrator logic only: the toy's jobs are stand-ins with known answers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_hpccomm.stacks.contract import Implementations

ROOT = Path(__file__).resolve().parents[2]
SUITE = """
import pytest

pytestmark = [pytest.mark.perf, pytest.mark.stack("toy")]


def test_toy(toy_latency):
    toy_latency(64)
"""
COMMON = [
    "-p",
    "tests.contract.toy_stack",
    "--hpc-history=none",
    "--hpc-baselines=bl",
    "--hpc-system=toybox",
    "--hpc-results=r.json",
    "-p",
    "no:cacheprovider",
]


def run(pytester: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, list[dict[str, Any]]]:
    res = pytester.runpytest_subprocess(*COMMON, *args, timeout=120)
    path = pytester.path / "r.json"
    results = json.loads(path.read_text())["results"] if path.exists() else []
    path.unlink(missing_ok=True)
    return res, results


@pytest.fixture
def toy(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    pytester.makepyfile(test_toy=SUITE)
    return pytester


def test_stored_mode_pools_more_jobs_while_the_verdict_is_undecided(toy: pytest.Pytester) -> None:
    first, _ = run(toy, "--hpc-update-baselines=all", "--hpc-repeats=3")
    first.assert_outcomes(passed=1)
    assert (toy.path / "bl").is_dir()
    # one job gives 2 batches: "too few samples" until 3 jobs give 6 (MIN_SAMPLES is 5)
    again, results = run(
        toy, "--hpc-repeats=1", "--hpc-max-repeats=4", "--hpc-repeat-for=undecided"
    )
    again.assert_outcomes(passed=1)
    (r,) = results
    assert r["measurement"]["extra"]["adaptive"]["jobs"] == 3, r
    assert r["measurement"]["extra"]["adaptive"]["added"] == 2, r
    assert r["verdict"]["outcome"] not in ("regression", "improvement"), r


def test_paired_run_catches_a_slower_candidate_with_both_sides_named(
    toy: pytest.Pytester,
) -> None:
    res, results = run(
        toy,
        "--hpc-base=toy=v1",
        "--hpc-candidate=toy=v2",
        "--hpc-ab-rounds=4",
        "--junitxml=j.xml",
        "--hpc-markdown=summary.md",
    )
    res.assert_outcomes(failed=1)
    res.stdout.fnmatch_lines(
        [
            "*regression: toy_latency size=64: v2 (candidate) median 1* us vs v1 (base) 1* us "
            "(4 job pairs, paired ratio 1.300*"
        ]
    )
    (r,) = results
    assert r["verdict"]["outcome"] == "regression"
    assert r["fingerprint"]["paired_base"] == "v1"
    assert len(r["measurement"]["extra"]["paired_base"]["job_medians"]) == 4
    assert 'name="verdict" value="regression"' in (toy.path / "j.xml").read_text()
    assert "toy_latency" in (toy.path / "summary.md").read_text()
    assert not (toy.path / "bl").exists()  # a paired run reads and writes no baseline


def test_paired_a_vs_a_passes_and_its_canary_stretches_the_candidate_only(
    toy: pytest.Pytester,
) -> None:
    sides = ["--hpc-base=toy=v1", "--hpc-candidate=toy=v1", "--hpc-ab-rounds=4"]
    clean, results = run(toy, *sides)
    clean.assert_outcomes(passed=1)
    assert results[0]["verdict"]["outcome"] == "pass", results
    canary, results = run(toy, *sides, "--hpc-inject-slowdown=1.5")
    canary.assert_outcomes(failed=1)
    assert results[0]["verdict"]["ratio"] == pytest.approx(1.5, rel=0.01), results


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("v9", "--hpc-candidate toy: toy 'v9' is not installed here"),
        ("broken", "toy broken: installed, but its peer exits at start"),
    ],
)
def test_a_named_side_that_is_absent_or_broken_fails_naming_it(
    toy: pytest.Pytester, spec: str, says: str
) -> None:
    res, _ = run(toy, "--hpc-base=toy=v1", f"--hpc-candidate=toy={spec}")
    res.assert_outcomes(errors=1)
    assert says in res.stdout.str()


def test_implementations_resolve_once_skip_what_is_absent_and_fail_what_is_broken() -> None:
    calls: list[str] = []

    class Absent(Exception):
        pass

    class Broken(Exception):
        pass

    def resolve(spec: str) -> str:
        calls.append(spec)
        if spec == "absent":
            raise Absent("not here")
        if spec == "broken":
            raise Broken("does not start")
        return spec.upper()

    impls = Implementations(resolve, (Absent,), (Broken,))
    assert impls("a") == impls("a") == "A"
    with pytest.raises(pytest.skip.Exception, match="not here"):
        impls("absent")
    with pytest.raises(pytest.fail.Exception, match="--hpc-base x: not here"):
        impls("absent", "--hpc-base x")
    with pytest.raises(pytest.fail.Exception, match="does not start"):
        impls("broken")
    assert calls == ["a", "absent", "broken"]  # each spec resolved once
