"""A paired A/B run of Horovod, TensorFlow or verbs that names what cannot be a side is a usage error
(exit 4) naming the option, before any test runs: a path that does not exist, `none`, or the
stack's own implementation option beside the two sides."""

from __future__ import annotations

import pytest

OWN = {"horovod": "--hpc-horovod-python", "tf": "--hpc-tf-python", "verbs": "--hpc-verbs-python"}
# each stack's keyword for the implementation it finds by itself (a cached build; this Python)
OWN_KIND = {"horovod": "build", "tf": "build", "verbs": "this"}


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
    own, kind = OWN[stack], OWN_KIND[stack]
    res = pytester.runpytest_inprocess(
        f"--hpc-base={stack}={base.replace('build', kind)}",
        f"--hpc-candidate={stack}={candidate.replace('build', kind)}",
        *[e.format(own=own).replace("build", kind) for e in extra],
        "--hpc-history=none",
        "-p",
        "no:cacheprovider",
        "--co",
    )
    assert res.ret == pytest.ExitCode.USAGE_ERROR, res.stdout.str()
    assert says.format(stack=stack, own=own) in res.stderr.str() + res.stdout.str()


@pytest.mark.parametrize("stack", sorted(OWN))
def test_every_stack_can_be_paired(pytester: pytest.Pytester, stack: str) -> None:
    pytester.makepyfile("def test_nothing():\n    pass\n")
    res = pytester.runpytest_inprocess(
        f"--hpc-base={stack}={OWN_KIND[stack]}",
        f"--hpc-candidate={stack}={OWN_KIND[stack]}",
        "--hpc-history=none",
        "-p",
        "no:cacheprovider",
    )
    res.assert_outcomes(passed=1)
