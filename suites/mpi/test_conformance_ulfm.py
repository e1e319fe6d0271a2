"""ULFM: a killed rank is reported to the survivors as MPI_ERR_PROC_FAILED (and they can
shrink the communicator and go on). Its own short-lived job: it kills a rank, which would end
the session's conformance peer."""

from __future__ import annotations

import pytest

from pytest_hpccomm.cluster.placement import LOOPBACK, NETNS
from pytest_hpccomm.stacks.mpi.conformance import (ConformanceError, run_ulfm,
                                                   ulfm_unavailable_reason)
from pytest_hpccomm.stacks.mpi.runtime import MpiRuntime

pytestmark = [pytest.mark.conformance, pytest.mark.stack("mpi"),
              pytest.mark.fabric("ethernet", "ipoib", "ib", "roce")]

DETECT_LIMIT = 10.0  # s; Open MPI 5's detector finds a dead rank in ~1 s here


def test_ulfm_proc_failed(mpi_runtime: MpiRuntime, hpc_placement: str,
                          request: pytest.FixtureRequest) -> None:
    reason = ulfm_unavailable_reason(mpi_runtime)
    if reason:
        pytest.skip(reason)
    if hpc_placement not in (LOOPBACK, NETNS):
        pytest.skip(f"placement {hpc_placement!r}: the ULFM job runs on {LOOPBACK} or {NETNS}")
    cluster = request.getfixturevalue("hpc_virtual_cluster") if hpc_placement == NETNS else None
    try:
        out = run_ulfm(mpi_runtime, hpc_placement, cluster)
    except ConformanceError as exc:
        pytest.fail(str(exc), pytrace=False)
    assert len(out.survivors) == out.ranks - 1, \
        f"{len(out.survivors)} of {out.ranks - 1} survivors reported: {out.job}"
    for s in out.survivors:
        assert s["error_class"] == s["ERR_PROC_FAILED"], \
            f"rank {s['rank']} ({s['host']}): receiving from killed rank {s['victim']} gave " \
            f"error class {s['error_class']} ({s.get('message')}), not MPI_ERR_PROC_FAILED"
        assert s["detect_s"] < DETECT_LIMIT, f"rank {s['rank']}: failure reported after " \
                                             f"{s['detect_s']} s"
        assert (s.get("shrunk_size"), s.get("shrunk_sum")) == (out.ranks - 1, out.ranks - 1), \
            f"rank {s['rank']}: Shrink after Ack_failed: {s}"
