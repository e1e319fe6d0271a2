"""Cross-check: perftest's own programs on the same device as the suite must succeed too.

A suite that passes where ib_write_bw fails (or the reverse) has found a problem in one of the
two; the numbers of both are in the JUnit properties for comparison. Under emulation perftest
may print inf latencies (its cycle counter is virtual): only success is asserted there.
"""

from __future__ import annotations

import math

import pytest

from pytest_hpccomm.stacks.verbs.fixtures import PerftestProgram

pytestmark = [pytest.mark.conformance, pytest.mark.stack("verbs")]

PROGRAMS = [
    ("ib_send_lat", 64),
    ("ib_write_lat", 64),
    ("ib_read_lat", 64),
    ("ib_atomic_lat", 8),
    ("ib_send_bw", 65536),
    ("ib_write_bw", 65536),
    ("ib_read_bw", 65536),
    ("ib_atomic_bw", 8),
]


@pytest.mark.parametrize("program,size", PROGRAMS, ids=[p for p, _ in PROGRAMS])
def test_perftest_program_succeeds(
    program: str, size: int, verbs_perftest_program: PerftestProgram, verbs_emulated: bool
) -> None:
    run = verbs_perftest_program(program, size)
    if not verbs_emulated:
        bad = {k: v for k, v in run.report.items() if not math.isfinite(v)}
        assert not bad, f"{program} reported non-finite numbers on hardware: {bad}"
