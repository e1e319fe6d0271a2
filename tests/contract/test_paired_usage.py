"""A paired A/B run of Horovod or TensorFlow that names what cannot be a side is a usage error
(exit 4) naming the option, before any test runs: a path that does not exist, `none`, or the
stack's own implementation option beside the two sides."""

from __future__ import annotations

import pytest

OWN = {"horovod": "--hpc-horovod-python", "tf": "--hpc-tf-python"}


@pytest.mark.parametrize("stack", sorted(OWN))
@pytest.mark.parametrize(
    ("base", "candidate", "extra", "says"),
    [
        (
            "build",
            "/nonexistent/python",
            [],
            "--hpc-candidate {stack}: /nonexistent/python does not exist",
        ),
        (
            "/nonexistent/python",
            "build",
            [],
            "--hpc-base {stack}: /nonexistent/python does not exist",
        ),
        ("build", "none", [], "--hpc-candidate {stack}=none: each side of a paired run is a"),
        (
            "build",
            "build",
            ["{own}=build"],
            "{own} cannot be combined with a paired A/B run of {stack}",
        ),
    ],
)
def test_what_cannot_be_a_side_is_a_usage_error(
    pytester: pytest.Pytester, stack: str, base: str, candidate: str, extra: list[str], says: str
) -> None:
    pytester.makepyfile("def test_nothing():\n    pass\n")
    own = OWN[stack]
    res = pytester.runpytest_inprocess(
        f"--hpc-base={stack}={base}",
        f"--hpc-candidate={stack}={candidate}",
        *[e.format(own=own) for e in extra],
        "--hpc-history=none",
        "-p",
        "no:cacheprovider",
        "--co",
    )
    assert res.ret == pytest.ExitCode.USAGE_ERROR, res.stdout.str()
    assert says.format(stack=stack, own=own) in res.stderr.str() + res.stdout.str()


@pytest.mark.parametrize("stack", sorted(OWN))
def test_both_stacks_can_be_paired(pytester: pytest.Pytester, stack: str) -> None:
    pytester.makepyfile("def test_nothing():\n    pass\n")
    res = pytester.runpytest_inprocess(
        f"--hpc-base={stack}=build",
        f"--hpc-candidate={stack}=build",
        "--hpc-history=none",
        "-p",
        "no:cacheprovider",
    )
    res.assert_outcomes(passed=1)
