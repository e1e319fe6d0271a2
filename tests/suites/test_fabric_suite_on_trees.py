"""The fabric suite's checks exercised on recorded sysfs trees of hosts this machine is not."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpccomm_suites import DIR as SUITES_DIR

ROOT = Path(__file__).resolve().parents[2]
SUITE = SUITES_DIR / "fabric" / "test_conformance_fabric.py"


@pytest.mark.parametrize(
    ("tree", "fabric", "passed"),
    [
        ("ib-edr-mlx5", "ib", 2),
        ("ib-edr-mlx5", "ipoib", 2),
        ("roce-v2-mlx5", "roce", 2),
        ("softroce-rxe", "softroce", 2),
        ("iwarp-siw", "iwarp", 2),
        ("ethernet-plain", "ethernet", 2),
    ],
)
def test_fabric_suite_passes_on_recorded_tree(
    pytester: pytest.Pytester, tree: str, fabric: str, passed: int
) -> None:
    pytester.copy_example(str(SUITE))
    result = pytester.runpytest(
        f"--hpc-sysfs-root={ROOT / 'fixtures/sysfs' / tree / 'sys'}",
        f"--hpc-fabric={fabric}",
        "--hpc-history=none",
        "-rs",
        "--import-mode=importlib",
    )
    result.assert_outcomes(passed=passed, skipped=6 - passed)


def test_fabric_suite_on_down_port_skips_with_reason(pytester: pytest.Pytester) -> None:
    pytester.copy_example(str(SUITE))
    result = pytester.runpytest(
        f"--hpc-sysfs-root={ROOT / 'fixtures/sysfs/ib-port-down/sys'}",
        "--hpc-fabric=ib",
        "-rs",
        "--import-mode=importlib",
    )
    result.assert_outcomes(passed=1, skipped=5)
    result.stdout.fnmatch_lines(["*mlx5_0 port 1 is DOWN (phys_state Polling)*"])


def test_fabric_suite_on_a_public_partial_recording(pytester: pytest.Pytester) -> None:
    """Prometheus procfs' fixture (no LIDs, GIDs, node_type or addresses): the IB checks skip
    naming what the recording lacks; Omni-Path is never taken for InfiniBand."""
    pytester.copy_example(str(SUITE))
    root = ROOT / "fixtures/sysfs/procfs-opa-mlx4-mlx5/sys"
    result = pytester.runpytest(
        f"--hpc-sysfs-root={root}",
        "--hpc-fabric=ib",
        "-rs",
        "--hpc-history=none",
        "--import-mode=importlib",
    )
    result.assert_outcomes(passed=1, skipped=5)
    result.stdout.fnmatch_lines(
        [
            "*hpccomm: fabric=ib -> ib: mlx4_0 port 1 (InfiniBand, 40 Gb/sec*",
            "*mlx4_0 port 1: the tree records no lid, sm_lid or gids*",
        ]
    )
