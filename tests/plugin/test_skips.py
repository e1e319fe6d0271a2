"""Skip semantics end to end: tests needing an absent fabric or stack SKIP with one reason."""

from __future__ import annotations

from pathlib import Path

import pytest

TREES = Path(__file__).resolve().parents[2] / "fixtures" / "sysfs"

FABRIC_TESTS = """
import pytest

@pytest.mark.fabric("ib")
def test_ib(hpc_fabric):
    assert hpc_fabric.kind == "ib"

@pytest.mark.fabric("roce", "softroce")
def test_roce(hpc_fabric):
    assert hpc_fabric.gid

@pytest.mark.fabric("ethernet")
def test_eth(hpc_fabric):
    assert hpc_fabric.kind == "ethernet"

def test_unbound_uses_fixture(hpc_fabric):
    assert hpc_fabric.kind

def test_not_fabric_bound():
    pass
"""


def tree(name: str) -> str:
    return f"--hpc-sysfs-root={TREES / name / 'sys'}"


def skip_reasons(result: pytest.RunResult) -> dict[str, str]:
    out = {}
    for line in result.stdout.lines:
        if line.startswith("SKIPPED"):
            # "SKIPPED [1] test_x.py:4: reason"
            loc, _, reason = line.partition(": ")
            out[loc.split()[-1]] = reason
    return out


def test_ib_on_softroce_host_skips_naming_what_was_found(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(FABRIC_TESTS)
    result = pytester.runpytest("-rs", "--hpc-fabric=ib", tree("softroce-rxe"))
    result.assert_outcomes(passed=1, skipped=4)
    reasons = " | ".join(skip_reasons(result).values())
    assert "rxe0" in reasons and "InfiniBand" in reasons
    assert "ERROR" not in result.stdout.str()


def test_ib_tree_runs_ib_tests(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(FABRIC_TESTS)
    result = pytester.runpytest("-rs", "--hpc-fabric=ib", tree("ib-edr-mlx5"))
    result.assert_outcomes(passed=3, skipped=2)
    assert "this session runs on ib" in result.stdout.str()


def test_fabric_mark_why_comes_first(pytester: pytest.Pytester) -> None:
    """why=: a stack's own word on the fabrics it cannot use (TensorFlow's TCP-only gRPC on
    InfiniBand), then what the session found."""
    pytester.makepyfile(
        "import pytest\n"
        "@pytest.mark.fabric('ethernet', 'ipoib', why='runs over TCP: use --hpc-fabric=ipoib')\n"
        "def test_tcp(): pass\n"
    )
    result = pytester.runpytest("-rs", "--hpc-fabric=ib", tree("ib-edr-mlx5"))
    result.assert_outcomes(skipped=1)
    (reason,) = skip_reasons(result).values()
    assert reason.startswith("runs over TCP: use --hpc-fabric=ipoib (needs fabric ethernet|ipoib;")


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("ib-edr-mlx5", "ib"),
        ("roce-v2-mlx5", "roce"),
        ("softroce-rxe", "softroce"),
        ("iwarp-siw", "iwarp"),
        ("ethernet-plain", "ethernet"),
    ],
)
def test_auto_picks_the_best_fabric_present(
    pytester: pytest.Pytester, name: str, kind: str
) -> None:
    pytester.makepyfile(f"def test_kind(hpc_fabric):\n    assert hpc_fabric.kind == {kind!r}\n")
    pytester.runpytest("--hpc-fabric=auto", tree(name)).assert_outcomes(passed=1)


def test_down_port_reason_says_so(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(FABRIC_TESTS)
    result = pytester.runpytest("-rs", "--hpc-fabric=ib", tree("ib-port-down"))
    result.assert_outcomes(passed=1, skipped=4)
    assert "DOWN" in result.stdout.str()


def test_this_host_with_ib_skips_everything_fabric_bound(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(FABRIC_TESTS)
    result = pytester.runpytest("-rs", "--hpc-fabric=ib")
    assert result.ret == 0
    result.assert_outcomes(passed=1, skipped=4)
    assert "no InfiniBand" in result.stdout.str()


def test_stack_from_hook_skips_when_missing(pytester: pytest.Pytester) -> None:
    """A third-party stack registers through the hook; absent, its tests skip with the hint."""
    pytester.makeconftest("""
        from pytest_hpccomm.stack_probes import ImportProbe
        def pytest_hpccomm_stack_probes(config):
            return [ImportProbe("nccl", ("nccl_bindings_not_installed",), (), (), "pip install x")]
    """)
    pytester.makepyfile("""
        import pytest
        @pytest.mark.stack("nccl")
        def test_nccl():
            raise AssertionError("must not run")
    """)
    result = pytester.runpytest("-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(
        [
            "*stack 'nccl' not available: missing nccl_bindings_not_installed (install: pip install x)*"
        ]
    )
