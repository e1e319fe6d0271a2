"""Cross-check: perftest's own programs on the same device as the suite must succeed too.

A suite that passes where ib_write_bw fails (or the reverse) has found a problem in one of the
two; the numbers of both are in the JUnit properties for comparison. Under emulation perftest
may print inf latencies (its cycle counter is virtual): only success is asserted there.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from pytest_hpccomm.fabrics import FabricSelection
from pytest_hpccomm.stacks.verbs.perftest import PerftestFailed, missing, run_pair

pytestmark = [pytest.mark.conformance, pytest.mark.stack("verbs")]

PROGRAMS = [("ib_send_lat", 64), ("ib_write_lat", 64), ("ib_read_lat", 64),
            ("ib_atomic_lat", 8), ("ib_send_bw", 65536), ("ib_write_bw", 65536),
            ("ib_read_bw", 65536), ("ib_atomic_bw", 8)]


@pytest.mark.parametrize("program,size", PROGRAMS, ids=[p for p, _ in PROGRAMS])
def test_perftest_program_succeeds(program: str, size: int, verbs_fabric: FabricSelection,
                                   verbs_pair: Any, verbs_emulated: bool,
                                   record_property: Any) -> None:
    why = missing(program)
    if why:
        pytest.skip(why)
    if "atomic" in program and not verbs_pair.info.get("atomic_cap"):
        pytest.skip(f"{verbs_fabric.device} has no atomics (atomic_cap = NONE)")
    iterations = 200 if verbs_emulated else (1000 if program.endswith("_lat") else 5000)
    try:
        run = run_pair(program, verbs_fabric, size, iterations)
    except PerftestFailed as exc:
        pytest.fail(str(exc), pytrace=False)
    for name, value in run.report.items():
        record_property(f"perftest_{name}", value)
    if not verbs_emulated:
        bad = {k: v for k, v in run.report.items() if not math.isfinite(v)}
        assert not bad, f"{program} reported non-finite numbers on hardware: {bad}"
