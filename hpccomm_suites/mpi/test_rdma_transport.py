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

import time
from typing import Any

import pytest

from pytest_hpccomm.cluster.host_fabrics import ClusterFabric, HostFabric
from pytest_hpccomm.cluster.peer_env import peer_env
from pytest_hpccomm.cluster.placement import HOSTS
from pytest_hpccomm.fabrics import RDMA_KINDS, FabricSelection
from pytest_hpccomm.fabrics.counters import sent_and_received
from pytest_hpccomm.fabrics.link_cut import roce_cut
from pytest_hpccomm.proc.jobs import run_job, start_job
from pytest_hpccomm.session import HpcSession
from pytest_hpccomm.stacks.mpi.driver import (
    SweepFailed,
    SweepSettings,
    hosts_launch,
    peer_argv,
    run_sweep,
)
from pytest_hpccomm.stacks.mpi.env import MpiRuntime
from pytest_hpccomm.stacks.mpi.plugin import sweep_target

# across hosts on an RDMA fabric only: elsewhere skipped at collection, saying which it lacks
pytestmark = [
    pytest.mark.conformance,
    pytest.mark.stack("mpi"),
    pytest.mark.placements(HOSTS),
    pytest.mark.fabric(*RDMA_KINDS, made=True),  # rxe/siw: hpc_rdma_fabric makes the link
]

SIZE = 1 << 20
MAX_MTU = 4096
# few, large messages: 2 batches x 8 in flight x 1 MiB (plus one warm-up batch) = 16-24 MiB
SETTINGS = SweepSettings(
    batches=2,
    min_batches=2,
    budget=0.0,
    iterations=4,
    loops=1,
    coll_iterations=1,
    batch_bytes=8 << 20,
    warmup=1,
    window=8,
)
PAYLOAD = 2 * SETTINGS.window * SIZE  # the least osu_bw moves from rank 0 to rank 1
JOB_TIMEOUT = 240.0


def _traffic(fabric: ClusterFabric, host: HostFabric) -> dict[str, Any]:
    got = fabric.counters(host)
    return {
        "port": sent_and_received(got["port"]),
        "tcp": got["tcp_out_segments"],
        "packets": "hw.sent_pkts" in got["port"],
    }


def test_mpi_payload_goes_through_the_rdma_device(
    mpi_runtime: MpiRuntime,
    hpc_placement: str,
    hpc_session: HpcSession,
    request: pytest.FixtureRequest,
    record_property: Any,
) -> None:
    target = sweep_target(HOSTS, mpi_runtime, hpc_session, request)
    fabric: ClusterFabric = request.getfixturevalue("hpc_rdma_fabric")
    sel = hpc_session.selection
    assert isinstance(sel, FabricSelection)
    src, dst = fabric.hosts[0], fabric.hosts[1]
    before = {h.host: _traffic(fabric, h) for h in (src, dst)}
    if before[src.host]["port"] is None:
        pytest.skip(
            f"{sel.device} ({sel.driver}) counts no traffic on its port (siw has no "
            "RDMA counters): nothing can show the bytes took the device"
        )
    try:
        sweep = run_sweep(mpi_runtime, target, "osu_bw", [SIZE], SETTINGS)
        sweep.point("osu_bw", SIZE)
    except SweepFailed as exc:
        pytest.fail(
            f"osu_bw over {target.transport_summary} from {src.host} to {dst.host}: {exc}",
            pytrace=False,
        )
    assert not sweep.errors_for("osu_bw", SIZE), sweep.errors_for("osu_bw", SIZE)[:3]
    after = {h.host: _traffic(fabric, h) for h in (src, dst)}
    sent = after[src.host]["port"][0] - before[src.host]["port"][0]
    rcvd = after[dst.host]["port"][1] - before[dst.host]["port"][1]
    tcp = sum(after[h]["tcp"] - before[h]["tcp"] for h in (src.host, dst.host))
    unit = "packets" if after[src.host]["packets"] else "bytes"
    least = PAYLOAD // MAX_MTU if unit == "packets" else PAYLOAD
    record_property(
        "counters",
        f"transport {sweep.transport}: {src.host} sent {sent} {unit}, "
        f"{dst.host} received {rcvd} {unit} on {sel.device}; TCP "
        f"segments sent by both hosts: {tcp}",
    )
    assert sent >= least and rcvd >= least, (
        f"osu_bw moved at least {PAYLOAD} B from {src.host} to {dst.host}, but the RDMA ports "
        f"counted {sent} {unit} sent and {rcvd} received (at least {least} each expected): "
        f"the payload did not go through {sel.device}"
    )
    # a TCP segment carries at most ~64 KiB (TSO); the payload over TCP would need
    # PAYLOAD / 65536 segments at the very least
    assert tcp < PAYLOAD // 65536, (
        f"TCP sent {tcp} segments during the job, as many as {PAYLOAD} B over TCP would need: "
        f"the MPI's payload went over TCP, not {sel.device}"
    )


# The fault: a long osu_bw job, the RDMA path cut under it once its traffic flows. UCX's RC
# transport retries UCX_RC_RETRY_COUNT times, UCX_RC_TIMEOUT (1 s) apart, then fails the
# endpoint and Open MPI aborts the job. The count is 6 here, not UCX's default 7: rxe retries
# forever at 7 (see hpccomm_suites/verbs/test_host_to_host.py), and the job would only end at its
# timeout.
LONG = SweepSettings(
    batches=40,
    min_batches=40,
    budget=0.0,
    iterations=4,
    loops=4,
    coll_iterations=1,
    batch_bytes=64 << 20,
    warmup=1,
    window=16,
)
FAULT_ENV = {"UCX_RC_RETRY_COUNT": "6"}
FLOWING = 2000  # packets sent by the first host before the cut: the job is past MPI_Init
FAULT_BOUND = 90.0  # seconds from the cut to the job's end: 7 x 1 s of retries, then teardown


def test_mpi_job_over_a_cut_link_ends_with_an_error(
    mpi_runtime: MpiRuntime,
    hpc_placement: str,
    hpc_session: HpcSession,
    request: pytest.FixtureRequest,
    record_property: Any,
) -> None:
    target = sweep_target(HOSTS, mpi_runtime, hpc_session, request)
    fabric: ClusterFabric = request.getfixturevalue("hpc_rdma_fabric")
    src = fabric.hosts[0]
    if not src.local or not src.selection.netdev or src.selection.driver == "siw":
        pytest.skip(
            "the cut drops RoCE v2 arriving at the first host, which must be the one "
            "running pytest, on a RoCE fabric"
        )
    hosts = target.hosts[:2]
    argv = peer_argv(mpi_runtime, "osu_bw", [SIZE], LONG, 1.0, False)
    env = peer_env(FAULT_ENV, own_python=mpi_runtime.name == "system")
    launch = hosts_launch(mpi_runtime, argv, env, hosts, target)
    job = start_job(launch.argv, launch.env, timeout=JOB_TIMEOUT, label="osu_bw under a cut")
    try:
        start = sent_and_received(fabric.counters(src)["port"]) or (0, 0)
        deadline = time.monotonic() + JOB_TIMEOUT / 2
        while time.monotonic() < deadline and job.poll() is None:
            now = sent_and_received(fabric.counters(src)["port"]) or (0, 0)
            if now[0] - start[0] >= FLOWING:
                break
            time.sleep(0.5)
        assert job.poll() is None, f"the job ended before the cut: {job.wait(1).describe()}"
        with roce_cut(src.selection.netdev, src.host) as fault:
            record_property("fault", fault)
            cut_at = time.monotonic()
            result = job.wait(FAULT_BOUND)
            took = time.monotonic() - cut_at
    finally:
        job.stop()
    output = result.stdout + result.stderr
    reason = next(
        (
            ln.strip()
            for ln in output.splitlines()
            if "retry" in ln.lower() or "timeout" in ln.lower()
        ),
        "",
    )
    record_property(
        "fault_outcome",
        f"job ended {took:.1f} s after the cut, exit "
        f"{result.returncode}: {reason or result.describe()}",
    )
    assert not result.timed_out, (
        f"{fault}: the MPI job was still running {FAULT_BOUND:g} s after the cut"
    )
    assert not result.ok, f"{fault}: the MPI job reported success over a cut link"
    leftovers = [h.host for h in fabric.hosts[:2] if _peer_alive(fabric, h)]
    assert not leftovers, f"{fault}: MPI ranks still running on {', '.join(leftovers)}"


def _peer_alive(fabric: ClusterFabric, host: HostFabric) -> bool:
    """Whether an osu peer still runs on host (pgrep only looks; nothing is killed by name)."""
    # "[p]" so the pattern does not match the command lines that carry it (shim, timeout)
    probe = ["pgrep", "-f", "[p]ytest_hpccomm[.]stacks[.]mpi[.]peer"]
    got = run_job(probe, timeout=30) if host.local else fabric.shell.run(host.host, probe, 30)
    return got.returncode == 0
