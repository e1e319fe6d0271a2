"""What an MPI job across two hosts did on an RDMA fabric, read from the hosts' own counters:
how much went through the RDMA ports and how much over the kernel's TCP (RdmaTraffic), and how
a job ended when its RDMA path was cut under it (CutOutcome). The fixtures mpi_rdma_traffic
and mpi_cut_job run the jobs; hpccomm_suites/mpi/test_rdma_transport.py states what must hold.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import pytest

from pytest_hpccomm.cluster.host_fabrics import ClusterFabric, HostFabric
from pytest_hpccomm.cluster.peer_env import peer_env
from pytest_hpccomm.fabrics.counters import sent_and_received, tcp_segments_for
from pytest_hpccomm.fabrics.link_cut import roce_cut
from pytest_hpccomm.proc.jobs import JobResult, run_job, start_job
from pytest_hpccomm.stacks.mpi.driver import (
    SweepFailed,
    SweepSettings,
    SweepTarget,
    hosts_launch,
    peer_argv,
    run_sweep,
)
from pytest_hpccomm.stacks.mpi.env import MpiRuntime

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

# The fault: a long osu_bw job, the RDMA path cut under it once its traffic flows. UCX's RC
# transport retries UCX_RC_RETRY_COUNT times, UCX_RC_TIMEOUT (1 s) apart, then fails the
# endpoint and Open MPI aborts the job. The count is 6 here, not UCX's default 7: rxe retries
# forever at 7 (hpccomm_suites/verbs/test_host_to_host.py), and the job would only end at its
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


@dataclass(frozen=True)
class RdmaTraffic:
    """One osu_bw job of PAYLOAD bytes or more from `src` to `dst`: what the RDMA ports
    counted (`unit`: packets, or bytes where the port counts only those) and the TCP segments
    both hosts sent meanwhile; `least`: the port count the payload needs at the largest MTU."""

    transport: str
    src: str
    dst: str
    device: str
    sent: int
    received: int
    tcp_segments: int
    unit: str
    tcp_bound: int  # the fewest segments the payload over TCP would count (counters.py)

    @property
    def least(self) -> int:
        return PAYLOAD // MAX_MTU if self.unit == "packets" else PAYLOAD

    def line(self) -> str:
        return (
            f"transport {self.transport}: {self.src} sent {self.sent} {self.unit}, "
            f"{self.dst} received {self.received} {self.unit} on {self.device}; TCP "
            f"segments sent by both hosts: {self.tcp_segments} (the payload over TCP: at least "
            f"{self.tcp_bound})"
        )


@dataclass(frozen=True)
class CutOutcome:
    """A long osu_bw job whose RDMA path was cut once its traffic flowed: the cut (`fault`),
    seconds from the cut to the job's end (`took`), its result, the first output line that
    names a retry or timeout, and the hosts where an osu peer still ran afterwards."""

    fault: str
    took: float
    result: JobResult
    reason: str
    leftovers: tuple[str, ...]

    def line(self) -> str:
        return (
            f"job ended {self.took:.1f} s after the cut, exit {self.result.returncode}: "
            f"{self.reason or self.result.describe()}"
        )


def _traffic(fabric: ClusterFabric, host: HostFabric) -> dict[str, Any]:
    got = fabric.counters(host)
    return {
        "port": sent_and_received(got["port"]),
        "tcp": got["tcp_out_segments"],
        "mtu": got.get("mtu"),
        "packets": "hw.sent_pkts" in got["port"],
    }


def measure_traffic(runtime: MpiRuntime, target: SweepTarget, fabric: ClusterFabric) -> RdmaTraffic:
    """Run osu_bw at SIZE from the first host to the second and read both hosts' counters
    around it; skips where the port counts nothing (siw), fails when the job fails."""
    src, dst = fabric.hosts[0], fabric.hosts[1]
    device = str(src.selection.device)
    before = {h.host: _traffic(fabric, h) for h in (src, dst)}
    if before[src.host]["port"] is None:
        pytest.skip(
            f"{device} ({src.selection.driver}) counts no traffic on its port (siw has no "
            "RDMA counters): nothing can show the bytes took the device"
        )
    try:
        sweep = run_sweep(runtime, target, "osu_bw", [SIZE], SETTINGS)
        sweep.point("osu_bw", SIZE)
    except SweepFailed as exc:
        pytest.fail(
            f"osu_bw over {target.transport_summary} from {src.host} to {dst.host}: {exc}",
            pytrace=False,
        )
    errors = sweep.errors_for("osu_bw", SIZE)
    if errors:
        pytest.fail(f"osu_bw from {src.host} to {dst.host}: {errors[:3]}", pytrace=False)
    after = {h.host: _traffic(fabric, h) for h in (src, dst)}
    return RdmaTraffic(
        transport=str(sweep.transport),
        src=src.host,
        dst=dst.host,
        device=device,
        sent=after[src.host]["port"][0] - before[src.host]["port"][0],
        received=after[dst.host]["port"][1] - before[dst.host]["port"][1],
        tcp_segments=sum(after[h]["tcp"] - before[h]["tcp"] for h in (src.host, dst.host)),
        unit="packets" if after[src.host]["packets"] else "bytes",
        tcp_bound=tcp_segments_for(PAYLOAD, after[src.host]["mtu"]),
    )


def cut_under_job(runtime: MpiRuntime, target: SweepTarget, fabric: ClusterFabric) -> CutOutcome:
    """Start a LONG osu_bw job across the first two hosts, cut the first host's RoCE path once
    FLOWING packets went out, and wait FAULT_BOUND s for the job to end (then stop it); skips
    where the cut cannot be made (the first host not this one, no netdev, siw)."""
    src = fabric.hosts[0]
    if not src.local or not src.selection.netdev or src.selection.driver == "siw":
        pytest.skip(
            "the cut drops RoCE v2 arriving at the first host, which must be the one "
            "running pytest, on a RoCE fabric"
        )
    argv = peer_argv(runtime, "osu_bw", [SIZE], LONG, 1.0, False)
    env = peer_env(FAULT_ENV, own_python=runtime.name == "system")
    launch = hosts_launch(runtime, argv, env, target.hosts[:2], target)
    job = start_job(launch.argv, launch.env, timeout=JOB_TIMEOUT, label="osu_bw under a cut")
    try:
        start = sent_and_received(fabric.counters(src)["port"]) or (0, 0)
        deadline = time.monotonic() + JOB_TIMEOUT / 2
        while time.monotonic() < deadline and job.poll() is None:
            now = sent_and_received(fabric.counters(src)["port"]) or (0, 0)
            if now[0] - start[0] >= FLOWING:
                break
            time.sleep(0.5)
        if job.poll() is not None:
            pytest.fail(f"the job ended before the cut: {job.wait(1).describe()}", pytrace=False)
        with roce_cut(src.selection.netdev, src.host) as fault:
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
    leftovers = tuple(h.host for h in fabric.hosts[:2] if _peer_alive(fabric, h))
    return CutOutcome(fault, took, result, reason, leftovers)


def _peer_alive(fabric: ClusterFabric, host: HostFabric) -> bool:
    """Whether an osu peer still runs on host (pgrep only looks; nothing is killed by name)."""
    # "[p]" so the pattern does not match the command lines that carry it (shim, timeout)
    probe = ["pgrep", "-f", "[p]ytest_hpccomm[.]stacks[.]mpi[.]peer"]
    got = run_job(probe, timeout=30) if host.local else fabric.shell.run(host.host, probe, 30)
    return got.returncode == 0
