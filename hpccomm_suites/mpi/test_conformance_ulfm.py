"""ULFM: a killed rank is reported to the survivors as MPI_ERR_PROC_FAILED (and they can
shrink the communicator and go on). Its own short-lived job (the `mpi_ulfm` fixture): it kills
a rank, which would end the session's conformance peer."""

from __future__ import annotations

import pytest

from pytest_hpccomm.coverage import cells
from pytest_hpccomm.stacks.mpi.plugin import UlfmRun

pytestmark = [
    pytest.mark.conformance,
    pytest.mark.stack("mpi"),
    pytest.mark.fabric("ethernet", "ipoib", "ib", "roce"),
]

DETECT_LIMIT = 10.0  # s; Open MPI 5's detector finds a dead rank in ~1 s here


@pytest.mark.covers(
    "mpi",
    *cells(["fault_tolerance"], ["plain"]),
)
def test_ulfm_proc_failed(mpi_ulfm: UlfmRun) -> None:
    out = mpi_ulfm()
    assert len(out.survivors) == out.ranks - 1, (
        f"{len(out.survivors)} of {out.ranks - 1} survivors reported: {out.job}"
    )
    for s in out.survivors:
        assert s["error_class"] == s["ERR_PROC_FAILED"], (
            f"rank {s['rank']} ({s['host']}): receiving from killed rank {s['victim']} gave "
            f"error class {s['error_class']} ({s.get('message')}), not MPI_ERR_PROC_FAILED"
        )
        assert s["detect_s"] < DETECT_LIMIT, (
            f"rank {s['rank']}: failure reported after {s['detect_s']} s"
        )
        assert (s.get("shrunk_size"), s.get("shrunk_sum")) == (out.ranks - 1, out.ranks - 1), (
            f"rank {s['rank']}: Shrink after Ack_failed: {s}"
        )
        # Shrink excludes the failed group: a group difference, which keeps the survivors'
        # relative order (the victim is the last rank, so every survivor keeps its rank)
        assert s.get("shrunk_order") == list(range(out.ranks - 1)), (
            f"rank {s['rank']}: the shrunk communicator holds old ranks "
            f"{s.get('shrunk_order')} in its rank order, not {list(range(out.ranks - 1))}"
        )
