"""The verbs stack plugin's skips and fabric fixture, on recorded sysfs trees (pytester).

pyverbs is absent on this host; a stub package stands in for it where a test needs the stack
to count as present (nothing here opens a device: the peers are not started).
"""

from __future__ import annotations

from importlib.metadata import entry_points
from pathlib import Path

import pytest

TREES = Path(__file__).resolve().parents[3] / "fixtures" / "sysfs"
PLUGIN = "pytest_hpccomm.stacks.verbs.plugin"

VERBS_TESTS = """
import pytest

pytestmark = pytest.mark.stack("verbs")

def test_fabric(verbs_fabric, verbs_emulated):
    print("SELECTED", verbs_fabric.kind, verbs_fabric.device, verbs_fabric.gid_index,
          "EMULATED" if verbs_emulated else "HARDWARE")

def test_other_stacks_untouched():
    pass
"""
NOT_VERBS = """
def test_plain():
    pass
"""


def plugin_args() -> list[str]:
    """-p the plugin unless an installed entry point already loads it."""
    loaded = {e.value for e in entry_points(group="pytest11")}
    return [] if PLUGIN in loaded else ["-p", PLUGIN]


def tree(name: str) -> str:
    return f"--hpc-sysfs-root={TREES / name / 'sys'}"


def with_pyverbs(pytester: pytest.Pytester) -> None:
    pytester.mkpydir("pyverbs")
    pytester.syspathinsert()


def reasons(result: pytest.RunResult) -> str:
    return " | ".join(line for line in result.stdout.lines if line.startswith("SKIPPED"))


def test_ib_without_pyverbs_names_the_stack_and_what_was_found(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(VERBS_TESTS)
    result = pytester.runpytest("-rs", *plugin_args(), "--hpc-fabric=ib", tree("softroce-rxe"))
    result.assert_outcomes(skipped=2)
    text = reasons(result)
    assert "missing pyverbs" in text
    assert "fabric ib:" in text and "rxe0" in text, text


def test_softroce_on_a_recorded_tree_without_rxe_cannot_be_provisioned(
    pytester: pytest.Pytester,
) -> None:
    with_pyverbs(pytester)
    pytester.makepyfile(VERBS_TESTS)
    result = pytester.runpytest(
        "-rs", *plugin_args(), "--hpc-fabric=softroce", tree("ethernet-plain")
    )
    result.assert_outcomes(skipped=2)
    text = reasons(result)
    assert "no SoftRoCE (rxe) device" in text and "cannot create one" in text, text
    assert "recorded sysfs tree" in text, text
    assert "pyverbs" not in text


def test_softroce_tree_selects_rxe_and_marks_it_emulated(pytester: pytest.Pytester) -> None:
    with_pyverbs(pytester)
    pytester.makepyfile(VERBS_TESTS)
    result = pytester.runpytest("-s", *plugin_args(), "--hpc-fabric=softroce", tree("softroce-rxe"))
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*SELECTED softroce rxe0 3 EMULATED*"])


def test_ib_tree_is_hardware(pytester: pytest.Pytester) -> None:
    with_pyverbs(pytester)
    pytester.makepyfile(VERBS_TESTS)
    result = pytester.runpytest("-s", *plugin_args(), "--hpc-fabric=ib", tree("ib-edr-mlx5"))
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*SELECTED ib mlx5_0 0 HARDWARE*"])


def test_ethernet_session_skips_verbs_naming_the_fabric(pytester: pytest.Pytester) -> None:
    with_pyverbs(pytester)
    pytester.makepyfile(VERBS_TESTS)
    result = pytester.runpytest(
        "-rs", *plugin_args(), "--hpc-fabric=ethernet", tree("ethernet-plain")
    )
    result.assert_outcomes(skipped=2)
    assert "verbs needs an RDMA fabric" in reasons(result)


def test_other_tests_are_not_touched(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(NOT_VERBS)
    result = pytester.runpytest(*plugin_args(), "--hpc-fabric=softroce", tree("ethernet-plain"))
    result.assert_outcomes(passed=1)


def test_plant_option_is_validated(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(NOT_VERBS)
    result = pytester.runpytest(*plugin_args(), "--hpc-verbs-plant=nonsense")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
