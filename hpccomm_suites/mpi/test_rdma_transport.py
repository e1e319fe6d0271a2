"""MPI across hosts on an RDMA fabric goes through the RDMA device, not TCP.

transport.py pins the job to the fabric (Open MPI: pml ucx with UCX_NET_DEVICES and UCX_TLS
without tcp/shared memory on ib/roce/softroce; libfabric's verbs provider on iwarp); this item
proves it with the hosts' own counters: an osu_bw job moving 1 MiB messages from the first host
to the second must show at least that payload in packets (or bytes) on both RDMA ports, while
the kernel's TCP sent far fewer segments than the payload would need (only mpirun's and ssh's
control traffic goes over TCP). Runs with --hpc-hosts on an RDMA fabric (in CI: the two-guest
SoftRoCE cluster, ci/guest/run.sh --hosts 2); skips elsewhere at collection, saying why.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from pytest_hpccomm.cluster.placement import HOSTS
from pytest_hpccomm.fabrics import RDMA_KINDS
from pytest_hpccomm.stacks.mpi.rdma_path import (
    FAULT_BOUND,
    PAYLOAD,
    CutOutcome,
    RdmaTraffic,
)

# across hosts on an RDMA fabric only: elsewhere skipped at collection, saying which it lacks
pytestmark = [
    pytest.mark.conformance,
    pytest.mark.stack("mpi"),
    pytest.mark.placements(HOSTS),
    pytest.mark.fabric(*RDMA_KINDS, made=True),  # rxe/siw: hpc_rdma_fabric makes the link
]


def test_mpi_payload_goes_through_the_rdma_device(
    mpi_rdma_traffic: Callable[[], RdmaTraffic], record_property: Any
) -> None:
    got = mpi_rdma_traffic()
    record_property("counters", got.line())
    assert got.sent >= got.least and got.received >= got.least, (
        f"osu_bw moved at least {PAYLOAD} B from {got.src} to {got.dst}, but the RDMA ports "
        f"counted {got.sent} {got.unit} sent and {got.received} received (at least "
        f"{got.least} each expected): the payload did not go through {got.device}"
    )
    # the bound: the fewest segments TCP's counter shows for the payload on this link's MTU
    assert got.tcp_segments < got.tcp_bound, (
        f"TCP sent {got.tcp_segments} segments during the job, as many as {PAYLOAD} B over "
        f"TCP would need ({got.tcp_bound}): the MPI's payload went over TCP, not {got.device}"
    )


def test_mpi_job_over_a_cut_link_ends_with_an_error(
    mpi_cut_job: Callable[[], CutOutcome], record_property: Any
) -> None:
    got = mpi_cut_job()
    record_property("fault", got.fault)
    record_property("fault_outcome", got.line())
    assert not got.result.timed_out, (
        f"{got.fault}: the MPI job was still running {FAULT_BOUND:g} s after the cut"
    )
    assert not got.result.ok, f"{got.fault}: the MPI job reported success over a cut link"
    assert not got.leftovers, f"{got.fault}: MPI ranks still running on {', '.join(got.leftovers)}"
